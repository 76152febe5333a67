"""`dsh-daemon exec` (issue 35 items 1-2): real `dsh-daemon exec` processes against the fake provider,
in temp dirs. Each exit status; every `--json` line valid against `dsh-daemon schema`; the output
schema retry; a permission that nothing may answer exits instead of hanging; SIGINT cancels in order
and the session stays resumable; a budget stops the turn before the request that would pass it."""

from __future__ import annotations

import argparse
import json
import os
import pty
import re
import shlex
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema.protocols
import jsonschema.validators
import pytest

from dsh_daemon.chat.exec_args import STATUS_NAMES
from dsh_daemon.cli import build_parser
from dsh_daemon.model.schema import wire_schema
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream
from tests.test_cli import run_cli

SCHEMA = wire_schema()
# One validator per schema, its schema checked once: `jsonschema.validate` checks the whole wire
# schema against the metaschema on every call (~1 s each), which made this file take minutes.
_VALIDATORS: dict[str, jsonschema.protocols.Validator] = {}


def _validator(name: str, schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """The validator of `schema`, made of the wire schema's `$defs`, which are checked once."""
    cls = jsonschema.validators.validator_for(SCHEMA)
    if not _VALIDATORS:
        cls.check_schema(SCHEMA)
    if name not in _VALIDATORS:
        _VALIDATORS[name] = cls(schema)
    return _VALIDATORS[name]


def exec_cli(
    env: dict[str, str], work: Path, *args: str, stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    return run_cli(["--no-thinking", "exec", *args], env, stdin=stdin, cwd=work)


def check_lines(stdout: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every line but the last is a `dsh/event`'s params, valid against the declared event schema and
    its payload's; the last is the result object."""
    lines = [json.loads(line) for line in stdout.splitlines()]
    assert lines, "no output"
    events, result = lines[:-1], lines[-1]
    params_schema = {"$defs": SCHEMA["$defs"], "$ref": "#/$defs/EventParams"}
    for event in events:
        _validator("EventParams", params_schema).validate(event)
        payload = SCHEMA["x-events"][event["type"]]
        _validator(event["type"], {"$defs": SCHEMA["$defs"], **payload}).validate(event["data"])
    assert result["type"] == "result"
    return events, result


@pytest.fixture
def work(tmp_path: Path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def test_the_answer_alone_on_stdout_and_the_prompt_from_stdin(tmp_path: Path, work: Path) -> None:
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.stream(text_stream(["Hello", " there"])))
        done = exec_cli(env, work, "say hello")
        assert (done.returncode, done.stdout) == (0, "Hello there\n"), done.stderr
        assert "\x1b[" not in done.stderr  # stderr is no terminal: no progress lines

        fake.script(Reply.stream(text_stream(["From stdin"])))
        piped = exec_cli(env, work, "-", stdin="the prompt, piped\n")
        assert (piped.returncode, piped.stdout) == (0, "From stdin\n"), piped.stderr
        sent = fake.requests[-1].json["messages"]
        assert "the prompt, piped" in json.dumps(sent)
        assert len(run_cli(["sessions"], env).stdout.strip().splitlines()) == 2  # a new session each


def test_json_lines_are_the_wire_events_then_a_result(tmp_path: Path, work: Path) -> None:
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        touch = [("c1", "run_command", {"command": "touch ran.txt"})]
        fake.script(
            Reply.stream(tool_call_stream(touch, text="Running it.")), Reply.stream(text_stream(["Ran it."]))
        )
        done = exec_cli(env, work, "--json", "--allow", "run_command", "run touch")
        assert done.returncode == 0, done.stderr
        events, result = check_lines(done.stdout)
        kinds = [e["type"] for e in events]
        assert "tool/call" in kinds and "tool/result" in kinds and kinds.count("turn/end") == 1
        assert (work / "ran.txt").exists()
        assert result["status"] == "completed" and result["exitCode"] == 0
        assert result["answer"] == "Ran it." and result["reason"] == {"kind": "completed"}
        assert result["sessionId"] == events[0]["sessionId"] and result["turns"] == 1
        assert result["usage"]["inputTokens"] > 0 and result["costUsd"] > 0

        # --continue resumes the latest session of the directory: its events only from now on.
        fake.script(Reply.stream(text_stream(["Again."])))
        again = exec_cli(env, work, "--json", "--continue", "once more")
        events2, result2 = check_lines(again.stdout)
        assert result2["sessionId"] == result["sessionId"] and result2["answer"] == "Again."
        assert [e["data"]["turn"] for e in events2 if e["type"] == "turn/end"] == [2]


def test_usage_errors_exit_2_with_one_line(tmp_path: Path, work: Path) -> None:
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        nothing = exec_cli(env, work, "--continue", "hi")
        assert nothing.returncode == 2 and "no session to continue" in nothing.stderr
        (work / "bad.json").write_text("{not json")
        bad = exec_cli(env, work, "--output-schema", str(work / "bad.json"), "hi")
        assert bad.returncode == 2 and "--output-schema" in bad.stderr
        empty = exec_cli(env, work, "-", stdin="  \n")
        assert empty.returncode == 2 and "empty" in empty.stderr
        assert "Traceback" not in nothing.stderr + bad.stderr + empty.stderr
        assert fake.requests == []


def test_a_failed_turn_exits_1(tmp_path: Path, work: Path) -> None:
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.error(401))
        failed = exec_cli(env, work, "--json", "hi")
        assert failed.returncode == 1
        _, result = check_lines(failed.stdout)
        assert result["status"] == "failed" and result["reason"]["kind"] == "error"
        assert result["reason"]["error"]["code"] == "AUTH"
        assert "the turn ended error: AUTH" in failed.stderr


def test_output_schema_is_told_retried_once_then_a_typed_failure(tmp_path: Path, work: Path) -> None:
    schema = {
        "type": "object",
        "properties": {"count": {"type": "integer"}},
        "required": ["count"],
        "additionalProperties": False,
    }
    (work / "schema.json").write_text(json.dumps(schema))
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(
            Reply.stream(text_stream(['{"count": "three"}'])), Reply.stream(text_stream(['{"count": 3}']))
        )
        done = exec_cli(env, work, "--output-schema", "schema.json", "count them")
        assert (done.returncode, done.stdout) == (0, '{"count": 3}\n'), done.stderr
        first = json.dumps(fake.requests[0].json["messages"])
        assert "JSON Schema" in first and '\\"required\\": [\\"count\\"]' in first
        retry = json.dumps(fake.requests[1].json["messages"][-1])
        assert "not valid against the required JSON Schema" in retry and "count" in retry

        fake.script(Reply.stream(text_stream(["three"])), Reply.stream(text_stream(["```json\n{}\n```"])))
        bad = exec_cli(env, work, "--json", "--output-schema", "schema.json", "count them")
        assert bad.returncode == 5
        _, result = check_lines(bad.stdout)
        assert result["status"] == "output-invalid" and result["output"] is None
        assert "'count' is a required property" in result["outputProblem"]
        assert result["turns"] == 2 and len(fake.requests) == 4  # one retry, no more


def test_a_permission_nothing_may_answer_exits_3_and_the_session_resumes(tmp_path: Path, work: Path) -> None:
    touch = [("c1", "run_command", {"command": "touch ran.txt"})]
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.stream(tool_call_stream(touch, text="Let me run it.")))
        # full-access: the command is not confined, so it asks (confined, it would run unasked)
        asked = exec_cli(env, work, "--json", "--sandbox", "full-access", "run touch ran.txt")
        assert asked.returncode == 3, asked.stderr
        assert "allow it with --allow run_command" in asked.stderr
        _, result = check_lines(asked.stdout)
        assert result["status"] == "permission-needed"
        assert result["permission"]["tool"] == "run_command"
        assert result["permission"]["hint"] == "--allow run_command"
        assert result["reason"]["kind"] == "aborted"
        assert not (work / "ran.txt").exists()
        assert len(fake.requests) == 1  # cancelled: no request after the refused call

        fake.script(Reply.stream(tool_call_stream(touch)), Reply.stream(text_stream(["Done."])))
        session = result["sessionId"]
        resumed = exec_cli(
            env, work, "--resume", session[:8], "--sandbox", "full-access", "--allow", "run_command", "go"
        )
        assert (resumed.returncode, resumed.stdout) == (0, "Done.\n"), resumed.stderr
        assert (work / "ran.txt").exists()


def test_sandbox_is_passed_to_the_daemon(tmp_path: Path, work: Path) -> None:
    """`--sandbox read-only` reaches the daemon as `tools.sandbox`: a confined command runs unasked and
    cannot write in the working directory; a mode the daemon does not know is a usage error."""
    touch = [("c1", "run_command", {"command": "touch ran.txt"})]
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.stream(tool_call_stream(touch)), Reply.stream(text_stream(["Tried."])))
        done = exec_cli(env, work, "--json", "--sandbox", "read-only", "run touch ran.txt")
        assert done.returncode == 0, done.stderr
        events, _ = check_lines(done.stdout)
        (result,) = [e["data"] for e in events if e["type"] == "tool/result"]
        assert result.get("error") and not (work / "ran.txt").exists()
        # The live `sandbox/status` is one more valid JSON line (checked above against its schema),
        # and it says the mode asked for; the result line stays the last.
        statuses = [e["data"] for e in events if e["type"] == "sandbox/status"]
        assert statuses and statuses[-1]["mode"] == "read-only", statuses
        bad = exec_cli(env, work, "--sandbox", "nowhere", "hi")
        assert bad.returncode == 2 and "tools.sandbox" in bad.stderr, bad.stderr
        # The daemon that refused `initialize` still ends when told to `exit` (it was killed after
        # 10 s when `exit` went unsent after the refused `shutdown`).
        assert "it was killed" not in bad.stderr, bad.stderr
        assert len(fake.requests) == 2


