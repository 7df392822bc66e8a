"""The request body of ``/v1/chat/completions`` as an outside conformance run sends it: every
field of every JSON type is either taken or a 400 in OpenAI's error shape naming the field (never
a 500), through the parser and through the official ``openai`` client and LiteLLM; the fields
accepted and ignored are type-checked as OpenAI's API checks them; and what comes back validates
against the ``openai`` package's own response models, whole and streamed (docs/gateway.md)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from psychoalign.config import Settings
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from psychoalign.web.errors import APIError
from psychoalign.web.openai_schema import ChatCompletionRequest, parse_request
from tests.scenario import World, proposals
from tests.webserver import Running, run_app

ANSWER = "Boil the egg for nine minutes."
ASK = [{"role": "user", "content": "How do I boil an egg?"}]
TOOL = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
#: One value of each JSON type (and a few shapes the fields take), sent in every field.
VALUES: list[Any] = [None, True, 0, -1, 1.5, 10**20, "", "auto", [], [1], ["a"], [{}], {}, {"a": 1}, {"type": "text"}]
FIELDS = [
    "model",
    "messages",
    "stream",
    "stream_options",
    "n",
    "user",
    "logprobs",
    "top_logprobs",
    "tools",
    "tool_choice",
    "response_format",
    "modalities",
    "psychoalign",
    "temperature",
    "top_p",
    "presence_penalty",
    "frequency_penalty",
    "seed",
    "max_tokens",
    "max_completion_tokens",
    "stop",
    "logit_bias",
    "metadata",
    "store",
    "service_tier",
    "reasoning_effort",
    "verbosity",
    "parallel_tool_calls",
    "prompt_cache_key",
    "prompt_cache_retention",
    "prompt_cache_options",
    "safety_identifier",
    "moderation",
    "functions",
    "function_call",
    "audio",
    "prediction",
    "web_search_options",
]
MESSAGE_FIELDS = [
    "role",
    "content",
    "name",
    "refusal",
    "tool_calls",
    "tool_call_id",
    "annotations",
    "audio",
    "function_call",
]


def _parse(body: dict[str, Any]) -> ChatCompletionRequest | Exception:
    """The parser's answer: a request, or what it raised (only an APIError passes the test)."""
    try:
        return parse_request(json.dumps(body).encode(), max_body_bytes=1_000_000)
    except Exception as exc:  # anything else is what the server would answer with a 500
        return exc


def _is_openai_400(answer: ChatCompletionRequest | Exception) -> bool:
    if isinstance(answer, ChatCompletionRequest):
        return True
    if not isinstance(answer, APIError):
        return False
    return answer.status == 400 and answer.param is not None and "\n" not in answer.message


def _bodies() -> Iterator[dict[str, Any]]:
    for value in VALUES:
        for name in FIELDS:
            yield {"model": "m", "messages": ASK, name: value}
        for name in MESSAGE_FIELDS:
            for role in ("user", "assistant", "system"):
                message = {"role": role, "content": "hi", name: value}
                history = [message] if role == "user" else [ASK[0], message, ASK[0]]
                yield {"model": "m", "messages": history}
                yield {"model": "m", "messages": history, "tools": [TOOL]}
        yield {"model": "m", "messages": ASK, "tools": [TOOL], "tool_choice": {"type": "function", "function": value}}
        yield {"model": "m", "messages": ASK, "tools": [{"type": "function", "function": {"name": "f", "x": value}}]}
        yield {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": value}]}]}
        yield {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "x": value}]}]}
        part = {"type": "text", "text": "hi", "prompt_cache_breakpoint": value}
        yield {"model": "m", "messages": [{"role": "user", "content": [part]}]}
        yield {"model": "m", "messages": ASK, "logit_bias": {"50256": value}}
        yield {"model": "m", "messages": ASK, "metadata": {"team": value}}
        yield {"model": "m", "messages": ASK, "stream": True, "stream_options": {"include_usage": value}}


def test_every_field_of_every_json_type_is_taken_or_a_400_naming_it() -> None:
    """No value in any field reaches past the parser as anything but a request or a 400 with the
    field in ``param`` (``tool_choice.function`` of another type than an object was a 500)."""
    bodies = list(_bodies())
    answers = [_parse(body) for body in bodies]
    wrong = [
        f"{json.dumps(body)[:120]} -> {a!r:.120}"
        for body, a in zip(bodies, answers, strict=True)
        if not _is_openai_400(a)
    ]
    assert not wrong, wrong[:3]
    refused = sum(isinstance(a, APIError) for a in answers)
    assert 0 < refused < len(answers)  # both kinds of answer were exercised


