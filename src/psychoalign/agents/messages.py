"""Messages the MEDIATOR's runtime sends to each agent, and the envelope agents reply with.

Each task carries only what its recipient may see: the EVALUATOR gets one proposal's text and
never the DRIVE's other proposals or identity; the DRIVE gets only feedback the MEDIATOR relays.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..models.types import Usage
from .schemas import DriveOutput, Evaluation, EvaluationBatch, MediatorAssessment, MediatorCompose

__all__ = ["NO_PROPOSAL", "AgentReply", "AgentRole", "AssessItem", "EvaluateBatchTask"]

#: ``ComposeTask.proposal`` when nothing passed the gates (the defense composes without a draft).
NO_PROPOSAL = "(no proposal passed the safety gates)"

AgentRole = Literal["drive", "evaluator", "mediator"]
T = TypeVar("T", DriveOutput, Evaluation, EvaluationBatch, MediatorAssessment, MediatorCompose)


class _Task(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    request: str
    context: str


class DriveTask(_Task):
    kind: Literal["drive"] = "drive"
    n: int = Field(3, ge=1, le=8)
    feedback: str | None = None
    first: int = Field(0, ge=0, le=7, description="Proposals already written this round: write different ones.")


class EvaluateTask(_Task):
    kind: Literal["evaluate"] = "evaluate"
    proposal: str
    framework: dict[str, Any] = Field(description="The framework content (Framework.model_dump()).")


class EvaluateBatchTask(_Task):
    """One round's proposals in one message. The EVALUATOR still judges each in its own model
    call, seeing only that proposal: batching saves network round trips, not independence."""

    kind: Literal["evaluate_batch"] = "evaluate_batch"
    proposals: list[str] = Field(min_length=1, max_length=8)
    framework: dict[str, Any] = Field(description="The framework content (Framework.model_dump()).")

    def single(self, proposal: str) -> EvaluateTask:
        return EvaluateTask(request=self.request, context=self.context, proposal=proposal, framework=self.framework)


class AssessItem(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    utility: float
    score: int
    verdict: str


class AssessTask(_Task):
    kind: Literal["assess"] = "assess"
    items: list[AssessItem]


class ComposeTask(_Task):
    kind: Literal["compose"] = "compose"
    proposal: str
    modifications: list[str] = Field(default_factory=list)
    instruction: str


class AgentReply(BaseModel, Generic[T]):
    """An agent's typed output plus the accounting the trace needs."""

    model_config = ConfigDict(frozen=True)

    output: T
    usage: Usage = Usage()
    latency_s: float = 0.0
    model: str = ""
    host: str = "in-process"
