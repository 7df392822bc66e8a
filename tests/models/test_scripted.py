"""The scripted backend and the ChatModel policy it exercises without any network."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from psychoalign.errors import ConfigError, EndpointError, InputError, ModelError, TransientBackendError
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


BAD_SCRIPTS = {
    "bad-regex": (
        'rules:\n  - match: "(unclosed"\n    reply: hi\n',
        r"script\.yaml:2: rule 1: 'match' is not a valid regular",
    ),
    "no-match": ("rules:\n  - match: a\n    reply: a\n  - reply: hi\n", r"script\.yaml:4: rule 2 has no 'match'"),
    "no-reply": ("rules:\n  - match: a\n", r"script\.yaml:2: rule 1 has no 'reply'"),
    "empty-reply": ("rules:\n  - match: a\n    reply:\n", r"script\.yaml:3: rule 1: 'reply' is empty"),
    "match-not-text": (
        "rules:\n  - match: [a, b]\n    reply: hi\n",
        r"script\.yaml:2: rule 1: 'match' must be a string",
    ),
    "rule-not-mapping": ("rules:\n  - weather\n", r"script\.yaml:2: rule 1 must be a mapping, not a string"),
    "rules-not-list": ("rules: weather\n", r"script\.yaml:1: 'rules' must be a list, not a string"),
    "rule-typo": ("rules:\n  - match: a\n    replies: hi\n", r"script\.yaml:2: rule 1: unknown key 'replies'"),
    "top-typo": ("rules: []\ndefualt: hi\n", r"script\.yaml:2: unknown key 'defualt'"),
    "empty-default": ("rules: []\ndefault:\n", r"script\.yaml:2: 'default' is empty"),
    "empty-list-reply": ("- one\n-\n", r"script\.yaml:2: reply 2 is empty"),
    "invalid-yaml": ("rules:\n  - match: a\n    reply: [unclosed\n", r"script\.yaml:4:1: invalid YAML"),
    "not-a-script": ("weather: sunny\n", r"must hold a list of replies or a 'rules' mapping"),
}


@pytest.mark.parametrize(("text", "message"), BAD_SCRIPTS.values(), ids=BAD_SCRIPTS.keys())
def test_a_bad_script_file_is_one_config_error_naming_file_line_and_fix(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "script.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=message) as err:
        build_model(ModelSpec(backend="scripted", script=str(path)))
    assert str(path) in err.value.message and "\n" not in str(err.value) and err.value.exit_code == 2
    assert err.value.hint  # what to write instead


def test_a_good_rules_file_with_json_replies_still_loads(tmp_path: Path) -> None:
    path = tmp_path / "script.yaml"
    path.write_text('rules:\n  - match: "a\\\\(b"\n    reply: {x: 1}\ndefault: ""\n', encoding="utf-8")
    backend = ScriptedBackend(ModelSpec(backend="scripted", script=str(path)))
    assert [p.pattern for p, _ in backend._rules] == [r"a\(b"] and backend._default == ""


async def test_a_script_list_that_runs_out_names_the_file_and_the_fix(tmp_path: Path) -> None:
    """A persona campaign stopped with "scripted model: ran out of replies after 4": which role's
    script, and how to make it answer every call, went unsaid."""
    path = tmp_path / "attacker.yaml"
    path.write_text("- one\n", encoding="utf-8")
    model = build_model(ModelSpec(backend="scripted", script=str(path)))
    assert (await model.chat("a")).text == "one"
    with pytest.raises(ModelError) as err:
        await model.chat("b")
    assert err.value.message.startswith(f"script {path}: ran out of replies after 1")
    assert "default:" in (err.value.hint or "") and "\n" not in str(err.value)


async def test_a_default_only_script_answers_every_call(tmp_path: Path) -> None:
    """'Else the default' (docs/configuration.md) without rules was refused as not a script."""
    path = tmp_path / "target.yaml"
    path.write_text("default: I cannot say.\n", encoding="utf-8")
    model = build_model(ModelSpec(backend="scripted", script=str(path)))
    assert [(await model.chat(p)).text for p in ("a", "b", "c")] == ["I cannot say."] * 3
