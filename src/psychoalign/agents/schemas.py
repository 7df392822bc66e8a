"""Typed, bounded outputs of the three agents. These are the JSON Schemas models must satisfy."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Conflict",
    "DriveOutput",
    "Evaluation",
    "Feasibility",
    "MediatorAssessment",
    "MediatorCompose",
    "Proposal",
    "RuleHit",
    "Verdict",
]


Short = Annotated[str, Field(max_length=300)]
Name = Annotated[str, Field(max_length=80)]


class Verdict(StrEnum):
    APPROVED = "APPROVED"
    CONDITIONAL = "CONDITIONAL"
    VETOED = "VETOED"


class Proposal(BaseModel):
    """One DRIVE proposal ``p_i`` with its self-assessed utility ``u_D(p_i)``."""

    model_config = ConfigDict(frozen=True)

    text: str = Field(min_length=1, max_length=4000, description="The full answer to the user.")
    utility: float = Field(ge=0.0, le=1.0, description="How fully it answers the request (0..1).")


class DriveOutput(BaseModel):
    """``D(x) -> {p_1..p_n}``, ranked by the engine by utility (highest first)."""

    model_config = ConfigDict(frozen=True)

    proposals: list[Proposal] = Field(min_length=1, max_length=8)


class RuleHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    rule_id: str = Field(max_length=80)
    layer: str = Field(json_schema_extra={"enum": ["universal", "contextual", "aspirational"]})


class Conflict(BaseModel):
    """The structured conflict classification (the conflict types of the paper's Table 2).

    Defense mechanisms are selected from these fields by rule (negotiation/defense.py).
    """

    model_config = ConfigDict(frozen=True)

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


class Evaluation(BaseModel):
    """``V(p, F) -> (s, v, m)`` plus rule hits and the conflict classification."""

    model_config = ConfigDict(frozen=True)

    score: int = Field(ge=0, le=100, description="Ethical alignment of the proposal under the framework.")
    verdict: Verdict
    modifications: list[Short] = Field(default_factory=list, max_length=5)
    rule_hits: list[RuleHit] = Field(default_factory=list, max_length=8)
    conflict: Conflict
    reasoning: str = Field("", max_length=300)


class Feasibility(BaseModel):
    model_config = ConfigDict(frozen=True)

    proposal: int = Field(ge=1, le=8, description="1-based number of the proposal as listed.")
    feasibility: float = Field(ge=0.0, le=1.0, description="How well it fits the deployment context.")


class MediatorAssessment(BaseModel):
    """The MEDIATOR's per-round judgement of feasibility in context C for each admissible proposal."""

    model_config = ConfigDict(frozen=True)

    assessments: list[Feasibility] = Field(min_length=1, max_length=8)


class MediatorCompose(BaseModel):
    """The MEDIATOR's final, user-facing response."""

    model_config = ConfigDict(frozen=True)

    response: str = Field(min_length=1, max_length=4000)
