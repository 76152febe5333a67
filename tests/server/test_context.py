"""Editor context (D10) end to end: explicit context/add from synced documents, ambient snapshots."""

from __future__ import annotations

from pathlib import Path

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from tests.fakes.deepseek_server import Reply, text_stream
from tests.server.harness import Daemon, text_reply


def open_doc(daemon: Daemon, uri: str, text: str, version: int = 1) -> None:
    daemon.client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            types.TextDocumentItem(uri=uri, language_id="python", version=version, text=text)
        )
    )


def selection(start: tuple[int, int], end: tuple[int, int]) -> dict:
    return {"start": {"line": start[0], "character": start[1]}, "end": {"line": end[0], "character": end[1]}}


async def test_selection_from_an_unsaved_buffer_mid_turn(daemon: Daemon, tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_text("def on_disk():\n    pass\n")
    uri = path.as_uri()
    open_doc(daemon, uri, "def unsaved():\n    return 42\n")
    # an incremental edit in the editor, never saved
    daemon.client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                types.TextDocumentContentChangePartial(
                    range=types.Range(types.Position(1, 11), types.Position(1, 13)), text="43"
                )
            ],
        )
    )
    daemon.fake.script(Reply.stream(text_stream(["w"] * 20), delay=0.05), text_reply("seen"))
    sid = await daemon.new_session()
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "look"}})
    await daemon.wait_event(sid, "assistant/delta")
    added = await daemon.request(
        "dsh/context/add",
        {
            "sessionId": sid,
            "uri": uri,
            "range": selection((1, 4), (1, 13)),
            "kind": "selection",
            "delivery": "steer",
        },
    )
    await daemon.wait_idle_turn(sid)
    last = daemon.fake.requests[-1].json["messages"][-1]
    assert "return 43" in last["content"] and "on_disk" not in last["content"]
    (entered,) = [e for e in daemon.of(sid, "user/message") if e["data"]["id"] == added["messageId"]]
    source = entered["data"]["source"]
    assert source["kind"] == "editor" and source["contextKind"] == "selection"
    assert source["uri"] == uri and source["version"] == 2 and source["languageId"] == "python"
    assert entered["data"]["source"]["range"] == selection((1, 4), (1, 13))
    assert len(daemon.of(sid, "turn/start")) == 1


def workspace_root(tmp_path: Path) -> Path:
    """The root the `daemon` fixture's editor opened: context/add reads disk files only inside it."""
    return tmp_path / "state" / "work"


async def test_file_context_from_disk_inject_then_followup(daemon: Daemon, tmp_path: Path) -> None:
    path = workspace_root(tmp_path) / "notes.txt"
    path.write_text("remember the milk\n")
    sid = await daemon.new_session()
    await daemon.request("dsh/context/add", {"sessionId": sid, "uri": path.as_uri(), "kind": "file"})
    assert daemon.of(sid, "turn/start") == []
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "what should I buy?"}})
    await daemon.wait_idle_turn(sid)
    first, second = [m for m in daemon.fake.requests[0].json["messages"] if m["role"] != "system"]
    assert "remember the milk" in first["content"] and second["content"] == "what should I buy?"


async def test_context_add_errors(daemon: Daemon, tmp_path: Path) -> None:
    sid = await daemon.new_session()
    binary = workspace_root(tmp_path) / "blob.bin"
    binary.write_bytes(b"\x00\x01\x02")
    for params in (
        {"sessionId": sid, "uri": (workspace_root(tmp_path) / "missing.py").as_uri(), "kind": "file"},
        {"sessionId": sid, "uri": binary.as_uri(), "kind": "file"},
        {"sessionId": sid, "uri": binary.as_uri(), "kind": "selection"},
        {"sessionId": sid, "uri": binary.as_uri(), "kind": "bogus"},
    ):
        with pytest.raises(JsonRpcException) as error:
            await daemon.request("dsh/context/add", params)
        assert error.value.data["code"] == "invalid_params"


async def test_ambient_snapshot_enters_only_when_changed(daemon: Daemon, tmp_path: Path) -> None:
    path = workspace_root(tmp_path) / "app.py"
    path.write_text("import os\nprint(os.getcwd())\n")
    uri = path.as_uri()
    sid = await daemon.new_session()
    state = {
        "sessionId": sid,
        "activeUri": uri,
        "selection": selection((1, 0), (1, 5)),
        "diagnostics": [{"range": selection((1, 0), (1, 5)), "severity": 1, "message": "undefined name"}],
    }
    daemon.notify("dsh/context/didChange", state)
    for n in (1, 2):
        await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": f"q{n}"}})
        await daemon.wait_idle_turn(sid, n)
    daemon.notify("dsh/context/didChange", {**state, "selection": selection((0, 0), (0, 6))})
    await daemon.request("dsh/followup", {"sessionId": sid, "message": {"content": "q3"}})
    await daemon.wait_idle_turn(sid, 3)
    snapshots = [
        e for e in daemon.of(sid, "user/message") if e["data"]["source"].get("contextKind") == "snapshot"
    ]
    assert len(snapshots) == 2  # turn 1 and turn 3; unchanged in turn 2
    first_text = snapshots[0]["data"]["content"][0]["text"]
    assert "undefined name" in first_text and "print" in first_text
    assert "import" in snapshots[1]["data"]["content"][0]["text"]
    assert len(first_text) <= 4000