@pytest.mark.parametrize(
    ("fields", "param", "code"),
    [
        ({"tools": []}, "tools", "empty_array"),  # OpenAI's API: "Invalid 'tools': empty array"
        ({"tools": [], "tool_choice": "auto"}, "tools", "empty_array"),
        ({"functions": []}, "functions", "unsupported_parameter"),
        (
            {"tools": [TOOL], "tool_choice": {"type": "function", "function": "get_time"}},
            "tool_choice",
            "invalid_value",
        ),
        ({"logit_bias": [1]}, "logit_bias", "invalid_type"),
        ({"logit_bias": {"the": 5}}, "logit_bias", "invalid_value"),
        ({"logit_bias": {"50256": 101}}, "logit_bias.50256", "invalid_value"),
        ({"logit_bias": {"50256": "-100"}}, "logit_bias.50256", "invalid_value"),
        ({"metadata": "team=search"}, "metadata", "invalid_type"),
        ({"metadata": {"team": 1}}, "metadata.team", "invalid_type"),
        ({"metadata": {f"k{i}": "v" for i in range(17)}}, "metadata", "invalid_value"),
        ({"metadata": {"team": "x" * 513}}, "metadata.team", "invalid_value"),
        ({"store": "yes"}, "store", "invalid_type"),
        ({"parallel_tool_calls": "false"}, "parallel_tool_calls", "invalid_type"),
        ({"service_tier": 1}, "service_tier", "invalid_type"),
        ({"reasoning_effort": True}, "reasoning_effort", "invalid_type"),
        ({"verbosity": ["low"]}, "verbosity", "invalid_type"),
        ({"prompt_cache_key": 5}, "prompt_cache_key", "invalid_type"),
        ({"safety_identifier": {}}, "safety_identifier", "invalid_type"),
        ({"prompt_cache_retention": 24}, "prompt_cache_retention", "invalid_type"),
        ({"prompt_cache_options": "30m"}, "prompt_cache_options", "invalid_type"),
        # a safety request this server cannot honour as asked: refused, never silently dropped
        ({"moderation": {"model": "omni-moderation-latest"}}, "moderation", "unsupported_parameter"),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "prompt_cache_breakpoint": 1}]}]},
            "messages[0].content[0].prompt_cache_breakpoint",
            "invalid_type",
        ),
        ({"messages": [{"role": "user", "content": "hi", "name": 7}]}, "messages[0].name", "invalid_type"),
        (
            {"messages": [{"role": "user", "content": "hi", "refusal": "no"}]},
            "messages[0].refusal",
            "unknown_parameter",
        ),
        (
            {"messages": [ASK[0], {"role": "assistant", "content": "Hi.", "annotations": "x"}, ASK[0]]},
            "messages[1].annotations",
            "invalid_type",
        ),
        (  # a known OpenAI field (an earlier audio reply's id), not an unrecognized one
            {"messages": [ASK[0], {"role": "assistant", "content": "Hi.", "audio": {"id": "audio_1"}}, ASK[0]]},
            "messages[1].audio",
            "unsupported_parameter",
        ),
        (
            {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {}}]}]},
            "messages[0].content[0].cache_control",
            "unknown_parameter",
        ),
        (
            {
                "messages": [
                    ASK[0],
                    {"role": "assistant", "content": [{"type": "refusal", "refusal": "No.", "text": "No."}]},
                    ASK[0],
                ]
            },
            "messages[1].content[0].text",
            "unknown_parameter",
        ),
    ],
)
def test_the_official_client_gets_openais_400_naming_the_field(
    ai: openai.OpenAI, fields: dict[str, Any], param: str, code: str
) -> None:
    body = {"messages": ASK, **fields}
    with pytest.raises(openai.BadRequestError) as caught:
        ai.chat.completions.create(model="psychoalign", messages=body.pop("messages"), extra_body=body)
    error = caught.value
    assert (error.status_code, error.code, error.param) == (400, code, param), error.body
    assert isinstance(error.body, dict) and set(error.body) == {"message", "type", "param", "code"}
    assert error.body["type"] == "invalid_request_error" and "\n" not in error.body["message"]


