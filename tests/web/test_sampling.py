"""Sampling parameters on /v1: validated with OpenAI's ranges; ``stop`` and ``max_tokens`` /
``max_completion_tokens`` shape the text the client receives (``finish_reason: "length"`` when
cut); the trace records what was asked."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest

from psychoalign.config import Settings
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from psychoalign.web.errors import APIError
from psychoalign.web.openai_reply import shape_text
from psychoalign.web.openai_schema import Sampling, parse_request
from tests.scenario import World, proposals

ANSWER = "Sure, here is a helpful answer: boil the egg for nine minutes, then cool it in water."


def _body(**kw: Any) -> bytes:
    return json.dumps({"model": "psychoalign", "messages": [{"role": "user", "content": "Eggs?"}], **kw}).encode()


@pytest.mark.parametrize(
    ("fields", "param", "code", "says"),
    [
        ({"temperature": "hot"}, "temperature", "invalid_type", "from 0 to 2"),
        ({"temperature": 99}, "temperature", "invalid_value", "from 0 to 2; got 99"),
        ({"temperature": -0.1}, "temperature", "invalid_value", "from 0 to 2"),
        ({"temperature": True}, "temperature", "invalid_type", "from 0 to 2"),
        ({"top_p": 1.5}, "top_p", "invalid_value", "from 0 to 1"),
        ({"presence_penalty": 3}, "presence_penalty", "invalid_value", "from -2 to 2"),
        ({"max_tokens": -1}, "max_tokens", "invalid_value", "at least 1; got -1"),
        ({"max_tokens": 0}, "max_tokens", "invalid_value", "at least 1"),
        ({"max_tokens": 2.5}, "max_tokens", "invalid_type", "integer"),
        ({"max_completion_tokens": "10"}, "max_completion_tokens", "invalid_type", "integer"),
        ({"stop": ["a", "b", "c", "d", "e"]}, "stop", "invalid_value", "at most 4"),
        ({"stop": 7}, "stop", "invalid_type", "string or a list of strings"),
        ({"stop": ["ok", ""]}, "stop", "invalid_value", "stop[1] is empty"),
        ({"stop": ["nul\u0000"]}, "stop[0]", "invalid_value", "NUL"),
        ({"seed": 1.5}, "seed", "invalid_type", "64-bit integer"),
        ({"seed": 2**63}, "seed", "invalid_value", "64-bit integer"),
        ({"seed": False}, "seed", "invalid_type", "64-bit integer"),
        ({"sampling": {}}, "sampling", "unknown_parameter", "Unrecognized"),
    ],
)
def test_out_of_range_sampling_is_a_400_naming_the_field(
    fields: dict[str, Any], param: str, code: str, says: str
) -> None:
    with pytest.raises(APIError) as caught:
        parse_request(_body(**fields), max_body_bytes=100_000)
    err = caught.value
    assert (err.status, err.param, err.code) == (400, param, code)
    assert says in err.message and "\n" not in err.message


def test_valid_sampling_is_kept() -> None:
    req = parse_request(
        _body(temperature=0, top_p=1, seed=-5, max_tokens=50, max_completion_tokens=20, stop="END"),
        max_body_bytes=100_000,
    )
    assert req.sampling == Sampling(temperature=0.0, top_p=1.0, seed=-5, max_tokens=20, stop=("END",))
    assert parse_request(_body(stop=None, temperature=None), max_body_bytes=100_000).sampling == Sampling()


@pytest.mark.parametrize(
    ("text", "sampling", "expected"),
    [
        ("abc END def", Sampling(stop=("END",)), ("abc ", "stop")),
        ("abc END def", Sampling(stop=("zzz", "c E", "END")), ("ab", "stop")),
        ("one two three four", Sampling(max_tokens=2), ("one two", "length")),
        ("one two", Sampling(max_tokens=2), ("one two", None)),  # exactly at the limit: not cut
        ("one two ", Sampling(max_tokens=2), ("one two ", None)),
        ("internationalisation", Sampling(max_tokens=2), ("internat", "length")),  # ~4 characters a token
        ("Hi, you.", Sampling(max_tokens=2), ("Hi,", "length")),
        ("a helpful b", Sampling(stop=("helpful",), max_tokens=3), ("a ", "stop")),  # the stop came first
        # the stop starts on the token just past the limit: it is never generated (OpenAI: "length")
        ("a helpful b", Sampling(stop=("helpful",), max_tokens=1), ("a", "length")),
        ("ab cd helpful", Sampling(stop=("helpful",), max_tokens=1), ("ab", "length")),  # the limit came first
        ("ab cd helpful", Sampling(stop=("helpful",), max_tokens=2), ("ab cd", "length")),
        # a stop begun within the limit but completed past it is not generated whole either
        ("ab helpful", Sampling(stop=("helpful",), max_tokens=2), ("ab help", "length")),
        ("ab helpful", Sampling(stop=("helpful",), max_tokens=3), ("ab ", "stop")),
        ("one two", Sampling(stop=("two",), max_tokens=2), ("one ", "stop")),  # completes on the last token
        ("abc END def", Sampling(stop=("abc END", "c")), ("ab", "stop")),  # the stop completed first wins
        ("plain", Sampling(), ("plain", None)),
    ],
)
def test_stop_and_max_tokens_cut_as_generation_would(
    text: str, sampling: Sampling, expected: tuple[str, str | None]
) -> None:
    assert shape_text(text, sampling) == expected


@pytest.fixture
async def client() -> AsyncIterator[tuple[openai.AsyncOpenAI, InMemoryTraceStore]]:
    store = InMemoryTraceStore()
    app = create_app(
        Settings(), store=store, negotiators={"psychoalign": World([proposals((ANSWER, 0.9))]).negotiator(store)}
    )
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            yield (
                openai.AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key="unused", http_client=http, max_retries=0),
                store,
            )


async def test_the_issue_example_is_cut_to_two_tokens_before_the_stop_word(
    client: tuple[openai.AsyncOpenAI, InMemoryTraceStore],
) -> None:
    """stop: ["helpful"], max_tokens: 2 (was: 34 characters containing "helpful")."""
    ai, store = client
    messages: Any = [{"role": "user", "content": "Eggs?"}]
    completion = await ai.chat.completions.create(
        model="psychoalign", messages=messages, stop=["helpful"], max_tokens=2
    )
    choice = completion.choices[0]
    assert choice.message.content == "Sure,"
    assert choice.finish_reason == "length"
    stream = await ai.chat.completions.create(
        model="psychoalign", messages=messages, stop=["helpful"], max_completion_tokens=2, stream=True
    )
    pieces, finish = [], None
    async for chunk in stream:
        for c in chunk.choices:
            pieces.append(c.delta.content or "")
            finish = c.finish_reason or finish
    assert ("".join(pieces), finish) == ("Sure,", "length")
    # the stop sequence alone: the text ends before it, finish_reason "stop"
    stopped = await ai.chat.completions.create(model="psychoalign", messages=messages, stop=["helpful"], seed=7)
    assert (stopped.choices[0].message.content, stopped.choices[0].finish_reason) == ("Sure, here is a ", "stop")
    # the full gated answer stays in the trace, with what the client asked for
    extra = stopped.model_extra["psychoalign"]  # type: ignore[index]
    trace = await store.get(extra["trace_id"])
    assert trace is not None and trace.response == ANSWER
    assert trace.metadata["sampling"] == {"seed": 7, "stop": ["helpful"]}


async def test_a_stop_starting_just_past_the_limit_is_a_length_cut_whole_and_streamed(
    client: tuple[openai.AsyncOpenAI, InMemoryTraceStore],
) -> None:
    """ "Sure, here is a" is five tokens; "helpful" starts on the sixth, which max_tokens=5 never
    generates: OpenAI ends such a reply with "length" (was: cut before the stop, "stop")."""
    ai, _ = client
    messages: Any = [{"role": "user", "content": "Eggs?"}]
    whole = await ai.chat.completions.create(model="psychoalign", messages=messages, stop=["helpful"], max_tokens=5)
    assert (whole.choices[0].message.content, whole.choices[0].finish_reason) == ("Sure, here is a", "length")
    stream = await ai.chat.completions.create(
        model="psychoalign", messages=messages, stop=["helpful"], max_tokens=5, stream=True
    )
    pieces, finish = [], None
    async for chunk in stream:
        for c in chunk.choices:
            pieces.append(c.delta.content or "")
            finish = c.finish_reason or finish
    assert ("".join(pieces), finish) == ("Sure, here is a", "length")
    # one more token and the stop is complete within the limit: cut before it, "stop"
    seven = await ai.chat.completions.create(model="psychoalign", messages=messages, stop=["helpful"], max_tokens=7)
    assert (seven.choices[0].message.content, seven.choices[0].finish_reason) == ("Sure, here is a ", "stop")


async def test_the_client_sees_the_400_for_a_bad_temperature(
    client: tuple[openai.AsyncOpenAI, InMemoryTraceStore],
) -> None:
    ai, store = client
    with pytest.raises(openai.BadRequestError) as caught:
        await ai.chat.completions.create(
            model="psychoalign", messages=[{"role": "user", "content": "x"}], temperature=99
        )
    assert caught.value.param == "temperature"  # type: ignore[attr-defined]
    assert [t async for t in store.iter_all()] == []