def test_sigint_cancels_the_turn_in_order_and_exits_130(tmp_path: Path, work: Path) -> None:
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.stream(text_stream(["Partial", " answer"]), gate_after=(2, "never")))
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_daemon", "--no-thinking", "exec", "--json", "long job"],
            env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            for line in proc.stdout:  # the reply has begun streaming: the turn is running
                if json.loads(line)["type"] == "assistant/delta":
                    break
            proc.send_signal(signal.SIGINT)
            rest, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            fake.open_gate("never")
        assert proc.returncode == 130, err
        assert "cancelled; the session stays resumable" in err
        result = json.loads(rest.splitlines()[-1])
        assert result["status"] == "cancelled" and result["reason"] == {"kind": "aborted", "cause": "user"}
        fake.script(Reply.stream(text_stream(["Resumed."])))
        again = exec_cli(env, work, "--resume", result["sessionId"], "go on")
        assert (again.returncode, again.stdout) == (0, "Resumed.\n"), again.stderr


def test_sigint_before_the_prompt_entered_its_turn_ends_the_run(tmp_path: Path, work: Path) -> None:
    """A SIGINT after the prompt was sent but before the turn entered it (here: the turn's first step
    waits for an MCP server that never finishes starting) cancels that turn, and the prompt goes back
    to the inbox, parked (protocol.md `dsh/cancel {keepInbox: true}`): no turn of the prompt's will
    end, so the run ends once the cancel is answered, status 130, rather than waiting forever."""
    state = tmp_path / "state"
    state.mkdir()
    slow = {"command": sys.executable, "args": ["-c", "import time; time.sleep(120)"], "startupTimeoutS": 100}
    (state / "config.json").write_text(json.dumps({"mcpServers": {"slow": slow}}))
    with FakeDeepSeek() as fake:
        env = daemon_env(state, fake)
        proc = subprocess.Popen(
            [sys.executable, "-m", "dsh_daemon", "--no-thinking", "exec", "--json", "long job"],
            env=env, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert proc.stdout is not None
            for line in proc.stdout:  # the turn has started; its first step waits for the server
                if json.loads(line)["type"] == "turn/start":
                    break
            proc.send_signal(signal.SIGINT)
            rest, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 130, err
        result = json.loads(rest.splitlines()[-1])
        assert result["status"] == "cancelled" and result["exitCode"] == 130
        assert fake.requests == []


def test_max_turns_stops_before_the_request_past_the_cap(tmp_path: Path, work: Path) -> None:
    """Issue 35 item 2: the budget is checked before each model request: with one request allowed,
    the tool the first one called runs, and the second request is never made."""
    touch = [("c1", "run_command", {"command": "touch ran.txt"})]
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.stream(tool_call_stream(touch)), Reply.stream(text_stream(["Never sent."])))
        stopped = exec_cli(env, work, "--json", "--allow", "run_command", "--max-turns", "1", "run touch")
        assert stopped.returncode == 4, stopped.stderr
        _, result = check_lines(stopped.stdout)
        assert result["status"] == "budget-exhausted"
        assert result["reason"] == {"kind": "budget", "budget": {"limit": "steps", "cap": 1, "used": 1}}
        assert (work / "ran.txt").exists() and len(fake.requests) == 1
        assert "budget exhausted: steps used 1 of 1" in stopped.stderr


