"""session/prompt over a real `dsh-daemon acp` process, with the official ACP SDK's client."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from acp import RequestError, resource_link_block, text_block
from acp.schema import EmbeddedResourceContentBlock, TextResourceContents

from tests.acp.harness import acp_daemon, settle
from tests.fakes.deepseek_server import FakeDeepSeek, Reply, text_stream


def reply(*pieces: str, delay: float = 0.0) -> Reply:
    return Reply.stream(text_stream(list(pieces)), delay=delay)


def stalled(text: str) -> Reply:
    """A reply that streams `text` and then hangs before its finish: the turn runs until cancelled."""
    return Reply.stream(text_stream([text])[:2], tail="stall")


def position(wire: list[dict], predicate) -> int:  # type: ignore[no-untyped-def]
    return next(i for i, m in enumerate(wire) if predicate(m))


def chunk_with(text: str):  # type: ignore[no-untyped-def]
    return lambda m: (
        m.get("method") == "session/update"
        and m["params"]["update"].get("sessionUpdate") == "agent_message_chunk"
        and m["params"]["update"]["content"].get("text") == text
    )


def answer_to(request_id: int):  # type: ignore[no-untyped-def]
    return lambda m: "method" not in m and m.get("id") == request_id


async def test_a_prompt_streams_and_ends_end_turn(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(reply("Hel", "lo ", "world"))
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        response = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("say hello")]))
        assert response.stop_reason == "end_turn"
        assert [u["content"]["text"] for u in d.client.updates(sid, "agent_message_chunk")] == [
            "Hel",
            "lo ",
            "world",
        ]
        # Every update of the turn precedes the answer on the wire.
        wire = d.client.wire
        answer = position(wire, lambda m: "method" not in m and "stopReason" in (m.get("result") or {}))
        assert position(wire, chunk_with("world")) < answer
        usage = d.client.updates(sid, "usage_update")
        assert usage and usage[-1]["used"] == 15  # USAGE_A: 12 in + 3 out
        titled = [u for u in d.client.updates(sid, "session_info_update") if "title" in u]
        assert titled[0]["title"] == "say hello"
        messages = fake.requests[-1].json["messages"]
        assert messages[-1] == {"role": "user", "content": "say hello"}
        listed = await d.conn.list_sessions()
        assert [(s.session_id, s.title) for s in listed.sessions] == [(sid, "say hello")]


async def test_prompts_sent_while_busy_are_answered_in_order_after_their_own_turns(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(reply("one", delay=0.05), reply("two"), reply("three"))
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        first = asyncio.ensure_future(d.conn.prompt(session_id=sid, prompt=[text_block("p1")]))
        await d.wait_for(lambda: bool(d.client.updates(sid, "agent_message_chunk")) or first.done())
        second = asyncio.ensure_future(d.conn.prompt(session_id=sid, prompt=[text_block("p2")]))
        third = asyncio.ensure_future(d.conn.prompt(session_id=sid, prompt=[text_block("p3")]))
        results = await settle(asyncio.gather(first, second, third))
        assert [r.stop_reason for r in results] == ["end_turn"] * 3
        wire = d.client.wire
        answers = [m for m in wire if "method" not in m and "stopReason" in (m.get("result") or {})]
        order = [wire.index(m) for m in answers]
        assert order == sorted(order)
        one, two, three = (position(wire, chunk_with(t)) for t in ("one", "two", "three"))
        assert one < order[0] < two < order[1] < three < order[2]
        # Each prompt was its own turn: the model saw p1, then p2, then p3 as the last message.
        assert [r.json["messages"][-1]["content"] for r in fake.requests] == ["p1", "p2", "p3"]


async def test_cancel_answers_cancelled_and_the_queue_runs(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.script(stalled("partial"), reply("after"))
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        first = asyncio.ensure_future(d.conn.prompt(session_id=sid, prompt=[text_block("long job")]))
        await d.wait_for(lambda: d.client.text(sid) == "partial")
        second = asyncio.ensure_future(d.conn.prompt(session_id=sid, prompt=[text_block("queued")]))
        await d.wait_for(lambda: len(d.client.wire) > 0 and not second.done())
        await asyncio.sleep(0)  # let the queued prompt's request go out before the cancel
        await d.conn.cancel(session_id=sid)
        assert (await settle(first)).stop_reason == "cancelled"
        assert (await settle(second)).stop_reason == "end_turn"
        assert d.client.text(sid).endswith("after")
        assert fake.requests[-1].json["messages"][-1]["content"] == "queued"


async def test_an_error_turn_answers_with_its_typed_code(tmp_path: Path, fake: FakeDeepSeek) -> None:
    fake.fail_next(1, 401)
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        with pytest.raises(RequestError) as caught:
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("hi")]))
        assert caught.value.data["code"] == "AUTH"
        fake.script(reply("fine"))
        assert (
            await settle(d.conn.prompt(session_id=sid, prompt=[text_block("again")]))
        ).stop_reason == "end_turn"


async def test_resource_blocks_travel_with_their_prompt_as_editor_messages(
    tmp_path: Path, fake: FakeDeepSeek
) -> None:
    fake.script(reply("ok"))
    async with acp_daemon(tmp_path / "state", fake) as d:
        source = d.work / "app.py"
        source.write_text("a = 1\nb = 2\nc = 3\nd = 4\n")
        sid = await d.new_session()
        embedded = EmbeddedResourceContentBlock(
            type="resource",
            resource=TextResourceContents(uri=(d.work / "notes.md").as_uri(), text="remember the milk\n"),
        )
        prompt = [
            text_block("explain"),
            resource_link_block(name="app.py", uri=source.as_uri() + "#L2:3"),
            embedded,
        ]
        assert (await settle(d.conn.prompt(session_id=sid, prompt=prompt))).stop_reason == "end_turn"
        messages = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
        assert messages[-1] == "explain"
        selection, notes = messages[-3], messages[-2]
        assert selection.startswith(f"Selection in {source}, lines 2-3:") and "b = 2\nc = 3\n" in selection
        assert "a = 1" not in selection
        assert notes.startswith("File ") and "remember the milk" in notes
        # Issue 24.4: a linked directory is attached as its listing; a link outside the session's
        # workspace as a reference naming it, not read (the agent's read meets the confinement).
        (d.work / "pkg").mkdir()
        (d.work / "pkg" / "mod.py").write_text("")
        (d.work / "pkg" / "sub").mkdir()
        outside = tmp_path / "secret.txt"
        outside.write_text("the secret")
        fake.script(reply("seen"))
        prompt = [
            text_block("look"),
            resource_link_block(name="pkg", uri=(d.work / "pkg").as_uri()),
            resource_link_block(name="s", uri=outside.as_uri()),
        ]
        assert (await settle(d.conn.prompt(session_id=sid, prompt=prompt))).stop_reason == "end_turn"
        messages = [m["content"] for m in fake.requests[-1].json["messages"] if m["role"] == "user"]
        listing, reference, said = messages[-3:]
        assert said == "look"
        assert listing.startswith(f"Directory {d.work / 'pkg'}:") and "mod.py\nsub/\n" in listing, listing
        assert reference.startswith(
            f"Linked {outside} (outside this session's workspace"
        ) and "secret" not in (reference.replace(str(outside), "")), reference


async def test_the_prompt_answer_carries_the_turns_token_usage(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """Issue 39.7: the `session/prompt` response reports the turn's tokens (ACP `usage`, as
    claude-agent-acp does), summed over the turn's requests; the SDK validates its shape."""
    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        fake.script(reply("hello"))
        answer = await settle(d.conn.prompt(session_id=sid, prompt=[text_block("hi")]))
        assert answer.stop_reason == "end_turn"
        assert answer.usage is not None
        # USAGE_A: 12 prompt tokens (0 from the cache), 3 completion tokens.
        assert (answer.usage.input_tokens, answer.usage.output_tokens, answer.usage.total_tokens) == (
            12,
            3,
            15,
        )
        assert answer.usage.cached_read_tokens == 0


async def test_an_image_is_refused_in_words_and_nothing_is_sent(tmp_path: Path, fake: FakeDeepSeek) -> None:
    """Issue 39.7: `image` is not advertised (the models are text-only); a client that sends one
    anyway gets a typed refusal that says why and what to do, and nothing reaches the model."""
    from acp import image_block

    async with acp_daemon(tmp_path / "state", fake) as d:
        sid = await d.new_session()
        with pytest.raises(RequestError) as refused:
            await settle(
                d.conn.prompt(
                    session_id=sid,
                    prompt=[text_block("what is this?"), image_block("iVBORw0KGgo=", "image/png")],
                )
            )
        assert refused.value.code == -32602
        said = str(refused.value)
        assert "text only" in said and "nothing was sent" in said
        assert fake.requests == []
