"""Piped (no terminal): `dsh-daemon chat` reads one line per prompt or command, writes the answers on
stdout and everything else on stderr, never waits on a question no one can answer, and names
sessions the way it shows them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.chat.conftest import unconfined
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream
from tests.server.harness import daemon_env, tool_call_stream
from tests.test_cli import run_cli


def test_piped_commands_answer_in_plain_text(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "app.py").write_text("one = 1\ntwo = 2\n")
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        lines = ["/queue", "/wake", "/attach app.py:2", "/attach", "/bogus", "/drop 1", "/help", "/sessions"]
        result = run_cli(["--no-thinking", "chat"], env, stdin="\n".join(lines) + "\n", cwd=work)
        assert result.returncode == 0, result.stderr
        assert result.stdout == ""  # no answer: nothing on stdout
        out = result.stderr
        assert "\x1b[" not in out  # no colour, no cursor codes when piped
        assert "[the queue is empty]" in out and "[nothing is queued]" in out
        assert "[📎 app.py lines 2-2: goes with your next prompt]" in out and "  📎 app.py lines 2-2" in out
        assert "[unknown command /bogus; /help lists them" in out
        assert "[no queued item #1; /queue lists them]" in out
        assert "/wake" in out and "/attach" in out  # the help
        assert "[no sessions in this directory]" in out
        assert fake.requests == []  # nothing ran the model

        fake.script(Reply.stream(text_stream(["# Heading\n\nplain *markdown*"])))
        result = run_cli(["--no-thinking", "chat", "show me"], env, cwd=work)
        assert "› show me" in result.stderr
        assert result.stdout == "# Heading\n\nplain *markdown*\n"  # the answer, verbatim, and only it
        assert "turn ended" not in result.stderr  # a completed turn goes unremarked


def test_a_chat_without_a_prompt_keeps_no_session(tmp_path: Path) -> None:
    """Issue 23 item 7: the session is made by the first prompt, so trying the chat and leaving keeps
    nothing behind."""
    work = tmp_path / "work"
    work.mkdir()
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        result = run_cli(["--no-thinking", "chat"], env, stdin="/help\n/queue\n/cost\n", cwd=work)
        assert result.returncode == 0, result.stderr
        assert run_cli(["sessions"], env).stdout.strip() == ""
        fake.script(Reply.stream(text_stream(["hi"])))
        run_cli(["--no-thinking", "chat", "hello"], env, cwd=work)
        assert len(run_cli(["sessions"], env).stdout.strip().splitlines()) == 1


def test_piped_mode_never_waits_on_a_question_and_composes_in_a_pipeline(tmp_path: Path) -> None:
    """Issue 23 item 3: piped, no one can answer a permission question: it is answered `cancelled` at
    once, a line says how to allow the tool, and the exit status is 1. `--allow TOOL` allows it; the
    final answer alone is on stdout; `--json` writes the events as JSON lines."""
    work = tmp_path / "work"
    work.mkdir()
    touch = [("c1", "run_command", {"command": "touch ran.txt"})]
    unconfined(tmp_path / "state")  # commands ask (a confined one would run unasked)
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.stream(tool_call_stream(touch, text="Let me run it.")))
        asked = run_cli(["--no-thinking", "chat"], env, stdin="run touch ran.txt\n", cwd=work)
        assert asked.returncode == 1
        assert asked.stdout == ""
        assert "$ touch ran.txt" in asked.stderr
        assert "allow it with --allow run_command (or every tool with --yes)" in asked.stderr
        assert "Traceback" not in asked.stderr
        assert not (work / "ran.txt").exists()

        fake.script(
            Reply.stream(tool_call_stream(touch, text="Let me run it.")),
            Reply.stream(text_stream(["Ran it."])),
        )
        allowed = run_cli(
            ["--no-thinking", "chat", "--allow", "run_command"], env, stdin="run touch ran.txt\n", cwd=work
        )
        assert allowed.returncode == 0, allowed.stderr
        assert allowed.stdout == "Ran it.\n"  # the commentary before the tool call is not the answer
        assert "Let me run it." in allowed.stderr and "allowed by --allow run_command" in allowed.stderr
        assert "⚙ run_command touch ran.txt" in allowed.stderr
        assert (work / "ran.txt").exists()

        fake.script(Reply.stream(text_stream(["As JSON."])))
        as_json = run_cli(["--no-thinking", "chat", "--json", "events please"], env, cwd=work)
        assert as_json.returncode == 0, as_json.stderr
        events = [json.loads(line) for line in as_json.stdout.splitlines()]
        kinds = [event["type"] for event in events]
        # A live `sandbox/status` may come at any point (the session's sandbox starts lazily), and the
        # turn's final live `turn/diff` after its end (it is computed off the turn).
        turn_kinds = [kind for kind in kinds if kind not in ("sandbox/status", "turn/diff")]
        assert "user/message" in kinds and "assistant/message" in kinds and turn_kinds[-1] == "agent/status"
        answer = next(e for e in events if e["type"] == "assistant/message")
        assert answer["data"]["message"]["content"][0]["text"] == "As JSON."
        assert len({event["sessionId"] for event in events}) == 1


def test_resume_takes_the_id_shown_a_title_or_continue_and_errors_are_one_line(tmp_path: Path) -> None:
    """Issue 23 item 4: `--resume` takes the 8-character id the chat shows (any unique prefix) or a
    title; `-c` continues this directory's latest session; a miss is one line, never a traceback."""
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.stream(text_stream(["about alpha"])), Reply.stream(text_stream(["about beta"])))
        run_cli(["--no-thinking", "chat", "the alpha question"], env, cwd=work)
        run_cli(["--no-thinking", "chat", "the beta question"], env, cwd=work)
        listing = run_cli(["sessions"], env).stdout
        alpha = next(line.split()[0] for line in listing.splitlines() if "alpha" in line)

        continued = run_cli(["--no-thinking", "chat", "-c"], env, cwd=work)
        assert continued.returncode == 0 and "› the beta question" in continued.stderr
        for wanted, seen in ((alpha[:8], "alpha"), ("The Beta Question", "beta"), ("alpha", "alpha")):
            resumed = run_cli(["--no-thinking", "chat", "--resume", wanted], env, cwd=work)
            assert resumed.returncode == 0, resumed.stderr
            assert f"› the {seen} question" in resumed.stderr and f"about {seen}" in resumed.stderr

        for args, cwd, said in (
            (["--resume", "nope"], work, "no session matches 'nope' (`dsh-daemon sessions` lists them)"),
            (["--resume", "question"], work, "'question' matches 2 sessions"),
            (["--continue"], elsewhere, "no session to continue in this directory"),
        ):
            failed = run_cli(["--no-thinking", "chat", *args], env, cwd=cwd)
            assert failed.returncode == 1
            assert len(failed.stderr.strip().splitlines()) == 1, failed.stderr
            assert failed.stderr.startswith("dsh-daemon chat: ") and said in failed.stderr


