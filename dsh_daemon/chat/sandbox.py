"""The commands' sandbox as the chat shows it: the status line's part, `/sandbox`'s report, and the
exact widening an escalation asks for (protocol.md §16 "Sandbox").

Everything here reads the daemon's `sandbox/status` data (`{mode, configuredMode, level, confined,
available, reasons, network, writable}`) and a permission request's `preview.escalation`
(`{reason, writable, network, unconfined}`); text from either is sanitized before it is shown."""

from __future__ import annotations

from typing import Any

from dsh_daemon.chat.render import clip, sanitize

MODES = ("read-only", "workspace-write", "full-access")
MODE_MEANINGS = {
    "read-only": "commands read, write only a private temp directory, no network",
    "workspace-write": "commands write inside the workspace (and the writable paths), network only to"
    " the allowed domains",
    "full-access": "commands run unconfined, as your own account (each one asks first)",
}
FULL_ACCESS_WARNING = (
    "full-access runs every command unconfined: the agent gets your whole account (every file you can"
    " write, your keys, the network); each command still asks first"
)


def refused(status: dict[str, Any] | None) -> bool:
    """Commands are refused now: a confined mode on a machine that cannot confine them."""
    if not status:
        return False
    return status.get("mode") != "full-access" and not status.get("available", True)


def toolbar_part(status: dict[str, Any] | None) -> str:
    """The status line's words for the sandbox: `⛨ workspace-write`; a warning when commands are refused
    for want of confinement; "" before the daemon has said (no session yet)."""
    if not status:
        return ""
    mode = sanitize(str(status.get("mode") or "?"))
    if refused(status):
        return f"⚠ {mode}: no confinement here, commands refused (/sandbox)"
    if mode == "full-access":
        return "⚠ full-access (unconfined)"
    return f"⛨ {mode}"


def report_lines(status: dict[str, Any] | None) -> list[str]:
    """`/sandbox`: the mode, the level this machine gives and why a layer is missing, the domains
    commands may reach and the paths they may write (configured and granted)."""
    if not status:
        return [
            "sandbox: not known yet — the daemon tells it once a session is open (send a prompt first);"
            " `dsh-daemon config` shows the configured mode and this machine's level"
        ]
    mode = sanitize(str(status.get("mode") or "?"))
    configured = sanitize(str(status.get("configuredMode") or mode))
    lines = [f"sandbox: {mode} — {MODE_MEANINGS.get(mode, 'a mode this chat does not know')}"]
    if configured != mode:
        lines.append(f"  configured: {configured} (plan mode runs commands read-only)")
    lines.append(f"  level: {sanitize(str(status.get('level') or '?'))}")
    if refused(status):
        lines.append(
            f"  ⚠ this machine cannot confine commands: every command is refused in {mode};"
            " `/sandbox full-access` runs them unconfined (your choice to make)"
        )
    elif status.get("confined"):
        lines.append("  commands run confined")
    else:
        lines.append("  commands run unconfined (each asks first)")
    for reason in status.get("reasons") or ():
        lines.append(f"  why: {clip(str(reason), 200)}")
    network = [sanitize(str(d)) for d in status.get("network") or ()]
    writable = [sanitize(str(p)) for p in status.get("writable") or ()]
    lines.append(f"  network: {', '.join(network) if network else 'none (no domain is allowed)'}")
    lines.append(
        "  writable: "
        + ("the workspace, the temp directory, " if mode == "workspace-write" else "")
        + (", ".join(writable) if writable else "no other path")
    )
    lines.append("  /sandbox read-only | workspace-write | full-access changes it (every session)")
    return lines


def escalation_of(params: dict[str, Any]) -> dict[str, Any] | None:
    """A permission request's `preview.escalation`, when it asks to widen the sandbox."""
    escalation = (params.get("preview") or {}).get("escalation")
    return escalation if isinstance(escalation, dict) else None


def widening_words(escalation: dict[str, Any]) -> str:
    """The exact widening asked for: the paths made writable, the domains made reachable, or
    "unconfined, once" for a command that asks to run outside the sandbox."""
    if escalation.get("unconfined"):
        return "unconfined (the command runs outside the sandbox, as your account)"
    parts = []
    writable = [sanitize(str(p)) for p in escalation.get("writable") or ()]
    network = [sanitize(str(d)) for d in escalation.get("network") or ()]
    if writable:
        parts.append("writable: " + ", ".join(writable))
    if network:
        parts.append("network: " + ", ".join(network))
    return "; ".join(parts) or "nothing named"


def escalation_lines(escalation: dict[str, Any]) -> list[str]:
    """What the permission card says about an escalation, under its title."""
    reason = clip(str(escalation.get("reason") or "(no reason given)"), 300)
    return [f"why: {reason}", f"widen: {widening_words(escalation)}"]
