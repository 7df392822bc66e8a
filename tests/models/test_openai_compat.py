"""The openai backend against a real loopback HTTP server speaking the Chat Completions protocol."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from pydantic import BaseModel, Field

from psychoalign.errors import EndpointError, ModelTimeoutError, SchemaValidationError
from psychoalign.models import build_model
from tests.helpers import fast_spec
from tests.loopback import FakeServer, Scripted, fake_endpoint, free_port, openai_reply

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
    assert info.value.hint == "check the API key ($OPENAI_API_KEY, or api_key_env / api_key)"


async def test_unreachable_endpoint_fails_clearly() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    model = build_model(spec_for(url, max_retries=1))  # type: ignore[arg-type]
    with pytest.raises(EndpointError, match="connection refused by the model endpoint") as info:
        await model.chat("hi")
    await model.aclose()
    assert url not in str(info.value) and info.value.detail and url in info.value.detail


async def test_the_give_up_line_counts_one_attempt_in_the_singular() -> None:
    """max_retries = 0: one attempt, "gave up after 1 attempt" (was "1 attempts"); two read in the plural."""
    url = f"http://127.0.0.1:{free_port()}"
    for retries, words in ((0, "(gave up after 1 attempt)"), (1, "(gave up after 2 attempts)")):
        async with build_model(spec_for(url, max_retries=retries)) as model:  # type: ignore[arg-type]
            with pytest.raises(EndpointError) as info:
                await model.chat("hi")
        assert info.value.message.endswith(words), info.value.message


async def test_a_model_used_as_a_context_closes_its_session_when_a_call_fails() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    async with build_model(spec_for(url, max_retries=0)) as model:  # type: ignore[arg-type]
        with pytest.raises(EndpointError):
            await model.chat("hi")
        session = model.backend._session  # type: ignore[attr-defined]
        assert session is not None and not session.closed
    assert session.closed


async def test_timeout_per_call() -> None:
    fake = FakeServer(default=Scripted(openai_reply("slow"), hang=True))
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


def test_retry_after_forms() -> None:
    from datetime import UTC, datetime, timedelta
    from email.utils import format_datetime

    from psychoalign.models.openai_compat import parse_retry_after

    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25  # OpenAI's finer header wins
    assert parse_retry_after({"retry-after": "-5"}) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "nan"}) is None
    assert parse_retry_after({}) is None
    later = format_datetime(datetime.now(UTC) + timedelta(seconds=30), usegmt=True)
    assert 25 <= (parse_retry_after({"retry-after": later}) or 0) <= 30  # an HTTP date (RFC 9110)
    past = format_datetime(datetime.now(UTC) - timedelta(seconds=30), usegmt=True)
    assert parse_retry_after({"retry-after": past}) == 0.0


async def test_retry_after_ms_is_honoured_on_429() -> None:
    fake = FakeServer(
        queue=[Scripted({"error": "slow down"}, status=429, headers={"retry-after-ms": "1"})],
        default=Scripted(openai_reply("ok")),
    )
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url, max_retries=1))  # type: ignore[arg-type]
        result = await model.chat("hi")
        await model.aclose()
    assert result.text == "ok" and result.attempts == 2


@pytest.mark.parametrize(
    "body",
    [
        {"choices": []},
        {"choices": [{"message": "not an object"}]},
        {"choices": [{"message": {"content": {"nested": 1}}}]},
        {"choices": [{"message": {"content": "x"}}], "usage": {"prompt_tokens": "many"}},
    ],
)
async def test_malformed_completion_is_one_line_endpoint_error(body: dict[str, object]) -> None:
    fake = FakeServer(default=Scripted(body))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url, max_retries=0))  # type: ignore[arg-type]
        with pytest.raises(EndpointError, match="not a chat completion") as info:
            await model.chat("hi")
        await model.aclose()
    assert "\n" not in str(info.value)


async def test_hostile_finish_reason_is_dropped_not_a_crash() -> None:
    reply = openai_reply("fine")
    reply["choices"][0]["finish_reason"] = {"why": ["not", "a", "string"]}  # type: ignore[index]
    fake = FakeServer(default=Scripted(reply))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url))  # type: ignore[arg-type]
        result = await model.chat("hi")
        await model.aclose()
    assert result.text == "fine"


async def test_error_body_is_cut_to_one_line() -> None:
    fake = FakeServer(default=Scripted({"error": {"message": "bad\nmodel\n" + "x" * 5000}}, status=404))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url))  # type: ignore[arg-type]
        with pytest.raises(EndpointError, match="HTTP 404") as info:
            await model.chat("hi")
        await model.aclose()
    assert "\n" not in info.value.message and len(info.value.message) < 450


async def test_proxy_from_environment_and_no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """HTTP_PROXY is honoured (the request goes to the proxy in absolute form), NO_PROXY bypasses it."""
    proxy = FakeServer(default=Scripted(openai_reply("via proxy")))
    with fake_endpoint(PATH, proxy):
        monkeypatch.setenv("HTTP_PROXY", proxy.url)
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        model = build_model(spec_for("http://model.invalid"))  # type: ignore[arg-type]
        result = await model.chat("hi")
        await model.aclose()
        assert result.text == "via proxy" and len(proxy.requests) == 1
        monkeypatch.setenv("NO_PROXY", "model.invalid")
        model = build_model(spec_for("http://model.invalid", max_retries=0))  # type: ignore[arg-type]
        with pytest.raises(EndpointError, match="cannot resolve the model endpoint's host name"):
            await model.chat("hi")  # not proxied: the name does not resolve
        await model.aclose()
    assert len(proxy.requests) == 1


def test_one_backend_across_event_loops() -> None:
    """A model built once and used by two asyncio.run calls (a CLI, a notebook) keeps working."""
    fake = FakeServer(default=Scripted(openai_reply("again")))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url))  # type: ignore[arg-type]
        first = asyncio.run(model.chat("one"))
        second = asyncio.run(model.chat("two"))
        asyncio.run(model.aclose())
    assert first.text == second.text == "again" and len(fake.requests) == 2


async def test_a_reply_over_the_size_bound_is_refused_not_buffered(monkeypatch: pytest.MonkeyPatch) -> None:
    from psychoalign.models import openai_compat

    monkeypatch.setattr(openai_compat, "MAX_REPLY_BYTES", 2048)  # the bound is 8 MB; the mechanism is the same
    fake = FakeServer(queue=[Scripted(openai_reply("x" * 4000))], default=Scripted(openai_reply("short")))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url, max_retries=3))  # type: ignore[arg-type]
        with pytest.raises(EndpointError) as info:
            await model.chat("hi")
        assert (await model.chat("again")).text == "short"  # a reply under the bound is read as before
        await model.aclose()
    assert str(info.value).startswith("openai:fake-model: model endpoint sent a reply over ")
    assert "xxxx" not in str(info.value) and "127.0.0.1" not in str(info.value)
    assert info.value.detail is not None and "more than 2048 bytes" in info.value.detail
    assert len(fake.requests) == 2  # refused, not retried


async def test_rate_limiting_that_outlasts_the_retries_says_so() -> None:
    fake = FakeServer(default=Scripted({"error": "slow down"}, status=429, headers={"retry-after": "0"}))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url, max_retries=1))  # type: ignore[arg-type]
        with pytest.raises(EndpointError) as info:
            await model.chat("hi")
        await model.aclose()
    message = str(info.value)
    assert "HTTP 429 (gave up after 2 attempts)" in message and "limiting your request rate" in message
    assert "up and reachable" not in message


async def test_a_password_in_base_url_is_kept_out_of_errors() -> None:
    """With an API key too, aiohttp refused the request with a ValueError (an internal error at
    the CLI): now a one-line configuration error that does not echo the URL. Without a key the
    endpoint's basic auth works, and the password never reaches the error's internal detail."""
    from psychoalign.errors import ConfigError

    fake = FakeServer(default=Scripted({"error": "down"}, status=500))
    with fake_endpoint(PATH, fake):
        authed = fake.url.replace("http://", "http://admin:hunter2secret@")
        with pytest.raises(ConfigError) as info:
            build_model(spec_for(authed, api_key="sk-test-0123456789"))  # type: ignore[arg-type]
        assert "hunter2secret" not in str(info.value) and "user:password@" in str(info.value)
        model = build_model(spec_for(authed, max_retries=0))  # type: ignore[arg-type]
        with pytest.raises(EndpointError) as failed:
            await model.chat("hi")
        await model.aclose()
    assert fake.headers[-1]["authorization"].startswith("Basic ")
    assert "hunter2secret" not in str(failed.value) and "hunter2secret" not in (failed.value.detail or "")
    assert "[redacted]@127.0.0.1" in (failed.value.detail or "")


async def test_a_long_reply_under_the_bound_is_read_whole() -> None:
    """3 MB arrive in many chunks: all of them are read (a single bounded read returned only
    what was buffered, and the cut JSON was 'not a chat completion')."""
    fake = FakeServer(default=Scripted(openai_reply("y" * 3_000_000)))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url))  # type: ignore[arg-type]
        result = await model.chat("hi")
        await model.aclose()
    assert result.text == "y" * 3_000_000


@pytest.mark.parametrize(
    ("message", "finish_reason", "says", "fix"),
    [
        ({"role": "assistant", "content": ""}, "stop", "finish_reason 'stop'", "try another model"),
        ({"role": "assistant", "content": None}, "length", "max_tokens ran out", "raise max_tokens"),
        (
            {"role": "assistant", "content": "  \n", "reasoning_content": "Let me think..."},
            "length",
            "spent it reasoning",
            "turn the model's thinking off",
        ),
    ],
)
async def test_an_empty_completion_is_an_error_not_an_answer(
    message: dict[str, object], finish_reason: str, says: str, fix: str
) -> None:
    """An empty completion would be scored as a refusal and pass every gate as harmless: it fails,
    once (the same request gets the same empty reply), plain or structured, naming why and the fix."""
    reply = openai_reply("x")
    reply["choices"][0].update(message=message, finish_reason=finish_reason)  # type: ignore[index]
    for output in (None, Verdict):
        fake = FakeServer(default=Scripted(reply))
        with fake_endpoint(PATH, fake):
            model = build_model(spec_for(fake.url))  # type: ignore[arg-type]
            with pytest.raises(EndpointError, match="empty completion") as info:
                await model.chat("hi", output=output)
            await model.aclose()
        assert says in info.value.message and fix in (info.value.hint or "")
        assert info.value.message.startswith("openai:fake-model: ") and "\n" not in str(info.value)
        assert len(fake.requests) == 1


@pytest.mark.parametrize(
    ("status", "fix"),
    [(401, "check the API key ($OPENAI_API_KEY"), (404, "check the model name 'fake-model' and that base_url")],
)
async def test_a_refused_request_names_the_setting_to_fix(status: int, fix: str) -> None:
    fake = FakeServer(default=Scripted({"error": {"message": "no"}}, status=status))
    with fake_endpoint(PATH, fake):
        model = build_model(spec_for(fake.url))  # type: ignore[arg-type]
        with pytest.raises(EndpointError, match=f"HTTP {status}") as info:
            await model.chat("hi")
        await model.aclose()
    assert (info.value.hint or "").startswith(fix) and len(fake.requests) == 1