#: A value of the shape OpenAI documents for each parameter of the official client's
#: ``chat.completions.create``.
CLIENT_SAMPLES: dict[str, Any] = {
    "audio": {"voice": "alloy", "format": "mp3"},
    "frequency_penalty": 0.5,
    "function_call": "auto",
    "functions": [{"name": "f", "parameters": {"type": "object"}}],
    "logit_bias": {"50256": -100},
    "logprobs": True,
    "max_completion_tokens": 50,
    "max_tokens": 50,
    "messages": ASK,
    "metadata": {"team": "search"},
    "modalities": ["text"],
    "model": "m",
    "moderation": {"model": "omni-moderation-latest", "policy": {"input": {"mode": "block"}}},
    "n": 1,
    "parallel_tool_calls": True,
    "prediction": {"type": "content", "content": "Boil"},
    "presence_penalty": 0.5,
    "prompt_cache_key": "k1",
    "prompt_cache_options": {"mode": "implicit", "ttl": "30m"},
    "prompt_cache_retention": "24h",
    "reasoning_effort": "low",
    "response_format": {"type": "text"},
    "safety_identifier": "hash-1",
    "seed": 7,
    "service_tier": "auto",
    "stop": ["\n\n"],
    "store": False,
    "stream_options": {"include_usage": True, "include_obfuscation": False},
    "temperature": 0.5,
    "tool_choice": "auto",
    "tools": [TOOL],
    "top_logprobs": 2,
    "top_p": 0.9,
    "user": "user-42",
    "verbosity": "low",
    "web_search_options": {},
}


def test_every_parameter_of_the_official_clients_create_is_known_to_the_server() -> None:
    """Each parameter the installed ``openai`` package's ``chat.completions.create`` takes is
    taken, or refused by name for a reason (``unsupported_parameter``, a range), never as an
    unrecognized argument (``prompt_cache_retention``, ``prompt_cache_options`` and
    ``moderation`` were). A parameter a newer client adds fails here until it is decided."""
    from typing import get_type_hints

    from openai.types.chat.completion_create_params import CompletionCreateParamsBase

    taken = sorted(get_type_hints(CompletionCreateParamsBase))
    assert not set(taken) - set(CLIENT_SAMPLES), f"decide how /v1 treats {set(taken) - set(CLIENT_SAMPLES)}"
    unknown = []
    for name in taken:
        body = {"model": "m", "messages": ASK, "stream": name == "stream_options", name: CLIENT_SAMPLES[name]}
        answer = _parse(body)
        assert _is_openai_400(answer), f"{name}: {answer!r:.200}"
        if isinstance(answer, APIError) and (answer.code == "unknown_parameter" or answer.param != name):
            unknown.append(f"{name}: {answer.message}")
    assert not unknown, unknown


def test_a_null_stream_option_is_the_option_left_out() -> None:
    """``null`` for an optional field is the field left out, inside ``stream_options`` too (it was
    a 400 though ``"stream": null`` and ``"stream_options": null`` were taken); a string is still
    refused by name."""
    body = {"model": "m", "messages": ASK, "stream": True}
    taken = _parse({**body, "stream_options": {"include_usage": None, "include_obfuscation": None}})
    assert isinstance(taken, ChatCompletionRequest) and taken.stream_options is not None
    assert not taken.stream_options.include_usage
    refused = _parse({**body, "stream_options": {"include_usage": "yes"}})
    assert isinstance(refused, APIError) and refused.param == "stream_options.include_usage"


def test_a_content_part_refuses_an_unknown_key_as_a_message_does() -> None:
    """A content part's unknown key is named as a message's is; one sent as null is left out."""
    part = {"type": "text", "text": "How do I boil an egg?"}
    answer = _parse({"model": "m", "messages": [ASK[0], {"role": "user", "content": [part, {**part, "detail": 1}]}]})
    assert isinstance(answer, APIError) and (answer.param, answer.code) == (
        "messages[1].content[1].detail",
        "unknown_parameter",
    )
    assert answer.message == "unrecognized field messages[1].content[1].detail: remove it"
    taken = _parse({"model": "m", "messages": [{"role": "user", "content": [{**part, "detail": None}]}]})
    assert isinstance(taken, ChatCompletionRequest) and taken.messages[0].text == part["text"]


#: Commonly sent fields that are accepted: sampling applied or recorded, the rest ignored.
ACCEPTED: dict[str, Any] = {
    "temperature": 0.2,
    "top_p": 0.9,
    "presence_penalty": 0.5,
    "frequency_penalty": -0.5,
    "seed": 7,
    "user": "user-42",
    "n": 1,
    "logprobs": False,
    "logit_bias": {"50256": -100, "1": 2.5},
    "metadata": {"team": "search"},
    "store": False,
    "service_tier": "auto",
    "reasoning_effort": "low",
    "verbosity": "medium",
    "prompt_cache_key": "k1",
    "prompt_cache_retention": "24h",
    "prompt_cache_options": {"mode": "implicit", "ttl": "30m"},
    "safety_identifier": "hash-1",
    "max_completion_tokens": 100,
    "stop": ["\n\n"],
    "modalities": ["text"],
    "messages": [
        {"role": "developer", "content": "Be brief.", "name": "ops"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "How do I boil an egg?", "prompt_cache_breakpoint": {"mode": "explicit"}}
            ],
            "name": "sam",
        },
    ],
}


