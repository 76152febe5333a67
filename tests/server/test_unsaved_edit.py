"""The person's unsaved changes in the document the agent edits (issue 37, protocol.md §8, §9), over
the real daemon process: apart from the edit they stay unsaved (the file gets the saved text plus the
edit only, written by a client offering `documentSaveText` or else by the daemon); overlapping it,
they are written only when the person answered `unsaved: "both"`, and a misplaced `unsaved` fails
closed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pytest_lsp import LanguageClient

from dsh_daemon.tools.drafts import saved_with_edit
from tests.fakes.deepseek_server import FakeDeepSeek
from tests.server.harness import Daemon, start_daemon, stop_daemon, text_reply
from tests.server.test_coherence import EditorModel, call, result_text, results

SAVED = "a = 1\nb = 2\nc = 3\n"


class TextSavingEditor(EditorModel):
    """Also honours `texts` on dsh/document/save (`documentSaveText`): writes that text, keeps the buffer."""

    def __init__(self) -> None:
        super().__init__(change_delay_s=0.0)
        self.save_params: list[dict[str, Any]] = []

    def setup(self, client: LanguageClient, daemon: Daemon) -> None:
        self.daemon = daemon
        daemon.on_apply_edit = self.apply

        @client.feature("dsh/document/save")
        def on_save(params: Any) -> Any:
            self.save_params.append(dict(params))
            texts = params.get("texts") or {}
            for uri in params["uris"]:
                text = texts.get(uri, self.buffers[uri])
                Path(uri.removeprefix("file://")).write_text(text)
            return {"saved": list(params["uris"])}


async def _edit_with_draft(
    tmp_path: Path,
    fake: FakeDeepSeek,
    draft: str,
    old: str,
    new: str,
    dsh_client: dict[str, Any],
    answer: dict[str, Any] | None = None,
) -> tuple[Daemon, TextSavingEditor, Path, dict[str, Any], str]:
    work = tmp_path / "work"
    work.mkdir()
    app = work / "app.py"
    app.write_text(SAVED)
    editor = TextSavingEditor()
    d = await start_daemon(tmp_path / "state", fake, root=work, dsh_client=dsh_client, setup=editor.setup)
    if answer is not None:
        d.on_permission = lambda p: answer
    editor.open(app, draft)
    fake.script(
        call("c1", "edit_file", path="app.py", old_string=old, new_string=new),
        call("c2", "run_command", command="cat app.py"),
        text_reply("done"),
    )
    sid = await d.new_session(cwd=str(work))
    await d.request("dsh/followup", {"sessionId": sid, "message": {"content": "edit it"}})
    await d.wait_idle_turn(sid)
    out = results(d, sid)
    return d, editor, app, out, result_text(out["c2"]) if "c2" in out else ""


@pytest.mark.parametrize("save_text", [True, False], ids=["client-writes-text", "daemon-writes"])
async def test_an_edit_apart_from_the_draft_reaches_the_file_without_the_draft(
    tmp_path: Path, fake: FakeDeepSeek, save_text: bool
) -> None:
    offered = {"documentSave": True, "documentSaveText": True} if save_text else {"documentSave": True}
    d, editor, app, out, command = await _edit_with_draft(
        tmp_path, fake, "a = (\nb = 2\nc = 3\n", "c = 3", "c = 4", offered
    )
    (asked,) = d.permission_requests
    assert asked["preview"]["unsaved"] == "apart"
    assert app.read_text() == "a = 1\nb = 2\nc = 4\n"  # the saved text plus only the agent's change
    assert editor.buffers[app.as_uri()] == "a = (\nb = 2\nc = 4\n"  # the draft stays in the buffer
    # The whole document is never saved: the client was asked for the text, or not at all.
    uri = app.as_uri()
    assert editor.save_params == (
        [{"uris": [uri], "texts": {uri: "a = 1\nb = 2\nc = 4\n"}}] if save_text else []
    )
    assert out["c1"]["meta"]["unsaved"] == "apart"
    assert "the file on disk got your edit only" in result_text(out["c1"])
    assert "c = 4" in command and "a = (" not in command  # the command saw the edit, not the draft
    assert "app.py has unsaved changes in the editor; the command saw the saved file" in command
    await stop_daemon(d)


@pytest.mark.parametrize(
    ("answer", "disk", "unsaved", "said"),
    [
        (
            {"outcome": "allow-once", "unsaved": "both"},
            "a = 11\nb = 2\nc = 3\n",
            "both",
            "chose to save both",
        ),
        ({"outcome": "allow-once", "unsaved": "buffer-only"}, SAVED, "buffer-only", "buffer only"),
        # an older client that knows nothing of it: the draft is still not written
        ({"outcome": "allow-once"}, SAVED, "buffer-only", "buffer only"),
    ],
    ids=["both", "buffer-only", "no-choice"],
)
async def test_an_edit_overlapping_the_draft_writes_it_only_when_the_person_said_both(
    tmp_path: Path, fake: FakeDeepSeek, answer: dict[str, Any], disk: str, unsaved: str, said: str
) -> None:
    d, editor, app, out, command = await _edit_with_draft(
        tmp_path,
        fake,
        "a = 10\nb = 2\nc = 3\n",
        "a = 10",
        "a = 11",
        {"documentSave": True, "documentSaveText": True},
        answer,
    )
    (asked,) = d.permission_requests
    assert asked["preview"]["unsaved"] == "overlaps"
    assert app.read_text() == disk
    assert editor.buffers[app.as_uri()] == "a = 11\nb = 2\nc = 3\n"
    assert out["c1"]["meta"]["unsaved"] == unsaved
    assert said in result_text(out["c1"]).replace("editor's buffer only", "buffer only")
    assert ("a = 11" in command) == (unsaved == "both")
    await stop_daemon(d)


async def test_unsaved_on_an_edit_apart_from_the_draft_fails_closed(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    """`unsaved` answers only a preview that overlaps: elsewhere the answer counts as cancelled."""
    d, _editor, app, out, _ = await _edit_with_draft(
        tmp_path,
        fake,
        "a = (\nb = 2\nc = 3\n",
        "c = 3",
        "c = 4",
        {"documentSave": True, "documentSaveText": True},
        {"outcome": "allow-once", "unsaved": "both"},
    )
    assert app.read_text() == SAVED
    assert _editor.buffers[app.as_uri()] == "a = (\nb = 2\nc = 3\n"  # nothing applied
    assert "c2" not in out  # the answer counted as cancelled: the turn ended there
    await stop_daemon(d)


def test_saved_with_edit_keeps_the_draft_out_and_refuses_overlaps() -> None:
    draft = "a = (\nb = 2\nc = 3\n"
    assert saved_with_edit(SAVED, draft, draft.replace("c = 3", "c = 4")) == "a = 1\nb = 2\nc = 4\n"
    assert saved_with_edit(SAVED, draft, draft + "d = 5\n") == SAVED + "d = 5\n"
    assert saved_with_edit(SAVED, draft, draft.replace("a = (", "a = 2")) is None  # the same line
    assert saved_with_edit(SAVED, draft, "x = 0\n" + draft) is None  # inserted where the draft begins
    inserted = "a = 1\nnew = 0\nb = 2\nc = 3\n"  # the person inserted a line: the agent's line moves
    assert saved_with_edit(SAVED, inserted, inserted.replace("c = 3", "c = 9")) == "a = 1\nb = 2\nc = 9\n"
