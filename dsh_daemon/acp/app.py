"""The ACP methods: parameters checked here, the work done by the front end and its session host.

Standard: `initialize`, `authenticate`, `session/new`, `session/load`, `session/resume`,
`session/list`, `session/close`, `session/prompt`, and the notifications `session/cancel` and
`$/cancel_request`. Extensions (advertised under `agentCapabilities._meta`): `_session/steering`,
`_dsh/inject`, `_dsh/wake`, `_dsh/inbox/{list,remove,replace,move}`, `_dsh/project/trust`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dsh_daemon import __version__
from dsh_daemon.acp import commands, named_agents
from dsh_daemon.acp.rpc import Connection
from dsh_daemon.acp.transport import RequestId
from dsh_daemon.host import errors
from dsh_daemon.host.config_file import ProblemReporter
from dsh_daemon.host.options import DaemonOptions, ServerSource, parse_options, parse_session_servers
from dsh_daemon.host.paths import checked_path, is_directory
from dsh_daemon.host.preload import preload_in_background, settle

if TYPE_CHECKING:
    from dsh_daemon.acp.context import PromptParts
    from dsh_daemon.acp.frontend import AcpFrontEnd
    from dsh_daemon.host.early import EarlySessions
    from dsh_daemon.model.inbox import Target

logger = logging.getLogger(__name__)

PROTOCOL_VERSION = 1
API_KEY_VARIABLE = "DEEPSEEK_API_KEY"
# ACP's environment-variable auth method: the client sets the variable when it starts the agent.
AUTH_METHOD: dict[str, Any] = {
    "id": "deepseek-api-key",
    "name": "DeepSeek API key",
    "description": f"Set {API_KEY_VARIABLE} in the environment dsh-daemon acp starts with",
    "type": "env_var",
    "vars": [{"name": API_KEY_VARIABLE, "label": "DeepSeek API key", "secret": True}],
    "link": "https://platform.deepseek.com/api_keys",
}
NO_KEY_MESSAGE = (
    f"No DeepSeek API key: set {API_KEY_VARIABLE} in the environment dsh-daemon acp starts with "
    '(Zed: "env" of the agent server in settings.json; CodeCompanion: Neovim\'s environment), or '
    '"apiKey" in $DSH_HOME/config.json'
)

# What the first session request imports (`front_end`, `_prompt`), loaded after `initialize`'s reply.
PRELOAD = ("dsh_daemon.acp.frontend", "dsh_daemon.acp.files", "dsh_daemon.acp.context")
# What a first `session/new` is answered with, before the rest (`_new_early`): loaded first; the rest
# waits for that answer, or this long when none comes (a client sends it as soon as it can).
PRELOAD_FIRST = ("dsh_daemon.host.early", "dsh_daemon.host.models", "dsh_daemon.acp.sessionstate")
PRELOAD_HOLD_S = 0.1


@dataclass
class Settings:
    state_dir: Path
    flags: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def capabilities() -> dict[str, Any]:
    return {
        "loadSession": True,
        "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
        "mcpCapabilities": {"http": True, "sse": False},
        "sessionCapabilities": {
            "list": {},
            "resume": {},
            "close": {},
            "delete": {},
            "fork": {},
            "additionalDirectories": {},
        },
        "_meta": {
            # `_session/steering`: dsh's own (no other agent is known to answer it; a client asks here)
            "steering": {"supported": True},
            "dsh": {
                "protocolVersion": 1,
                "version": __version__,
                "promptQueueing": True,  # a prompt sent while busy is queued durably, answered after its turn
                "inject": True,
                "wake": True,
                "inbox": True,
            },
        },
    }


# ---- params --------------------------------------------------------------------------------------------


def _worktree_meta(p: Mapping[str, Any], method: str) -> dict[str, str | None] | None:
    """`_meta.dsh.worktree: {branch?, base?}` of a `session/new` (None: not asked for)."""
    meta = p.get("_meta")
    dsh = meta.get("dsh") if isinstance(meta, Mapping) else None
    wanted = dsh.get("worktree") if isinstance(dsh, Mapping) else None
    if wanted is None:
        return None
    if not isinstance(wanted, Mapping):
        raise errors.invalid_params(f"{method}: _meta.dsh.worktree must be an object {{branch?, base?}}")
    out: dict[str, str | None] = {}
    for key in ("branch", "base"):
        value = wanted.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise errors.invalid_params(f"{method}: _meta.dsh.worktree.{key} must be a non-empty string")
        out[key] = value
    return out


def _object(raw: Any, method: str) -> Mapping[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise errors.invalid_params(f"{method}: params must be an object")
    return raw


def _str(p: Mapping[str, Any], key: str, method: str) -> str:
    value = p.get(key)
    if not isinstance(value, str) or not value:
        raise errors.invalid_params(f"{method}: '{key}' must be a non-empty string")
    return value


def _opt_str(p: Mapping[str, Any], key: str, method: str) -> str | None:
    value = p.get(key)
    if value is not None and not isinstance(value, str):
        raise errors.invalid_params(f"{method}: '{key}' must be a string")
    return value


def _dirs(p: Mapping[str, Any], method: str) -> list[str]:
    value = p.get("additionalDirectories") or []
    if not isinstance(value, list) or not all(isinstance(d, str) and os.path.isabs(d) for d in value):
        raise errors.invalid_params(f"{method}: 'additionalDirectories' must be absolute paths")
    return [checked_path(d, method, f"additionalDirectories[{i}]") for i, d in enumerate(value)]


def _cwd(p: Mapping[str, Any], method: str, required: bool = True) -> str | None:
    cwd = _opt_str(p, "cwd", method)
    if cwd is None:
        if required:
            raise errors.invalid_params(f"{method}: 'cwd' (an absolute path) is required")
        return None
    if "\0" in cwd or not os.path.isabs(cwd):
        raise errors.invalid_params(f"{method}: 'cwd' must be an absolute path, not {errors.shown(cwd)}")
    return os.path.normpath(checked_path(cwd, method, "cwd"))


def _mcp(p: Mapping[str, Any], method: str) -> ServerSource:
    """The session's MCP servers (stdio and http; over those of `$DSH_HOME/config.json`)."""
    return parse_session_servers(p.get("mcpServers"), f"{method}: mcpServers", acp=True)


