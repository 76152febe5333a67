"""A command's environment without the daemon's secrets (issues 32 and 41).

A command the model runs must not read the daemon's API key, its store's location or the values the
person gave MCP servers (their `env` and `headers`) from its environment. What is dropped: every
variable named like a provider key (`*_API_KEY`, `DEEPSEEK_*`), the daemon's own `DSH_*` variables,
and every variable whose value is one of the secret values the host knows (whatever its name: a key
exported as `OPENAI_KEY` is still the key). This is a floor, not a proof: a secret the daemon was never
told about cannot be recognised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

SECRET_PREFIXES = ("DEEPSEEK_", "DSH_")
SECRET_SUFFIXES = ("_API_KEY", "_APIKEY")
MIN_SECRET_CHARS = 8  # a shorter "secret" value (a port, "1") would drop unrelated variables


def scrub_secrets(env: Mapping[str, str], secret_values: Iterable[str] = ()) -> dict[str, str]:
    """`env` without the variables that carry the daemon's secrets (see the module's note)."""
    values = {v for v in secret_values if isinstance(v, str) and len(v) >= MIN_SECRET_CHARS}
    kept: dict[str, str] = {}
    for name, value in env.items():
        upper = name.upper()
        if upper.startswith(SECRET_PREFIXES) or upper.endswith(SECRET_SUFFIXES):
            continue
        if value in values or any(secret in value for secret in values):
            continue
        kept[name] = value
    return kept
