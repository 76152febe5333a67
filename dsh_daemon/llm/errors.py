"""Classifies HTTP and transport failures into the seam's typed codes (DeepSeek's documented status codes).

The body parse is best effort: a JSON `{"error": {...}}` body gives the provider's readable message and
the code/type used for the quota test; anything else still gets a code from the status alone. Whether a
code is retried is the loop's policy, never decided here. The body itself goes along as the failure's
`provider_body` (protocol.md §7 `providerBody`): its secrets replaced before it is cut, so a cut never
leaves part of a key behind.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from dsh_daemon.model.provider import (
    AUTH,
    CONTEXT_WINDOW_EXCEEDED,
    INVALID_REQUEST,
    QUOTA,
    RATE_LIMIT,
    SERVER,
    LlmFailure,
)

MAX_MESSAGE_CHARS = 2000  # a provider may answer with a whole HTML page; keep the event readable
PROVIDER_BODY_CHARS = 2000  # the body kept beside the message (protocol.md §7 `providerBody`)
REDACTED = "[redacted]"
MIN_SECRET_CHARS = 8

_QUOTA = re.compile(
    r"insufficient[ _]?balance|insufficient[ _]?(funds|credits?)|quota|out of credits|"
    r"credits? (exhausted|exceeded)|billing",
    re.IGNORECASE,
)
_CONTEXT = re.compile(
    r"maximum context length|context[ _]length[ _]exceeded|exceeds? (the )?(available |maximum )?context|"
    r"too long for (the )?(model'?s? )?context|exceed_context_size|context window",
    re.IGNORECASE,
)


def classify_http(
    status: int,
    body: bytes,
    headers: Mapping[str, str],
    *,
    secrets: Iterable[str] = (),
    now: float | None = None,
) -> LlmFailure:
    """The failure for a non-2xx response. `headers` must be case-insensitive (httpx.Headers)."""
    secrets = tuple(secrets)
    raw = redact(body.decode("utf-8", errors="replace").strip(), secrets)
    message, fields = _parse_error_body(raw)
    code = _code_for(status, message, fields)
    text = f"HTTP {status}: {message}" if message else f"HTTP {status}"
    return LlmFailure(
        code,
        redact(text, secrets),
        status=status,
        retry_after_ms=retry_after_ms(headers, now=now),
        request_id=request_id(headers),
        provider_body=provider_body(raw, secrets),
    )


def classify_stream_error(payload: Mapping[str, Any], *, secrets: Iterable[str] = ()) -> LlmFailure:
    """An `{"error": {...}}` event sent inside a 200 stream (some gateways do this mid-response)."""
    secrets = tuple(secrets)
    message, fields = _error_fields(payload)
    raw_status = payload.get("error", {}).get("code") if isinstance(payload.get("error"), Mapping) else None
    status = raw_status if isinstance(raw_status, int) and 400 <= raw_status <= 599 else None
    # Without a usable status the error came from the upstream mid-generation: a server fault.
    code = _code_for(status, message, fields) if status is not None else _text_code(message, fields) or SERVER
    body = json.dumps(payload, ensure_ascii=False)
    return LlmFailure(
        code,
        redact(f"stream error: {message or 'no message'}", secrets),
        status=status,
        provider_body=provider_body(body, secrets),
    )


def provider_body(body: str, secrets: Iterable[str]) -> str | None:
    """The provider's answer as a person may read it: every secret replaced, then cut to
    `PROVIDER_BODY_CHARS` (`…` after a cut); None when it was empty."""
    text = redact(body.strip(), secrets)
    if not text:
        return None
    return text if len(text) <= PROVIDER_BODY_CHARS else text[:PROVIDER_BODY_CHARS] + "…"


def _code_for(status: int, message: str, fields: str) -> str:
    if status in (401, 403):
        return AUTH
    if status == 413:
        return INVALID_REQUEST
    if fields and _QUOTA.search(fields):
        return QUOTA
    if status == 429:
        return RATE_LIMIT
    if status == 400:
        return CONTEXT_WINDOW_EXCEEDED if _CONTEXT.search(message) else INVALID_REQUEST
    if 500 <= status <= 599:
        return SERVER
    return f"HTTP_{status}"


def _text_code(message: str, fields: str) -> str | None:
    if fields and _QUOTA.search(fields):
        return QUOTA
    if _CONTEXT.search(message):
        return CONTEXT_WINDOW_EXCEEDED
    return None


def _parse_error_body(text: str) -> tuple[str, str]:
    """(readable message, the JSON fields joined for the quota test; "" for a non-JSON body)."""
    try:
        payload = json.loads(text)
    except ValueError:
        return _clip(" ".join(text.split())), ""
    if isinstance(payload, Mapping):
        message, fields = _error_fields(payload)
        if message or fields:
            return message, fields
    return _clip(text), ""


def _error_fields(payload: Mapping[str, Any]) -> tuple[str, str]:
    error = payload.get("error", payload)
    if isinstance(error, str):  # {"error": "text"} (FastAPI-style servers)
        return _clip(error), error
    if not isinstance(error, Mapping):
        return "", ""
    message = error.get("message") or error.get("detail") or ""
    if not isinstance(message, str):
        message = json.dumps(message, ensure_ascii=False)
    fields = " ".join(str(error.get(k) or "") for k in ("code", "type", "message"))
    return _clip(message), fields


def _clip(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE_CHARS else text[:MAX_MESSAGE_CHARS] + "…"


def retry_after_ms(headers: Mapping[str, str], *, now: float | None = None) -> int | None:
    """`retry-after-ms` (OpenAI-style), else `retry-after` as seconds or an HTTP date; None if invalid."""
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms)
        except ValueError:
            value = -1.0
        if value >= 0 and value == value and value != float("inf"):
            return int(value)
    raw = headers.get("retry-after")
    if raw is None:
        return None
    raw = raw.strip()
    try:
        seconds = float(raw)
    except ValueError:
        # Imported here: email's package (15 modules, 0.4 MiB) for the rare Retry-After given as a date.
        import email.utils

        try:
            when = email.utils.parsedate_to_datetime(raw)
        except (TypeError, ValueError):
            return None
        if when is None or when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
        return max(0, int(seconds * 1000))
    if not (seconds >= 0 and seconds != float("inf")):  # also rejects NaN
        return None
    return int(seconds * 1000)


def request_id(headers: Mapping[str, str]) -> str | None:
    return headers.get("x-request-id") or headers.get("x-deepseek-request-id") or None


def redact(text: str, secrets: Iterable[str]) -> str:
    """Replace every secret in `text`. Providers echo keys back (DeepSeek's 401 shows the last four
    characters; others the whole key), so every failure message goes through here."""
    for secret in secrets:
        # Shorter strings are no credential (a dummy key for a local server) and would mangle words.
        if len(secret) >= MIN_SECRET_CHARS:
            text = text.replace(secret, REDACTED)
    return text