def test_accepted_fields_answer_in_the_openai_packages_response_shape(ai: openai.OpenAI) -> None:
    """Every accepted field at once: a ``chat.completion`` that validates against the ``openai``
    package's model, with the fields its clients read."""
    body = dict(ACCEPTED)
    raw = ai.chat.completions.with_raw_response.create(
        model="psychoalign", messages=body.pop("messages"), extra_body=body
    )
    completion = ChatCompletion.model_validate(json.loads(raw.http_response.text))
    assert completion.object == "chat.completion" and completion.id.startswith("chatcmpl-")
    assert completion.model == "psychoalign" and completion.created > 0 and completion.system_fingerprint
    (choice,) = completion.choices
    assert (choice.index, choice.finish_reason, choice.message.content) == (0, "stop", ANSWER)
    assert completion.usage is not None and completion.usage.total_tokens == (
        completion.usage.prompt_tokens + completion.usage.completion_tokens
    )


@pytest.mark.parametrize("include_usage", [None, False, True])
def test_every_streamed_chunk_validates_and_the_stream_ends_as_openais(
    served: Running, include_usage: bool | None
) -> None:
    """Each ``data:`` event is a ``chat.completion.chunk`` the ``openai`` package validates; one
    chunk carries ``finish_reason``; with ``include_usage`` every chunk has ``usage: null`` but a
    last one with no choices and the usage; then ``[DONE]``."""
    body: dict[str, Any] = {"model": "psychoalign", "messages": ASK, "stream": True}
    if include_usage is not None:
        body["stream_options"] = {"include_usage": include_usage}
    with httpx.stream("POST", f"{served.url}/v1/chat/completions", json=body, timeout=60) as response:
        assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
        events = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]" and "[DONE]" not in events[:-1]
    chunks = [json.loads(e) for e in events[:-1]]
    parsed = [ChatCompletionChunk.model_validate(c) for c in chunks]
    assert len({c.id for c in parsed}) == 1 and all(c.object == "chat.completion.chunk" for c in parsed)
    finished = [choice.finish_reason for c in parsed for choice in c.choices if choice.finish_reason]
    assert finished == ["stop"]
    assert "".join(choice.delta.content or "" for c in parsed for choice in c.choices) == ANSWER
    if include_usage:
        assert parsed[-1].choices == [] and parsed[-1].usage is not None and parsed[-1].usage.total_tokens > 0
        assert all("usage" in c and c["usage"] is None for c in chunks[:-1])
    else:
        assert all(c.usage is None for c in parsed) and all(c.choices for c in parsed)


@pytest.mark.skipif(importlib.util.find_spec("litellm") is None, reason="the litellm package is not installed")
def test_litellm_reads_the_new_refusals_as_bad_requests(served: Running, monkeypatch: pytest.MonkeyPatch) -> None:
    """LiteLLM forwards ``tools=[]`` and a malformed ``logit_bias`` as they are: both come back
    as ``litellm.BadRequestError`` with our message, and a well-formed request still answers."""
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no download at import
    import litellm

    call: dict[str, Any] = {
        "model": "openai/psychoalign",
        "api_base": f"{served.url}/v1",
        "api_key": "unused-on-loopback",
        "messages": ASK,
        "num_retries": 0,
    }
    assert litellm.completion(**call, seed=3, user="u").choices[0].message.content == ANSWER
    with pytest.raises(litellm.BadRequestError, match="tools is an empty array"):
        litellm.completion(**call, tools=[])
    with pytest.raises(litellm.BadRequestError, match="logit_bias keys must be token ids"):
        litellm.completion(**call, logit_bias={"egg": 5})


@pytest.fixture(scope="module")
def served() -> Iterator[Running]:
    """The app on loopback with a scripted world whose DRIVE always drafts :data:`ANSWER`."""
    world = World([proposals((ANSWER, 0.9))])
    app = create_app(Settings(), store=InMemoryTraceStore(), negotiators={"psychoalign": world.negotiator()})
    with run_app(app) as running:
        yield running


@pytest.fixture
def ai(served: Running) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{served.url}/v1", api_key="unused-on-loopback", max_retries=0)