def test_resume_shows_the_last_turns_and_says_where_the_rest_is(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    with FakeDeepSeek() as fake:
        fake.script(*[Reply.stream(text_stream([f"answer {n}"])) for n in range(1, 13)])
        env = daemon_env(tmp_path / "state", fake)
        prompts = "\n".join(f"question {n}" for n in range(1, 13)) + "\n"
        first = run_cli(["--no-thinking", "chat"], env, stdin=prompts, cwd=work)
        assert first.returncode == 0, first.stderr
        assert "answer 12" in first.stdout
        resumed = run_cli(["--no-thinking", "chat", "--resume"], env, stdin="/cost\n", cwd=work)
        assert resumed.returncode == 0, resumed.stderr
        out = resumed.stderr
        assert "earlier turns not shown" in out and "dsh-daemon export" in out
        assert "› question 12" in out and "answer 12" in out and "› question 3\n" in out
        assert "› question 2\n" not in out and "answer 2\n" not in out  # only the last 10 turns
        assert "12 turn(s) · 144 tokens in · 36 out" in out  # the totals count every turn


def test_cost_says_the_subagents_part_apart(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    start = {"description": "look", "prompt": "CHILD: say what you found"}
    with FakeDeepSeek() as fake:
        fake.script(
            Reply.stream(tool_call_stream([("call_1", "run_subagent", start)])),
            Reply.stream(text_stream(["The child looked."])),
        )
        fake.script_for("CHILD", Reply.stream(text_stream(["found it"])))
        env = daemon_env(tmp_path / "state", fake)
        first = run_cli(["--no-thinking", "chat"], env, stdin="ask a child\n", cwd=work)
        assert first.returncode == 0, first.stderr
        assert "The child looked." in first.stdout
        resumed = run_cli(["--no-thinking", "chat", "--resume"], env, stdin="/cost\n", cwd=work)
        assert resumed.returncode == 0, resumed.stderr
        # The parent's two requests are its turn's; the child's one request is its own session's.
        assert "1 turn(s) · 24 tokens in · 6 out" in resumed.stderr
        assert "its subagents (1 session(s)): 1 turn(s) · 12 tokens in · 3 out" in resumed.stderr


def test_a_resumed_chat_shows_the_background_process_lines_it_showed_live(tmp_path: Path) -> None:
    """Their events lie before the page's lastSeq: the page's `event` items carry them, also an exit
    logged after its turn ended (the session closing stopped the process)."""
    work = tmp_path / "work"
    work.mkdir()
    start = {"command": "echo up; exec sleep 60", "background": True, "name": "ticker"}
    with FakeDeepSeek() as fake:
        fake.script(
            Reply.stream(tool_call_stream([("call_1", "run_command", start)])),
            Reply.stream(text_stream(["It runs."])),
        )
        env = daemon_env(tmp_path / "state", fake)
        first = run_cli(
            ["--no-thinking", "chat", "--allow", "run_command"],
            env,
            stdin="start the ticker\n",
            cwd=work,
        )
        assert first.returncode == 0, first.stderr
        assert "  ⏵ p1 ticker runs in the background (/ps, /kill p1)" in first.stderr
        resumed = run_cli(["--no-thinking", "chat", "--resume"], env, stdin="", cwd=work)
        assert resumed.returncode == 0, resumed.stderr
        out = resumed.stderr
        assert "› start the ticker" in out and "It runs." in out
        assert "  ⏵ p1 ticker runs in the background (/ps, /kill p1)" in out
        assert "  ⏹ p1 exited, stopped by session-close" in out or "  ⏹ p1 exited, stopped by shutdown" in out


def test_a_failed_turn_is_one_line_saying_what_went_wrong(tmp_path: Path) -> None:
    """The `agent/error` line and the `turn/end` that repeats it show as one line, not two."""
    work = tmp_path / "work"
    work.mkdir()
    with FakeDeepSeek() as fake:
        fake.script(Reply.error(401))
        env = daemon_env(tmp_path / "state", fake)
        result = run_cli(["--no-thinking", "chat", "hello"], env, cwd=work)
        assert result.returncode == 1
        failures = [line for line in result.stderr.splitlines() if "AUTH" in line]
        assert len(failures) == 1, result.stderr
        assert "set DEEPSEEK_API_KEY" in failures[0]  # and says what to do


def test_piped_each_plan_update_is_a_line(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    steps = [{"title": "Read", "status": "done"}, {"title": "Fix", "status": "in_progress"}]
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(
            Reply.stream(tool_call_stream([("call_1", "update_plan", {"steps": steps})])),
            Reply.stream(text_stream(["fixing"])),
        )
        result = run_cli(["--no-thinking", "chat"], env, stdin="/plan\nfix it\n", cwd=work)
        assert result.returncode == 0, result.stderr
        out = result.stderr
        assert out.startswith("no plan\n")  # /plan before there is one
        assert "  ⚙ update_plan (2 steps)\n  plan 1/2 done · ☑ Read · ◐ Fix\n" in out  # the update's line
        assert result.stdout == "fixing\n"


def test_a_resumed_chat_shows_a_plan_older_than_the_turns_it_draws(tmp_path: Path) -> None:
    """The chat draws the last 10 turns and replays events from there; the plan of turn 1 comes with
    the attach reply (protocol.md §3 `plan`)."""
    work = tmp_path / "work"
    work.mkdir()
    steps = [{"title": "Read", "status": "done"}, {"title": "Fix", "status": "in_progress"}]
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(
            Reply.stream(tool_call_stream([("call_1", "update_plan", {"steps": steps})])),
            *[Reply.stream(text_stream([f"answer {n}"])) for n in range(1, 13)],
        )
        prompts = "".join(f"prompt {n}\n" for n in range(1, 13))
        first = run_cli(["--no-thinking", "chat"], env, stdin=prompts, cwd=work)
        assert first.returncode == 0, first.stderr
        assert first.stdout.splitlines()[-1] == "answer 12"
        resumed = run_cli(["--no-thinking", "chat", "--continue"], env, stdin="/plan\n", cwd=work)
        assert resumed.returncode == 0, resumed.stderr
        assert "earlier turns not shown" in resumed.stderr  # turn 1 is not drawn
        assert "plan (turn 1): 1/2 done\n  ☑ Read\n  ◐ Fix\n" in resumed.stderr


def test_piped_ps_lists_shows_and_kills_background_processes(tmp_path: Path) -> None:
    """Issue 33.2: a line when a background process starts or ends, `/ps` lists, `/ps N` shows its
    output, `/kill N` stops it; the chat's end (the daemon's shutdown) leaves nothing running."""
    from tests.server.test_processes import new_marker, with_marker

    work = tmp_path / "work"
    work.mkdir()
    marker = new_marker()
    command = f"echo ready; sh -c 'sleep {marker}; true'"
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(
            Reply.stream(
                tool_call_stream([("call_1", "run_command", {"command": command, "background": True})])
            ),
            Reply.stream(text_stream(["started"])),
            Reply.stream(
                tool_call_stream([("call_2", "run_command", {"command": command, "background": True})])
            ),
            Reply.stream(text_stream(["again"])),
        )
        chat = subprocess.Popen(
            [sys.executable, "-m", "dsh_daemon", "--no-thinking", "chat"],
            stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=work,
        )  # fmt: skip
        assert chat.stdin is not None and chat.stderr is not None
        seen: list[str] = []

        def until(text: str) -> None:  # piped lines do not wait for the turn: the test does
            while not any(text in line for line in seen):
                line = chat.stderr.readline()  # type: ignore[union-attr]
                assert line, "".join(seen)
                seen.append(line)

        try:
            chat.stdin.write("/ps\nstart it\n")
            chat.stdin.flush()
            until("✓ run_command")  # its result; a completed turn's end goes unremarked
            chat.stdin.write("/ps\n/ps 1\n/kill 1\n/ps\n/kill 1\n/kill 7\nonce more\n")
            chat.stdin.flush()
            until("runs in the background (/ps, /kill p2)")
            chat.stdin.close()
            rest = chat.stderr.read()
            assert chat.wait(60) == 0
        finally:
            if chat.poll() is None:
                chat.kill()
    out = "".join(seen) + rest
    assert out.startswith("[no background processes]\n")
    assert "  ⏵ p1 echo ready; sh -c 'sleep" in out and "runs in the background (/ps, /kill p1)" in out
    assert f"  1 p1 running echo ready; sh -c 'sleep {marker}; true'\n" in out
    assert f"[p1 running: {command}]\nready\n" in out  # /ps 1: its output
    assert "  ⏹ p1 exited (signal 15), stopped by person\n" in out and "[p1 stopped]\n" in out
    assert "  1 p1 exited (signal 15), stopped by person" in out
    assert "[p1 had ended already]\n" in out and "[no background process 7; /ps lists them]" in out
    assert "  ⏹ p2 exited, stopped by shutdown\n" in out  # the chat's end stops the daemon, and p2
    assert not with_marker(marker)


def test_a_projects_hooks_are_said_to_wait_and_trust_runs_them(tmp_path: Path) -> None:
    """Issue 35.3: the chat says a project's hooks wait for the person; `/trust` runs them from then on."""
    from tests.server.test_hooks import hook, hook_program

    work = tmp_path / "work"
    (work / ".dsh").mkdir(parents=True)
    hooks = {"userPromptSubmit": [hook(hook_program(tmp_path), "context", name="ctx")]}
    (work / ".dsh" / "config.json").write_text(json.dumps({"hooks": hooks}))
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        unconfined(tmp_path / "state")
        fake.script(Reply.stream(text_stream(["one"])), Reply.stream(text_stream(["two"])))
        result = run_cli(["--no-thinking", "chat"], env, stdin="hi\n/trust\nagain\n", cwd=work)
        assert result.returncode == 0, result.stderr
        out = result.stderr
        assert f"the project's hooks in {work.resolve()}/.dsh/config.json do not run" in out
        assert f"[1 hooks of {work.resolve()} run from now on (userPromptSubmit)]" in out
        assert "  ↪ hook ctx (userPromptSubmit): userPromptSubmit context (prompt)" in out
        first, second = (json.dumps(r.json["messages"]) for r in fake.requests)
        assert "userPromptSubmit context" not in first and "userPromptSubmit context" in second


def test_piped_diff_lists_the_last_turns_hunks_and_undo_hunk_takes_one_back(tmp_path: Path) -> None:
    """Issue 33.3: `/diff` numbers the last turn's hunks across its files, `/undo-hunk N` takes hunk N
    back (the others and the person's later edit stay), `/keep` marks the rest reviewed."""
    from tests.server.test_turn_diff import ORIGINAL, agents_version

    work = tmp_path / "work"
    work.mkdir()
    app = work / "app.py"
    app.write_text("".join(ORIGINAL))
    content = "".join(agents_version())
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(
            Reply.stream(tool_call_stream([("c1", "write_file", {"path": "app.py", "content": content})])),
            Reply.stream(text_stream(["Changed three places."])),
        )
        chat = subprocess.Popen(
            [sys.executable, "-m", "dsh_daemon", "--no-thinking", "chat", "--allow", "write_file"],
            stdin=subprocess.PIPE, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=work,
        )  # fmt: skip
        assert chat.stdin is not None and chat.stderr is not None
        seen: list[str] = []

        def until(text: str) -> None:  # piped lines do not wait for the turn: the test does
            while not any(text in line for line in seen):
                line = chat.stderr.readline()  # type: ignore[union-attr]
                assert line, "".join(seen)
                seen.append(line)

        try:
            chat.stdin.write("change app.py\n")
            chat.stdin.flush()
            until("/diff reviews them")
            app.write_text(content.replace("line 12\n", "line 12, the person's\n"))
            chat.stdin.write("/diff\n/undo-hunk 2\n/undo-hunk 9\n/keep\n/diff\n")
            chat.stdin.close()
            rest = chat.stderr.read()
            assert chat.wait(60) == 0
        finally:
            if chat.poll() is None:
                chat.kill()
    out = "".join(seen) + rest
    assert "  ± 1 file(s) changed (+4 −3): app.py — /diff reviews them" in out
    assert "[turn 1: 1 file(s) changed (+4 −3)]" in out
    assert (
        "  #1\n" in out
        and "  #3\n" in out
        and "    -line 6\n" in out
        and "    +a line the agent added\n" in out
    )
    assert "[undid #2 of app.py; the model hears of it before its next step]" in out
    assert "[no hunk #9; /diff lists them]" in out
    assert "[kept 2 hunk(s) of turn 1]" in out
    assert "  #1 ✓ kept\n" in out and "  #2 ↶ undone\n" in out and "  #3 ✓ kept\n" in out
    expected = content.replace("line 12\n", "line 12, the person's\n")
    assert app.read_text() == expected.replace("line 6 by the agent\na line the agent added\n", "line 6\n")


def test_a_subagent_shows_as_an_indented_block_with_its_summary(tmp_path: Path) -> None:
    """Issue 34.1: the parent's `run_subagent` call shows the child's tool calls under it as they come
    and the child's summary when it ends."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("alpha\n")
    delegate = [("s1", "run_subagent", {"description": "survey", "prompt": "CHILD-SURVEY: look around"})]
    with FakeDeepSeek() as fake:
        env = daemon_env(tmp_path / "state", fake)
        fake.script(Reply.stream(tool_call_stream(delegate)), Reply.stream(text_stream(["All done."])))
        fake.script_for(
            "CHILD-SURVEY",
            Reply.stream(tool_call_stream([("g1", "grep", {"pattern": "alpha"})])),
            Reply.stream(text_stream(["notes.txt says alpha\nnothing else"])),
        )
        result = run_cli(["--no-thinking", "chat", "delegate it"], env, cwd=work)
        assert result.returncode == 0, result.stderr
        out = result.stderr
        assert "⧉ subagent “survey” (explore) started" in out
        assert '  │ ⚙ grep {"pattern": "alpha"}' in out
        assert "⧉ subagent completed:\n  │ notes.txt says alpha\n  │ nothing else" in out
        assert result.stdout == "All done.\n"
