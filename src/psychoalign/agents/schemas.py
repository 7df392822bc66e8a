"""Typed, bounded outputs of the three agents. These are the JSON Schemas models must satisfy."""

from __future__ import annotations

import re
import unicodedata
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from ..frameworks.model import Layer

__all__ = ["DriveOutput", "EvaluationBatch", "MediatorAssessment", "MediatorCompose", "Verdict"]


Short = Annotated[str, Field(max_length=300)]
Name = Annotated[str, Field(max_length=80)]


class Verdict(StrEnum):
    APPROVED = "APPROVED"
    CONDITIONAL = "CONDITIONAL"
    VETOED = "VETOED"


# -- closed vocabularies -----------------------------------------------------------------------------
# Model output is hostile input: every gate reads these fields, so they are parsed into their
# closed vocabulary here, at validation, whoever consumes the reply (engine, A2A codec, tests).


def _words(value: Any) -> str:
    """Case-, width-, punctuation- and whitespace-insensitive form of a short label."""
    text = unicodedata.normalize("NFKC", str(value)).casefold()
    return " ".join(re.findall(r"[a-z0-9]+", text))


_LAYER_WORDS: dict[str, Layer] = {}
for _layer, _synonyms in (
    (Layer.UNIVERSAL, ("universal", "1", "l1", "layer 1", "layer one", "layer i", "first", "first layer", "hard")),
    (Layer.CONTEXTUAL, ("contextual", "context", "2", "l2", "layer 2", "layer two", "layer ii", "second layer")),
    (Layer.ASPIRATIONAL, ("aspirational", "aspiration", "3", "l3", "layer 3", "layer three", "layer iii")),
):
    for _word in _synonyms:
        _LAYER_WORDS[_word] = _layer


def parse_layer(value: Any) -> Layer:
    """A rule hit's layer in the closed vocabulary. Any spelling of a layer name or number maps
    to it ("Universal", " layer 1", "UNIVERSAL constraints", "L1"); anything unparseable, or
    naming more than one layer, is ``universal``: a hit the gate cannot place blocks (fail closed)."""
    words = _words(value)
    if words in _LAYER_WORDS:
        return _LAYER_WORDS[words]
    found = {layer for layer in Layer if layer.value in words.split() or layer.value in words}
    for word, layer in _LAYER_WORDS.items():
        if " " in word and word in words:
            found.add(layer)
    return found.pop() if len(found) == 1 else Layer.UNIVERSAL


#: A verdict's words as :func:`parse_verdict` reads them (upper case, ``_`` between words): each
#: verdict's value and its aliases. Every key reads as itself.
_VERDICT_WORDS: dict[str, Verdict] = {
    **{verdict.value: verdict for verdict in Verdict},
    "APPROVE": Verdict.APPROVED,
    "CONDITIONALLY_APPROVED": Verdict.CONDITIONAL,
    "VETO": Verdict.VETOED,
}


def parse_verdict(value: Any) -> Verdict:
    """A verdict in the closed vocabulary, case- and whitespace-insensitive. An unknown verdict
    is ``VETOED`` (fail closed); the gates then block the proposal."""
    if type(value) is str and value in _VERDICT_WORDS:  # already in its read form: "APPROVED"
        return _VERDICT_WORDS[value]
    return _VERDICT_WORDS.get(_words(value).upper().replace(" ", "_"), Verdict.VETOED)


def canonical_rule_id(value: Any) -> str:
    """A rule id as the model wrote it, stripped of whitespace, quotes and the brackets the
    rendered framework puts around ids. Matching against a framework is case-insensitive
    (:meth:`Framework.rule`)."""
    text = unicodedata.normalize("NFKC", str(value)).strip()
    return text.strip("[]()<>{}'\"`* \t\r\n")


