"""The scripted backend and the ChatModel policy it exercises without any network."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from psychoalign.errors import EndpointError, InputError, ModelError, TransientBackendError
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend, build_model
from tests.helpers import fast_spec


class Answer(BaseModel):
    answer: str


def scripted(**kw: object) -> ChatModel:
    spec = fast_spec(backend="scripted")
    return ChatModel(spec, ScriptedBackend(spec, **kw))  # type: ignore[arg-type]


async def test_list_replies_in_order_then_exhausted() -> None:
    model = scripted(replies=["one", {"answer": "two"}])
    assert (await model.chat("a")).text == "one"
    assert (await model.chat("b", output=Answer)).data == Answer(answer="two")
    with pytest.raises(ModelError, match="ran out"):
        await model.chat("c")


async def test_function_replies_see_the_request() -> None:
    def fn(request: ChatRequest) -> str:
        return request.messages[-1].content.upper()

    assert (await scripted(fn=fn).chat("shout")).text == "SHOUT"


async def test_rules_file(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text("rules:\n  - match: weather\n    reply: sunny\ndefault: no idea\n")
    model = build_model(ModelSpec(backend="scripted", script=str(path)))
    assert (await model.chat("what's the weather?")).text == "sunny"
    assert (await model.chat("anything else")).text == "no idea"


async def test_transient_failures_are_retried_with_bound() -> None:
    model = scripted(replies=["ok"], fail_first=[TransientBackendError("blip")] * 2)
    assert (await model.chat("x")).attempts == 3
    model = scripted(replies=["ok"], fail_first=[TransientBackendError("blip")] * 9)
    with pytest.raises(EndpointError, match="gave up after 4 attempts"):
        await model.chat("x")


@pytest.mark.parametrize("prompt", ["", "   \n"])
async def test_empty_prompt_rejected(prompt: str) -> None:
    with pytest.raises(InputError, match="empty"):
        await scripted(replies=["x"]).chat(prompt)


async def test_overlong_prompt_rejected() -> None:
    spec = fast_spec(backend="scripted", max_prompt_chars=10)
    model = ChatModel(spec, ScriptedBackend(spec, replies=["x"]))
    with pytest.raises(InputError, match="over the limit of 10"):
        await model.chat("x" * 11)
