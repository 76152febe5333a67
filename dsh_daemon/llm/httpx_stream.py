"""The provider's streamed POST through httpx, for when a proxy applies (or a test wraps the transport).

httpx honours the proxy variables (with `NO_PROXY`) and speaks to HTTP and SOCKS proxies, which
`llm/http1.py` does not; this wrapper gives it the same face as `http1.Http1Client`, its errors turned
into `http1`'s. Imported only when used: httpx's module tree is about 2.5 MiB of a daemon's memory.
"""

from __future__ import annotations

import asyncio
import contextlib

import httpx

from dsh_daemon.llm.http1 import BadHeader, BadUrl, Headers, HttpError, HttpTimeout, describe


class HttpxClient:
    def __init__(
        self,
        *,
        connect_timeout_s: float,
        idle_timeout_s: float,
        trust_env: bool,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(
                connect=connect_timeout_s, read=idle_timeout_s, write=idle_timeout_s, pool=connect_timeout_s
            ),
            transport=transport,
            trust_env=trust_env,
            follow_redirects=False,
        )

    @property
    def closed(self) -> bool:
        return self._client.is_closed

    async def post_stream(self, url: str, headers: list[tuple[str, str]], body: bytes) -> HttpxResponse:
        try:
            request = self._client.build_request("POST", url, content=body, headers=headers)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise BadUrl(str(exc)) from None
        except UnicodeEncodeError:
            raise BadHeader("a header value holds a character HTTP cannot carry") from None
        try:
            response = await self._client.send(request, stream=True)
        except (httpx.InvalidURL, httpx.UnsupportedProtocol) as exc:
            raise BadUrl(str(exc)) from None
        except httpx.TimeoutException as exc:
            raise HttpTimeout(describe(exc)) from None
        except httpx.HTTPError as exc:
            raise HttpError(describe(exc)) from None
        return HttpxResponse(response)

    async def aclose(self) -> None:
        await self._client.aclose()


class HttpxResponse:
    def __init__(self, response: httpx.Response) -> None:
        self._response = response
        self._chunks = response.aiter_bytes()
        self.status = response.status_code
        self.headers = Headers({k: v for k, v in response.headers.items()})
        self.is_success = response.is_success

    async def read(self) -> bytes:
        try:
            return await anext(self._chunks, b"")
        except httpx.TimeoutException as exc:
            raise HttpTimeout(describe(exc)) from None
        except httpx.HTTPError as exc:
            raise HttpError(describe(exc)) from None

    async def read_up_to(self, limit: int) -> bytes:
        body = b""
        while len(body) < limit:
            data = await self.read()
            if not data:
                break
            body += data
        return body

    async def finish(self, within_s: float) -> None:
        """After `[DONE]` only the chunked terminator should be left. Reading it lets the connection
        go back to the pool; a server that keeps sending is cut."""
        try:
            async with asyncio.timeout(within_s):
                while await self.read():
                    pass
        except (HttpError, TimeoutError):
            pass
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        # Nested, so that a cancellation landing in the first close still closes the response.
        try:
            with contextlib.suppress(Exception):
                await self._chunks.aclose()  # type: ignore[attr-defined]
        finally:
            await self._response.aclose()
