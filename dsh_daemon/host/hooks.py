"""The person's hooks in the host: a session's project hooks loaded (run only when trusted), its
hook failures and untrusted project hooks told to clients, and the person's trust applied to every
session of that project driven here (hooks/project.py, protocol.md "Hooks")."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable

from dsh_daemon.hooks.project import ProjectHooks, ProjectTrust, project_root, read_project_hooks
from dsh_daemon.host.errors import invalid_params, shown
from dsh_daemon.host.hosted import HostedSession
from dsh_daemon.host.wiring import SessionTools
from dsh_daemon.model.events import TURN_START
from dsh_daemon.model.hooks import HookCommand
from dsh_daemon.model.payloads import HookFailed, HooksUntrusted

logger = logging.getLogger(__name__)


def load_project_hooks(tools: SessionTools, trust: ProjectTrust) -> None:
    """The project's hooks of the session's cwd run when the person trusted them; otherwise the
    session keeps the notice saying they wait (`SessionHooks.untrusted`)."""
    try:
        project = read_project_hooks(tools.workspace.cwd)
    except OSError as exc:  # a project folder that cannot be read must not keep the session from opening
        logger.warning("the project's hooks in %s could not be read: %s", tools.workspace.cwd, exc)
        return
    if project is None:
        return
    for problem in project.problems:
        logger.warning("%s; ignored", problem)
    if project.settings and trust.trusted(project):
        tools.hooks.project = project.settings
        return
    if not project.settings and not project.problems:
        return
    tools.hooks.untrusted = HooksUntrusted(
        str(project.root),
        str(project.path),
        project.settings.events,
        len(project.settings.hooks),
        trust.known(project.root),
        project.problems,
    )


def start_hooks(hosted: HostedSession, tasks: set[asyncio.Task[None]]) -> None:
    """A session just opened here: its hook failures go to whoever follows it, its sessionStart hooks
    start, and a project's untrusted hooks are told (after the session's reply and first events)."""
    session = hosted.tools.hooks
    bus = hosted.agent.bus

    def report(hook: HookCommand, reason: str) -> None:
        bus.publish(HookFailed(hook.label, hook.event, reason, hook.origin).event())

    session.report = report
    resumed = any(event.type == TURN_START for event in hosted.agent.log.events)
    session.start("resume" if resumed else "startup")
    untrusted = session.untrusted
    if untrusted is None:
        return

    async def announce() -> None:
        bus.publish(untrusted.event())

    task = asyncio.get_running_loop().create_task(announce())
    tasks.add(task)
    task.add_done_callback(tasks.discard)


def trust_project(
    sessions: Iterable[HostedSession], trust: ProjectTrust, root: str, *, method: str
) -> tuple[str, int, tuple[str, ...]]:
    """The person trusts the hooks of `root`'s `.dsh/config.json` as they are now: recorded for the
    folder, and running from now on in every session of it driven here."""
    if "\0" in root:
        raise invalid_params(f"{method}: 'root' must be a folder's path (it holds a NUL character)")
    folder = project_root(root)
    if not folder.is_dir():
        raise invalid_params(f"{method}: {shown(root)} is not a folder")
    project: ProjectHooks | None = read_project_hooks(folder)
    if project is None or not project.settings:
        raise invalid_params(f"{method}: {folder}/.dsh/config.json has no hooks to trust")
    trust.trust_durably(project)
    for hosted in sessions:
        if project_root(hosted.workspace.cwd) == project.root:
            hosted.tools.hooks.project = project.settings
            hosted.tools.hooks.untrusted = None
    logger.info("the hooks of %s are trusted (%d)", project.root, len(project.settings.hooks))
    return str(project.root), len(project.settings.hooks), project.settings.events
