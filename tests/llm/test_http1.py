"""The provider's own HTTP/1.1 client (llm/http1.py, llm/chunked.py) against the real fake server on
127.0.0.1: chunked framing cut anywhere, CRLF and comments, other body framings, error bodies, a
connection cut mid-stream, TLS with certificate verification, and the fall-back to httpx for proxies."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest

from dsh_daemon.llm.chunked import ChunkedDecoder, ChunkedError
from dsh_daemon.llm.deepseek import DeepSeekProvider, proxy_configured
from dsh_daemon.llm.http1 import Http1Client, HttpError, default_ssl_context
from dsh_daemon.llm.httpx_stream import HttpxClient
from dsh_daemon.model.provider import Finish, ProviderFailure, StreamEvent, TextDelta
from tests.fakes.deepseek_server import (
    Close,
    FakeDeepSeek,
    Raw,
    Reply,
    Sleep,
    Write,
    text_stream,
    wire,
)
from tests.llm.support import TEST_KEY, make_config
from tests.llm.test_adapter import collect, failure_of, hello_request, texts

PIECES = ["héllo ", "wörld ", "你好", "🙂", " done"]


def framed(body: bytes, sizes: tuple[int, ...] = (5, 17, 1, 64)) -> bytes:
    """`body` as chunked frames of the given sizes in turn (so frames end inside events and inside
    UTF-8 sequences), with an extension on one size line, then the terminator and a trailer field."""
    out, start, index = [], 0, 0
    while start < len(body):
        size = sizes[index % len(sizes)]
        piece = body[start : start + size]
        extension = b";name=value" if index == 1 else b""
        out.append(b"%x%s\r\n%s\r\n" % (len(piece), extension, piece))
        start += size
        index += 1
    return b"".join(out)


# ---- the chunked decoder, cut at every byte -------------------------------------------------------


def test_chunked_decoder_gives_the_payload_however_the_bytes_are_cut() -> None:
    body = wire(text_stream(PIECES))
    raw = framed(body) + b"0\r\nx-trailer: 1\r\n\r\n"
    for cut in range(1, len(raw)):
        decoder = ChunkedDecoder()
        got = decoder.feed(raw[:cut]) + decoder.feed(raw[cut:])
        assert got == body, cut
        assert decoder.done and decoder.extra == 0
    decoder = ChunkedDecoder()
    assert b"".join(decoder.feed(raw[i : i + 1]) for i in range(len(raw))) == body
    assert decoder.done


@pytest.mark.parametrize(
    "raw",
    [b"zz\r\nabc\r\n", b"3\r\nabcX\r\n", b"+3\r\nabc\r\n", b"0x3\r\nabc\r\n", b"1" * 5000],
    ids=["not-hex", "no-crlf-after-data", "sign", "0x", "endless-size-line"],
)
def test_chunked_decoder_refuses_what_is_not_the_grammar(raw: bytes) -> None:
    with pytest.raises(ChunkedError):
        ChunkedDecoder().feed(raw)


def test_bytes_after_the_terminator_are_counted() -> None:
    decoder = ChunkedDecoder()
    assert decoder.feed(b"3\r\nabc\r\n0\r\n\r\nHTTP/1.1") == b"abc"
    assert decoder.done and decoder.extra == 8


# ---- over the wire ----------------------------------------------------------------------------------


@pytest.fixture
async def provider(fake: FakeDeepSeek) -> DeepSeekProvider:
    adapter = DeepSeekProvider(make_config(fake))
    yield adapter  # type: ignore[misc]
    await adapter.aclose()


def test_the_own_client_streams_when_no_proxy_applies(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    assert not proxy_configured()
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.invalid:3128")
    assert proxy_configured()


async def test_frames_cut_inside_events_and_characters_with_pauses(
    fake: FakeDeepSeek, provider: DeepSeekProvider
) -> None:
    raw = framed(wire(text_stream(PIECES)))
    # Pauses between 3-byte writes make the client's reads end inside size lines, CRLFs and characters.
    actions: list[Raw | Sleep] = []
    for i in range(0, len(raw), 3):
        actions += [Raw(raw[i : i + 3]), Sleep(0.0005)]
    fake.script(Reply(200, Reply.stream([]).headers, tuple(actions)))
    events = await collect(provider)
    assert events[:-1] == [TextDelta(p) for p in PIECES]
    assert isinstance(events[-1], Finish)
    await collect(provider)  # the trailer section was read: the connection is pooled and reused
    assert [r.connection for r in fake.requests] == [1, 1]


async def test_crlf_line_ends_and_comments(fake: FakeDeepSeek, provider: DeepSeekProvider) -> None:
    lines = [": keep-alive", *text_stream(PIECES)]
    body = "".join(line + "\r\n\r\n" for line in lines).encode("utf-8")
    fake.script(Reply.stream(body, split=2))  # CR and LF of one line end land in different chunks
    assert texts(await collect(provider)) == "".join(PIECES)


async def test_a_content_length_body_and_one_ended_by_close(
    fake: FakeDeepSeek, provider: DeepSeekProvider
) -> None:
    body = wire(text_stream(["sized"]))
    fake.script(Reply(200, Reply.stream([]).headers, (Write(body),), chunked=False))
    assert texts(await collect(provider)) == "sized"
    # No length and no chunking: the body runs to the connection's end, which must not be pooled.
    headers = (*Reply.stream([]).headers, ("connection", "close"))
    fake.script(Reply(200, headers, (Write(body),), chunked=False))
    assert texts(await collect(provider)) == "sized"
    assert texts(await collect(provider)) == "Hello there!"
    assert [r.connection for r in fake.requests] == [1, 1, 2]


async def test_a_chunked_error_body_is_read_and_classified(
    fake: FakeDeepSeek, provider: DeepSeekProvider
) -> None:
    body = b'{"error":{"message":"Rate Limit Reached","type":"rate_limit_error"}}'
    fake.script(
        Reply(429, (("content-type", "application/json"), ("retry-after", "2")), (Raw(framed(body)),))
    )
    failure = (await failure_of(provider)).failure
    assert (failure.code, failure.status, failure.retry_after_ms) == ("RATE_LIMIT", 429, 2000)
    assert "Rate Limit Reached" in failure.message


async def test_a_connection_cut_inside_a_frame_is_stream_closed(
    fake: FakeDeepSeek, provider: DeepSeekProvider
) -> None:
    raw = framed(wire(text_stream(PIECES)))
    cut = raw.index("你".encode()) + 1  # inside a frame and inside a character
    fake.script(Reply(200, Reply.stream([]).headers, (Raw(raw[:cut]), Sleep(0.05), Close())))
    seen: list[StreamEvent] = []
    with pytest.raises(ProviderFailure) as caught:
        async for event in provider.stream(hello_request()):
            seen.append(event)
    assert seen == [TextDelta("héllo "), TextDelta("wörld ")]
    assert caught.value.failure.code == "STREAM_CLOSED"
    assert "before the end of the body" in caught.value.failure.message


async def test_bad_framing_is_stream_closed_and_drops_the_connection(
    fake: FakeDeepSeek, provider: DeepSeekProvider
) -> None:
    fake.script(Reply(200, Reply.stream([]).headers, (Raw(b"zz\r\n"),)))
    failure = (await failure_of(provider)).failure
    assert failure.code == "STREAM_CLOSED" and "chunk size" in failure.message
    await collect(provider)
    assert [r.connection for r in fake.requests] == [1, 2]


async def test_a_header_with_a_line_break_is_refused_without_showing_it(fake: FakeDeepSeek) -> None:
    key = TEST_KEY + "\r\nx-injected: 1"
    provider = DeepSeekProvider(make_config(fake, api_key=key))
    failure = (await failure_of(provider)).failure
    assert failure.code == "CONFIG" and TEST_KEY not in failure.message
    assert fake.requests == []


# ---- proxies: httpx streams -------------------------------------------------------------------------


async def test_a_proxy_variable_sends_the_request_through_httpx_and_the_proxy(
    fake: FakeDeepSeek, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The fake stands in for the proxy: a request sent through a proxy names the whole URL.
    monkeypatch.setenv("HTTP_PROXY", fake.base_url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    provider = DeepSeekProvider(make_config(fake, base_url="http://provider.invalid/v1"))
    assert texts(await collect(provider)) == "Hello there!"
    assert isinstance(provider._client, HttpxClient)
    assert fake.requests[0].path == "http://provider.invalid/v1/chat/completions"
    await provider.aclose()


async def test_loopback_ignores_proxy_variables(fake: FakeDeepSeek, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    provider = DeepSeekProvider(make_config(fake))
    assert texts(await collect(provider)) == "Hello there!"
    assert isinstance(provider._client, Http1Client)
    await provider.aclose()


# ---- TLS --------------------------------------------------------------------------------------------


def _openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and a server certificate for the name localhost (not the address 127.0.0.1) signed by it."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is not installed")
    where = tmp_path_factory.mktemp("tls")
    curve = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *curve, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2",
             "-subj", "/CN=dsh test CA", "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=where)  # fmt: skip
    _openssl(
        "req", *curve, "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=localhost", cwd=where
    )
    (where / "ext.cnf").write_text(
        "subjectAltName=DNS:localhost\nbasicConstraints=CA:FALSE\n"
        "keyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
        "subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid,issuer\n"
    )
    _openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
             "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=where)  # fmt: skip
    return where


@pytest.fixture
def tls_fake(certificates: Path) -> FakeDeepSeek:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificates / "server.pem", certificates / "server.key")
    with FakeDeepSeek(ssl_context=context) as server:
        yield server  # type: ignore[misc]


def test_the_default_context_verifies_certificates_and_host_names() -> None:
    context = default_ssl_context(trust_env=False)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname


async def test_tls_to_a_server_the_ca_vouches_for(tls_fake: FakeDeepSeek, certificates: Path) -> None:
    context = ssl.create_default_context(cafile=str(certificates / "ca.pem"))
    client = Http1Client(connect_timeout_s=5, idle_timeout_s=5, trust_env=False, ssl_context=context)
    body = b'{"model":"m","messages":[{"role":"user","content":"hi"}],"stream":true}'
    for _ in range(2):
        response = await client.post_stream(f"https://localhost:{tls_fake.port}/chat/completions", [], body)
        assert response.status == 200
        data = await response.read_up_to(1 << 20)
        assert data.endswith(b"data: [DONE]\n\n")
        await response.aclose()
    await client.aclose()
    assert [r.connection for r in tls_fake.requests] == [1, 1]


async def test_tls_refuses_an_untrusted_certificate(tls_fake: FakeDeepSeek) -> None:
    # The daemon's default trust (certifi's bundle) does not include the test CA.
    provider = DeepSeekProvider(make_config(tls_fake))
    assert provider.config.base_url.startswith("https://")
    failure = (await failure_of(provider)).failure
    assert failure.code == "TRANSPORT" and "CERTIFICATE_VERIFY_FAILED" in failure.message
    assert tls_fake.requests == []


async def test_tls_refuses_a_certificate_for_another_name(tls_fake: FakeDeepSeek, certificates: Path) -> None:
    context = ssl.create_default_context(cafile=str(certificates / "ca.pem"))
    client = Http1Client(connect_timeout_s=5, idle_timeout_s=5, trust_env=False, ssl_context=context)
    # A trusted certificate, but for localhost: the address is not among its names.
    with pytest.raises(HttpError, match="IP address mismatch"):
        await client.post_stream(f"https://127.0.0.1:{tls_fake.port}/", [], b"{}")
    await client.aclose()
    assert tls_fake.requests == []
