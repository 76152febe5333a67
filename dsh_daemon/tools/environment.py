"""The environment a command the agent runs gets: the daemon's own, less the daemon's secrets.

The daemon holds secrets a command has no use for and must never see (docs/design.md: secrets never
reach a command's env): the provider's API key, the state directory (`DSH_HOME`: the session store
and config.json, which may hold keys), and what the MCP servers are configured with (their `env`
values, their HTTP `headers`). `scrubbed_environment` drops each variable named as a secret and
each variable whose value holds a secret value, wherever it came from (a key in `DEEPSEEK_API_KEY`
and the same key exported again as `OPENAI_API_KEY` both go). `run_command` builds its environment
with it; a later sandbox can too.

What it does not promise: a configured value shorter than `MIN_SECRET_CHARS` (`"1"`, `"true"`) is a
setting, not a secret, and is not looked for (a variable with the same value stays); a secret the
daemon was never told about (one only in the person's shell) stays, as it is theirs to pass on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

# Variables never passed on, whatever they hold.
SECRET_NAMES = frozenset({"DEEPSEEK_API_KEY", "DSH_HOME"})
MIN_SECRET_CHARS = 8


@dataclass(frozen=True)
class DaemonSecrets:
    """What a command's environment must not hold: variables by name, and contents by value."""

    names: frozenset[str] = SECRET_NAMES
    values: frozenset[str] = frozenset()

    @classmethod
    def of(cls, values: Iterable[str | None]) -> DaemonSecrets:
        """The secret names plus `values` (an API key, configured env values and header values); a
        header value's words count on their own too (`Bearer <token>`: the token)."""
        kept: set[str] = set()
        for value in values:
            if not value:
                continue
            for part in (value, *value.split()):
                if len(part) >= MIN_SECRET_CHARS:
                    kept.add(part)
        return cls(SECRET_NAMES, frozenset(kept))


def scrubbed_environment(env: Mapping[str, str], secrets: DaemonSecrets) -> dict[str, str]:
    """`env` without the variables `secrets` names and those whose value contains a secret value."""
    return {
        name: value
        for name, value in env.items()
        if name not in secrets.names and not any(secret in value for secret in secrets.values)
    }


def blanked_secret_names(secrets: DaemonSecrets) -> dict[str, str]:
    """For an environment this process does not build (an editor's terminal, which can only set
    variables): each secret name set to the empty string, so the editor's own copy does not show."""
    return dict.fromkeys(sorted(secrets.names), "")
