"""`dsh-daemon exec`: one prompt run to its end, headless, for CI and scripts (README "Headless runs").

It starts the daemon like an editor would (stdio, LSP framing: `chat/rpc.py`), opens a new session or
resumes one, sends the prompt as a `dsh/followup` and waits for that turn's `turn/end`. The final answer
goes to stdout; with `--json`, every event of the session as one JSON line (the `dsh/event` params, as
declared by `dsh-daemon schema`), then one `{"type": "result", …}` line.

Nothing here may wait on a person: a permission question that `--allow` does not answer is answered
`cancelled`, the turn is cancelled (the session stays resumable) and the run exits PERMISSION_NEEDED.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dsh_daemon.chat.exec_args import (
    BUDGET_EXHAUSTED,
    CANCELLED,
    COMPLETED,
    FAILED,
    OUTPUT_INVALID,
    PERMISSION_NEEDED,
    STATUS_NAMES,
    USAGE,
    init_options,
)
from dsh_daemon.chat.rpc import RpcError, RpcPipe
from dsh_daemon.chat.sessions import NoSuchSession, find_session


class UsageError(RuntimeError):
    """Arguments or configuration that cannot run: said in one line, exit status USAGE."""


SCHEMA_INSTRUCTION = (
    "\n\nYour final answer must be a single JSON value, with no other text and no code fence, that is"
    " valid against this JSON Schema:\n{schema}"
)
SCHEMA_RETRY = (
    "Your final answer was not valid against the required JSON Schema: {problem}. Answer again with the"
    " JSON value alone, valid against the schema."
)


def check_answer(text: str, schema: Any) -> tuple[Any, str | None]:
    """The answer parsed as JSON and checked against `schema`: (value, None) or (None, problem)."""
    body = text.strip()
    if body.startswith("```"):  # a fenced answer despite the instruction: its body is still the answer
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.rsplit("```", 1)[0]
    try:
        value = json.loads(body)
    except json.JSONDecodeError as exc:
        return None, f"not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
    import jsonschema  # a dependency of `mcp`; imported only when a schema is given

    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(the root)"
        return None, f"at {where}: {error.message}"
    return value, None


@dataclass
class Run:
    """What one exec run saw of its session."""

    session_id: str = ""
    message_id: str = ""
    turn: int | None = None  # the turn our message was entered in
    current_turn: int | None = None
    answer: str = ""
    reason: dict[str, Any] | None = None
    usage: dict[str, float] = field(default_factory=dict)
    turns: int = 0
    permission: dict[str, Any] | None = None  # the question nothing could answer
    interrupted: bool = False
    finished: bool = False  # the result is written: nothing more goes to stdout
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def on_event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "turn/start":
            self.current_turn = int(data["turn"])
        elif kind == "user/message" and data.get("id") == self.message_id:
            self.turn = self.current_turn
            self.answer = ""
        elif self.turn is None or data.get("turn") != self.turn:
            return
        elif kind == "assistant/message" and not data.get("interrupted"):
            text = "".join(
                block.get("text", "")
                for block in data["message"].get("content", ())
                if block.get("type") == "text"
            )
            if text:  # a step of tool calls alone keeps the answer so far
                self.answer = text
        elif kind == "turn/usage":
            for key, value in data["usage"].items():
                if isinstance(value, int | float) and not isinstance(value, bool):
                    self.usage[key] = self.usage.get(key, 0) + value
        elif kind == "turn/end":
            self.turns += 1
            self.reason = dict(data["reason"])
            self.ended.set()

    def expect(self, message_id: str) -> None:
        self.message_id, self.turn, self.reason = message_id, None, None
        self.ended.clear()


def status_of(run: Run) -> int:
    if run.interrupted:
        return CANCELLED
    if run.permission is not None:
        return PERMISSION_NEEDED
    kind = (run.reason or {}).get("kind")
    if kind == "completed":
        return COMPLETED
    if kind == "budget":
        return BUDGET_EXHAUSTED
    return FAILED


class Progress:
    """One dim line per step of note on stderr, only when stderr is a terminal."""

    def __init__(self, on: bool) -> None:
        self.on = on

    def say(self, text: str) -> None:
        if self.on:
            print(f"\x1b[2m{text}\x1b[0m", file=sys.stderr, flush=True)

    def event(self, kind: str, data: dict[str, Any]) -> None:
        if kind == "tool/call":
            self.say(f"⚙ {data.get('name')} {str(data.get('arguments', ''))[:100]}")
        elif kind == "llm/retry":
            self.say(f"retry {data['retry']} in {data['delayMs']} ms: {data['error']['code']}")
        elif kind == "agent/error":
            error = data.get("error") or {}
            self.say(f"{error.get('code', 'error')}: {error.get('message', '')}")


def say(message: str) -> None:
    print(f"dsh-daemon exec: {message}", file=sys.stderr, flush=True)


def read_prompt(args: argparse.Namespace) -> str:
    if args.prompt not in (None, "-"):
        return str(args.prompt)
    if args.prompt is None and sys.stdin.isatty():
        raise UsageError("no prompt: give one, or `-` to read it from stdin")
    text = sys.stdin.read()
    if not text.strip():
        raise UsageError("the prompt read from stdin is empty")
    return text


def read_schema(path: str | None) -> Any:
    if path is None:
        return None
    try:
        schema = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--output-schema {path}: {exc}") from None
    try:
        import jsonschema
    except ImportError:
        raise UsageError("--output-schema needs the jsonschema package") from None
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise UsageError(f"--output-schema {path}: not a JSON Schema: {exc.message}") from None
    return schema


async def _session(rpc: RpcPipe, args: argparse.Namespace, cwd: str) -> str:
    if args.continue_session:
        sessions = (await rpc.request("dsh/session/list", {"cwd": cwd}))["sessions"]
        if not sessions:
            raise UsageError(f"no session to continue in {cwd}")
        session_id = str(sessions[0]["sessionId"])
    elif args.resume:
        every = (await rpc.request("dsh/session/list", {}))["sessions"]
        try:
            session_id = str(find_session(every, args.resume)["sessionId"])
        except NoSuchSession as exc:
            raise UsageError(str(exc)) from None
    else:
        return str((await rpc.request("dsh/session/new", {"cwd": cwd}))["sessionId"])
    attached = await rpc.request("dsh/session/attach", {"sessionId": session_id})
    if attached.get("readOnly"):
        raise UsageError(f"session {session_id[:8]} is driven by another daemon (read-only here)")
    return session_id


def working_directory(args: argparse.Namespace) -> str:
    cwd = Path(args.cwd or os.getcwd()).resolve()
    if not cwd.is_dir():
        raise UsageError(f"--cwd {args.cwd}: not a directory")
    return str(cwd)


async def _exec(args: argparse.Namespace, state_dir: Path, prompt: str, schema: Any, cwd: str) -> int:
    command = [sys.executable, "-m", "dsh_daemon", "--state-dir", str(state_dir)]
    for value, flag in ((args.model, "--model"), (args.base_url, "--base-url")):
        if value:
            command += [flag, value]
    if args.no_thinking:
        command.append("--no-thinking")
    command += ["--log-level", args.log_level]  # the daemon's log goes to this stderr, or the file
    if args.log_file:
        command += ["--log-file", args.log_file]
    # Its own process group: SIGINT reaches this client, which cancels the turn in order.
    proc = await asyncio.create_subprocess_exec(
        *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, cwd=cwd,
        start_new_session=True,
    )  # fmt: skip
    rpc = RpcPipe(proc)
    run = Run()
    progress = Progress(sys.stderr.isatty())
    allowed = frozenset(args.allow or ())

    def on_notification(method: str, params: Any) -> None:
        if method == "window/showMessage" and isinstance(params, dict):
            say(f"daemon: {params.get('message', '')}")
            return
        if method != "dsh/event" or not isinstance(params, dict):
            return
        if not run.session_id or params.get("sessionId") != run.session_id:
            return
        if args.json and not run.finished:  # the result line is the last one
            write_out(json.dumps(params, ensure_ascii=False) + "\n")
        kind, data = params["type"], params["data"]
        progress.event(kind, data)
        run.on_event(kind, data)

    async def on_request(method: str, params: Any) -> Any:
        if method != "dsh/requestPermission":
            raise RuntimeError(f"unsupported request {method}")
        tool = str(params.get("tool") or "")
        if tool in allowed:
            progress.say(f"→ {tool}: allowed by --allow {tool}")
            return {"outcome": "allow-once"}
        if run.permission is None:
            run.permission = dict(params)
            say(
                f"{tool} asked for permission ({str(params.get('title') or tool)[:120]}) and nothing can"
                f" answer here: allow it with --allow {tool}; the session stays resumable"
                f" (dsh-daemon exec --resume {run.session_id[:8]} …)"
            )
            rpc.spawn(rpc.request("dsh/cancel", {"sessionId": run.session_id, "keepInbox": True}))
        return {"outcome": "cancelled"}

    rpc.on_notification = on_notification
    rpc.on_request = on_request
    rpc.on_error = lambda exc: say(f"[{exc}]")
    reader = asyncio.ensure_future(rpc.read_forever())
    reader.add_done_callback(lambda _: run.ended.set())
    loop = asyncio.get_running_loop()

    def on_sigint() -> None:
        if run.interrupted or not run.session_id:
            return
        run.interrupted = True
        progress.say("cancelling the turn (SIGINT)…")
        rpc.spawn(cancel_on_sigint())

    async def cancel_on_sigint() -> None:
        await rpc.request("dsh/cancel", {"sessionId": run.session_id, "keepInbox": True})
        # The reply comes after the aborted turn's turn/end. A prompt the turn had not entered yet
        # went back to the inbox, parked: no turn of it will end, so the run ends here.
        run.ended.set()

    output: Any = None
    problem: str | None = None
    try:
        try:
            await rpc.request(
                "initialize",
                {
                    "processId": os.getpid(),
                    "rootUri": Path(cwd).as_uri(),
                    "capabilities": {},
                    "initializationOptions": init_options(args),
                },
            )
        except RpcError as exc:
            raise UsageError(str(exc)) from None
        rpc.notify("initialized", {})
        run.session_id = await _session(rpc, args, cwd)
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, on_sigint)
        text = prompt if schema is None else prompt + SCHEMA_INSTRUCTION.format(schema=json.dumps(schema))
        for _attempt in (1, 2):  # the prompt, then one retry for --output-schema
            message_id = uuid.uuid4().hex
            run.expect(message_id)
            await rpc.request(
                "dsh/followup",
                {"sessionId": run.session_id, "message": {"id": message_id, "content": text}},
            )
            await run.ended.wait()
            if reader.done():
                say("the daemon exited before the turn ended; see its log above")
                return _finish(args, run, FAILED, output, problem)
            code = status_of(run)
            if code != COMPLETED or schema is None:
                break
            output, problem = check_answer(run.answer, schema)
            if problem is None:
                break
            progress.say(f"the answer does not meet --output-schema ({problem}); asking once more")
            text = SCHEMA_RETRY.format(problem=problem)
        code = status_of(run)
        if code == COMPLETED and problem is not None:
            code = OUTPUT_INVALID
            say(f"the answer does not meet --output-schema, even after a retry: {problem}")
        elif code == BUDGET_EXHAUSTED:
            budget = (run.reason or {}).get("budget") or {}
            say(
                f"budget exhausted: {budget.get('limit', '?')} used {budget.get('used', '?')} of"
                f" {budget.get('cap', '?')}; the session stays resumable"
            )
        elif code == FAILED:
            reason = run.reason or {}
            error = reason.get("error") or {}
            detail = f": {error.get('code')}: {error.get('message')}" if error else ""
            say(f"the turn ended {reason.get('kind', 'without an end')}{detail}")
        elif code == CANCELLED:
            say(f"cancelled; the session stays resumable (dsh-daemon exec --resume {run.session_id[:8]} …)")
        return _finish(args, run, code, output, problem)
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        if not await rpc.stop_daemon():
            say("the daemon did not exit when asked; it was killed")
        reader.cancel()


def _finish(args: argparse.Namespace, run: Run, code: int, output: Any, problem: str | None) -> int:
    run.finished = True
    if args.json:
        result: dict[str, Any] = {
            "type": "result",
            "status": STATUS_NAMES[code],
            "exitCode": code,
            "sessionId": run.session_id,
            "reason": run.reason,
            "answer": run.answer,
            "usage": run.usage,
            "costUsd": run.usage.get("costUsd"),
            "turns": run.turns,
        }
        if args.output_schema:
            result["output"] = output
            if problem is not None:
                result["outputProblem"] = problem
        if run.permission is not None:
            tool = run.permission.get("tool")
            result["permission"] = {
                "tool": tool,
                "title": run.permission.get("title"),
                "hint": f"--allow {tool}",
            }
        write_out(json.dumps(result, ensure_ascii=False) + "\n")
    elif code == COMPLETED:
        answer = json.dumps(output, ensure_ascii=False) if args.output_schema else run.answer
        write_out(answer if answer.endswith("\n") else answer + "\n")
    return code


def write_out(text: str) -> None:
    """To stdout, flushed; a reader that went away (`| head`) is let go quietly: the run goes on and
    ends with its own status (the session is what matters), and nothing more is written."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())  # no second error when Python flushes at exit
            os.close(devnull)


def run_exec(args: argparse.Namespace, state_dir: Path) -> int:
    try:
        prompt = read_prompt(args)
        schema = read_schema(args.output_schema)
        cwd = working_directory(args)
        return asyncio.run(_exec(args, state_dir, prompt, schema, cwd))
    except UsageError as exc:
        say(str(exc))
        return USAGE
    except KeyboardInterrupt:  # before the session existed: nothing to cancel
        return CANCELLED
    except (ConnectionError, RpcError) as exc:
        say(f"{getattr(exc, 'code', None) or 'error'}: {exc}")
        return FAILED
