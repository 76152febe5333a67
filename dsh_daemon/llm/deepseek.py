"""The DeepSeek / OpenAI-compatible streaming provider over HTTP (`/chat/completions`, `stream: true`).

One `stream()` call is one `POST {base_url}/chat/completions` attempt: no retries here (the loop owns
them, D8). The POST goes through the daemon's own HTTP/1.1 client (`llm/http1.py`: httpx and h11 cost
about a third of the time per delta), or through httpx when a proxy variable is set for a non-loopback
URL (`llm/httpx_stream.py`; docs/design.md §4, "The provider's HTTP client"). Timeouts: a connect
timeout, and an idle-read timeout that any received bytes re-arm — keep-alive comments included —
with no total deadline, so a long healthy stream is never cut. Closing the generator (task
cancellation or `aclose()`) closes the response at once; a response closed before its end is never
pooled, so the server sees the connection go.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import logging
import os
import sys
from collections.abc import AsyncIterator, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from dsh_daemon import __version__
from dsh_daemon.llm.config import ProviderConfig
from dsh_daemon.llm.errors import classify_http, classify_stream_error, redact, request_id
from dsh_daemon.llm.http1 import BadHeader, BadUrl, Http1Client, HttpError, HttpTimeout
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

if TYPE_CHECKING:
    import httpx

logger = logging.getLogger(__name__)

DRAIN_AFTER_DONE_S = 0.05
MAX_ERROR_BODY = 64 * 1024  # an error page is read only this far; the message is clipped anyway
NO_KEY_MESSAGE = (
    "no API key: set DEEPSEEK_API_KEY in the daemon's environment, or `provider.apiKey` in "
    "<DSH_HOME>/config.json or the editor's initializationOptions"
)


class ResponseStream(Protocol):
    """A response whose head has arrived (`http1.StreamedResponse`, `httpx_stream.HttpxResponse`)."""

    @property
    def status(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]:  # case-insensitive
        ...
    @property
    def is_success(self) -> bool: ...
    async def read(self) -> bytes: ...
    async def read_up_to(self, limit: int) -> bytes: ...
    async def finish(self, within_s: float) -> None: ...
    async def aclose(self) -> None: ...


class StreamClient(Protocol):
    @property
    def closed(self) -> bool: ...
    async def post_stream(self, url: str, headers: list[tuple[str, str]], body: bytes) -> ResponseStream: ...
    async def aclose(self) -> None: ...


class DeepSeekProvider:
    """`Provider` for DeepSeek and any OpenAI-compatible `/chat/completions` endpoint."""

    def __init__(self, config: ProviderConfig, *, transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.config = config
        self.name = config.name
        self._transport = transport  # tests and the benchmark wrap httpx's transport; production leaves it
        self._client: StreamClient | None = None
        self._client_loop: asyncio.AbstractEventLoop | None = None
        self._retired: list[StreamClient] = []  # pools replaced by `reconfigure`
        self._bodies = BodyEncoder()  # keeps each history message's wire text between requests

    def __repr__(self) -> str:
        return f"DeepSeekProvider({self.config!r})"

    def reconfigure(self, config: ProviderConfig) -> None:
        """Use `config` from the next request on (a request under way finishes on the old one). New
        timeouts or another URL need a new connection pool; the old pool is closed with the provider,
        since a stream may still be reading from it."""
        old, self.config, self.name = self.config, config, config.name
        # The URL decides the client too: loopback or not, and so proxy or not.
        kept = ("connect_timeout_s", "idle_timeout_s", "base_url")
        if self._client is not None and any(getattr(old, t) != getattr(config, t) for t in kept):
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
        read = response.read
        done = False
        try:
            try:
                if not response.is_success:
                    raise ProviderFailure(await self._http_failure(response))
                if response.headers.get("content-type", "").startswith("application/json"):
                    raise ProviderFailure(await self._json_instead_of_stream(response))
                while chunk := await read():
                    for sse in parser.feed(chunk):
                        if sse.data == "[DONE]":
                            finish = translator.finish()
                            done = True
                            yield finish
                            return
                        for delta in translator.feed(sse.data):
                            yield delta
            except HttpTimeout:
                idle = self.config.idle_timeout_s
                raise ProviderFailure(
                    LlmFailure(TIMEOUT, f"no bytes for {idle:g} s mid-stream", request_id=rid)
                ) from None
            except HttpError as exc:
                message = f"the stream broke before [DONE]: {exc}"
                raise ProviderFailure(LlmFailure(STREAM_CLOSED, message, request_id=rid)) from None
            except ProviderFailure as failure:
                # Every failure leaves through a redaction, so no message can carry the key.
                raise self._redacted(failure) from None
            raise ProviderFailure(LlmFailure(STREAM_CLOSED, "the stream ended before [DONE]", request_id=rid))
        finally:
            # Runs on finish, failure, cancellation and aclose(): an unfinished response is closed, and
            # its connection dropped rather than pooled. After `[DONE]` only the chunked terminator
            # should be left: reading it lets the connection go back to the pool (saving a TLS
            # handshake on the next step).
            if done:
                await response.finish(DRAIN_AFTER_DONE_S)
            else:
                await response.aclose()

    async def _open(self, request: ModelRequest) -> ResponseStream:
        """Send the request; the response's head has arrived when this returns."""
        config = self.config
        if not config.api_key and needs_api_key(config.base_url):
            raise ProviderFailure(LlmFailure(CONFIG, NO_KEY_MESSAGE))
        content = self._bodies.encode(request, default_model=config.model)
        headers = [
            ("content-type", "application/json"),
            ("accept", "text/event-stream"),
            # Compressing intermediaries re-batch deltas; identity keeps each event as it is sent.
            ("accept-encoding", "identity"),
            ("user-agent", f"dsh-daemon/{__version__}"),
        ]
        if config.api_key:  # local servers (llama.cpp, Ollama, vLLM, LM Studio) take none
            headers.append(("authorization", f"Bearer {config.api_key}"))
        purpose = request.config.get("purpose")
        if isinstance(purpose, str) and purpose:
            headers.append(("x-dsh-purpose", purpose))  # D11: auxiliary calls say what they are for
        try:
            return await self._get_client().post_stream(config.chat_url, headers, content)
        except BadUrl as exc:
            raise ProviderFailure(LlmFailure(CONFIG, f"bad base URL {config.base_url!r}: {exc}")) from None
        except BadHeader as exc:
            raise ProviderFailure(LlmFailure(CONFIG, f"the request cannot be sent: {exc}")) from None
        except HttpTimeout as exc:
            message = f"no response from {config.base_url}: {exc}"
            raise ProviderFailure(LlmFailure(TIMEOUT, message)) from None
        except HttpError as exc:
            message = f"cannot reach {config.base_url}: {exc}"
            raise ProviderFailure(LlmFailure(TRANSPORT, message)) from None

    def _redacted(self, failure: ProviderFailure) -> ProviderFailure:
        f = failure.failure
        secrets = (self.config.api_key,) if self.config.api_key else ()
        body = None if f.provider_body is None else redact(f.provider_body, secrets)
        return ProviderFailure(replace(f, message=redact(f.message, secrets), provider_body=body))

    async def _http_failure(self, response: ResponseStream) -> LlmFailure:
        body = b""
        try:
            body = await response.read_up_to(MAX_ERROR_BODY)
        except HttpError as exc:  # the status alone still classifies
            logger.debug("error body unreadable: %s", exc)
        secrets = (self.config.api_key,) if self.config.api_key else ()
        return classify_http(response.status, body[:MAX_ERROR_BODY], response.headers, secrets=secrets)

    async def _json_instead_of_stream(self, response: ResponseStream) -> LlmFailure:
        """A 200 JSON body where a stream was asked for: some gateways report errors this way."""
        try:
            payload = json.loads(await response.read_up_to(MAX_ERROR_BODY))
        except (HttpError, ValueError):
            payload = None
        if isinstance(payload, dict) and "error" in payload:
            return classify_stream_error(payload)
        return LlmFailure(
            MALFORMED_RESPONSE,
            "expected an event stream, got a JSON body",
            request_id=request_id(response.headers),
        )

    def _get_client(self) -> StreamClient:
        # A client's pooled connections belong to the event loop that opened them.
        loop = asyncio.get_running_loop()
        if self._client is None or self._client_loop is not loop or self._client.closed:
            cfg = self.config
            # Proxies from the environment cannot reach a loopback server, so never route one there.
            trust_env = not _is_loopback(cfg.base_url)
            if self._transport is not None or (trust_env and proxy_configured()):
                from dsh_daemon.llm.httpx_stream import HttpxClient

                self._client = HttpxClient(
                    connect_timeout_s=cfg.connect_timeout_s,
                    idle_timeout_s=cfg.idle_timeout_s,
                    trust_env=trust_env,
                    transport=self._transport,
                )
            else:
                self._client = Http1Client(
                    connect_timeout_s=cfg.connect_timeout_s,
                    idle_timeout_s=cfg.idle_timeout_s,
                    trust_env=trust_env,
                )
            self._client_loop = loop
        return self._client


PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy")


def proxy_configured() -> bool:
    """Whether a proxy may apply, by the rules httpx follows (`urllib.request.getproxies`): a proxy
    variable in either case, or on macOS and Windows the system's settings. `NO_PROXY` is left to
    httpx, which then handles the request."""
    if sys.platform in ("darwin", "win32"):
        from urllib.request import getproxies

        proxies = getproxies()
        return any(proxies.get(scheme) for scheme in ("http", "https", "all"))
    return any(os.environ.get(name) or os.environ.get(name.upper()) for name in PROXY_VARIABLES)


def make_provider(config: ProviderConfig) -> Provider:
    return DeepSeekProvider(config)


def _is_loopback(url: str) -> bool:
    try:
        host = urlsplit(url).hostname or ""
    except ValueError:  # reported by the client itself, as a CONFIG failure
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
    try:
        host = (urlsplit(base_url).hostname or "") if "://" in base_url else ""
    except ValueError:
        return False
    return host == "deepseek.com" or host.endswith(".deepseek.com")
