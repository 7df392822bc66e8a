"""``response_format`` on /v1: the request shape and the schema are validated (400 naming the
field); the negotiated final text must be a JSON object (json_object) or validate against the
schema (json_schema), else the answer is a structured-outputs refusal (``content`` null,
``refusal`` set; ``finish_reason`` ``"stop"`` as OpenAI's refusals, ``"content_filter"`` for a
gate refusal, ``"length"`` for JSON cut at ``max_tokens``), plain and streamed, through the
official ``openai`` client."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from pydantic import BaseModel

from psychoalign.config import Settings
from psychoalign.traces import InMemoryTraceStore
from psychoalign.web import create_app
from psychoalign.web.errors import APIError
from psychoalign.web.openai_reply import FORMAT_REFUSAL, format_problem
from psychoalign.web.openai_schema import ResponseFormat, parse_request
from tests.scenario import APPROVE, World, evaluation, proposals


class Egg(BaseModel):
    minutes: int
    method: str


VALID = json.dumps({"minutes": 9, "method": "boil"})
WRONG_SHAPE = json.dumps({"minutes": "nine"})  # JSON, but not an Egg
PROSE = "Boil the egg for nine minutes."
CANARY = "CANARY-5e1d"
EGG_SCHEMA = {
    "type": "object",
    "properties": {"minutes": {"type": "integer"}, "method": {"type": "string"}},
    "required": ["minutes", "method"],
    "additionalProperties": False,
}
JSON_SCHEMA: Any = {"type": "json_schema", "json_schema": {"name": "egg", "schema": EGG_SCHEMA, "strict": True}}
JSON_OBJECT: Any = {"type": "json_object"}
ASK: Any = [{"role": "user", "content": "How do I cook an egg? Answer in JSON."}]


def _body(response_format: Any) -> bytes:
    return json.dumps({"model": "m", "messages": ASK, "response_format": response_format}).encode()


@pytest.mark.parametrize(
    ("fmt", "param", "code", "says"),
    [
        ("json", "response_format", "invalid_type", "must be an object"),
        ({"type": "xml"}, "response_format.type", "invalid_value", "'text', 'json_object' or 'json_schema'"),
        ({"type": "json_object", "schema": {}}, "response_format.schema", "unknown_parameter", "remove it"),
        ({"type": "json_schema"}, "response_format.json_schema", "missing_required_parameter", "is required"),
        ({"type": "json_schema", "json_schema": []}, "response_format.json_schema", "invalid_type", "is required"),
        (
            {"type": "json_schema", "json_schema": {"schema": EGG_SCHEMA}},
            "response_format.json_schema.name",
            "invalid_value",
            "1-64 characters",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "a b", "schema": EGG_SCHEMA}},
            "response_format.json_schema.name",
            "invalid_value",
            "1-64 characters",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "egg"}},
            "response_format.json_schema.schema",
            "missing_required_parameter",
            "must be a JSON Schema object",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "egg", "schema": {"type": "objekt"}}},
            "response_format.json_schema.schema",
            "invalid_value",
            "not a valid JSON Schema at type",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "egg", "schema": {"required": "minutes"}}},
            "response_format.json_schema.schema",
            "invalid_value",
            "not a valid JSON Schema at required",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "egg", "schema": {"type": "string", "pattern": "("}}},
            "response_format.json_schema.schema",
            "invalid_value",
            "not a valid JSON Schema at pattern",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "egg", "schema": {"$schema": 5}}},
            "response_format.json_schema.schema.$schema",
            "invalid_value",
            "not a JSON Schema dialect this server knows",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "egg", "schema": {"$schema": {}}}},
            "response_format.json_schema.schema.$schema",
            "invalid_value",
            "not a JSON Schema dialect this server knows",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "egg", "schema": {"$schema": "https://example.invalid/s"}}},
            "response_format.json_schema.schema.$schema",
            "invalid_value",
            "not a JSON Schema dialect this server knows",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "egg", "schema": EGG_SCHEMA, "strict": "yes"}},
            "response_format.json_schema.strict",
            "invalid_type",
            "JSON boolean",
        ),
        (
            {"type": "json_schema", "json_schema": {"name": "egg", "schema": EGG_SCHEMA, "extra": 1}},
            "response_format.json_schema.extra",
            "unknown_parameter",
            "remove it",
        ),
    ],
)
def test_a_bad_response_format_is_a_400_naming_the_field(fmt: Any, param: str, code: str, says: str) -> None:
    with pytest.raises(APIError) as caught:
        parse_request(_body(fmt), max_body_bytes=100_000)
    err = caught.value
    assert (err.status, err.param, err.code) == (400, param, code)
    assert says in err.message and "\n" not in err.message


def test_the_three_formats_are_accepted() -> None:
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", **EGG_SCHEMA}
    seven = {"type": "json_schema", "json_schema": {"name": "egg", "schema": draft7}}
    assert parse_request(_body(seven), max_body_bytes=100_000).response_format is not None
    assert parse_request(_body({"type": "text"}), max_body_bytes=100_000).response_format is not None
    assert parse_request(_body(JSON_OBJECT), max_body_bytes=100_000).response_format.type == "json_object"  # type: ignore[union-attr]
    fmt = parse_request(_body(JSON_SCHEMA), max_body_bytes=100_000).response_format
    assert fmt is not None and (fmt.type, fmt.name, fmt.schema_, fmt.strict) == ("json_schema", "egg", EGG_SCHEMA, True)


def test_an_answer_with_nan_or_infinity_is_not_json() -> None:
    """Python's parser reads ``NaN``; the client's (RFC 8259) does not: such an answer would reach
    it as content it cannot parse, so it is refused as any text that is not JSON is."""
    number = ResponseFormat(type="json_schema", name="n", schema={"type": "number"})
    assert (format_problem("NaN", number), format_problem("1.5", number)) == ("not_json", None)
    obj = ResponseFormat(type="json_object")
    assert format_problem('{"dose": Infinity}', obj) == "not_json"


def test_a_schema_that_cannot_be_applied_fails_closed() -> None:
    """A ``$ref`` to another document is never fetched: the answer is withheld."""
    remote = ResponseFormat(type="json_schema", name="r", schema={"$ref": "https://example.invalid/egg.json"})
    assert format_problem(VALID, remote) == "schema_error"
    local = ResponseFormat(type="json_schema", name="l", schema={"$defs": {"egg": EGG_SCHEMA}, "$ref": "#/$defs/egg"})
    assert (format_problem(VALID, local), format_problem(WRONG_SHAPE, local)) == (None, "schema_mismatch")


def _veto_canary(text: str) -> dict[str, Any]:
    if CANARY in text:
        return evaluation(2, "VETOED", hits=[("U1-mass-harm", "universal")], harmful_intent=True, legitimate_need=False)
    return APPROVE


def _world(final: str) -> World:
    # The MEDIATOR passes the DRIVE's proposal through unchanged: the final text is ``final``.
    return World([proposals((final, 0.9))], compose=lambda proposal, instruction: proposal)


@pytest.fixture
async def ai() -> AsyncIterator[tuple[openai.AsyncOpenAI, InMemoryTraceStore]]:
    store = InMemoryTraceStore()
    worlds = {
        "valid": _world(VALID),
        "wrong-shape": _world(WRONG_SHAPE),
        "prose": _world(PROSE),
        "array": _world("[1, 2]"),
        "deep": _world("[" * 500 + "]" * 500),
        "harmful": World([proposals((f"{CANARY} synthesis", 0.95))], judge=_veto_canary),
    }
    settings = Settings.model_validate({"deployments": {name: {} for name in worlds}})
    app = create_app(settings, store=store, negotiators={n: w.negotiator(store) for n, w in worlds.items()})
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
            yield (
                openai.AsyncOpenAI(base_url="http://127.0.0.1/v1", api_key="unused", http_client=http, max_retries=0),
                store,
            )


async def test_a_valid_answer_is_delivered_and_the_drive_was_asked_for_the_schema(
    ai: tuple[openai.AsyncOpenAI, InMemoryTraceStore],
) -> None:
    client, store = ai
    completion = await client.chat.completions.create(model="valid", messages=ASK, response_format=JSON_SCHEMA)
    choice = completion.choices[0]
    assert (choice.message.content, choice.message.refusal, choice.finish_reason) == (VALID, None, "stop")
    assert completion.model_extra is not None
    assert completion.model_extra["psychoalign"]["response_format"] == {
        "type": "json_schema",
        "valid": True,
        "problem": None,
    }
    trace = await store.get(completion.model_extra["psychoalign"]["trace_id"])
    assert trace is not None
    assert "validates against the JSON Schema 'egg'" in trace.context and '"minutes"' in trace.context
    assert trace.metadata["response_format"] == "json_schema"


async def test_parse_with_a_pydantic_model_gets_the_parsed_object(
    ai: tuple[openai.AsyncOpenAI, InMemoryTraceStore],
) -> None:
    client, _ = ai
    parsed = await client.chat.completions.parse(model="valid", messages=ASK, response_format=Egg)
    assert parsed.choices[0].message.parsed == Egg(minutes=9, method="boil")


async def test_parse_of_an_answer_that_does_not_fit_is_a_refusal_as_openais(
    ai: tuple[openai.AsyncOpenAI, InMemoryTraceStore],
) -> None:
    """The client's ``parse`` reads a structured-outputs refusal as it reads OpenAI's (``parsed``
    None, ``refusal`` set); a gate refusal is its content-filter error."""
    client, _ = ai
    refused = await client.chat.completions.parse(model="wrong-shape", messages=ASK, response_format=Egg)
    message = refused.choices[0].message
    assert (message.parsed, message.content, message.refusal) == (None, None, FORMAT_REFUSAL)
    assert refused.choices[0].finish_reason == "stop"
    with pytest.raises(openai.ContentFilterFinishReasonError):
        await client.chat.completions.parse(model="harmful", messages=ASK, response_format=Egg)


@pytest.mark.parametrize(
    ("model", "fmt", "problem"),
    [
        ("wrong-shape", JSON_SCHEMA, "schema_mismatch"),
        ("prose", JSON_SCHEMA, "not_json"),
        ("prose", JSON_OBJECT, "not_json"),
        ("array", JSON_OBJECT, "not_object"),
        ("deep", JSON_OBJECT, "not_json"),  # over jsonguard's depth bound: refused before parsing
    ],
)
async def test_an_answer_that_does_not_fit_is_a_refusal_in_the_structured_outputs_shape(
    ai: tuple[openai.AsyncOpenAI, InMemoryTraceStore], model: str, fmt: Any, problem: str
) -> None:
    client, _ = ai
    completion = await client.chat.completions.create(model=model, messages=ASK, response_format=fmt)
    choice = completion.choices[0]
    assert (choice.message.content, choice.message.refusal) == (None, FORMAT_REFUSAL)
    assert choice.finish_reason == "stop"
    assert completion.model_extra is not None
    assert completion.model_extra["psychoalign"]["response_format"]["problem"] == problem


async def test_json_object_accepts_an_object(ai: tuple[openai.AsyncOpenAI, InMemoryTraceStore]) -> None:
    client, _ = ai
    completion = await client.chat.completions.create(model="wrong-shape", messages=ASK, response_format=JSON_OBJECT)
    assert (completion.choices[0].message.content, completion.choices[0].finish_reason) == (WRONG_SHAPE, "stop")


async def test_json_object_without_the_word_json_in_the_messages_is_openais_400(
    ai: tuple[openai.AsyncOpenAI, InMemoryTraceStore],
) -> None:
    """OpenAI's API refuses JSON mode unless some message says "json" (any case, any role): 400,
    param ``messages``, code null, before anything runs; ``json_schema`` has no such rule."""
    client, store = ai
    plain = [{"role": "user", "content": "How do I cook an egg?"}]
    for stream in (False, True):
        with pytest.raises(openai.BadRequestError) as caught:
            await client.chat.completions.create(
                model="valid", messages=plain, response_format=JSON_OBJECT, stream=stream
            )
        error = caught.value
        assert (error.status_code, error.param, error.code) == (400, "messages", None)
        assert "must contain the word 'json'" in error.message
    assert [t async for t in store.iter_all()] == []  # refused before any negotiation
    system = [{"role": "system", "content": "Reply with a Json object."}, *plain]
    completion = await client.chat.completions.create(model="valid", messages=system, response_format=JSON_OBJECT)
    assert completion.choices[0].message.content == VALID
    schema = await client.chat.completions.create(model="valid", messages=plain, response_format=JSON_SCHEMA)
    assert schema.choices[0].message.content == VALID


async def test_a_gate_refusal_under_a_json_format_has_null_content(
    ai: tuple[openai.AsyncOpenAI, InMemoryTraceStore],
) -> None:
    client, _ = ai
    completion = await client.chat.completions.create(model="harmful", messages=ASK, response_format=JSON_SCHEMA)
    message = completion.choices[0].message
    assert message.content is None and message.refusal and CANARY not in message.refusal
    assert completion.choices[0].finish_reason == "content_filter"
    plain = await client.chat.completions.create(model="harmful", messages=ASK)  # without: content kept
    assert plain.choices[0].message.content == plain.choices[0].message.refusal


async def _stream(client: openai.AsyncOpenAI, model: str, fmt: Any) -> tuple[str | None, str | None, str | None]:
    stream = await client.chat.completions.create(model=model, messages=ASK, response_format=fmt, stream=True)
    content: str | None = None
    refusal: str | None = None
    finish = None
    async for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content is not None:
                content = (content or "") + choice.delta.content
            if choice.delta.refusal is not None:
                refusal = (refusal or "") + choice.delta.refusal
            finish = choice.finish_reason or finish
    return content, refusal, finish


async def test_streams_are_validated_before_any_text_is_released(
    ai: tuple[openai.AsyncOpenAI, InMemoryTraceStore],
) -> None:
    client, _ = ai
    assert await _stream(client, "valid", JSON_SCHEMA) == (VALID, None, "stop")
    assert await _stream(client, "wrong-shape", JSON_SCHEMA) == (None, FORMAT_REFUSAL, "stop")
    assert await _stream(client, "prose", JSON_OBJECT) == (None, FORMAT_REFUSAL, "stop")


async def test_the_streaming_helper_parses_and_refuses(ai: tuple[openai.AsyncOpenAI, InMemoryTraceStore]) -> None:
    client, _ = ai
    async with client.chat.completions.stream(model="valid", messages=ASK, response_format=Egg) as stream:
        final = await stream.get_final_completion()
    assert final.choices[0].message.parsed == Egg(minutes=9, method="boil")
    async with client.chat.completions.stream(model="prose", messages=ASK, response_format=Egg) as stream:
        refused = await stream.get_final_completion()
    assert (refused.choices[0].message.parsed, refused.choices[0].message.refusal) == (None, FORMAT_REFUSAL)
    with pytest.raises(openai.ContentFilterFinishReasonError):
        async with client.chat.completions.stream(model="harmful", messages=ASK, response_format=Egg) as stream:
            await stream.get_final_completion()


async def test_a_cut_by_max_tokens_that_breaks_the_json_is_refused(
    ai: tuple[openai.AsyncOpenAI, InMemoryTraceStore],
) -> None:
    client, _ = ai
    completion = await client.chat.completions.create(
        model="valid", messages=ASK, response_format=JSON_OBJECT, max_tokens=2
    )
    assert (completion.choices[0].message.content, completion.choices[0].finish_reason) == (None, "length")
    with pytest.raises(openai.LengthFinishReasonError):  # as the client raises for OpenAI's cut JSON
        await client.chat.completions.parse(model="valid", messages=ASK, response_format=Egg, max_tokens=2)
