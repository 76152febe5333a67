"""Error classification (provider.md §1.8) over the §3.3 bodies, Retry-After and redaction."""

from __future__ import annotations

import email.utils

import httpx
import pytest

from dsh_daemon.llm.errors import (
    PROVIDER_BODY_CHARS,
    REDACTED,
    classify_http,
    classify_stream_error,
    redact,
    retry_after_ms,
)
from tests.fakes.deepseek_server import (
    BAD_GATEWAY_502,
    CONTEXT_LENGTH_400,
    ERROR_BODIES,
    REASONING_MISSING_400,
)


@pytest.mark.parametrize(
    ("status", "body", "code", "readable"),
    [
        (400, CONTEXT_LENGTH_400, "CONTEXT_WINDOW_EXCEEDED", "maximum context length is 131072"),
        (400, REASONING_MISSING_400, "INVALID_REQUEST", "must be passed back"),
        (401, ERROR_BODIES[401], "AUTH", "Authentication Fails"),
        (403, "", "AUTH", ""),
        (402, ERROR_BODIES[402], "QUOTA", "Insufficient Balance"),
        (402, "Payment Required", "HTTP_402", "Payment Required"),  # unparseable body: status alone
        (413, "too big", "INVALID_REQUEST", "too big"),
        (422, ERROR_BODIES[422], "HTTP_422", "deserialize"),
        (429, ERROR_BODIES[429], "RATE_LIMIT", "Rate Limit Reached"),
        (
            429,
            '{"error":{"message":"You exceeded your current quota","code":"insufficient_quota"}}',
            "QUOTA",
            "quota",
        ),
        (500, ERROR_BODIES[500], "SERVER", "Internal Server Error"),
        (503, ERROR_BODIES[503], "SERVER", "Server Overloaded"),
        (502, BAD_GATEWAY_502, "SERVER", "Bad Gateway"),
        (
            400,
            '{"error":{"code":400,"message":"request (6021 tokens) exceeds the available context size '
            '(4096 tokens)","type":"exceed_context_size_error"}}',
            "CONTEXT_WINDOW_EXCEEDED",
            "6021 tokens",
        ),
        (404, "<html>not found</html>", "HTTP_404", "not found"),
    ],
)
def test_classification(status: int, body: str, code: str, readable: str) -> None:
    failure = classify_http(status, body.encode(), httpx.Headers())
    assert failure.code == code
    assert failure.status == status
    assert readable in failure.message
    assert failure.message.startswith(f"HTTP {status}")


def test_request_id_and_retry_after_seconds() -> None:
    headers = httpx.Headers({"Retry-After": "2", "X-Request-Id": "req-123"})
    failure = classify_http(429, ERROR_BODIES[429].encode(), headers)
    assert failure.retry_after_ms == 2000
    assert failure.request_id == "req-123"
    alt = classify_http(503, b"", httpx.Headers({"x-deepseek-request-id": "ds-9"}))
    assert alt.request_id == "ds-9" and alt.retry_after_ms is None


def test_retry_after_http_date_and_ms() -> None:
    now = 1_800_000_000.0
    date = email.utils.formatdate(now + 7, usegmt=True)
    assert retry_after_ms(httpx.Headers({"retry-after": date}), now=now) == 7000
    past = email.utils.formatdate(now - 60, usegmt=True)
    assert retry_after_ms(httpx.Headers({"retry-after": past}), now=now) == 0
    assert retry_after_ms(httpx.Headers({"retry-after-ms": "250", "retry-after": "9"})) == 250
    for bad in ("soon", "-3", "nan", "inf"):
        assert retry_after_ms(httpx.Headers({"retry-after": bad})) is None


def test_long_bodies_are_clipped() -> None:
    failure = classify_http(500, b"x" * 100_000, httpx.Headers())
    assert len(failure.message) < 3000


def test_key_in_error_body_is_redacted() -> None:
    key = "sk-live-abcdef0123456789"
    body = f'{{"error":{{"message":"Authentication Fails, Your api key: {key} is invalid"}}}}'
    failure = classify_http(401, body.encode(), httpx.Headers(), secrets=(key,))
    assert key not in failure.message
    assert "[redacted]" in failure.message
    assert redact("short k stays", ("k",)) == "short k stays"


def test_the_body_goes_along_redacted_then_cut() -> None:
    key = "sk-live-abcdef0123456789"
    body = f'{{"error":{{"message":"bad key {key}","type":"authentication_error"}}}}'
    failure = classify_http(401, body.encode(), httpx.Headers(), secrets=(key,))
    assert failure.provider_body == body.replace(key, REDACTED)
    assert failure.to_json()["providerBody"] == failure.provider_body
    # the key straddling the cut: replaced first, so none of it is left
    long = "x" * (PROVIDER_BODY_CHARS - 3) + key + "y" * 100
    cut = classify_http(500, long.encode(), httpx.Headers(), secrets=(key,))
    assert cut.provider_body == ("x" * (PROVIDER_BODY_CHARS - 3) + REDACTED)[:PROVIDER_BODY_CHARS] + "…"
    assert key[:6] not in cut.message and key[:6] not in (cut.provider_body or "")
    assert classify_http(503, b"  ", httpx.Headers()).provider_body is None
    assert "providerBody" not in classify_http(503, b"", httpx.Headers()).to_json()
    streamed = classify_stream_error({"error": {"message": f"overloaded {key}"}}, secrets=(key,))
    assert streamed.provider_body == '{"error": {"message": "overloaded [redacted]"}}'
