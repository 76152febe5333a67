"""The DeepSeek / OpenAI-compatible streaming provider over HTTP (`/chat/completions`, `stream: true`).

One `stream()` call is one `POST {base_url}/chat/completions` attempt: no retries here (the loop owns
them, D8). Timeouts: a connect timeout, and an idle-read timeout that any received bytes re-arm —
keep-alive comments included, because httpx's read timeout applies to each socket read — with no
total deadline, so a long healthy stream is never cut. Closing the generator (task cancellation or
`aclose()`) closes the response at once; a response closed before its end is never pooled, so the
server sees the connection go.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from dsh_daemon import __version__
from dsh_daemon.llm.config import ProviderConfig
from dsh_daemon.llm.errors import classify_http, classify_stream_error, redact, request_id
from dsh_daemon.llm.serialize import BodyEncoder
from dsh_daemon.llm.sse import SseParser
from dsh_daemon.llm.translate import ChunkTranslator
from dsh_daemon.model.provider import (
    CONFIG,
    MALFORMED_RESPONSE,
    STREAM_CLOSED,
    TIMEOUT,
    TRANSPORT,
    LlmFailure,
    ModelRequest,
    Provider,
    ProviderFailure,
    StreamEvent,
)

logger = logging.getLogger(__name__)

DRAIN_AFTER_DONE_S = 0.05
MAX_ERROR_BODY = 64 * 1024  # an error page is read only this far; the message is clipped anyway
NO_KEY_MESSAGE = (
    "no API key: set DEEPSEEK_API_KEY in the daemon's environment, or `provider.apiKey` in "
    "<DSH_HOME>/config.json or the editor's initializationOptions"
)


class DeepSeekProvider:
    """`Provider` for DeepSeek and any OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(self, config: ProviderConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self.name = config.name
        self._transport = transport  # tests and the benchmark wrap the transport; production leaves it
        self._client: httpx.AsyncClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._retired: list[httpx.AsyncClient] = []  # pools replaced by `reconfigure`
        self._bodies = BodyEncoder()  # keeps each history message's wire text between requests

    def __repr__(self) -> str:
        return f"DeepSeekProvider({self.config!r})"

    def reconfigure(self, config: ProviderConfig) -> None:
        """Use `config` from the next request on (a request under way finishes on the old one). New
        timeouts need a new connection pool; the old pool is closed with the provider, since a stream
        may still be reading from it."""
        old, self.config, self.name = self.config, config, config.name
        timeouts = ("connect_timeout_s", "idle_timeout_s")
        if self._client is not None and any(getattr(old, t) != getattr(config, t) for t in timeouts):
            self._retired.append(self._client)
            self._client = None

    def default_config(self, model: str) -> Mapping[str, Any]:
        defaults: dict[str, Any] = {"maxTokens": self.config.max_tokens}
        if self.config.thinking is not None:
            defaults["thinking"] = self.config.thinking
        if self.config.reasoning_effort is not None:
            defaults["reasoningEffort"] = self.config.reasoning_effort
        return defaults

    def context_window(self, model: str) -> int | None:
        """The model's context window in tokens (configuration's `contextWindow`), None if unknown."""
        return self.config.context_window(model or self.config.model)

    @property
    def compact_at_ratio(self) -> float | None:
        return self.config.compact_at_ratio

    def stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        return self._stream(request)

    async def aclose(self) -> None:
        """Close pooled connections (call at daemon shutdown)."""
        client, self._client = self._client, None
        retired, self._retired = self._retired, []
        for pool in [*retired, client]:
            if pool is not None:
                await pool.aclose()

    # ---- one attempt -------------------------------------------------------------------------------

    async def _stream(self, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        # One flat generator: each nested async generator would add a hop to every delta.
        try:
            response = await self._open(request)
        except ProviderFailure as failure:
            raise self._redacted(failure) from None
        rid = request_id(response.headers)
        parser = SseParser()
        translator = ChunkTranslator(price=self.config.price(request.model or self.config.model))
        chunks = response.aiter_bytes()
        done = False
        try:
            try:
                if not response.is_success:
                    raise ProviderFailure(await self._http_failure(response))
                if response.headers.get("content-type", "").startswith("application/json"):
                    raise ProviderFailure(await self._json_instead_of_stream(response))
                async for chunk in chunks:
                    for sse in parser.feed(chunk):
                        if sse.data == "[DONE]":
                            finish = translator.finish()
                            done = True
                            yield finish
                            return
                        for delta in translator.feed(sse.data):
                            yield delta
            except httpx.TimeoutException:
                idle = self.config.idle_timeout_s
                raise ProviderFailure(
                    LlmFailure(TIMEOUT, f"no bytes for {idle:g} s mid-stream", request_id=rid)
                ) from None
            except httpx.HTTPError as exc:
                message = f"the stream broke before [DONE]: {_describe(exc)}"
                raise ProviderFailure(LlmFailure(STREAM_CLOSED, message, request_id=rid)) from None
            except ProviderFailure as failure:
                # Every failure leaves through a redaction, so no message can carry the key.
                raise self._redacted(failure) from None
            raise ProviderFailure(LlmFailure(STREAM_CLOSED, "the stream ended before [DONE]", request_id=rid))
        finally:
            # Runs on finish, failure, cancellation and aclose(): an unfinished response is closed, and
            # its connection dropped rather than pooled.
            # Nested, so that a cancellation landing in the drain still closes the response.
            try:
                if done:
                    await _drain(chunks)
            finally:
                try:
                    with contextlib.suppress(Exception):
                        await chunks.aclose()  # type: ignore[attr-defined]
                finally:
                    await response.aclose()

    async def _open(self, request: ModelRequest) -> httpx.Response:
        """Send the request; the response's headers have arrived when this returns."""
        config = self.config
        if not config.api_key and needs_api_key(config.base_url):
            raise ProviderFailure(LlmFailure(CONFIG, NO_KEY_MESSAGE))
        content = self._bodies.encode(request, default_model=config.model)
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            # Compressing intermediaries re-batch deltas; identity keeps each event as it is sent.
            "accept-encoding": "identity",
            "user-agent": f"dsh-daemon/{__version__}",
        }
        if config.api_key:  # local servers (llama.cpp, Ollama, vLLM, LM Studio) take none
            headers["authorization"] = f"Bearer {config.api_key}"
        purpose = request.config.get("purpose")
        if isinstance(purpose, str) and purpose:
            headers["x-dsh-purpose"] = purpose  # D11: auxiliary calls say what they are for
        try:
            client = self._get_client()
            http_request = client.build_request("POST", config.chat_url, content=content, headers=headers)
            return await client.send(http_request, stream=True)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise ProviderFailure(LlmFailure(CONFIG, f"bad base URL {config.base_url!r}: {exc}")) from None
        except httpx.TimeoutException as exc:
            message = f"no response from {config.base_url}: {_describe(exc)}"
            raise ProviderFailure(LlmFailure(TIMEOUT, message)) from None
        except httpx.HTTPError as exc:
            message = f"cannot reach {config.base_url}: {_describe(exc)}"
            raise ProviderFailure(LlmFailure(TRANSPORT, message)) from None

    def _redacted(self, failure: ProviderFailure) -> ProviderFailure:
        f = failure.failure
        secrets = (self.config.api_key,) if self.config.api_key else ()
        return ProviderFailure(
            LlmFailure(f.code, redact(f.message, secrets), f.status, f.retry_after_ms, f.request_id)
        )

    async def _http_failure(self, response: httpx.Response) -> LlmFailure:
        body = b""
        try:
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) >= MAX_ERROR_BODY:
                    break
        except httpx.HTTPError as exc:  # the status alone still classifies
            logger.debug("error body unreadable: %s", _describe(exc))
        secrets = (self.config.api_key,) if self.config.api_key else ()
        return classify_http(response.status_code, body[:MAX_ERROR_BODY], response.headers, secrets=secrets)

    async def _json_instead_of_stream(self, response: httpx.Response) -> LlmFailure:
        """A 200 JSON body where a stream was asked for: some gateways report errors this way."""
        try:
            body = await response.aread()
            payload = json.loads(body)
        except (httpx.HTTPError, ValueError):
            payload = None
        if isinstance(payload, dict) and "error" in payload:
            return classify_stream_error(payload)
        return LlmFailure(
            MALFORMED_RESPONSE,
            "expected an event stream, got a JSON body",
            request_id=request_id(response.headers),
        )

    def _get_client(self) -> httpx.AsyncClient:
        # A client's pooled connections belong to the event loop that opened them.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop or self._client.is_closed:
            cfg = self.config
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(
                    connect=cfg.connect_timeout_s,
                    read=cfg.idle_timeout_s,
                    write=cfg.idle_timeout_s,
                    pool=cfg.connect_timeout_s,
                ),
                transport=self._transport,
                # Proxies from the environment cannot reach a loopback server, so never route one there.
                trust_env=not _is_loopback(cfg.base_url),
                follow_redirects=False,
            )
            self._client_loop = loop
        return self._client


async def _drain(chunks: AsyncIterator[bytes]) -> None:
    """After `[DONE]` only the chunked terminator should be left. Reading it lets the connection go
    back to the pool (saving a TLS handshake on the next step); a server that keeps sending is cut."""
    try:
        async with asyncio.timeout(DRAIN_AFTER_DONE_S):
            async for _ in chunks:
                pass
    except Exception:  # a failed drain only costs the pooled connection
        pass


def make_provider(config: ProviderConfig) -> Provider:
    return DeepSeekProvider(config)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _is_loopback(url: str) -> bool:
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:  # httpx reports the bad URL itself, as a CONFIG failure
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def needs_api_key(base_url: str) -> bool:
    """DeepSeek's own API refuses a request without a key, so a missing key is reported up front as a
    `CONFIG` error; any other OpenAI-compatible endpoint may take none, so it is simply asked."""
    host = (httpx.URL(base_url).host if "://" in base_url else "").lower()
    return host == "deepseek.com" or host.endswith(".deepseek.com")
