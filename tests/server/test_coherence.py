"""Coherence (issue 26.1, protocol.md §9): after an allowed edit the file the commands see is the edited
one, the person's unsaved changes in other documents are never written, a command is told which open
documents differ from disk, and the agent's own edit is not reported back to it as a change.

The client here is a small editor model over the real daemon process: it holds buffers, applies
`workspace/applyEdit` to them, sends `didChange` late (as debouncing editors do) and, when it offers
`documentSave`, writes a buffer to disk on `dsh/document/save`.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pytest_lsp import LanguageClient

from tests.fakes.deepseek_server import FakeDeepSeek, Reply
from tests.server.harness import UNCONFINED, Daemon, start_daemon, stop_daemon, text_reply, tool_call_stream


class EditorModel:
    def __init__(self, change_delay_s: float = 0.15) -> None:
        self.buffers: dict[str, str] = {}
        self.versions: dict[str, int] = {}
        self.saves: list[list[str]] = []
        self.change_delay_s = change_delay_s
        self.daemon: Daemon | None = None

    def setup(self, client: LanguageClient, daemon: Daemon) -> None:
        self.daemon = daemon
        daemon.on_apply_edit = self.apply

        @client.feature("dsh/document/save")
        def on_save(params: Any) -> Any:
            uris = list(params["uris"])
            self.saves.append(uris)
            for uri in uris:
                Path(uri.removeprefix("file://")).write_text(self.buffers[uri])
            return {"saved": uris}

    def open(self, path: Path, text: str | None = None) -> None:
        uri = path.as_uri()
        self.buffers[uri] = path.read_text() if text is None else text
        self.versions[uri] = 1
        assert self.daemon is not None
        self.daemon.client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri, "python", 1, self.buffers[uri]))
        )

    def apply(self, edit: dict[str, Any]) -> dict[str, Any]:
        for uri, edits in (edit["edit"].get("changes") or {}).items():
            (whole,) = edits  # the daemon replaces the whole document
            self.buffers[uri] = whole["newText"]
            asyncio.get_running_loop().call_later(self.change_delay_s, self._did_change, uri)
        return {"applied": True}

    def _did_change(self, uri: str) -> None:
        self.versions[uri] += 1
        assert self.daemon is not None
        self.daemon.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(self.versions[uri], uri),
                [types.TextDocumentContentChangeWholeDocument(self.buffers[uri])],
            )
        )


def call(call_id: str, name: str, **args: Any) -> Reply:
    return Reply.stream(tool_call_stream([(call_id, name, args)]))


def results(d: Daemon, sid: str) -> dict[str, dict[str, Any]]:
    """The session's tool results by the provider's call id (the scripts name calls by it)."""
    return {d.provider_id(sid, e["data"]["callId"]): e["data"] for e in d.of(sid, "tool/result")}


def result_text(result: dict[str, Any]) -> str:
    return "".join(b.get("text", "") for b in result["message"]["content"][0]["content"])


@pytest.mark.parametrize("document_save", [True, False], ids=["client-saves", "daemon-writes"])
async def test_a_command_after_an_allowed_edit_sees_it_and_other_buffers_stay_unsaved(
    tmp_path: Path, fake: FakeDeepSeek, document_save: bool
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    app, other = work / "app.py", work / "other.py"
    app.write_text("VALUE = 1\n")
    other.write_text("SAVED = True\n")
    editor = EditorModel()
    d = await start_daemon(
        tmp_path / "state",
        fake,
        root=work,
        dsh_client={"documentSave": True} if document_save else {},
        setup=editor.setup,
    )
    editor.open(app)
    editor.open(other, "SAVED = True\nUNSAVED = 'the person is typing'\n")
    fake.script(
        call("c1", "read_file", path="app.py"),
        call("c2", "edit_file", path="app.py", old_string="VALUE = 1", new_string="VALUE = 2"),
        call("c3", "run_command", command="cat app.py other.py"),
        text_reply("done"),
    )
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "bump it"}})
    await d.wait_idle_turn(sid)
    out = results(d, sid)
    assert "error" not in out["c2"], out["c2"]
    assert app.read_text() == "VALUE = 2\n"  # buffer == disk
    assert editor.buffers[app.as_uri()] == "VALUE = 2\n"
    assert editor.saves == ([[app.as_uri()]] if document_save else [])
    command = result_text(out["c3"])
    assert "VALUE = 2" in command and "VALUE = 1" not in command  # the command ran the edited file
    assert "UNSAVED" not in command and other.read_text() == "SAVED = True\n"  # never written
    assert "other.py has unsaved changes in the editor; the command saw the saved file" in command
    assert "app.py" not in command.split("Note:")[-1]
    assert out["c3"]["meta"]["unsavedDocuments"] == ["other.py"]
    live = "".join(e["data"]["text"] for e in d.of(sid, "tool/output"))
    assert "other.py has unsaved changes" in live  # the person sees it as the command starts
    # The agent's own edit is the new read state: no "changed since you read it" after it.
    sent = json.dumps([r.json for r in fake.requests])
    assert "since you read it" not in sent.replace("files that changed since you read them", "")
    await stop_daemon(d)


async def test_a_real_change_after_the_agents_edit_is_still_reported(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """The own-edit exemption covers the agent's text only: the person's later change is news."""
    work = tmp_path / "work"
    work.mkdir()
    app = work / "app.py"
    app.write_text("VALUE = 1\n")
    editor = EditorModel(change_delay_s=0.0)
    d = await start_daemon(
        tmp_path / "state",
        fake,
        root=work,
        dsh_client={"documentSave": True},
        setup=editor.setup,
        init_options=UNCONFINED,  # the command is asked about: the person types meanwhile
    )
    editor.open(app)
    gate = asyncio.Event()

    async def person_types_then_allows(params: dict[str, Any]) -> dict[str, Any]:
        if params["tool"] == "run_command":
            editor.buffers[app.as_uri()] = "VALUE = 3\n"
            editor._did_change(app.as_uri())
            await asyncio.sleep(0.2)
            gate.set()
        return {"outcome": "allow-once"}

    d.on_permission = person_types_then_allows
    fake.script(
        call("c1", "read_file", path="app.py"),
        call("c2", "edit_file", path="app.py", old_string="VALUE = 1", new_string="VALUE = 2"),
        call("c3", "run_command", command="true"),
        text_reply("done"),
    )
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "go"}})
    await d.wait_idle_turn(sid)
    assert gate.is_set()
    after_command = json.dumps(fake.requests[3].json["messages"][-1])
    assert "app.py changed on disk (or in the editor) since you read it" in after_command
    await stop_daemon(d)
