"""The openai backend against a real loopback HTTP server speaking the Chat Completions protocol."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from psychoalign.errors import EndpointError, ModelTimeoutError, SchemaValidationError
from psychoalign.models import build_model

from .helpers import fast_spec
from .loopback import FakeServer, Scripted, fake_endpoint, free_port, openai_reply

PATH = "/v1/chat/completions"


class Verdict(BaseModel):
    label: str
    score: int = Field(ge=0, le=100)


def spec_for(url: str, **kw: object) -> object:
    return fast_spec(backend="openai", model="fake-model", base_url=f"{url}/v1", **kw)


async def test_plain_text_and_usage() -> None:
    fake = FakeServer(default=Scripted(openai_reply("hello there", 12, 2)))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url))  # type: ignore[arg-type]
        result = await model.chat("hi", system="be brief")
        await model.aclose()
    assert result.text == "hello there"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (12, 2)
    assert result.attempts == 1
    sent = fake.requests[0]
    assert sent["model"] == "fake-model"
    assert sent["messages"] == [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]


async def test_structured_output_sends_bounded_json_schema() -> None:
    fake = FakeServer(default=Scripted(openai_reply(json.dumps({"label": "ok", "score": 88}))))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url))  # type: ignore[arg-type]
        result = await model.chat("rate it", output=Verdict, schema_name="verdict")
        await model.aclose()
    assert result.data == Verdict(label="ok", score=88)
    fmt = fake.requests[0]["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["name"] == "verdict"
    assert fmt["json_schema"]["strict"] is True
    score = fmt["json_schema"]["schema"]["properties"]["score"]
    assert (score["minimum"], score["maximum"]) == (0, 100)
    assert fmt["json_schema"]["schema"]["additionalProperties"] is False


async def test_schema_violation_is_reasked_then_fails_bounded() -> None:
    bad = Scripted(openai_reply(json.dumps({"label": "ok", "score": 400})))
    fake = FakeServer(default=bad)
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url, schema_retries=2))  # type: ignore[arg-type]
        with pytest.raises(SchemaValidationError, match="score"):
            await model.chat("rate it", output=Verdict)
        await model.aclose()
    assert len(fake.requests) == 3  # first try + 2 re-asks, then stop
    assert fake.requests[1]["seed"] != fake.requests[0]["seed"]


async def test_schema_violation_recovers_on_reask() -> None:
    fake = FakeServer(
        queue=[Scripted(openai_reply("not json at all"))],
        default=Scripted(openai_reply(json.dumps({"label": "fine", "score": 3}))),
    )
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url))  # type: ignore[arg-type]
        result = await model.chat("rate", output=Verdict)
        await model.aclose()
    assert result.data.score == 3
    assert result.attempts == 2


@pytest.mark.parametrize("status", [429, 500, 502, 503])
async def test_retries_transient_status_then_succeeds(status: int) -> None:
    fake = FakeServer(
        queue=[Scripted({"error": "busy"}, status=status, headers={"retry-after": "0"})] * 2,
        default=Scripted(openai_reply("finally")),
    )
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url, max_retries=3))  # type: ignore[arg-type]
        result = await model.chat("hi")
        await model.aclose()
    assert result.text == "finally"
    assert result.attempts == 3


async def test_retries_are_bounded() -> None:
    fake = FakeServer(default=Scripted({"error": "down"}, status=503))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url, max_retries=2))  # type: ignore[arg-type]
        with pytest.raises(EndpointError, match="503"):
            await model.chat("hi")
        await model.aclose()
    assert len(fake.requests) == 3


async def test_auth_error_is_not_retried() -> None:
    fake = FakeServer(default=Scripted({"error": {"message": "bad key"}}, status=401))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url, max_retries=3))  # type: ignore[arg-type]
        with pytest.raises(EndpointError, match="401") as info:
            await model.chat("hi")
        await model.aclose()
    assert len(fake.requests) == 1
    assert info.value.hint == "check the API key"


async def test_unreachable_endpoint_fails_clearly() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    model = build_model(spec_for(url, max_retries=1))  # type: ignore[arg-type]
    with pytest.raises(EndpointError, match="cannot reach"):
        await model.chat("hi")
    await model.aclose()


async def test_timeout_per_call() -> None:
    fake = FakeServer(default=Scripted(openai_reply("slow"), delay_s=1.0))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url, timeout_s=0.1, max_retries=1))  # type: ignore[arg-type]
        with pytest.raises(ModelTimeoutError, match="timed out"):
            await model.chat("hi")
        await model.aclose()
    assert len(fake.requests) == 2


async def test_cache_serves_repeat_requests(tmp_path: Path) -> None:
    fake = FakeServer(default=Scripted(openai_reply(json.dumps({"label": "a", "score": 1}), 10, 4)))
    with fake_endpoint(PATH, fake):
        spec = spec_for(fake.url, input_cost_per_mtok=1000.0, output_cost_per_mtok=2000.0)
        model = build_model(spec, cache_dir=tmp_path)  # type: ignore[arg-type]
        first = await model.chat("same", output=Verdict)
        second = await model.chat("same", output=Verdict)
        third = await model.chat("different", output=Verdict)
        await model.aclose()
        # A fresh process (new ChatModel) reuses the on-disk cache.
        again = build_model(spec, cache_dir=tmp_path)  # type: ignore[arg-type]
        fourth = await again.chat("same", output=Verdict)
        await again.aclose()
    assert len(fake.requests) == 2
    assert not first.cached and second.cached and not third.cached and fourth.cached
    assert second.data == first.data
    assert first.cost_usd == pytest.approx((10 * 1000 + 4 * 2000) / 1e6)
    assert second.cost_usd == 0.0


async def test_concurrent_calls_share_one_client() -> None:
    fake = FakeServer(default=Scripted(openai_reply("x")))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url))  # type: ignore[arg-type]
        results = await asyncio.gather(*(model.chat(f"q{i}") for i in range(40)))
        await model.aclose()
    assert len(results) == 40 and len(fake.requests) == 40
    assert model.calls == 40
    assert model.usage.prompt_tokens == 40 * 7
