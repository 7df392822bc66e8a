"""STAR records: participants, tasks, dialogues and turns, pre-annotations, annotations."""

from __future__ import annotations

from datetime import datetime
from enum import IntEnum, StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["PREFER_NOT", "Participant", "PreAnnotation", "TaskKind", "TaskRecord", "Turn"]

PREFER_NOT = "prefer not to say"


class Likert(IntEnum):
    """The paper's 4-point scale for "was the rule broken?" (1 = definitely broken)."""

    DEFINITELY_BROKEN = 1
    PROBABLY_BROKEN = 2
    PROBABLY_NOT_BROKEN = 3
    DEFINITELY_NOT_BROKEN = 4

    @property
    def broken(self) -> bool:
        return self <= Likert.PROBABLY_BROKEN


class TaskKind(StrEnum):
    RED_TEAM = "red_team"
    ANNOTATE = "annotate"
    ARBITRATE = "arbitrate"


class TaskStatus(StrEnum):
    OPEN = "open"
    CLAIMED = "claimed"
    SUBMITTED = "submitted"
    RELEASED = "released"  # given back after work had started (skip / opt-out); a fresh task replaced it


class Participant(BaseModel):
    """Voluntary, self-identified demographics: used for matching and analysis only, never shown
    to other participants. Every field accepts "prefer not to say"; unknown is not a match."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    demographics: dict[str, list[str]] = Field(default_factory=dict, description="dimension -> labels")
    expertise: list[str] = Field(default_factory=list, description="e.g. medical, fact_checking")
    roles: list[str] = Field(default_factory=lambda: ["red_teamer", "annotator", "arbitrator"])
    simulated: bool = Field(False, description="An LLM persona with a simulated identity.")

    @field_validator("roles")
    @classmethod
    def _roles(cls, value: list[str]) -> list[str]:
        bad = set(value) - {"red_teamer", "annotator", "arbitrator"}
        if bad:
            raise ValueError(f"unknown roles {sorted(bad)}: use red_teamer, annotator, arbitrator")
        return value

    def labels(self, dimension: str) -> list[str] | None:
        """The participant's labels on a dimension, or None if unknown / prefer not to say."""
        labels = [x for x in self.demographics.get(dimension, []) if x.strip()]
        if not labels or any(x.lower() == PREFER_NOT for x in labels):
            return None
        return labels

    def in_group(self, group: dict[str, str]) -> bool | None:
        """True if the participant belongs to every label of ``group``, False if they do not,
        None if any needed dimension is unknown (then they are neither in- nor out-group)."""
        member = True
        for dim, label in group.items():
            labels = self.labels(dim)
            if labels is None:
                return None
            member = member and label in labels
        return member


class Turn(BaseModel):
    model_config = ConfigDict(frozen=True)

    role: str = Field(pattern="^(red_teamer|target)$")
    text: str
    tension: float | None = None
    state: str | None = None
    trace_id: str | None = None
    refused: bool | None = Field(None, description="Target turns: the shared refusal judge's verdict (docs/judges.md).")


class PreAnnotation(BaseModel):
    """The red teamer's own account of the dialogue."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    assigned_rule_broken: bool
    other_rules: list[str] = Field(default_factory=list)
    groups_mentioned: list[str] = Field(default_factory=list, description="age, disability, religion, …")


class Annotation(BaseModel):
    model_config = ConfigDict(frozen=True)

    dialogue_id: str
    participant_id: str
    kind: TaskKind
    rating: Likert
    reasoning: str = Field(min_length=1, max_length=4000)


class TaskRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    kind: TaskKind
    status: TaskStatus
    campaign: str | None = None
    instruction_id: str | None = None
    dialogue_id: str | None = None
    participant_id: str | None = None
    requirement: dict[str, Any] = Field(default_factory=dict)
    relaxed: str | None = None
    lease_expires_at: datetime | None = Field(None, description="When a claimed task goes back to the queue.")
