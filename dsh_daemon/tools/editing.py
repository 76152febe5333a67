"""edit_file and write_file: compute a `ComputedEdit` from the current text (the editor's unsaved text
when the file is open there, else disk), then hand it to the `EditApplier`."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dsh_daemon.agent.tools import ToolContext, ToolOutcome
from dsh_daemon.model.messages import TextBlock
from dsh_daemon.tools.base import ToolBase, get_bool, get_str, make_spec, short
from dsh_daemon.tools.checkpoints import Checkpointer
from dsh_daemon.tools.documents import DocumentSource
from dsh_daemon.tools.drafts import saved_with_edit
from dsh_daemon.tools.editor import EditorServices, EditorUnavailable, FileDiagnostics, NoEditor
from dsh_daemon.tools.editor_tools import diagnostics_after_edit
from dsh_daemon.tools.edits import ComputedEdit, EditApplier, compute_edit, unified_diff
from dsh_daemon.tools.errors import EditConflictError, FileToolError, InvalidArgumentsError
from dsh_daemon.tools.limits import ToolLimits
from dsh_daemon.tools.textfiles import match_newlines, read_whole_text, sha256_text
from dsh_daemon.tools.tracking import ReadTracker
from dsh_daemon.tools.workspace import Workspace


class _EditToolBase(ToolBase):
    parallel_safe = False

    def __init__(
        self,
        workspace: Workspace,
        documents: DocumentSource,
        applier: EditApplier,
        tracker: ReadTracker,
        limits: ToolLimits,
        checkpoints: Checkpointer | None = None,
        editor: EditorServices | None = None,
    ) -> None:
        self.workspace = workspace
        self.documents = documents
        self.applier = applier
        self.tracker = tracker
        self.limits = limits
        self.checkpoints = checkpoints
        self.editor = editor or NoEditor()

    def target_paths(self, args: Mapping[str, Any]) -> list[str]:
        path = args.get("path")
        return [path] if isinstance(path, str) and path else []

    async def current_text(self, path: Path, shown: str) -> str | None:
        """The text an edit starts from; None when the file does not exist (and is not open)."""
        document = self.documents.text_for(path)
        if document is not None:
            return document
        return await asyncio.to_thread(self._disk_text, path, shown)

    def _disk_text(self, path: Path, shown: str) -> str | None:
        if not path.exists():
            return None
        return read_whole_text(self.workspace, path, shown, self.limits.whole_file_bytes)

    async def with_draft(self, edit: ComputedEdit, choice: str | None = None) -> ComputedEdit:
        """`edit` with what becomes of the person's unsaved changes in the file (protocol.md §9):
        kept apart from it when they can be (`unsaved` "apart", `disk_text` the saved text plus only
        this edit), else as the person chose when asked (`choice`): "both", or "buffer-only" (also
        when they were not asked: their unsaved text is never written without their word). Only for
        an applier that keeps them apart (the editor's); unchanged when there are none."""
        if edit.created or not getattr(self.applier, "keeps_drafts", False):
            return edit
        if self.documents.text_for(edit.path) is None:
            return edit
        shown = self.workspace.display(edit.path)
        try:
            saved = await asyncio.to_thread(self._disk_text, edit.path, shown)
        except FileToolError:
            saved = None  # unreadable as text: nothing can be kept apart, ask as for an overlap
        if saved == edit.before_text:
            return edit
        disk_text = None if saved is None else saved_with_edit(saved, edit.before_text, edit.after_text)
        if disk_text is not None and saved is not None:
            return dataclasses.replace(
                edit, unsaved="apart", disk_text=disk_text, disk_before_sha256=sha256_text(saved)
            )
        return dataclasses.replace(edit, unsaved="both" if choice == "both" else "buffer-only")

    async def apply(self, edit: ComputedEdit, summary: str, ctx: ToolContext) -> ToolOutcome:
        edit = await self.with_draft(edit, getattr(ctx, "unsaved_choice", None))
        before = await self._diagnostics_before(edit.path, ctx)
        try:
            note = await self.applier.apply(edit, ctx.signal)
        except EditorUnavailable as exc:
            # The editor gave no usable answer (none in time, an error, a malformed one): a failed
            # edit the model can read, never a stalled turn (protocol.md §9).
            return ToolOutcome.error(f"Error: {exc}", "EDITOR_UNAVAILABLE")
        if self.checkpoints is not None:
            # After the apply succeeded: a refused edit changed nothing, so it keeps nothing.
            self.checkpoints.edit_applied(ctx.call, edit)
        self.tracker.record_current(edit.path, edit.after_text, None if edit.created else edit.before_text)
        added, removed = edit.stats
        text = f"{summary} (+{added} -{removed} lines)"
        if note:
            text += f"\n{note}"
        meta = edit.meta()
        if before is not None:
            settle = self.limits.diagnostics_settle_s
            errors = await diagnostics_after_edit(
                self.editor, self.workspace, edit.path, before, settle, ctx.signal
            )
            if errors:
                # Told twice: in words for the model, as data for the clients (which never parse the words).
                text += f"\n{errors.note()}"
                meta.update(errors.meta())
        return ToolOutcome.text(text, meta=meta)

    async def _diagnostics_before(self, path: Path, ctx: ToolContext) -> list[FileDiagnostics] | None:
        """The file's diagnostics before an edit, to tell the new errors from the old (None: the
        editor reports none to us)."""
        if not self.editor.diagnostics_supported:
            return None
        try:
            return await self.editor.diagnostics([path], signal=ctx.signal)
        except EditorUnavailable:
            return None

    async def apply_accepted(
        self, proposed: ComputedEdit, accepted_text: str, ctx: ToolContext
    ) -> ToolOutcome:
        """The person changed the proposal before allowing it (a hunk rejected, a line retyped): write
        exactly their text, from the same before-text, and tell the model what they changed."""
        shown = self.workspace.display(proposed.path)
        if accepted_text == proposed.after_text:
            verb = "Created" if proposed.created else "Edited"
            return await self.apply(proposed, f"{verb} {shown}", ctx)
        if not proposed.created and accepted_text == proposed.before_text:
            return ToolOutcome.text(
                f"The user accepted none of your proposed changes to {shown}; nothing was written. "
                "Ask them what they want instead of proposing the same change again."
            )
        before = None if proposed.created else proposed.before_text
        edit = compute_edit(proposed.path, before, accepted_text, shown)
        outcome = await self.apply(edit, f"Wrote {shown} as the user changed it", ctx)
        changes = unified_diff(proposed.after_text, accepted_text, shown)
        if len(changes) > ACCEPTED_DIFF_CHARS:
            changes = changes[:ACCEPTED_DIFF_CHARS] + "\n[… diff cut; read the file to see the rest]\n"
        note = (
            f"The user changed your proposed edit of {shown} before accepting it; the file now holds "
            "their version, not yours. What they changed, from your proposal to what was written:\n"
            f"{changes}"
        )
        text = "".join(b.text for b in outcome.content if isinstance(b, TextBlock))
        meta = {**(outcome.meta or {}), "editedByUser": True}
        return ToolOutcome.text(f"{text}\n{note}", meta=meta)


ACCEPTED_DIFF_CHARS = 4_000  # the diff from the proposal to the accepted text, in the tool result


class EditFileTool(_EditToolBase):
    spec = make_spec(
        "edit_file",
        "Replace exact text in a file. `old_string` must match the file exactly (indentation included) "
        "and be unique unless replace_all is set; include surrounding lines to make it unique. "
        "Read the file first.",
        {
            "path": {"type": "string", "description": "File path, relative to the session directory."},
            "old_string": {"type": "string", "description": "Exact text to replace."},
            "new_string": {"type": "string", "description": "Replacement text."},
            "replace_all": {"type": "boolean", "description": "Replace every occurrence (default false)."},
        },
        ["path", "old_string", "new_string"],
    )

    def permission_title(self, args: Mapping[str, Any]) -> str:
        return f"Edit {short(str(args.get('path', '?')))}"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        edit, summary = await self.compute(args)
        _check_approved(edit, ctx)
        accepted = _accepted_text(ctx)
        if accepted is not None:
            return await self.apply_accepted(edit, accepted, ctx)
        return await self.apply(edit, summary, ctx)

    async def permission_preview(self, args: Mapping[str, Any]) -> Mapping[str, Any] | None:
        edit, _ = await self.compute(args)
        return edit_preview(await self.with_draft(edit))

    async def compute(self, args: Mapping[str, Any]) -> tuple[ComputedEdit, str]:
        """The edit this call makes and its summary; nothing is written."""
        path = self.workspace.resolve(get_str(args, "path", allow_empty=False))
        old = get_str(args, "old_string")
        new = get_str(args, "new_string")
        replace_all = get_bool(args, "replace_all")
        if not old:
            raise InvalidArgumentsError("old_string is empty; use write_file to create or overwrite a file")
        if old == new:
            raise InvalidArgumentsError("old_string and new_string are the same; nothing to change")
        shown = self.workspace.display(path)
        before = await self.current_text(path, shown)
        if before is None:
            raise FileToolError(f"{shown} does not exist; use write_file to create it", "NOT_FOUND")
        count = before.count(old)
        if count == 0 and match_newlines(old, before) != old:
            # The model wrote \n for a CRLF file: match (and write) with the file's own line endings.
            old, new = match_newlines(old, before), match_newlines(new, before)
            count = before.count(old)
        if count == 0:
            raise FileToolError(
                f"old_string was not found in {shown}; it must match exactly, whitespace included. "
                "Read the file again to copy the current text.",
                "NOT_FOUND_IN_FILE",
            )
        if count > 1 and not replace_all:
            raise FileToolError(
                f"old_string occurs {count} times in {shown}; add surrounding lines to make it unique, "
                "or set replace_all to replace every occurrence",
                "NOT_UNIQUE",
            )
        after = before.replace(old, new) if replace_all else before.replace(old, new, 1)
        edit = compute_edit(path, before, after, shown)
        noun = "occurrence" if count == 1 else "occurrences"
        return edit, f"Edited {shown}: replaced {count if replace_all else 1} {noun}"


class WriteFileTool(_EditToolBase):
    spec = make_spec(
        "write_file",
        "Create a file, or replace a file's whole content. Parent directories are created. "
        "Prefer edit_file for changes to existing files.",
        {
            "path": {"type": "string", "description": "File path, relative to the session directory."},
            "content": {"type": "string", "description": "The complete new content."},
        },
        ["path", "content"],
    )

    def permission_title(self, args: Mapping[str, Any]) -> str:
        return f"Write {short(str(args.get('path', '?')))}"

    async def run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolOutcome:
        edit, shown = await self.compute(args)
        if edit is None:
            return ToolOutcome.text(f"{shown} already has this content; nothing written.")
        _check_approved(edit, ctx)
        accepted = _accepted_text(ctx)
        if accepted is not None:
            return await self.apply_accepted(edit, accepted, ctx)
        return await self.apply(edit, f"{'Created' if edit.created else 'Wrote'} {shown}", ctx)

    async def permission_preview(self, args: Mapping[str, Any]) -> Mapping[str, Any] | None:
        edit, _ = await self.compute(args)
        return None if edit is None else edit_preview(await self.with_draft(edit))

    async def compute(self, args: Mapping[str, Any]) -> tuple[ComputedEdit | None, str]:
        """The edit this call makes (None: the file already holds the content) and the path shown."""
        path = self.workspace.resolve(get_str(args, "path", allow_empty=False))
        content = get_str(args, "content")
        shown = self.workspace.display(path)
        if path.is_dir():
            raise FileToolError(f"{shown} is a directory", "IS_DIRECTORY")
        before = await self.current_text(path, shown)
        if before is not None:
            content = match_newlines(content, before)
            if content == before:
                return None, shown
        return compute_edit(path, before, content, shown), shown


def _check_approved(edit: ComputedEdit, ctx: ToolContext) -> None:
    """The edit made must be the edit the person allowed: if the file changed while they were asked,
    the diff differs (for a changed proposal: the before-text differs from the previewed one), and
    nothing is written."""
    approved = getattr(ctx, "approved_preview", None)
    changed = approved is not None and (
        ("diff" in approved and approved["diff"] != edit.unified_diff)
        or (_accepted_text(ctx) is not None and approved.get("oldText") != edit.before_text)
    )
    if changed:
        raise EditConflictError(
            "the file changed while the user was asked to allow this edit; nothing was written. "
            "Read the file again and redo the edit."
        )


def _accepted_text(ctx: ToolContext) -> str | None:
    text = getattr(ctx, "accepted_text", None)  # a context built before edited accepts existed has none
    return text if isinstance(text, str) else None


PREVIEW_TEXT_CHARS = 1_000_000  # each of oldText / newText in a permission preview


def edit_preview(edit: ComputedEdit) -> dict[str, Any]:
    """What the person is asked to approve: the diff, and the whole old and new text for a side-by-side
    diff view (each capped; `truncated` says a cap cut one of them, and the diff is then the truth)."""
    old, new = edit.before_text, edit.after_text
    preview: dict[str, Any] = {
        "path": str(edit.path),
        "diff": edit.unified_diff,
        "oldText": old[:PREVIEW_TEXT_CHARS],
        "newText": new[:PREVIEW_TEXT_CHARS],
        "created": edit.created,
    }
    if len(old) > PREVIEW_TEXT_CHARS or len(new) > PREVIEW_TEXT_CHARS:
        preview["truncated"] = True
    if edit.unsaved is not None:
        # The file has unsaved changes in the editor: "apart" (only this edit reaches the disk) or
        # "overlaps" (the person chooses: both saved, or the buffer only; protocol.md §8)
        preview["unsaved"] = "apart" if edit.unsaved == "apart" else "overlaps"
    return preview
