"""Post-execute context: after any tool call, tell the model about files it read earlier that have
changed since (one `plugin` notice message, entered after the whole tool batch, per D3)."""

from __future__ import annotations

from dsh_daemon.agent.tools import PostExecuteDecision, ToolCall, ToolOutcome
from dsh_daemon.model.messages import UserMessage
from dsh_daemon.tools.tracking import ReadTracker
from dsh_daemon.tools.workspace import Workspace

NOTICE_SOURCE = {"kind": "plugin", "plugin": "dsh-tools", "form": "notice"}


class ChangedFilesNotice:
    def __init__(self, tracker: ReadTracker, workspace: Workspace) -> None:
        self.tracker = tracker
        self.workspace = workspace

    async def __call__(self, call: ToolCall, outcome: ToolOutcome) -> PostExecuteDecision | None:
        changes = self.tracker.changes()
        if not changes:
            return None
        lines = []
        for path, change in changes:
            shown = self.workspace.display(path)
            if change == "deleted":
                lines.append(f"Note: {shown} was deleted since you read it.")
            else:
                lines.append(
                    f"Note: {shown} changed on disk (or in the editor) since you read it; "
                    "read it again before relying on it or editing it."
                )
        return PostExecuteDecision(additional_contexts=(UserMessage.create("\n".join(lines), NOTICE_SOURCE),))
