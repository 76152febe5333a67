"""The `initialize` reply's capabilities, built without pygls or lsprotocol (pygls-free on purpose).

`initialize_result` is the result pygls computes for the features this server registers (it answers
`initialize` before pygls is imported: server/early_init.py), and `DSH_CAPABILITIES` the daemon's
own `experimental.dsh` block, which both paths send. tests/test_startup.py compares the early reply
with the one pygls computes, so the two cannot drift apart.
"""

from __future__ import annotations

from typing import Any

from dsh_daemon import __version__

PROTOCOL_VERSION = 1
SERVER_NAME = "dsh-daemon"
# The position encodings pygls can serve, in its own check's terms (pygls/capabilities.py).
SUPPORTED_ENCODINGS = ("utf-8", "utf-16", "utf-32")
DEFAULT_ENCODING = "utf-16"

DSH_CAPABILITIES: dict[str, Any] = {
    "protocolVersion": PROTOCOL_VERSION,
    "version": __version__,
    "sessions": True,
    "inboxEdits": True,
    "editorContext": ["file", "selection", "diagnostics", "snapshot", "gitDiff", "terminal"],
    "sendContext": True,  # `context` on sends and inbox/replace (§4)
    "inboxItems": True,  # verb, wakeup, queuedAt, target, context on pending items (§5)
    "deltaOffsets": True,  # `offset` on assistant/delta (§7)
    "permissionEvents": True,  # permission/requested|resolved, dsh/permissions/* (§8)
    "transcript": True,  # dsh/session/transcript; attach `replay: "none"` (§3)
    "sessionManagement": True,  # rename, delete, list paging + lastPrompt, session/title (§3)
    "detach": True,  # dsh/session/detach (§3)
    "liveReadOnly": True,  # a read-only attach follows the store; session/lease (§3)
    "followerOutput": True,  # …and gets the driver's running commands' tool/output (§3)
    "configurationChange": True,  # workspace/didChangeConfiguration (§1)
    "mcpServers": True,  # MCP servers' tools, `mcp/status` events (§12)
    "rewind": True,  # dsh/session/rewind, checkpoints, fork (§15)
    "turnDiff": True,  # dsh/turn/diff, keep, undo; the turn/diff event (§15)
    "editorCoherence": True,  # edits saved, unsaved documents named; `documentSave` (§9)
    "editorDiagnostics": True,  # client `diagnostics`: new errors after edits, a tool (§9)
    "languageFeatures": True,  # client `languageFeatures`: definition, references, … tools (§9)
    "editedAccept": True,  # `newText` in a permission answer: the edit as changed (§8)
    "persistWidening": True,  # `persist` in a permission answer: a widening saved (§16)
    "takeOver": True,  # dsh/session/takeOver (§3)
    "handOver": True,  # session/handover to the driver, dsh/session/handOver (§3)
    "modes": True,  # dsh/session/setMode, session/mode, attach `mode` (§3)
    "models": True,  # dsh/models/list (§1)
    "sessionModels": True,  # dsh/session/setModel, dsh/models/list `sessionId` (§1)
    "processes": True,  # background processes: dsh/process/*, process/* events (§12)
    "customCommands": True,  # dsh/commands/list; `/NAME` expanded in sends; skills (§18)
    "review": True,  # dsh/review/*, review/* events
    "worktrees": True,  # dsh/session/new `worktree`, dsh/worktree/*, `worktree` in lists
    "namedAgents": True,  # dsh/agents/list by session or cwd (§12 "Subagents")
    "sessionUsage": True,  # dsh/session/usage: the session's summed tokens and cost (§3)
}


def position_encoding(client_capabilities: dict[str, Any]) -> str | None:
    """The encoding pygls chooses (the client's first one it supports, else UTF-16); None when the
    client's `general.positionEncodings` is not what pygls reads as a list of names."""
    general = client_capabilities.get("general")
    if general is None:
        return DEFAULT_ENCODING
    if not isinstance(general, dict):
        return None
    encodings = general.get("positionEncodings")
    if encodings is None:
        return DEFAULT_ENCODING
    if not isinstance(encodings, list) or not all(isinstance(e, str) for e in encodings):
        return None
    return next((e for e in encodings if e in SUPPORTED_ENCODINGS), DEFAULT_ENCODING)


# The client capabilities the reply depends on, by section (the rest only reaches pygls' state).
READ_FROM_CLIENT = {"general": "positionEncodings", "textDocument": "synchronization"}
_WILL_SAVE = ("willSave", "willSaveWaitUntil")


def text_document_sync(client_capabilities: dict[str, Any]) -> dict[str, Any] | None:
    """`textDocumentSync` as pygls builds it: `willSave` and `willSaveWaitUntil` are the client's
    value when it is false (pygls' `client and registered`; this server registers neither), false
    when it is true, left out when the client leaves it out; None when the client's values are not
    plain booleans (pygls' reading of them is not this function's to guess)."""
    sync: dict[str, Any] = {"openClose": True, "change": 2}
    document = client_capabilities.get("textDocument")
    if document is not None:
        if not isinstance(document, dict):
            return None
        synchronization = document.get("synchronization")
        if synchronization is not None:
            if not isinstance(synchronization, dict):
                return None
            for name in _WILL_SAVE:
                value = synchronization.get(name)
                if value is not None and not isinstance(value, bool):
                    return None
                if value is not None:
                    sync[name] = False
    return {**sync, "save": False}


def initialize_result(encoding: str, sync: dict[str, Any]) -> dict[str, Any]:
    """The `initialize` result, as pygls serialises it for this server's features."""
    return {
        "capabilities": {
            "positionEncoding": encoding,
            "textDocumentSync": sync,
            "executeCommandProvider": {"commands": []},
            "workspace": {
                "workspaceFolders": {"supported": True, "changeNotifications": True},
                "fileOperations": {},
            },
            "experimental": {"dsh": DSH_CAPABILITIES},
        },
        "serverInfo": {"name": SERVER_NAME, "version": __version__},
    }