def test_max_cost_stops_before_the_request_that_would_pass_it(tmp_path: Path, work: Path) -> None:
    """Each fake request costs 2.52e-6 USD (USAGE_A at the default prices): a cap of 6e-6 lets the
    second request run (2 x 2.52e-6 fits) and stops the turn before the third (3 x 2.52e-6 would not)."""
    calls = [("c1", "read_file", {"path": "a.txt"})]
    (work / "a.txt").write_text("a\n")
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(
            Reply.stream(tool_call_stream(calls)),
            Reply.stream(tool_call_stream(calls)),
            Reply.stream(text_stream(["Never sent."])),
        )
        stopped = exec_cli(env, work, "--json", "--max-cost-usd", "0.000006", "read it twice")
        assert stopped.returncode == 4, stopped.stderr
        _, result = check_lines(stopped.stdout)
        budget = result["reason"]["budget"]
        assert budget["limit"] == "costUsd" and budget["cap"] == 6e-06
        assert budget["used"] == pytest.approx(2 * 2.52e-06) and len(fake.requests) == 2
        assert result["costUsd"] == pytest.approx(2 * 2.52e-06)


def test_the_chat_explains_a_budget_set_in_the_config_file(tmp_path: Path, work: Path) -> None:
    """`agent.budget` from config.json applies to every client's sessions; the chat says why the turn
    stopped, and `dsh-daemon config` reports the setting."""
    state = tmp_path / "state"
    state.mkdir()
    (state / "config.json").write_text(json.dumps({"agent": {"budget": {"steps": 1}}}))
    calls = [("c1", "read_file", {"path": "a.txt"})]
    (work / "a.txt").write_text("a\n")
    with FakeDeepSeek() as fake:
        env = daemon_env(state, fake)
        settings = json.loads(run_cli(["config", "--json"], env).stdout)["settings"]
        reported = {s["key"]: (s["value"], s["source"]) for s in settings}
        assert reported["agent.budget"] == ({"steps": 1}, "config.json")
        fake.script(Reply.stream(tool_call_stream(calls)), Reply.stream(text_stream(["Never sent."])))
        chat = run_cli(["--no-thinking", "chat", "read it"], env, cwd=work)
        assert chat.returncode == 0, chat.stderr
        assert (
            "[turn stopped by its budget before the next model request: model requests used 1 of 1;"
            " send a prompt to go on, or raise agent.budget.steps]" in chat.stderr
        )
        assert len(fake.requests) == 1


