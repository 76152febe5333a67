"""The dsh wire is declared once (dsh_daemon/model/methods.py, payloads.py, wire.py), and what is
written elsewhere is checked against the declarations: every example frame in protocol.md structures
into its declared type, `dsh-daemon schema` prints the JSON Schema from them without importing the
server, the VS Code client's editors/vscode/src/protocol/types.ts agrees with the schema, and the LSP
server serves exactly the declared methods."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from dsh_daemon.model import events as ev
from dsh_daemon.model.codec import WireValueError, structure, unstructure
from dsh_daemon.model.methods import DAEMON_METHODS, METHODS, DshCapabilities, EventParams
from dsh_daemon.model.payloads import PAYLOADS, TOOL_RESULT_META, AssistantDelta, ToolResulted, TurnEnded
from dsh_daemon.model.schema import wire_schema
from dsh_daemon.model.wire import Message, TextDelta, TurnEndReason
from dsh_daemon.server import errors as lsp_errors

ROOT = Path(__file__).resolve().parent.parent
PROTOCOL = ROOT / "protocol.md"
TYPES_TS = ROOT / "editors" / "vscode" / "src" / "protocol" / "types.ts"
ELIDED = re.compile(r"\{…\}|\[…\]")  # an example's "and so on": the frame is checked, not that part


# ---- the declarations ------------------------------------------------------------------------------


def test_every_event_type_has_a_payload() -> None:
    live = {ev.STATUS, ev.INBOX_INSERTED, ev.INBOX_CLAIMED, ev.INBOX_DISCARDED, ev.ASSISTANT_DELTA}
    live |= {ev.TOOL_OUTPUT, ev.AGENT_ERROR, ev.SESSION_LEASE, ev.PERMISSION_REQUESTED}
    live |= {ev.PERMISSION_RESOLVED, ev.MCP_STATUS, ev.SANDBOX_STATUS, ev.HOOK_FAILED, ev.HOOKS_UNTRUSTED}
    live |= {ev.TURN_DIFF}
    live |= {ev.SUBAGENT_EVENT, ev.SESSION_HANDOVER}
    assert set(PAYLOADS) == set(ev.DURABLE_TYPES) | live


def test_the_codec_is_strict_names_the_field_and_takes_null_as_absent() -> None:
    send = METHODS["dsh/send"].params
    good = {"sessionId": "s", "message": {"content": "x"}, "target": "next-step", "wakeup": False}
    assert structure(good, send).target == "next-step"
    wrong = [
        ({**good, "wakeup": None}, "'wakeup' must be a boolean"),  # required: null is not absent
        ({**good, "wakeup": 1}, "'wakeup' must be a boolean"),
        ({**good, "sessionId": ""}, "'sessionId' must be a non-empty string"),
        ({**good, "target": "later"}, "'target' must be one of"),
        ({**good, "message": {}}, "'message.content' is required"),
        (
            {**good, "context": [{"uri": "u", "kind": "selection", "range": {"start": {"line": 0, "character": 0},
                                                                           "end": {"line": True, "character": 0}}}]},
            "'context[0].range.end.line' must be a non-negative integer",
        ),
    ]  # fmt: skip
    for params, problem in wrong:
        with pytest.raises(WireValueError) as error:
            structure(params, send)
        assert problem in str(error.value), params
    cancel = structure({"sessionId": "s", "keepInbox": None, "cause": None}, METHODS["dsh/cancel"].params)
    assert (cancel.keep_inbox, cancel.cause) == (False, "user")  # optional: null takes the default


def test_payloads_round_trip_and_the_hot_path_matches_its_declaration() -> None:
    ended = TurnEnded(4, TurnEndReason("error", error={"code": "AUTH", "message": "no key"}))
    assert ended.data() == {
        "turn": 4,
        "reason": {"kind": "error", "error": {"code": "AUTH", "message": "no key"}},
    }
    assert TurnEnded.of(ended.event()) == ended
    for delta in (TextDelta("text", "hé"), TextDelta("reasoning", "so")):
        declared = AssistantDelta(1, 2, 3, delta)
        fast = AssistantDelta.fast_event(1, 2, 3, unstructure(delta))
        assert fast.type == declared.TYPE and fast.data == declared.event().data
        assert AssistantDelta.of(fast) == declared


# ---- protocol.md's examples ------------------------------------------------------------------------


@dataclass
class Frame:
    direction: str  # "→" client to daemon, "←" daemon to client
    message: dict[str, Any]
    elided: bool


def example_blocks() -> list[str]:
    return re.findall(r"```json\n(.*?)```", PROTOCOL.read_text(), re.S)


def frames(block: str) -> list[Frame]:
    """The frames of one example: a line starting with an arrow, and the lines continuing it."""
    texts: list[tuple[str, str]] = []
    for line in block.splitlines():
        stripped = line.strip()
        if stripped.startswith(("→", "←")):
            texts.append((stripped[0], stripped[1:].strip()))
        elif texts and stripped:
            texts[-1] = (texts[-1][0], f"{texts[-1][1]} {stripped}")
    return [
        Frame(direction, json.loads(ELIDED.sub("null", text)), bool(ELIDED.search(text)))
        for direction, text in texts
        if not text.startswith("…")  # "… every durable event up to lastSeq …"
    ]


def check_frames(block: str) -> int:
    """Structure each frame of one example into its declared type; the number of frames checked."""
    checked = 0
    asked: dict[Any, str] = {}  # request id -> method, to check its response
    for frame in frames(block):
        message = frame.message
        method = message.get("method")
        table = METHODS if frame.direction == "→" else DAEMON_METHODS
        if method in table:
            if "id" in message:
                asked[message["id"]] = method
            if not frame.elided:
                structure(message.get("params") or {}, table[method].params)
            if method == "dsh/event":
                params = message["params"]
                assert params["type"] in PAYLOADS, params
                assert ("seq" in params) == (params["type"] in ev.DURABLE_TYPES), params
                if not frame.elided:
                    data = structure(structure(params, EventParams).data, PAYLOADS[params["type"]])
                    if (
                        isinstance(data, ToolResulted)
                        and data.meta is not None
                        and data.name in TOOL_RESULT_META
                    ):
                        structure(data.meta, TOOL_RESULT_META[data.name])  # its tool's declared meta
            checked += 1
        elif method is not None:
            assert not method.startswith("dsh/"), f"{method} is not declared in model/methods.py"
        elif "result" in message and message["id"] in asked:
            answered = asked[message["id"]]
            declared = (METHODS.get(answered) or DAEMON_METHODS[answered]).result
            if not frame.elided:
                structure(message["result"], declared)
            checked += 1
        elif "error" in message:
            error = message["error"]
            kind = error["data"]["code"]
            assert error["code"] == lsp_errors.CODES[kind]  # the code the LSP front end gives that kind
            checked += 1
    return checked


def test_every_example_frame_of_protocol_md_fits_its_declaration() -> None:
    checked = sum(check_frames(block) for block in example_blocks())
    assert checked >= 40  # every request, response, event and error example (the doc has 45)


def test_the_examples_that_are_values_fit_theirs() -> None:
    blocks = [
        json.loads(ELIDED.sub("null", b)) for b in example_blocks() if not b.lstrip().startswith(("→", "←"))
    ]
    capabilities = [b for b in blocks if "capabilities" in b]
    (initialize,) = capabilities
    structure(initialize["capabilities"]["experimental"]["dsh"], DshCapabilities)
    messages = [b for b in blocks if b.get("role") == "user"]
    assert len(messages) == 2  # §2's UserMessage, §18's expanded custom command
    for message in messages:
        structure(message, Message)


def test_a_frame_that_does_not_fit_is_caught() -> None:
    """The check above can fail: a result with a field of the wrong type, an unknown event."""
    wrong_result = '→ {"jsonrpc":"2.0","id":1,"method":"dsh/wake","params":{"sessionId":"s"}}\n← {"jsonrpc":"2.0","id":1,"result":{"started":"yes"}}'
    with pytest.raises(WireValueError):
        check_frames(wrong_result)
    unknown = (
        '← {"jsonrpc":"2.0","method":"dsh/event","params":{"sessionId":"s","type":"turn/begin","data":{}}}'
    )
    with pytest.raises(AssertionError):
        check_frames(unknown)
    # A tool result's meta is checked against its tool's declaration (newErrors is a count).
    message = '{"id":"m","role":"user","content":[],"source":{"kind":"tool","callId":"c"}}'
    meta = '{"path":"/p/a.py","diff":"","beforeHash":null,"afterHash":"h","created":false,"newErrors":"2 new errors"}'
    result = (
        '← {"jsonrpc":"2.0","method":"dsh/event","params":{"sessionId":"s","seq":5,"type":"tool/result","data":'
        f'{{"turn":1,"step":1,"callId":"c","name":"edit_file","message":{message},"meta":{meta}}}}}}}'
    )
    with pytest.raises(WireValueError, match="newErrors"):
        check_frames(result)
    assert check_frames(result.replace('"2 new errors"', "2")) == 1


# ---- dsh-daemon schema -----------------------------------------------------------------------------


def test_dsh_daemon_schema_prints_the_whole_wire_without_the_server() -> None:
    code = (
        "import sys, io, contextlib\n"
        "from dsh_daemon import cli\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out): cli.main(['schema'])\n"
        "print(out.getvalue())\n"
        "print(' '.join(m for m in sys.modules if m.startswith(('dsh_daemon', 'pygls', 'lsprotocol'))))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True
    )
    text, _, loaded = result.stdout.rstrip().rpartition("\n")
    schema = json.loads(text)
    assert schema == wire_schema()
    assert set(schema["x-methods"]) == set(METHODS) | set(DAEMON_METHODS)
    assert set(schema["x-events"]) == set(PAYLOADS)
    assert [m for m in loaded.split() if not m.startswith(("dsh_daemon.model", "dsh_daemon.cli"))] == [
        "dsh_daemon"
    ]
    for name, method in schema["x-methods"].items():
        assert method["params"] and (method["kind"] == "notification") == ("result" not in method), name


def test_the_schema_validates_what_it_declares() -> None:
    """A JSON Schema validator (if installed) accepts the schema and an event it describes."""
    jsonschema = pytest.importorskip("jsonschema")
    schema = wire_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    event = {"sessionId": "s", "seq": 3, "type": "turn/start", "data": {"turn": 1}}
    jsonschema.validate(event, {**schema, "$ref": "#/$defs/DshEvent"})


# ---- the VS Code client's types ---------------------------------------------------------------------

# types.ts interface -> the schema definition it mirrors
MIRRORS = {
    "Position": "Position",
    "Range": "Range",
    "UserMessage": "Message",
    "OutgoingMessage": "OutgoingMessage",
    "InboxItem": "InboxItem",
    "Inbox": "Inbox",
    "ContextRef": "ContextRef",
    "TerminalOutput": "TerminalOutput",
    "SendResult": "SendResult",
    "SessionInfo": "SessionSummary",
    "AttachResult": "SessionAttachResult",
    "TranscriptPage": "SessionTranscriptResult",
    "TranscriptTurn": "TranscriptTurn",
    "SessionUsage": "SessionUsageResult",
    "SubagentUsageSum": "SubagentUsageSum",
    "Usage": "Usage",
    "TurnEndReason": "TurnEndReason",
    "EditMeta": "EditMeta",
    "ReportedProblem": "ReportedProblem",
    "LanguageToolMeta": "LanguageToolMeta",
    "PermissionGrant": "PermissionGrant",
    "PermissionPreview": "PermissionPreview",
    "PermissionRequest": "PermissionRequest",
    "ContextAddParams": "ContextAddParams",
    "ContextDidChangeParams": "ContextDidChangeParams",
    "InitializeDshCapabilities": "DshCapabilities",
}


@dataclass(frozen=True)
class TsMember:
    name: str
    optional: bool
    type: str


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _closing(text: str, start: int) -> int:
    """The index of the bracket closing the one at `start`."""
    depth = 0
    for index in range(start, len(text)):
        if text[index] in "{[(<":
            depth += 1
        elif text[index] in "}])>":
            depth -= 1
            if depth == 0:
                return index
    raise ValueError("unbalanced")


def _split_top(text: str, separator: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for char in text:
        depth += char in "{[(<"
        depth -= char in "}])>"
        if char == separator and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _members(body: str) -> dict[str, TsMember]:
    out = {}
    for part in _split_top(body.replace("\n", " "), ";"):
        if part.startswith("["):
            continue  # an index signature
        name, _, kind = part.partition(":")
        name = name.strip().strip("'\"")
        optional = name.endswith("?")
        name = name.rstrip("?")
        out[name] = TsMember(name, optional, kind.strip())
    return out


def ts_declarations() -> dict[str, dict[str, TsMember]]:
    """Every `export interface` / `export type X = {…}` of types.ts: its members (inherited included)."""
    text = _strip_comments(TYPES_TS.read_text())
    found: dict[str, dict[str, TsMember]] = {}
    parents: dict[str, str] = {}
    for match in re.finditer(r"export (?:interface (\w+)(?: extends (\w+))?|type (\w+) =)\s*\{", text):
        name = match.group(1) or match.group(3)
        start = match.end() - 1
        found[name] = _members(text[start + 1 : _closing(text, start)])
        if match.group(2):
            parents[name] = match.group(2)
    for child, parent in parents.items():
        found[child] = {**found[parent], **found[child]}
    return found


def ts_event_data() -> dict[str, dict[str, TsMember]]:
    """`EventDataMap`: event type -> the members of its data."""
    declarations = ts_declarations()
    out = {}
    for event_type, member in declarations["EventDataMap"].items():
        kind = member.type
        if kind.startswith("{"):
            out[event_type] = _members(kind[1 : _closing(kind, 0)])
        elif kind.startswith("Omit<"):
            base, _, dropped = kind[len("Omit<") : -1].partition(",")
            omitted = set(re.findall(r"'([^']+)'", dropped))
            out[event_type] = {k: v for k, v in declarations[base.strip()].items() if k not in omitted}
        else:
            out[event_type] = declarations[kind]
    return out


def _schema_object(schema: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    return node


def _primitive(node: dict[str, Any]) -> set[str]:
    """The JSON types a schema node allows, as far as TS primitives go."""
    kinds: set[str] = set()
    for option in node.get("anyOf", [node]):
        if option.get("type") in ("integer", "number"):
            kinds.add("number")
        elif option.get("type") in ("string", "boolean", "null"):
            kinds.add(option["type"])
        elif isinstance(option.get("const", option.get("enum", [None])[0]), str):
            kinds.add("string")
        elif isinstance(option.get("const", option.get("enum", [None])[0]), bool):
            kinds.add("boolean")
        else:
            kinds.add("other")
    return kinds


def _ts_primitive(kind: str) -> set[str] | None:
    """The primitive types a TS member type is made of (None: not only primitives, not compared)."""
    kinds = set()
    for option in _split_top(kind, "|"):
        if option in ("string", "number", "boolean", "null"):
            kinds.add(option)
        elif re.fullmatch(r"'[^']*'", option):
            kinds.add("string")
        elif option == "true":
            kinds.add("boolean")
        else:
            return None
    return kinds


def compare(
    schema: dict[str, Any], node: dict[str, Any], members: dict[str, TsMember], where: str
) -> list[str]:
    """What a TS declaration says that the schema does not: a field the daemon never sends, one it
    may leave out declared required, a required field missing, or another primitive type."""
    obj = _schema_object(schema, node)
    properties, required = obj.get("properties", {}), set(obj.get("required", []))
    problems = []
    for name, member in members.items():
        if name not in properties:
            problems.append(f"{where}.{name}: not in the schema")
            continue
        if not member.optional and name not in required:
            problems.append(f"{where}.{name}: required in types.ts, optional in the schema")
        ts = _ts_primitive(member.type)
        declared = _primitive(properties[name]) - {"null"}
        if ts is not None and "other" not in declared and not (ts - {"null"}) <= declared:
            problems.append(f"{where}.{name}: {member.type} in types.ts, {sorted(declared)} in the schema")
    for name in sorted(required - set(members)):
        problems.append(f"{where}.{name}: required by the schema, missing in types.ts")
    return problems


def test_the_vscode_types_agree_with_the_schema() -> None:
    schema = wire_schema()
    declarations = ts_declarations()
    problems = []
    for ts_name, def_name in MIRRORS.items():
        problems += compare(schema, {"$ref": f"#/$defs/{def_name}"}, declarations[ts_name], ts_name)
    events = ts_event_data()
    assert set(events) == set(schema["x-events"]), set(events) ^ set(schema["x-events"])
    for event_type, members in events.items():
        problems += compare(schema, schema["x-events"][event_type]["data"], members, event_type)
    assert problems == []


def test_the_types_check_catches_a_disagreement() -> None:
    schema = wire_schema()
    members = {"turn": TsMember("turn", False, "string"), "stepp": TsMember("stepp", True, "number")}
    problems = compare(schema, schema["x-events"]["step/start"]["data"], members, "step/start")
    assert problems == [
        "step/start.turn: string in types.ts, ['number'] in the schema",
        "step/start.stepp: not in the schema",
        "step/start.step: required by the schema, missing in types.ts",
    ]


# ---- the server -------------------------------------------------------------------------------------


def test_the_lsp_server_serves_exactly_the_declared_methods(tmp_path: Path) -> None:
    from dsh_daemon.server.app import Daemon, Settings

    daemon = Daemon(Settings(tmp_path))
    served = {name for name in daemon.server.protocol.fm.features if name.startswith("dsh/")}
    assert served == set(METHODS)


def test_wire_errors_have_a_code_on_both_wires() -> None:
    from typing import get_args

    from dsh_daemon.acp import errors as acp_errors
    from dsh_daemon.host.errors import Kind

    assert set(get_args(Kind)) == set(lsp_errors.CODES) == set(acp_errors.CODES)
