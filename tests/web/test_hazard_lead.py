"""A known hazard's warning leads the reply on /v1, through the official ``openai`` client: an
answer, a filtered answer and a refusal all open with it, whole and streamed (progressive
streaming sends it before the first window), a crisis message stays before it, and
``max_tokens`` never cuts it: its tokens count, the budget left applies after it, and a warning
longer than the budget goes whole with ``finish_reason: "length"`` (docs/gateway.md)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import openai
import pytest

from psychoalign.config import Settings
from psychoalign.frameworks import load_framework
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from psychoalign.web.openai_reply import shape_text
from psychoalign.web.openai_schema import Sampling
from tests.scenario import APPROVE, World, evaluation, proposals

GENERAL = load_framework("general")
CHOKING = "My toddler is choking on a grape and can't breathe, what do I do?"
WARNING = next(c.text.strip() for c in GENERAL.safe_channels if c.id == "choking")
ANSWER = "Grapes are a fruit that grows on vines in warm regions. " * 6
FLAGGED = "Give the child a glass of water to wash it down."
REJECT = evaluation(10, "REJECTED", harmful_intent=False, legitimate_need=False)
Judge = Callable[[str], dict[str, Any]]


def _approve(text: str) -> dict[str, Any]:
    return APPROVE


def _reject(text: str) -> dict[str, Any]:
    return REJECT


def _flag(text: str) -> dict[str, Any]:
    if FLAGGED in text:
        return evaluation(70, "CONDITIONAL", harmful_segments=[FLAGGED])
    return APPROVE


async def _client(draft: str, judge: Judge, window: int = 0) -> AsyncIterator[openai.AsyncOpenAI]:
    settings = Settings.model_validate({"serve": {"stream_window": window, "stream_lookahead": 8}})
    world = World([proposals((draft, 0.9))], judge=judge)
    app = create_app(
        settings, store=InMemoryTraceStore(), negotiators={"psychoalign": world.negotiator(fast_path=window > 0)}
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            yield openai.AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key="unused", http_client=http, max_retries=0)


async def _ask(
    ai: openai.AsyncOpenAI, request: str, *, stream: bool, max_tokens: int | None = None
) -> tuple[list[str], str | None]:
    """The content pieces the client got (one for a whole reply) and the finish reason."""
    extra: dict[str, Any] = {} if max_tokens is None else {"max_tokens": max_tokens}
    messages: Any = [{"role": "user", "content": request}]
    if not stream:
        done = await ai.chat.completions.create(model="psychoalign", messages=messages, **extra)
        return [done.choices[0].message.content or ""], done.choices[0].finish_reason
    pieces: list[str] = []
    finish: str | None = None
    async for chunk in await ai.chat.completions.create(model="psychoalign", messages=messages, stream=True, **extra):
        for c in chunk.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
            finish = c.finish_reason or finish
    return pieces, finish


@pytest.fixture
async def answered() -> AsyncIterator[openai.AsyncOpenAI]:
    async for ai in _client(ANSWER, _approve):
        yield ai


@pytest.mark.parametrize("stream", [False, True])
async def test_an_answer_opens_with_the_warning(answered: openai.AsyncOpenAI, stream: bool) -> None:
    pieces, finish = await _ask(answered, CHOKING, stream=stream)
    assert "".join(pieces) == f"{WARNING}\n\n{ANSWER}" and finish == "stop"


@pytest.mark.parametrize("stream", [False, True])
async def test_max_tokens_cuts_the_answer_after_the_warning_never_the_warning(
    answered: openai.AsyncOpenAI, stream: bool
) -> None:
    warning_tokens = _tokens(WARNING)
    # the reported case: 120 tokens, which the answer alone would fill
    text = "".join((await _ask(answered, CHOKING, stream=stream, max_tokens=120))[0])
    assert text.startswith(f"{WARNING}\n\n") and len(text) < len(f"{WARNING}\n\n{ANSWER}")
    # a budget of the warning and five more tokens: the warning whole, then five tokens of the answer
    pieces, finish = await _ask(answered, CHOKING, stream=stream, max_tokens=warning_tokens + 5)
    expected, _ = shape_text(f"\n\n{ANSWER}", Sampling(max_tokens=5))
    assert "".join(pieces) == WARNING + expected and finish == "length"
    # a budget smaller than the warning: the warning whole, nothing after it, "length"
    pieces, finish = await _ask(answered, CHOKING, stream=stream, max_tokens=3)
    assert "".join(pieces) == WARNING and finish == "length"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_filtered_answer_opens_with_the_warning(stream: bool) -> None:
    draft = f"Stay calm. {FLAGGED} Call for help."
    async for ai in _client(draft, _flag):
        pieces, _ = await _ask(ai, CHOKING, stream=stream)
        text = "".join(pieces)
        assert text.startswith(f"{WARNING}\n\n") and FLAGGED not in text and "Stay calm." in text
        pieces, finish = await _ask(ai, CHOKING, stream=stream, max_tokens=3)
        assert "".join(pieces) == WARNING and finish == "length"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_refusal_opens_with_the_warning_and_max_tokens_keeps_it_whole(stream: bool) -> None:
    async for ai in _client("Just wait, it will pass.", _reject):
        pieces, finish = await _ask(ai, CHOKING, stream=stream)
        text = "".join(pieces)
        assert text.startswith(f"{WARNING}\n\n") and "it will pass" not in text and finish == "content_filter"
        pieces, finish = await _ask(ai, CHOKING, stream=stream, max_tokens=3)
        # a gate refusal is content_filter, cut or not (docs/gateway.md)
        assert "".join(pieces) == WARNING and finish == "content_filter"


@pytest.mark.parametrize("stream", [False, True])
async def test_a_crisis_message_stays_first_and_is_not_cut_either(stream: bool) -> None:
    crisis = next(c for c in GENERAL.safe_channels if c.id == "crisis").render_message()
    warning = next(c.text.strip() for c in GENERAL.safe_channels if c.id == "alcohol-sedatives")
    async for ai in _client("unused", _approve):
        request = "I want to die tonight with vodka and my Xanax."
        pieces, _ = await _ask(ai, request, stream=stream)
        assert "".join(pieces) == f"{crisis}\n\n{warning}"
        pieces, _ = await _ask(ai, request, stream=stream, max_tokens=3)
        assert "".join(pieces) == f"{crisis}\n\n{warning}"


async def test_progressive_streaming_sends_the_warning_before_the_first_window() -> None:
    async for ai in _client(ANSWER, _approve, window=16):
        pieces, finish = await _ask(ai, CHOKING, stream=True)
        assert pieces[0].startswith(WARNING) and ANSWER[:16] not in pieces[0]
        assert "".join(pieces) == f"{WARNING}\n\n{ANSWER}" and finish == "stop"


async def test_a_progressive_stream_cut_keeps_the_warning_first_and_once() -> None:
    def judge(text: str) -> dict[str, Any]:
        return REJECT if "vines" in text else APPROVE

    async for ai in _client(ANSWER, judge, window=16):
        pieces, _ = await _ask(ai, CHOKING, stream=True)
        text = "".join(pieces)
        assert pieces[0].startswith(WARNING) and text.count(WARNING) == 1 and "vines" not in text


def _tokens(text: str) -> int:
    """The gateway's token estimate of ``text``: the largest budget that does not cut it."""
    n = 1
    while shape_text(text, Sampling(max_tokens=n))[1] == "length":
        n += 1
    return n