def test_a_reader_that_goes_away_ends_nothing_but_its_output(tmp_path: Path, work: Path) -> None:
    """`dsh-daemon exec --json … | head -1`: the run still ends by its own status, with no traceback."""
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.stream(text_stream(["Hello"])))
        script = (
            f"{sys.executable} -m dsh_daemon --no-thinking exec --json hi | head -1;"
            ' echo "exec status ${PIPESTATUS[0]}" >&2'
        )
        done = subprocess.run(
            ["bash", "-c", script], env=env, cwd=work, capture_output=True, text=True, timeout=120
        )
        assert json.loads(done.stdout)["sessionId"]  # one event line, then the reader left
        assert "exec status 0" in done.stderr and "Traceback" not in done.stderr, done.stderr


def test_progress_goes_to_stderr_when_it_is_a_terminal(tmp_path: Path, work: Path) -> None:
    """stderr a terminal (a pty here): one dim line per tool call; stdout, a pipe, holds the answer."""
    calls = [("c1", "read_file", {"path": "a.txt"})]
    (work / "a.txt").write_text("a\n")
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.stream(tool_call_stream(calls)), Reply.stream(text_stream(["Read it."])))
        leader, follower = pty.openpty()
        try:
            done = subprocess.run(
                [sys.executable, "-m", "dsh_daemon", "--no-thinking", "exec", "read a.txt"],
                env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=follower,
                text=True, timeout=120,
            )  # fmt: skip
            os.close(follower)
            shown = b""
            while True:
                try:
                    chunk = os.read(leader, 4096)
                except OSError:  # EIO: the terminal's last writer is gone
                    break
                if not chunk:
                    break
                shown += chunk
        finally:
            os.close(leader)
        assert (done.returncode, done.stdout) == (0, "Read it.\n")
        assert "⚙ read_file" in shown.decode() and "\x1b[2m" in shown.decode()


