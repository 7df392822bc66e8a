"""The negotiation trace: one self-contained, typed record of every decision."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..agents.schemas import Evaluation
from ..frameworks import FrameworkStamp
from ..negotiation.bus import AgentStats
from ..negotiation.defense import DefenseMechanism
from ..negotiation.gates import GateResult
from ..negotiation.params import NegotiationParams
from ..negotiation.tension import SystemState
from ..negotiation.track import CrossTurnRecord

__all__ = [
    "AlignmentContribution",
    "FinalDecision",
    "ProposalRecord",
    "RoundRecord",
    "Trace",
    "TraceStatus",
]


def _now() -> datetime:
    return datetime.now(UTC)


class TraceStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class ProposalRecord(BaseModel):
    """One DRIVE proposal with its evaluation and gate outcome. ``text`` is internal: the CLI
    hides it unless --show-internal."""

    rank: int
    text: str
    utility: float
    evaluation: Evaluation | None = None
    gate: GateResult | None = None
    tension: float | None = None
    feasibility: float | None = None
    objective: float | None = None


class RoundRecord(BaseModel):
    index: int
    proposals: list[ProposalRecord]
    lead: int = Field(description="Index into proposals of the round's lead proposal.")
    tension: float
    admissible: int
    feedback_to_drive: str | None = None
    exit: str | None = Field(None, description="Why the loop stopped here: early_exit, accepted, converged, ceiling.")


class FinalDecision(BaseModel):
    response: str
    chosen_round: int | None = None
    chosen_rank: int | None = None
    u_d: float | None = None
    u_v: float | None = None
    tension: float | None = None
    state: SystemState | None = None
    defense: DefenseMechanism | None = None
    composed_by: str = Field(description="adopted / filtered / mediator / template / fallback")
    final_gate: GateResult | None = None
    fallback: bool = False
    withheld: list[str] = Field(
        default_factory=list, description="EVALUATOR free-text fields dropped by the free-text guard."
    )


class AlignmentContribution(BaseModel):
    """Additive decomposition of the alignment change (see docs/negotiation.md)."""

    baseline_u_v: float | None = Field(None, description="u_V of the DRIVE's top round-1 proposal.")
    evaluator: float = 0.0
    drive: float = 0.0
    mediator: float = 0.0
    final_u_v: float | None = None


class Trace(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    created_at: datetime = Field(default_factory=_now)
    finished_at: datetime | None = None
    status: TraceStatus = TraceStatus.RUNNING
    error: str | None = Field(
        None, description="Why the negotiation failed: the failure class, safe to show (no provider text)."
    )
    error_detail: str | None = Field(
        None,
        description="Internal: what the endpoint or peer said (redacted, bounded); shown only with "
        "--show-internal or --debug, never over /v1 or A2A.",
    )
    request: str
    context: str = ""
    framework: FrameworkStamp | None = None
    params: NegotiationParams
    models: dict[str, str] = Field(default_factory=dict, description="role -> backend:model")
    rounds: list[RoundRecord] = Field(default_factory=list)
    converged: bool = False
    final: FinalDecision | None = None
    agents: dict[str, AgentStats] = Field(default_factory=dict)
    contribution: AlignmentContribution | None = None
    cross_turn: CrossTurnRecord | None = Field(
        None, description="The conversation's tension track for this turn and what it changed (tau)."
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def response(self) -> str:
        """The text the user received (a fixed refusal if the negotiation failed)."""
        from ..negotiation.defense import template

        return self.final.response if self.final is not None else template("fail_closed")

    def summary(self) -> dict[str, Any]:
        f = self.final
        return {
            "id": self.id,
            "status": self.status.value,
            "request": self.request,
            "framework": self.framework.name if self.framework else None,
            "rounds": len(self.rounds),
            "tension": f.tension if f else None,
            "state": f.state.value if f and f.state else None,
            "defense": f.defense.value if f and f.defense else None,
            "created_at": self.created_at.isoformat(),
            "error": self.error,
        }
