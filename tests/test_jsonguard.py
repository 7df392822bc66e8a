"""Bounds on untrusted JSON, checked before the parser recurses or converts a huge integer."""

from __future__ import annotations

import json
import logging
import re

import pytest

from psychoalign.config import Settings
from psychoalign.jsonguard import (
    MAX_JSON_DEPTH,
    MAX_NUMBER_DIGITS,
    JSONLimitError,
    NonFiniteError,
    check_finite,
    check_json,
    loads_bounded,
)
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
from psychoalign.models.schema import ReplyMismatchError, extract_json
from psychoalign.negotiation import Negotiator
from psychoalign.negotiation.defense import template
from psychoalign.traces import TraceStatus
from tests.scenario import APPROVE, World, proposals

REFUSED = [
    ("[" * 100_000, "nested more than 64 levels deep at character 64"),
    ('{"a":' * 100_000, "nested more than 64 levels deep at character 320"),
    ("[" * 65 + "]" * 65, "nested more than 64 levels deep"),
    ("[" + "1" * 5000 + "]", "a number at character 1 has 5000 digits, over the limit of 100"),
    ('{"seed": -' + "9" * 101 + "}", "has 101 digits"),
    ("]" * 1000 + "[" * 1000, "nested more than 64 levels deep at character 1064"),  # strays do not hide depth
    ('["\u00e9[",' * 70 + "1" + "]" * 70, "nested more than 64 levels deep"),  # brackets in strings are text
]
ACCEPTED = [
    "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH,
    '{"a": "' + "[" * 1000 + '"}',  # brackets inside a string
    '{"n": "' + "9" * 5000 + '"}',  # digits inside a string
    '{"s": "a \\" [[[[ \\\\"}',  # escaped quotes keep the scan inside the string
    "[" + "[]," * 300_000 + "[]]",  # many brackets, shallow
    "[1.5e300, -" + "9" * MAX_NUMBER_DIGITS + "]",
    "",
]


@pytest.mark.parametrize(("text", "message"), REFUSED)
def test_deep_nesting_and_long_numbers_are_refused_naming_where(text: str, message: str) -> None:
    with pytest.raises(JSONLimitError, match=message.replace("[", r"\[")) as caught:
        check_json(text)
    assert "\n" not in str(caught.value)
    with pytest.raises(JSONLimitError):
        check_json(text.encode())


@pytest.mark.parametrize("text", ACCEPTED)
def test_text_within_the_bounds_passes_and_parses_as_json_would(text: str) -> None:
    check_json(text)
    if text:
        assert loads_bounded(text) == json.loads(text)


@pytest.mark.parametrize(
    ("text", "name"), [('{"x": NaN}', "NaN"), ("[1, Infinity]", "Infinity"), ('{"a": {"b": [-Infinity]}}', "-Infinity")]
)
def test_nan_and_infinity_are_not_json_where_it_is_strict(text: str, name: str) -> None:
    """Python's parser takes them; RFC 8259 JSON, protobuf and most clients do not."""
    assert loads_bounded(text) is not None  # lenient by default (a model's reply, a provider's body)
    with pytest.raises(NonFiniteError, match=f"^{re.escape(name)} is not a JSON value"):
        loads_bounded(text, strict=True)
    with pytest.raises(NonFiniteError, match=f"^{re.escape(name)} is not a JSON value"):
        check_finite(text.encode())


@pytest.mark.parametrize("text", ['{"q": "Is NaN or Infinity a number?"}', "{not json NaN", '{"n": 1e308}', ""])
def test_check_finite_passes_text_that_only_mentions_them_and_leaves_bad_json_to_the_parser(text: str) -> None:
    check_finite(text)


def test_bounds_are_parameters() -> None:
    check_json("[[[1]]]", max_depth=3)
    with pytest.raises(JSONLimitError, match="more than 2 levels"):
        check_json("[[[1]]]", max_depth=2)
    with pytest.raises(JSONLimitError, match="over the limit of 3"):
        check_json("[1234]", max_digits=3)


@pytest.mark.parametrize("reply", ["[" * 200_000, '{"proposals": ' + "[" * 200_000, '{"x": ' + "7" * 5000 + "}"])
def test_a_model_reply_beyond_the_bounds_is_a_schema_failure(reply: str) -> None:
    with pytest.raises(ReplyMismatchError, match=r"not usable JSON \((JSON nested|a number)"):
        extract_json(reply)


async def test_a_hostile_reply_fails_the_negotiation_closed_without_a_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A DRIVE whose reply nests 200,000 deep: the negotiation fails closed, the error names the
    schema failure, and nothing is logged with a traceback (a CLI user without --debug sees one line)."""
    models = World([proposals(("unused", 0.9))], judge=lambda _t: APPROVE).models()
    spec = ModelSpec(backend="scripted", model="drive", schema_retries=0, max_retries=0)
    models["drive"] = ChatModel(spec, ScriptedBackend(spec, replies=["[" * 200_000], cycle=True))
    caplog.set_level(logging.DEBUG)
    trace = await Negotiator(Settings(), models=models).negotiate("How do I boil an egg?")
    assert trace.status is TraceStatus.FAILED
    assert trace.response == template("fail_closed")
    assert "nested more than 64 levels deep" in (trace.error or "")
    assert [r.getMessage() for r in caplog.records if r.exc_info] == []
