"""`dsh-daemon sessions` and `dsh-daemon export`: read the store directly (no daemon needed)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from dsh_daemon.session.store import SessionStore, UnknownSessionError


def list_sessions(state_dir: Path) -> int:
    store = SessionStore(state_dir)
    try:
        sessions = store.list_sessions()
        if not sessions:
            print("no sessions yet", file=sys.stderr)
        for s in sessions:
            stamp = time.strftime("%Y-%m-%d %H:%M", time.localtime(s.updated_at / 1000))
            pending = f"  [{s.pending} queued]" if s.pending else ""
            print(f"{s.session_id}  {stamp}  {s.status:<7}  {s.title or '(untitled)'}{pending}")
    finally:
        store.close()
    return 0


def export_session(state_dir: Path, session_id: str) -> int:
    """One JSON object per line: the session header, then every transcript event in log order."""
    from dsh_daemon.model import events as ev  # here, not at the top: `sessions` needs none of it

    transcript_types = frozenset(
        {
            ev.USER_MESSAGE,
            ev.ASSISTANT_MESSAGE,
            ev.TOOL_CALL,
            ev.TOOL_RESULT,
            ev.TURN_START,
            ev.TURN_END,
            ev.LLM_RETRY,
        }
    )
    store = SessionStore(state_dir)
    try:
        try:
            info = store.session_info(session_id)
        except UnknownSessionError:
            print(f"dsh-daemon: unknown session {session_id}", file=sys.stderr)
            return 1
        out = sys.stdout
        out.write(json.dumps({"type": "session", **info.to_json()}, ensure_ascii=False) + "\n")
        for event in store.load_events(session_id):
            if event.type in transcript_types:
                record = {"seq": event.seq, "time": event.time, "type": event.type, "data": event.data}
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
    finally:
        store.close()
    return 0


def show_config(state_dir: Path, flags: dict[str, object], *, as_json: bool) -> int:
    """`dsh-daemon config`: the effective configuration with each value's source; exit status 1 when
    config.json has entries that are left out (they are listed), 2 when the flags or the environment
    themselves are refused."""
    import os

    from dsh_daemon.host.config_report import effective_configuration
    from dsh_daemon.host.options import OptionsError

    try:
        report = effective_configuration(state_dir, os.environ, flags)
    except OptionsError as exc:
        print(f"dsh-daemon: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(report.json(), indent=2, ensure_ascii=False) if as_json else report.text())
    return 1 if report.problems else 0