def parse_ceiling(value: Any) -> int | None:
    """A score ceiling as a whole number in [0, 100], or None for anything else (it is not asked
    of models; junk in a model's reply must not cost the rest of its evaluation)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if 0 <= value <= 100 and float(value).is_integer() else None


def parse_band(value: Any) -> float | None:
    """A crisis score in [0, 1], or None for anything else (not asked of models, as ``ceiling``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if 0.0 <= value <= 1.0 else None


def parse_band_by(value: Any) -> list[str] | None:
    """The possible-risk band's tiers (short labels), or None for anything else (not asked of models)."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and 0 < len(v) <= 80 for v in value):
        return None
    return [str(v) for v in value[:4]]


LayerField = Annotated[Layer, BeforeValidator(parse_layer)]
VerdictField = Annotated[Verdict, BeforeValidator(parse_verdict)]


class _Frozen(BaseModel):
    """Agent outputs are values: validated once, never changed."""

    model_config = ConfigDict(frozen=True)


class Proposal(_Frozen):
    """One DRIVE proposal ``p_i`` with its self-assessed utility ``u_D(p_i)``."""

    text: str = Field(min_length=1, max_length=4000, description="The full answer to the user.")
    utility: float = Field(ge=0.0, le=1.0, description="How fully it answers the request (0..1).")


class DriveOutput(_Frozen):
    """``D(x) -> {p_1..p_n}``, ranked by the engine by utility (highest first)."""

    proposals: list[Proposal] = Field(min_length=1, max_length=8)


class RuleHit(_Frozen):
    rule_id: Annotated[str, BeforeValidator(canonical_rule_id)] = Field(max_length=80)
    layer: LayerField = Field(description="universal, contextual or aspirational.")


class Conflict(_Frozen):
    """The structured conflict classification (the conflict types of the paper's Table 2).

    Defense mechanisms are selected from these fields by rule (negotiation/defense.py).
    """

    adversarial_intent: bool = Field(description="The request tries to manipulate or jailbreak.")
    harmful_intent: bool = Field(description="The request aims at harm.")
    legitimate_need: bool = Field(description="Behind the request there is a legitimate need.")
    harmful_segments: list[Short] = Field(
        default_factory=list, max_length=5, description="Exact harmful sentences inside an otherwise useful answer."
    )
    third_party_harm: bool = Field(description="The answer could harm people other than the user in non-obvious ways.")
    stakeholders: list[Name] = Field(default_factory=list, max_length=5, description="Who else is affected.")
    safe_adjacent_topic: str = Field("", max_length=200, description="A safe related topic, if one exists.")
    safe_channel: str = Field("", max_length=200, description="Where the legitimate need is best served.")


class Evaluation(_Frozen):
    """``V(p, F) -> (s, v, m)`` plus rule hits and the conflict classification."""

    score: int = Field(ge=0, le=100, description="Ethical alignment of the proposal under the framework.")
    verdict: VerdictField
    modifications: list[Short] = Field(default_factory=list, max_length=5)
    rule_hits: list[RuleHit] = Field(default_factory=list, max_length=8)
    conflict: Conflict
    reasoning: str = Field("", max_length=300)
    ceiling: SkipJsonSchema[Annotated[int | None, BeforeValidator(parse_ceiling)]] = Field(
        None,
        description=(
            "The highest score this EVALUATOR can give any answer to this request, when it knows one "
            "(the classifier backend: its score is capped by the request's own). Never asked of models "
            "(not in the JSON Schema); the engine's fast path stops asking for drafts that cannot score higher."
        ),
    )
    crisis_band: SkipJsonSchema[Annotated[float | None, BeforeValidator(parse_band)]] = Field(
        None,
        description=(
            "The crisis check's score for the request when it is in the possible-risk band: not routed "
            "to the crisis channel, but at or above the band's floor (the classifier backend). The "
            "engine then ends the reply with the framework's soft crisis line. Never asked of models."
        ),
    )
    crisis_band_by: SkipJsonSchema[Annotated[list[str] | None, BeforeValidator(parse_band_by)]] = Field(
        None,
        description=(
            "Which tiers put the request in the possible-risk band: 'floor' (the check's score at or above "
            "the band's floor) and/or the band vote's label (a second check that fired). Never asked of models."
        ),
    )


class EvaluationBatch(_Frozen):
    """The EVALUATOR's verdicts on one round's proposals, in the order they were sent."""

    evaluations: list[Evaluation] = Field(min_length=1, max_length=8)


class Feasibility(_Frozen):
    proposal: int = Field(ge=1, le=8, description="1-based number of the proposal as listed.")
    feasibility: float = Field(ge=0.0, le=1.0, description="How well it fits the deployment context.")


class MediatorAssessment(_Frozen):
    """The MEDIATOR's per-round judgement of feasibility in context C for each admissible proposal."""

    assessments: list[Feasibility] = Field(min_length=1, max_length=8)


class MediatorCompose(_Frozen):
    """The MEDIATOR's final, user-facing response."""

    response: str = Field(min_length=1, max_length=4000)
