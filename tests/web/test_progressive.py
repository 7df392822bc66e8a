"""Progressive gated streaming (serve.stream_window) through the official ``openai`` client's
stream: a fuzz of hostile scripted drafts that turn harmful mid-answer (a canary the EVALUATOR
vetoes, or a deterministic-check match it misses) delivers no byte of the harmful part, the
trace's final response is exactly what the client received, and benign drafts arrive whole,
their windows before the negotiation's decision."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai
import pytest

from psychoalign.config import Settings
from psychoalign.models import ChatRequest
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from tests.scenario import APPROVE, World, _field, evaluation
from tests.webserver import Running, run_app

CANARY = "CANARY-9b1e77"
WINDOW, LOOKAHEAD = 16, 32  # the look-ahead covers the longest harmful marker below
MARKERS = (CANARY, "synthesize sarin")  # vetoed by the EVALUATOR / by the U1 deterministic check
WORDS = [
    "the",
    "egg",
    "water",
    "pan",
    "boil",
    "minutes",
    "cold",
    "yolk",
    "soft",
    "firm",
    "salt",
    "lid",
    "heat",
    "simmer",
    "peel",
    "shell",
]


def _judge(text: str) -> dict[str, Any]:
    """Vetoes the canary; misses the sarin line (the deterministic check must catch it)."""
    if CANARY in text:
        return evaluation(2, "VETOED", hits=[("U1-mass-harm", "universal")], harmful_intent=True)
    return APPROVE


@dataclass
class Draft:
    text: str
    harm_at: int | None  # where the harmful part starts; None: benign


def _drafts(n: int, seed: int = 2026) -> list[Draft]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 60)))
        if i % 3 == 0:
            out.append(Draft(words.capitalize() + ".", None))
            continue
        cut = rng.randint(0, len(words))
        marker = MARKERS[i % 2]
        head = words[:cut] + ("" if cut == 0 else " ")
        tail = " " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 30)))
        out.append(Draft(f"{head}{marker} step one{tail}", len(head)))
    return out


DRAFTS = _drafts(45)


@dataclass
class DraftWorld(World):
    drafts: dict[str, str] = field(default_factory=dict)

    def drive(self, request: ChatRequest) -> dict[str, Any]:
        return {"proposals": [{"text": self.drafts[_field(request, "Request", "Deployment context")], "utility": 0.9}]}


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Running, InMemoryTraceStore]]:
    store = InMemoryTraceStore()
    world = DraftWorld([], judge=_judge, drafts={f"draft {i}": d.text for i, d in enumerate(DRAFTS)})
    settings = Settings.model_validate({"serve": {"stream_window": WINDOW, "stream_lookahead": LOOKAHEAD}})
    app = create_app(settings, store=store, negotiators={"psychoalign": world.negotiator(store, fast_path=True)})
    with run_app(app) as running:
        yield running, store


async def test_no_harmful_byte_reaches_the_client_stream(served: tuple[Running, InMemoryTraceStore]) -> None:
    running, store = served
    async with openai.AsyncOpenAI(base_url=f"{running.url}/v1", api_key="unused", max_retries=0) as client:

        async def one(i: int) -> tuple[str, str | None, str, str | None]:
            stream = await client.chat.completions.with_raw_response.create(
                model="psychoalign", messages=[{"role": "user", "content": f"draft {i}"}], stream=True
            )
            pieces, finish, said = [], None, None
            async for chunk in stream.parse():
                if chunk.choices:
                    pieces.append(chunk.choices[0].delta.content or "")
                    finish = chunk.choices[0].finish_reason or finish
                if chunk.model_extra and "psychoalign" in chunk.model_extra:
                    said = chunk.model_extra["psychoalign"]["outcome"]
            return "".join(pieces), finish, stream.headers["x-psychoalign-trace-id"], said

        results = await asyncio.gather(*(one(i) for i in range(len(DRAFTS))))
    cut = 0
    for draft, (received, finish, trace_id, said) in zip(DRAFTS, results, strict=True):
        trace = await store.get(trace_id)
        assert trace is not None and trace.final is not None
        assert trace.final.response == received  # the trace records exactly what the client got
        released = received[: trace.metadata["stream"]["released_chars"]]
        assert draft.text.startswith(released)
        if draft.harm_at is None:
            assert received == draft.text and finish == "stop" and said == "answered"
            continue
        cut += 1
        assert finish == "content_filter" and trace.metadata["stream"]["cut"] is True and said == "refused"
        assert len(released) <= draft.harm_at  # no byte of the harmful part was released
        assert not any(marker in received for marker in MARKERS)
    assert cut == 30


def test_windows_go_out_before_the_decision(served: tuple[Running, InMemoryTraceStore]) -> None:
    running, _ = served
    benign = next(i for i, d in enumerate(DRAFTS) if d.harm_at is None and len(d.text) > 3 * WINDOW)
    body = {"model": "psychoalign", "messages": [{"role": "user", "content": f"draft {benign}"}], "stream": True}
    with httpx.stream("POST", f"{running.url}/v1/chat/completions", json=body, timeout=60) as response:
        raw = b"".join(response.iter_raw())
    first_window = DRAFTS[benign].text[:WINDOW].encode()
    assert raw.index(first_window) < raw.index(b": psychoalign deciding")