# ---- registration ---------------------------------------------------------------------------------------


class Daemon:
    def __init__(self, connection: Connection, settings: Settings) -> None:
        self.connection = connection
        self.settings = settings
        self._front_end: AcpFrontEnd | None = None
        self._early: EarlySessions | None = None  # sessions created before the front end (`_new_early`)
        self._init_result: dict[str, Any] | None = None
        # What `initialize` gave, for the front end built at the first session request.
        self._options: DaemonOptions | None = None
        self._client_capabilities: Any = None
        # Per session, the text blocks of its recent prompts here (commands.parse skips re-sent ones).
        self._typed_before: dict[str, commands.EarlierTexts] = {}
        self.shutting_down = False
        # config.json's left-out entries: `_dsh/notice` for clients that read it, and a message in
        # every session this connection opens, which any ACP client shows (`_tell_session`)
        self.file_problems = ProblemReporter(
            lambda text: connection.notify("_dsh/notice", {"level": "warning", "message": text})
        )
        self._told: set[str] = set()
        self._register()

    def _check_ready(self) -> DaemonOptions:
        if self.shutting_down:
            raise errors.shutting_down()
        if self._options is None:
            raise errors.not_initialized()
        return self._options

    @property
    def front_end(self) -> AcpFrontEnd:
        """The session host and this front end's side of it, built (and imported) on the first request
        that needs a session: `initialize` is answered before any of it is loaded. Sessions created
        before it (`_new_early`) are wired here, before anything can use them."""
        options = self._check_ready()
        if self._front_end is None:
            settle()  # the machinery is imported by the preload (waited for here), or now
            from dsh_daemon.acp.files import FsCapabilities
            from dsh_daemon.acp.frontend import AcpFrontEnd
            from dsh_daemon.acp.sessionstate import takes_booleans
            from dsh_daemon.acp.terminals import offers_terminal

            fs = FsCapabilities.parse(self._client_capabilities)
            terminal = offers_terminal(self._client_capabilities)
            self._front_end = AcpFrontEnd(
                self.connection,
                self.settings.state_dir,
                options,
                fs,
                terminal=terminal,
                booleans=takes_booleans(self._client_capabilities),
                early=self._early,
            )
        if self._early is not None and self._early.pending:
            self._wire_early(self._front_end)
        return self._front_end

    def _build_front_end(self) -> None:
        if not self.shutting_down:
            self.front_end  # noqa: B018  (built, and the early sessions wired, as a side effect)

    def _wire_early(self, front_end: AcpFrontEnd) -> None:
        """The tools, agent and provider of the sessions `_new_early` created; one that cannot be set
        up is gone (`SessionHost.adopt_early_sessions`) and the client is told in the session."""
        assert self._early is not None
        front_end.host.adopt_early_sessions(self._early, self._say_not_set_up)

    def _say_not_set_up(self, session_id: str, reason: str) -> None:
        self._say(session_id, f"dsh-daemon could not set this session up: {reason}")

    def _prompt(self, p: Mapping[str, Any], session_id: str) -> PromptParts:
        """A request's `prompt` blocks as the message (and attachments) they make in this session."""
        from dsh_daemon.acp.context import prompt_parts

        return prompt_parts(p.get("prompt"), self.front_end.workspace(session_id))

    async def close(self) -> None:
        """D6: running turns end aborted{shutdown}; queued prompts stay parked for the next load."""
        self.shutting_down = True
        if self._front_end is not None:
            await self._front_end.close()
        elif self._early is not None:
            self._early.close()  # no host took the early sessions over: their leases go

    def _register(self) -> None:
        c = self.connection
        # Answered with the first preloaded modules only (`_new_early`), the rest may still be loading.
        c.first_preloaded_only = frozenset({"session/new"})
        c.request("initialize")(self.initialize)
        c.request("authenticate")(self.authenticate)
        c.request("session/new")(self.session_new)
        c.request("session/load")(self.session_load)
        c.request("session/resume")(self.session_resume)
        c.request("session/fork")(self.session_fork)
        c.request("session/list")(self.session_list)
        c.request("session/close")(self.session_close)
        c.request("session/delete")(self.session_delete)
        c.request("session/prompt")(self.session_prompt)
        c.request("session/set_mode")(self.session_set_mode)
        c.request("session/set_config_option")(self.session_set_config_option)
        c.notification("session/cancel")(self.session_cancel)
        c.notification("$/cancel_request")(self.cancel_request)
        c.request("_session/steering")(self.steering)
        c.request("_dsh/inject")(self.inject)
        c.request("_dsh/wake")(self.wake)
        c.request("_dsh/inbox/list")(self.inbox_list)
        c.request("_dsh/inbox/remove")(self.inbox_remove)
        c.request("_dsh/inbox/replace")(self.inbox_replace)
        c.request("_dsh/inbox/move")(self.inbox_move)
        c.request("_dsh/project/trust")(self.project_trust)

    # ---- lifecycle -----------------------------------------------------------------------------------

    def initialize(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        p = _object(raw, "initialize")
        version = p.get("protocolVersion")
        if isinstance(version, bool) or not isinstance(version, int):
            raise errors.invalid_params("initialize: 'protocolVersion' must be an integer")
        if self._init_result is not None:
            return self._init_result
        meta = p.get("_meta")
        dsh_options = meta.get("dsh") if isinstance(meta, Mapping) else None
        settings = self.settings
        self._options = parse_options(
            settings.state_dir, settings.env, settings.flags, dsh_options, what="_meta.dsh"
        )
        self.connection.set_delta_window(self._options.delta_coalesce_s)
        self._client_capabilities = p.get("clientCapabilities")
        # Once this reply is written (the connection writes it before the loop runs anything else),
        # the session machinery loads while the client sends its first session request; config.json's
        # left-out entries are reported then too.
        asyncio.get_running_loop().call_soon(preload_in_background, PRELOAD, PRELOAD_FIRST, PRELOAD_HOLD_S)
        asyncio.get_running_loop().call_soon(self.file_problems.report, self._options.file_problems)
        self._init_result = {
            "protocolVersion": PROTOCOL_VERSION,
            "agentCapabilities": capabilities(),
            "authMethods": [AUTH_METHOD],
            "agentInfo": {"name": "dsh-daemon", "title": "dsh", "version": __version__},
        }
        return self._init_result

    def authenticate(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        """The one method is an environment variable the client sets when it starts the agent: nothing
        to do here but say whether the key is there (`{}`) or what to set (`auth_required`)."""
        p = _object(raw, "authenticate")
        method_id = p.get("methodId")
        if method_id != AUTH_METHOD["id"]:
            raise errors.invalid_params(
                f"authenticate: unknown 'methodId' {errors.shown(method_id)}; the one method is "
                f"{AUTH_METHOD['id']!r}"
            )
        self._check_api_key()
        return {}

    def _check_api_key(self) -> None:
        from dsh_daemon.host.options import api_key_missing

        if self._options is not None and api_key_missing(self._options):
            raise errors.auth_required(API_KEY_VARIABLE, NO_KEY_MESSAGE)

    # ---- sessions ------------------------------------------------------------------------------------

    def session_new(self, raw: Any, rid: RequestId) -> dict[str, Any] | Awaitable[dict[str, Any]]:
        method = "session/new"
        p = _object(raw, method)
        cwd = _cwd(p, method)
        assert cwd is not None
        servers = _mcp(p, method)
        extra = _dirs(p, method)
        if not is_directory(cwd):
            raise errors.invalid_params(f"{method}: cwd {errors.shown(cwd)} is not a directory")
        worktree = _worktree_meta(p, method)
        if worktree is not None:  # made off the event loop: answered once it exists
            return self._new_in_worktree(cwd, servers, worktree)
        if self._front_end is None:
            return self._new_early(cwd, extra, servers)
        session_id = self.front_end.new(cwd, extra, servers)
        self._tell_session(session_id)
        return {"sessionId": session_id, **self._session_state(session_id)}

    async def _new_in_worktree(
        self, cwd: str, servers: ServerSource, worktree: dict[str, str | None]
    ) -> dict[str, Any]:
        """`_meta.dsh.worktree` (protocol.md §20): the session in a git worktree of its own, whose
        path and branch the reply's `_meta.dsh.worktree` names."""
        from dsh_daemon.host.worktree_sessions import create_in_worktree, stored_worktree

        host = self.front_end.host
        hosted = await create_in_worktree(
            host, cwd, worktree["branch"], worktree["base"], mcp_servers=servers
        )
        session_id = hosted.session_id
        self._tell_session(session_id)
        state = self._session_state(session_id)
        return {
            "sessionId": session_id,
            **state,
            "_meta": {"dsh": {"worktree": stored_worktree(host, session_id)}},
        }

    def _new_early(self, cwd: str, extra: list[str], servers: ServerSource) -> dict[str, Any]:
        """Issue 20.2: a `session/new` before the session machinery is built (the connection's first,
        typically sent right after `initialize`'s reply while the preload still imports the agent,
        the tools and the provider) is answered from the store alone: the session's row and lease, the
        reply a new session's state makes (the same as `_session_state` gives). Its wiring follows
        once the reply is out, or at the first request that needs the front end, whichever comes
        first (`front_end`): a `session/prompt` sent at once waits for it. Everything here is among
        `PRELOAD_FIRST` (the connection waited for those only): nothing else may be imported here."""
        options = self._check_ready()
        from dsh_daemon.acp.sessionstate import config_options, mode_state, takes_booleans
        from dsh_daemon.host.early import EarlySessions
        from dsh_daemon.host.models import ModelSettings, configured_models

        if self._early is None:
            self._early = EarlySessions(self.settings.state_dir)
        session_id = self._early.create_durably(cwd, extra, servers).session_id
        logger.info("session %s: created before the session machinery, wired after its reply", session_id)
        self._tell_session(session_id)
        loop = asyncio.get_running_loop()
        loop.call_soon(self._advertise_commands, session_id)
        loop.call_soon(self._build_front_end)  # the wiring, once the reply and the updates above are out
        provider = options.provider
        return {
            "sessionId": session_id,
            "modes": mode_state("ask"),  # a new session's mode
            "configOptions": config_options(
                configured_models(provider),
                ModelSettings().effective(provider),
                "ask",
                booleans=takes_booleans(self._client_capabilities),
                sandbox=(options.tools.sandbox.mode, options.tools.sandbox.mode),
            ),
        }

    def session_load(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        method = "session/load"
        p = _object(raw, method)
        session_id = _str(p, "sessionId", method)
        cwd = _cwd(p, method, required=False)
        servers = _mcp(p, method)
        self.front_end.load(session_id, cwd, _dirs(p, method), servers)
        self._tell_session(session_id)
        return self._session_state(session_id)

    def session_resume(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        method = "session/resume"
        p = _object(raw, method)
        session_id = _str(p, "sessionId", method)
        cwd = _cwd(p, method, required=False)
        servers = _mcp(p, method)
        self.front_end.resume(session_id, cwd, _dirs(p, method), servers)
        self._tell_session(session_id)
        return self._session_state(session_id)

    def session_fork(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        """`{sessionId, cwd, additionalDirectories?, mcpServers?}` → a new session like `session/new`'s
        answer: `dsh/session/fork` at the last turn that ended (a running turn is left out, as is the
        queue), opened here without a replay (the client shows the history it already has)."""
        method = "session/fork"
        p = _object(raw, method)
        session_id = _str(p, "sessionId", method)
        cwd = _cwd(p, method, required=False)
        host = self.front_end.host
        turns = host.transcript(session_id, None, 2).get("turns") or []
        ended = [int(t["turn"]) for t in turns if "end" in t]
        if not ended:
            raise errors.invalid_params(f"{method}: the session has no finished turn to fork from")
        forked = host.fork(session_id, max(ended), None)
        self.front_end.resume(forked, cwd, _dirs(p, method), _mcp(p, method))
        self._tell_session(forked)
        return {"sessionId": forked, **self._session_state(forked)}

    def _session_state(self, session_id: str) -> dict[str, Any]:
        front_end = self.front_end
        # The slash commands, once the answer naming the session is out (the next loop turn).
        asyncio.get_running_loop().call_soon(self._advertise_commands, session_id)
        return {"modes": front_end.modes(session_id), "configOptions": front_end.config_options(session_id)}

    def session_delete(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        """`{sessionId}` → `{}`: the session is gone (refused with words while a turn runs here or
        another process drives it)."""
        p = _object(raw, "session/delete")
        self.front_end.host.delete(_str(p, "sessionId", "session/delete"))
        return {}

    def _tell_session(self, session_id: str) -> None:
        """config.json's left-out entries as an agent message in the session, once per session and
        connection, after the reply that names the session (the person sees it in the agent panel;
        it is not stored, so it is not replayed)."""
        problems = self._check_ready().file_problems  # the options the session host was given
        if not problems or session_id in self._told:
            return
        self._told.add(session_id)
        lines = "\n".join(f"- {problem}" for problem in problems)
        text = (
            "dsh-daemon: some settings in config.json were left out:\n"
            f"{lines}\n(`dsh-daemon config` shows the effective configuration.)\n\n"
        )
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        asyncio.get_running_loop().call_soon(
            self.connection.notify, "session/update", {"sessionId": session_id, "update": update}
        )

    def session_list(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        p = _object(raw, "session/list")
        cwd = _cwd(p, "session/list", required=False)
        return {"sessions": self.front_end.list(cwd)}

    async def session_close(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        p = _object(raw, "session/close")
        await self.front_end.close_session(_str(p, "sessionId", "session/close"))
        return {}

    # ---- prompting -----------------------------------------------------------------------------------

    def session_prompt(self, raw: Any, rid: RequestId) -> Any:
        method = "session/prompt"
        p = _object(raw, method)
        session_id = _str(p, "sessionId", method)
        blocks = p.get("prompt")
        earlier = self._typed_before.setdefault(session_id, commands.EarlierTexts())
        delegation = named_agents.delegated(blocks, lambda: self._agent_names(session_id), repeats=earlier)
        command = None if delegation is not None else commands.parse(blocks, repeats=earlier)
        earlier.remember(blocks)
        if delegation is not None:  # `/agent-NAME TASK`: a prompt that asks the model to delegate
            p = {**p, "prompt": delegation}
        if command is not None:
            if command.name in commands.NEED_THE_MODEL:
                self._check_api_key()
            return self._run_command(session_id, rid, command)
        self._check_api_key()
        parts = self._prompt(p, session_id)
        return self.front_end.prompt(session_id, rid, parts)

    def _advertise_commands(self, session_id: str) -> None:
        """The built-in commands, then the session's custom ones (protocol.md "Custom commands and
        skills"), which a prompt runs as any prompt: the daemon expands `/NAME …` when it is sent. A
        custom command named as a built-in one is not listed (the built-in one runs)."""
        advertised = list(commands.COMMANDS)
        try:
            custom = self.front_end.host.commands_of(session_id)["commands"]
        except Exception:  # the list must never keep the built-in commands from the client
            logger.exception("session %s: its custom commands could not be listed", session_id)
            custom = []
        try:
            agents = named_agents.advertised(self.front_end.host.agent_definitions(session_id))
        except Exception:  # as the custom commands: never keeps the built-in ones from the client
            logger.exception("session %s: its named agents could not be listed", session_id)
            agents = []
        taken = commands.NAMES | {agent["name"] for agent in agents}  # `/agent-NAME` runs the agent
        for command in custom:
            if command["name"] in taken:
                continue
            entry: dict[str, Any] = {"name": command["name"], "description": command["description"]}
            if command.get("argumentHint"):
                entry["input"] = {"hint": command["argumentHint"]}
            advertised.append(entry)
        advertised += agents
        update = {"sessionUpdate": "available_commands_update", "availableCommands": advertised}
        self.connection.notify("session/update", {"sessionId": session_id, "update": update})

    def _agent_names(self, session_id: str) -> frozenset[str]:
        """The session's named agents (protocol.md §12 "Subagents")."""
        return frozenset(str(agent["name"]) for agent in self.front_end.host.agent_definitions(session_id))

    def _say(self, session_id: str, text: str) -> None:
        content = {"type": "text", "text": text}
        update = {"sessionUpdate": "agent_message_chunk", "content": content}
        self.connection.notify("session/update", {"sessionId": session_id, "update": update})

    async def _run_command(
        self, session_id: str, rid: RequestId, command: commands.SlashCommand
    ) -> dict[str, Any]:
        """A slash command, answered `end_turn` with a line saying what it did; or, when it starts a
        turn, answered when that work ends: clients drop updates that arrive outside a prompt (a
        permission asked in such a turn could never be answered), so a turn a command starts runs
        inside the `session/prompt` that asked for it (protocol.md, "ACP mode")."""
        front_end = self.front_end
        hosted = front_end.session(session_id)
        name, argument = command.name, command.argument
        if name in ("queue", "steer", "inject"):
            if not command.prompt():
                raise errors.invalid_params(f"/{name} needs a prompt after it")
            running = hosted.status == "running"
            parts = self._prompt({"prompt": command.prompt()}, session_id)
            if name == "queue" or (name == "steer" and not running):
                # A prompt by another name: queued durably, answered when its own turn ends.
                if running:
                    self._say(session_id, "Queued: it runs after the current turn.\n\n")
                answer: dict[str, Any] = await front_end.prompt(session_id, rid, parts)
                return answer
            front_end.send(session_id, parts, name)
            said = {
                "steer": "Steering: the running turn takes it at its next step.",
                "inject": "Added as context for the next model request.",
            }[name]
        elif name == "wake":
            if not hosted.wake():
                said = "Nothing queued to run."
            else:
                self._say(session_id, "Running the queue.\n\n")
                return await self._until_idle(hosted)
        elif name == "drop":
            inbox = hosted.inbox()
            ids = [item["id"] for key in ("nextTurn", "nextStep") for item in inbox.get(key, [])]
            dropped = sum(1 for message_id in ids if hosted.remove(message_id))
            said = f"Dropped {dropped} queued item{'s' if dropped != 1 else ''}."
        elif name == "compact":
            result = await hosted.compact()
            if result.get("scheduled"):
                said = "The running turn compacts the conversation at its next step."
            elif result.get("compacted"):
                said = "Compacted the conversation."
            else:
                error = result.get("error")
                message = error.get("message") if isinstance(error, Mapping) else None
                said = f"Could not compact: {message or 'nothing to compact'}."
        elif name in ("undo", "rewind"):
            said = await self._rewind(session_id, command)
        elif name == "review":
            return await self._review(session_id, hosted, argument)
        elif name == "ps":
            said = commands.processes_said(front_end.host.process_list(session_id))
        elif name == "kill":
            said = await self._kill(session_id, argument)
        elif name == "rename":
            front_end.host.rename(session_id, argument, method="/rename")
            said = f"Renamed to “{argument}”."
        else:  # model
            if argument:  # the durable session/settings it writes is the client's config_option_update
                front_end.host.set_model_setting(session_id, "model", argument, method="/model")
            models, (model, _thinking, _effort) = front_end.host.model_settings(session_id)
            offered = ", ".join(m["id"] for m in models)
            said = f"Model: {model}." if argument else f"Model: {model}. Offered: {offered}."
        self._say(session_id, said)
        return {"stopReason": "end_turn"}

    async def _kill(self, session_id: str, argument: str) -> str:
        """`/kill N`: the person's stop of a background process (`dsh/process/stop`), in words; its
        card ends with the `process/exited` it writes."""
        process_id = commands.process_id_of(argument)
        if process_id is None:
            return "Usage: /kill N — stop background process N (/ps lists them)."
        known = {p["processId"]: p for p in self.front_end.host.process_list(session_id)}
        if process_id not in known:
            return f"No background process {process_id} in this chat (/ps lists them)."
        stopped = await self.front_end.host.process_stop(session_id, process_id)
        if not stopped.get("stopped"):
            return f"{process_id} had already ended."
        return f"Stopped {process_id} (`{known[process_id].get('command')}`)."

    async def _review(self, session_id: str, hosted: Any, argument: str) -> dict[str, Any]:
        """`/review [base B | commit C] [instructions]` (protocol.md "Review"): the review turn runs
        inside this prompt; each finding shows as its `report_finding` tool call, with the file and
        line in `locations` and the suggested fix as a diff."""
        from dsh_daemon.model.review import parse_review_arguments

        params = parse_review_arguments(argument)
        host = self.front_end.host
        started = await host.review_start(
            session_id, params.get("base"), params.get("commit"), params.get("instructions")
        )
        files = started["files"]
        self._say(session_id, f"Reviewing {len(files)} changed file{'s' if len(files) != 1 else ''}.\n\n")
        answer = await self._until_idle(hosted)
        done = [r for r in host.review_list(session_id)["reviews"] if r["reviewId"] == started["reviewId"]]
        if done:
            count = done[0]["findings"]
            self._say(session_id, f"\n\nReview finished: {count} finding{'s' if count != 1 else ''}.")
        return answer

    async def _until_idle(self, hosted: Any) -> dict[str, Any]:
        """The answer of a prompt that woke the queue: when the driver has retired, the way the last
        turn it ran ended (`prompts.answer_for`)."""
        from dsh_daemon.acp.prompts import answer_for
        from dsh_daemon.model.events import TURN_END
        from dsh_daemon.model.payloads import TurnEnded

        await hosted.agent.when_idle()
        ends = [e for e in reversed(hosted.agent.log.events) if e.type == TURN_END]
        return answer_for(TurnEnded.of(ends[0]).reason) if ends else {"stopReason": "end_turn"}

    async def _rewind(self, session_id: str, command: commands.SlashCommand) -> str:
        """`/undo [force]` and `/rewind [N [files|conversation] [force]]` on the host's rewind
        (protocol.md §15), answered in plain words."""
        host = self.front_end.host
        hosted = self.front_end.session(session_id)
        cwd = str(hosted.workspace.cwd)
        if hosted.status == "running":
            return "A turn is running: stop it first, then rewind."
        if command.name == "undo":
            if command.argument not in ("", "force"):
                return "Usage: /undo [force] — take back the last turn's file changes."
            turns = host.transcript(session_id, None, 1).get("turns") or []
            last = int(turns[0]["turn"]) if turns else None
            changed = {int(t["turn"]) for t in host.checkpoints_of(session_id)["turns"]}
            if last is None or last not in changed:
                return "The last turn changed no file: nothing to undo."
            request = commands.RewindRequest(
                last, files=True, conversation=False, force=command.argument == "force"
            )
            retry = "/undo"
        else:
            if not command.argument:
                page = host.transcript(session_id, None, 10)
                return commands.turns_said(page, host.checkpoints_of(session_id), cwd)
            parsed = commands.parse_rewind(command.argument)
            if parsed is None:
                return commands.REWIND_USAGE
            request = parsed
            retry = "/rewind " + " ".join(w for w in command.argument.split() if w != "force")
        try:
            result = await host.rewind(
                session_id,
                request.turn,
                files=request.files,
                conversation=request.conversation,
                force=request.force,
            )
        except Exception as exc:
            refused = errors.wire_error(exc)
            if refused is None:
                raise
            return f"Nothing was rewound: {refused.message}"
        return commands.rewind_said(
            result, cwd, turn=request.turn, retry=retry, conversation=request.conversation
        )

    def session_set_mode(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        """`{sessionId, modeId}` → `{}`: ask, accept-edits or plan (protocol.md §3); the client hears
        `current_mode_update` (the durable `session/mode`)."""
        method = "session/set_mode"
        p = _object(raw, method)
        session_id = _str(p, "sessionId", method)
        self.front_end.session(session_id)
        self.front_end.host.set_mode(session_id, _str(p, "modeId", method), method=method)
        return {}

    def session_set_config_option(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        """`{sessionId, configId, value}` → `{configOptions}`: the mode, the model, thinking, reasoning
        effort, the sandbox. `mode` is `session/set_mode` by another name (the client hears
        `current_mode_update` and `config_option_update` both); `thinking` takes `true`/`false` or the
        select's `on`/`off`."""
        method = "session/set_config_option"
        p = _object(raw, method)
        session_id = _str(p, "sessionId", method)
        config_id = _str(p, "configId", method)
        value = p.get("value")
        host = self.front_end.host
        self.front_end.session(session_id)
        if config_id == "mode":
            if not isinstance(value, str):
                raise errors.invalid_params(f"{method}: mode takes one of ask, accept-edits, plan")
            host.set_mode(session_id, value, method=method)
        elif config_id == "sandbox":
            if value is None:  # ACP's values are the options offered: null is none of them
                raise errors.invalid_params(
                    f"{method}: sandbox must be one of read-only, workspace-write, full-access"
                )
            host.set_sandbox_mode(session_id, value, method=method)
        elif config_id not in ("model", "thinking", "reasoning_effort"):
            raise errors.invalid_params(
                f"{method}: no option {errors.shown(config_id)} "
                "(mode, model, thinking, reasoning_effort, sandbox)"
            )
        else:
            from dsh_daemon.acp.sessionstate import ON_OFF

            if config_id == "thinking" and isinstance(value, str) and value in ON_OFF:
                value = ON_OFF[value]
            host.set_model_setting(session_id, config_id, value, method=method)
        return {"configOptions": self.front_end.config_options(session_id)}

    def session_cancel(self, raw: Any) -> None:
        p = _object(raw, "session/cancel")
        self.front_end.cancel(_str(p, "sessionId", "session/cancel"))

    def cancel_request(self, raw: Any) -> None:
        p = _object(raw, "$/cancel_request")
        request_id = p.get("requestId")
        if (
            isinstance(request_id, int | str)
            and not isinstance(request_id, bool)
            and self._front_end is not None
        ):
            self._front_end.revoke(request_id)

    # ---- extensions ----------------------------------------------------------------------------------

    def steering(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        """`{sessionId, prompt}` -> `{outcome: injected | startedNewTurn | failed}`: joins the running
        turn at its next step, or starts a turn when idle."""
        method = "_session/steering"
        p = _object(raw, method)
        session_id = _str(p, "sessionId", method)
        front_end = self.front_end
        parts = self._prompt(p, session_id)
        running = front_end.session(session_id).status == "running"
        try:
            front_end.send(session_id, parts, "steer")
        except Exception as exc:
            refused = errors.wire_error(exc)
            if refused is None:
                raise
            logger.info("steering failed: %s", refused.message)
            return {"outcome": "failed"}
        return {"outcome": "injected" if running else "startedNewTurn"}

    def inject(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        """`{sessionId, prompt}` -> `{messageId}`: context for the next request; never starts a turn."""
        method = "_dsh/inject"
        p = _object(raw, method)
        session_id = _str(p, "sessionId", method)
        parts = self._prompt(p, session_id)
        return {"messageId": self.front_end.send(session_id, parts, "inject")}

    def wake(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        p = _object(raw, "_dsh/wake")
        return {"started": self.front_end.session(_str(p, "sessionId", "_dsh/wake")).wake()}

    def inbox_list(self, raw: Any, rid: RequestId) -> Any:
        p = _object(raw, "_dsh/inbox/list")
        return self.front_end.session(_str(p, "sessionId", "_dsh/inbox/list")).inbox()

    def inbox_remove(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        method = "_dsh/inbox/remove"
        p = _object(raw, method)
        session = self.front_end.session(_str(p, "sessionId", method))
        return {"removed": session.remove(_str(p, "messageId", method))}

    def inbox_replace(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        method = "_dsh/inbox/replace"
        p = _object(raw, method)
        session_id = _str(p, "sessionId", method)
        message_id = _str(p, "messageId", method)
        parts = self._prompt(p, session_id)
        self.front_end.inbox_replace(session_id, message_id, parts)
        return {"messageId": parts.message.id}

    def project_trust(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        """`{root}` -> `{root, hooks, events}`: the project's hooks run from now on (protocol.md "Hooks")."""
        method = "_dsh/project/trust"
        root = _str(_object(raw, method), "root", method)
        folder, hooks, events = self.front_end.host.trust_project(root, method=method)
        return {"root": folder, "hooks": hooks, "events": list(events)}

    def inbox_move(self, raw: Any, rid: RequestId) -> dict[str, Any]:
        method = "_dsh/inbox/move"
        p = _object(raw, method)
        session_id = _str(p, "sessionId", method)
        message_id = _str(p, "messageId", method)
        from dsh_daemon.model.inbox import TARGETS

        target = p.get("target")
        if target not in TARGETS:
            raise errors.invalid_params(f"{method}: 'target' must be one of {list(TARGETS)}")
        index = p.get("index", -1)
        if isinstance(index, bool) or not isinstance(index, int):
            raise errors.invalid_params(f"{method}: 'index' must be an integer")
        chosen: Target = "next-turn" if target == "next-turn" else "next-step"
        self.front_end.inbox_move(session_id, message_id, chosen, index)
        return {}