def test_help_documents_every_option_each_exit_status_and_runnable_examples(tmp_path: Path) -> None:
    """Issue 35.6: `dsh-daemon exec --help` is complete: every option it accepts is listed with its
    help, every exit status with its meaning, the environment, and examples that parse."""
    env = {**os.environ, "DSH_HOME": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}
    done = run_cli(["exec", "--help"], env)
    assert done.returncode == 0, done.stderr
    text = done.stdout
    parser = build_parser()
    subcommands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for action in subcommands.choices["exec"]._actions:
        assert action.help and action.help != argparse.SUPPRESS, f"{action.dest} has no help"
        for flag in action.option_strings:
            assert re.search(rf"^  (-\w, )?{re.escape(flag)}\b", text, re.M), f"{flag} is not listed"
    for code, name in STATUS_NAMES.items():
        assert re.search(rf"^  {code} +{name.replace('-', ' ')}", text, re.M), f"exit status {code} ({name})"
    for variable in ("DEEPSEEK_API_KEY", "DEEPSEEK_BASE_URL", "DSH_MODEL", "DSH_HOME"):
        assert variable in text
    examples = text.split("\nexamples:\n", 1)[1].replace("\\\n", " ")
    commands = [shlex.split(line) for line in examples.splitlines() if line.strip()]
    assert len(commands) >= 4
    for argv in commands:
        assert argv[0] == "dsh-daemon" and "exec" in argv
        for redirect in ("<", ">"):
            if redirect in argv:
                argv = argv[: argv.index(redirect)]
        parsed = parser.parse_args(argv[1:])  # exits 2 (failing the test) on an example that does not parse
        assert parsed.command == "exec"


def test_log_options_reach_the_daemon(tmp_path: Path, work: Path) -> None:
    """`exec --log-level DEBUG --log-file F`: the daemon it starts logs there (they were accepted and
    ignored before)."""
    log = tmp_path / "daemon.log"
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.stream(text_stream(["Hi."])))
        done = exec_cli(env, work, "--log-level", "DEBUG", "--log-file", str(log), "hi")
        assert (done.returncode, done.stdout) == (0, "Hi.\n"), done.stderr
    assert "DEBUG" in log.read_text()
