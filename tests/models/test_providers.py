"""Anthropic and Gemini backends through their official SDKs, against loopback fakes of their wire APIs."""

from __future__ import annotations

import json
import sys

import pytest
from pydantic import BaseModel, Field

from psychoalign.errors import BackendUnavailableError, EndpointError, TransientBackendError
from psychoalign.models import build_model
from psychoalign.models.base import SdkBackend
from psychoalign.models.registry import backend_class
from tests.helpers import fast_spec
from tests.loopback import FakeServer, Scripted, anthropic_reply, fake_endpoint, gemini_reply


class Score(BaseModel):
    score: int = Field(ge=0, le=100)
    reason: str


async def test_anthropic_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    fake = FakeServer(default=Scripted(anthropic_reply(text="bonjour")))
    with fake_endpoint("/v1/messages", fake):
        model = build_model(fast_spec(backend="anthropic", model="claude-x", base_url=fake.url))
        result = await model.chat("hello", system="answer in French")
        await model.aclose()
    assert result.text == "bonjour"
    assert (result.usage.prompt_tokens, result.usage.completion_tokens) == (11, 5)
    sent = fake.requests[0]
    assert sent["system"] == "answer in French"
    assert sent["messages"] == [{"role": "user", "content": "hello"}]
    sent_key = fake.headers[0].get("x-api-key") or fake.headers[0].get("authorization", "")
    assert sent_key.endswith("sk-test")


async def test_anthropic_structured_output_native_format(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    fake = FakeServer(default=Scripted(anthropic_reply(text=json.dumps({"score": 70, "reason": "fine"}))))
    with fake_endpoint("/v1/messages", fake):
        model = build_model(fast_spec(backend="anthropic", base_url=fake.url))
        result = await model.chat("rate", output=Score, schema_name="reply")
        await model.aclose()
    assert result.data == Score(score=70, reason="fine")
    sent = fake.requests[0]
    assert sent["output_config"]["format"]["type"] == "json_schema"
    assert sent["output_config"]["format"]["schema"]["properties"]["score"]["maximum"] == 100


async def test_anthropic_retries_429_and_rejects_bad_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    err = {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}
    fake = FakeServer(queue=[Scripted(err, status=429)], default=Scripted(anthropic_reply(text="ok")))
    with fake_endpoint("/v1/messages", fake):
        model = build_model(fast_spec(backend="anthropic", base_url=fake.url))
        assert (await model.chat("hi")).attempts == 2
        await model.aclose()
    auth = {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}}
    fake = FakeServer(default=Scripted(auth, status=401))
    with fake_endpoint("/v1/messages", fake):
        model = build_model(fast_spec(backend="anthropic", base_url=fake.url))
        with pytest.raises(EndpointError, match="401"):
            await model.chat("hi")
        await model.aclose()
    assert len(fake.requests) == 1


def test_missing_keys_are_reported_with_the_variable_name() -> None:
    with pytest.raises(BackendUnavailableError, match=r"\$ANTHROPIC_API_KEY"):
        build_model(fast_spec(backend="anthropic"))
    with pytest.raises(BackendUnavailableError, match=r"\$GEMINI_API_KEY"):
        build_model(fast_spec(backend="gemini"))
    with pytest.raises(BackendUnavailableError, match=r"\$OPENAI_API_KEY"):
        build_model(fast_spec(backend="openai"))
    with pytest.raises(BackendUnavailableError, match=r"\$MY_KEY"):
        build_model(fast_spec(backend="openai", api_key_env="MY_KEY"))


@pytest.mark.parametrize(("backend", "module"), [("anthropic", "anthropic"), ("gemini", "google.genai")])
def test_a_missing_sdk_names_the_extra_that_installs_it(
    monkeypatch: pytest.MonkeyPatch, backend: str, module: str
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # importing it now raises ImportError
    monkeypatch.setenv("ANTHROPIC_API_KEY", "a-test")
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    hint = f"pip install 'psychoalign[{backend}]'"
    assert backend_class(backend).availability(fast_spec(backend=backend)) == (False, hint)
    with pytest.raises(BackendUnavailableError, match="SDK is not installed") as caught:
        build_model(fast_spec(backend=backend))
    assert caught.value.hint == hint


def test_each_sdk_backend_keeps_its_own_retryable_statuses() -> None:
    anthropic, gemini = backend_class("anthropic"), backend_class("gemini")
    assert issubclass(anthropic, SdkBackend)
    assert issubclass(gemini, SdkBackend)
    assert isinstance(anthropic.http_error(409, "conflict"), TransientBackendError)  # Anthropic: retry a 409
    assert isinstance(gemini.http_error(409, "conflict"), EndpointError)
    for adapter in (anthropic, gemini):
        assert isinstance(adapter.http_error(503, "busy"), TransientBackendError)
        error = adapter.http_error(401, "no")
        assert isinstance(error, EndpointError)
        assert error.hint == "check the API key"


async def test_gemini_text_and_structured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    fake = FakeServer(
        queue=[Scripted(gemini_reply("salut"))],
        default=Scripted(gemini_reply(json.dumps({"score": 12, "reason": "meh"}))),
    )
    with fake_endpoint("/{version}/models/{rest:path}", fake):
        model = build_model(fast_spec(backend="gemini", model="gemini-x", base_url=fake.url))
        text = await model.chat("hello", system="be French")
        structured = await model.chat("rate", output=Score)
        await model.aclose()
    assert text.text == "salut"
    assert (text.usage.prompt_tokens, text.usage.completion_tokens) == (13, 4)
    assert structured.data == Score(score=12, reason="meh")
    plain, constrained = fake.requests
    assert plain["systemInstruction"]["parts"][0]["text"] == "be French"
    cfg = constrained["generationConfig"]
    assert cfg["responseMimeType"] == "application/json"
    assert cfg["responseJsonSchema"]["properties"]["score"]["minimum"] == 0


async def test_gemini_retries_503(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "g-test")
    err = {"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}
    fake = FakeServer(queue=[Scripted(err, status=503)], default=Scripted(gemini_reply("up")))
    with fake_endpoint("/{version}/models/{rest:path}", fake):
        model = build_model(fast_spec(backend="gemini", base_url=fake.url))
        result = await model.chat("hi")
        await model.aclose()
    assert result.text == "up" and result.attempts == 2
