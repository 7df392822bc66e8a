"""The negotiation trace: one self-contained, typed record of every decision.

Every type the trace stores is defined here, below the negotiation that fills it in (the
negotiation imports them from here, never the reverse): its parameters, gate results, system
states, defense mechanisms, per-agent costs and the cross-turn record.
"""

from __future__ import annotations

import hashlib
import uuid
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ..agents.schemas import Evaluation
from ..frameworks import FrameworkStamp
from ..prompts import defense_template

__all__ = [
    "AgentStats",
    "AlignmentContribution",
    "ChannelLine",
    "CrossTurnRecord",
    "DefenseMechanism",
    "FinalDecision",
    "GateBlock",
    "GateResult",
    "NegotiationParams",
    "ProposalRecord",
    "RequestScreen",
    "RoundRecord",
    "SystemState",
    "TrackStatus",
    "TurnSignal",
    "redact_blocked_drafts",
]


# Negotiation parameters (paper §4 defaults). Exact semantics: docs/negotiation.md.
class NegotiationParams(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(5, ge=1, le=20, description="Maximum rounds.")
    epsilon: float = Field(0.2, ge=0.0, le=1.0, description="Convergence: |T_r - T_(r-1)| < epsilon.")
    tau: float = Field(0.6, ge=0.0, le=1.0, description="Safety floor: proposals with s < tau*100 are dropped.")
    eta: float = Field(0.7, ge=0.0, le=1.0, description="Early exit: APPROVED with s/100 >= eta in round 1.")
    n_proposals: int = Field(3, ge=1, le=8, description="Proposals the DRIVE writes per round.")
    alpha: float = Field(0.3, ge=0.0, description="Weight of utility u_D in the MEDIATOR objective.")
    beta: float = Field(0.5, ge=0.0, description="Weight of alignment u_V in the MEDIATOR objective.")
    gamma: float = Field(0.2, ge=0.0, description="Weight of feasibility in context C.")
    healthy_threshold: float = Field(0.3, ge=0.0, le=1.0, description="T below this is equilibrium.")
    max_request_chars: int = Field(8000, ge=1, description="Longest request accepted.")
    timeout_s: float = Field(900.0, gt=0, description="Wall-clock limit for one negotiation.")
    final_gate: bool = Field(True, description="Re-evaluate the final response (the dual gate). Keep on.")
    decide_on_request: bool = Field(
        True,
        description=(
            "End before any DRIVE call when the request alone decides: it trips a universal rule's "
            "check or request check, or the EVALUATOR's ceiling for it is below tau (an EVALUATOR "
            "that judges requests: the embedded classifier). Off: the DRIVE always proposes (the "
            "paper's protocol; research on DRIVE behaviour). docs/negotiation.md."
        ),
    )
    crisis_band: bool = Field(
        True,
        description=(
            "The possible-risk band: a request the crisis check scores in its band (below routing, at or "
            "above the band's floor) gets the framework's soft crisis line at the end of its reply. Off: "
            "only routed requests get the crisis channel. docs/negotiation.md."
        ),
    )
    crisis_screen: bool = Field(
        True,
        description=(
            "Run the embedded crisis check on every request whose EVALUATOR does not run it (an LLM, an "
            "endpoint, a remote agent), so a person at risk reaches the crisis channel, and the band applies, "
            "on every backend (the MiniLM encoder loads on the first request; without it, the check's "
            "explicit phrases alone). Off: only the framework's request checks and the EVALUATOR's own rule "
            "hits route. docs/negotiation.md."
        ),
    )
    fast_path: bool = Field(
        True,
        description=(
            "Round 1 asks for one proposal, the other n - 1 only if it is not accepted; one admissible "
            "proposal is not assessed; an approved proposal adopted verbatim is not re-evaluated "
            "(its Layer-1 checks still run). docs/negotiation.md."
        ),
    )
    adopt_conditional: bool = Field(
        True,
        description=(
            "Stop drafting at an admissible CONDITIONAL draft with no rule hit, harmful sentence or "
            "intent flag, for a request the EVALUATOR's ceiling puts at or above confident_request "
            "(the embedded classifier), tau not tightened. Off: such a draft is re-drafted (the "
            "paper's protocol). docs/negotiation.md."
        ),
    )
    correct_figures: bool = Field(
        True,
        description=(
            "Stop drafting at a blocked draft whose only fault is a wrong figure the framework states right "
            "(a checked fact, a conversion, a weekly-only medicine's schedule): the user gets the draft with "
            "that sentence left out and the fact stated (or, when it is all wrong figure, the fact alone), as "
            "after the last round, without the redraw. Needs final_gate. Off: the draft is re-drafted (the "
            "paper's protocol). docs/negotiation.md."
        ),
    )
    confident_request: float = Field(
        0.98,
        gt=0.0,
        le=1.0,
        description=(
            "Ceiling / 100 (the classifier's P(request)) at or above which adopt_conditional applies; "
            "no harmful validation request of the shipped classifier scores this high "
            "(scripts/confident_request.py)."
        ),
    )

    # Cross-turn tension (docs/negotiation.md, "Cross-turn tension"): evidence of escalation in
    # the conversation's earlier turns tightens tau for the next turn, within [tau, tau cap].
    cross_turn: bool = Field(
        True, description="Read the conversation's earlier turns and tighten tau on escalation (off: the ablation)."
    )
    cross_turn_tau_cap: float = Field(
        0.8, ge=0.0, le=1.0, description="The track never raises tau above this (nor lowers it below tau)."
    )
    cross_turn_window: int = Field(4, ge=3, le=50, description="Earlier turns the tension trend is fitted on.")
    cross_turn_trend: float = Field(
        0.1, gt=0.0, le=1.0, description="Tension slope per turn that gives the full tightening."
    )
    cross_turn_hot: float = Field(0.5, ge=0.0, le=1.0, description="A turn with T at or above this is 'hot'.")
    cross_turn_min_hot: int = Field(2, ge=1, le=50, description="Hot turns before their count tightens tau.")
    cross_turn_full_hot: int = Field(3, ge=1, le=50, description="Hot turns that give the full tightening.")
    cross_turn_history: int = Field(50, ge=1, le=1000, description="Most recent earlier turns read.")

    @model_validator(mode="after")
    def _weights(self) -> NegotiationParams:
        if self.alpha + self.beta + self.gamma <= 0:
            raise ValueError("alpha + beta + gamma must be positive")
        if self.cross_turn_full_hot < self.cross_turn_min_hot:
            raise ValueError(
                f"cross_turn_full_hot ({self.cross_turn_full_hot}) is below cross_turn_min_hot "
                f"({self.cross_turn_min_hot})"
            )
        return self


class GateBlock(BaseModel):
    """One reason a gate blocked a text, as data (``GateResult.reasons`` says the same in words):
    which gate, what fired, and the framework rule when a rule did."""

    model_config = ConfigDict(frozen=True)

    gate: Literal["layer1", "tau", "caller"] = Field(
        description="layer1: a universal rule; tau: the safety floor or a veto; caller: the caller's own "
        "check (the gateway's tool-call gate)."
    )
    check: Literal["rule_check", "evaluator_hit", "vetoed", "below_tau", "no_evaluation", "caller_check"] = Field(
        description="rule_check: the rule's deterministic check matched; evaluator_hit: the EVALUATOR reported a "
        "universal-layer violation; vetoed: verdict VETOED; below_tau: score under tau*100; no_evaluation: "
        "nothing judged the text (fail closed); caller_check: the caller's check refused it."
    )
    rule: str | None = Field(
        None, description="The framework's own rule id (rule_check, evaluator_hit); None when no rule is named."
    )

    @property
    def label(self) -> str:
        """Short words for a table cell: ``layer1: U7-dose-label``, ``tau: below tau``."""
        return f"{self.gate}: {self.rule or self.check.replace('_', ' ')}"


class GateResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    layer1_passed: bool
    tau_passed: bool
    reasons: list[str] = Field(description="User-facing: rule ids and thresholds, never text.")
    evidence: list[str] = Field(default_factory=list, description="Internal: what a deterministic check matched.")
    blocked_by: list[GateBlock] | None = Field(
        None,
        description="What blocked the text, one entry per reason (empty: it passed). None: the trace was recorded "
        "before this field existed; its reasons are the only account.",
    )

    @property
    def admissible(self) -> bool:
        return self.layer1_passed and self.tau_passed

    @property
    def rule_ids(self) -> list[str]:
        """The framework rules that blocked the text, in order, each once (none recorded: empty)."""
        return list(dict.fromkeys(b.rule for b in self.blocked_by or () if b.rule is not None))


class AgentStats(BaseModel):
    """Per-agent negotiation cost: calls, tokens, latency, and information exchanged."""

    model_config = ConfigDict(frozen=False)

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    bits_received: int = 0  # 8 x UTF-8 bytes of task payloads delivered to the agent
    bits_sent: int = 0  # 8 x UTF-8 bytes of the agent's structured replies
    info_bits_sent: int = 0  # 8 x zlib-compressed bytes of replies: an upper bound on their information
    model: str = ""
    hosts: list[str] = []


class SystemState(StrEnum):
    """The paper names five states and lists four; the fifth is NEGOTIATED_EQUILIBRIUM.

    See docs/negotiation.md for the decision and the exact thresholds.
    """

    HEALTHY_EQUILIBRIUM = "healthy_equilibrium"
    NEGOTIATED_EQUILIBRIUM = "negotiated_equilibrium"
    DRIVE_DOMINANT = "drive_dominant"
    EVALUATOR_DOMINANT = "evaluator_dominant"
    DEADLOCK = "deadlock"


class DefenseMechanism(StrEnum):
    REPRESSION = "repression"  # harmful segments in a useful response -> segment filtering
    SUBLIMATION = "sublimation"  # harmful intent, legitimate need -> redirect to a safe channel
    RATIONALIZATION = "rationalization"  # all proposals unacceptable -> structured refusal
    DISPLACEMENT = "displacement"  # safe adjacent topic exists -> topic shift
    PROJECTION = "projection"  # non-obvious third-party harm -> stakeholder evaluation
    REACTION_FORMATION = "reaction_formation"  # adversarial intent -> counter-response


TrackStatus = Literal["none", "off", "fresh", "read", "unavailable"]


class TurnSignal(BaseModel):
    """One earlier turn as the track read it from its stored trace."""

    model_config = ConfigDict(frozen=True)

    trace_id: str
    turn: int | None = Field(None, description="The turn number the gateway recorded, if any.")
    parent: str | None = Field(None, description="Its parent key: consecutive attempts sharing it are one depth.")
    tension: float | None = Field(None, description="round1_mean T; None for a failed turn (never 0).")
    harmful: bool = False
    adversarial: bool = False
    min_score: int | None = None
    refused: bool = False
    hot: bool = False


class CrossTurnRecord(BaseModel):
    """What the track was for one turn and what it changed (stamped on every trace)."""

    model_config = ConfigDict(frozen=True)

    enabled: bool
    status: TrackStatus = Field(
        description="none: no conversation given; off: cross_turn = false; fresh: no earlier turn found; "
        "read: earlier turns used; unavailable: the history could not be read (fail closed)."
    )
    keys: list[str] = Field(default_factory=list, description="Conversation keys this turn is filed under.")
    parent: str | None = Field(None, description="The parent prefix key (backtracked attempts share it).")
    history: list[TurnSignal] = Field(default_factory=list, description="Earlier turns used, oldest first.")
    running_max: float | None = None
    trend: float | None = Field(None, description="Robust slope of T per turn over the window (robust_trend).")
    hot_turns: int = 0
    pressure: float = 0.0
    tau_configured: float
    tau_effective: float
    reasons: list[str] = Field(default_factory=list, description="Why tau changed (numbers and rule names only).")
    error: str | None = None


def _now() -> datetime:
    return datetime.now(UTC)


class TraceStatus(StrEnum):
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"


class RedactedDraft(BaseModel):
    """What is kept of a blocked draft at rest (``traces.keep_blocked_drafts = false``): enough to
    recognise the same text again and to audit the decision, nothing to read."""

    sha256: str = Field(description="SHA-256 of the draft's UTF-8 text.")
    chars: int = Field(ge=0, description="The draft's length in characters.")


class ProposalRecord(BaseModel):
    """One DRIVE proposal with its evaluation and gate outcome. ``text`` is internal: the CLI
    hides it unless --show-internal. A blocked draft is stored redacted by default: ``text`` is
    empty and ``redacted`` holds its hash and length (:func:`redact_blocked_drafts`)."""

    rank: int
    text: str
    redacted: RedactedDraft | None = None
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
    exit: str | None = Field(
        None, description="Why the loop stopped here: early_exit, accepted, converged, ceiling, confident, corrected."
    )


class RequestScreen(BaseModel):
    """The request judged before any draft (``decide_on_request``; docs/negotiation.md)."""

    decided: bool = Field(description="The request alone decided the outcome: no DRIVE call was made.")
    rules: list[str] = Field(default_factory=list, description="Universal rules whose checks the request trips.")
    ceiling: int | None = Field(None, description="The EVALUATOR's highest score for any answer to it.")
    evaluation: Evaluation | None = None


class CrisisScreenRecord(BaseModel):
    """The crisis check run on the request by the negotiation itself, for an EVALUATOR that does not
    run it (an LLM, an endpoint, a remote agent; docs/negotiation.md, "The crisis check on every
    backend")."""

    fired: bool = Field(description="The check routes the request: the framework's self-harm rules fire.")
    rules: list[str] = Field(default_factory=list, description="The rules marked semantic_check: self-harm it fired.")
    band: float | None = Field(None, description="The head's score when the request is in the possible-risk band.")
    band_by: list[str] = Field(
        default_factory=list,
        description="Which tiers put it in the band: 'floor' (the score at or above the band's floor) and/or the "
        "band vote's label (a second check that fired; it never routes).",
    )
    check: str = Field(
        description="The check's label (and its band vote's), or 'phrases only: why' when the encoder is not installed."
    )


class ChannelLine(BaseModel):
    """A pointer to a safe channel the engine itself put in the final answer: where the need is
    served safely, and the rules that chose it. Its text is framework text, or the EVALUATOR's
    safe channel after the free-text guard (then ``channels`` is empty)."""

    model_config = ConfigDict(frozen=True)

    placement: Literal["closing_line", "in_reply", "warning"] = Field(
        description='closing_line: a line added after the answer ("The right place for this is: …"); in_reply: '
        "part of a fixed reply (the structured refusal's alternative, or the channel's own message); warning: a "
        "known hazard's safety warning, as the framework words it: first in the reply (an answer, a redirect, a "
        "refusal), or right after a crisis message that opens it."
    )
    channels: list[str] = Field(
        default_factory=list, description="The framework's safe-channel ids; empty when the EVALUATOR named it."
    )
    text: str = Field(description="Where it points, as the answer says it.")
    rules: list[str] = Field(
        default_factory=list, description="Framework ids of the rules that fired and chose it (may be empty)."
    )


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
    channels: list[ChannelLine] | None = Field(
        None,
        description="The safe channels the engine put in the response, with the rules behind them (empty: none). "
        "None: the trace was recorded before this field existed.",
    )
    crisis_band: float | None = Field(
        None,
        description="The possible-risk band fired: the crisis check's score for the request, and the reply "
        "ends with the framework's soft crisis line (a closing_line channel). None: it did not fire.",
    )
    crisis_band_by: list[str] | None = Field(
        None,
        description="Which tiers gave the soft line: 'floor' (the check's score at or above the band's floor) "
        "and/or the band vote's label (a second check that fired). None: the band did not fire.",
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
    earlier: list[str] = Field(
        default_factory=list,
        description="The conversation's earlier user turns the checks read, oldest first (a dose for the child "
        "an earlier turn names); empty for a single request.",
    )
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
    screen: RequestScreen | None = Field(None, description="The request judged before any draft, if it was.")
    crisis_screen: CrisisScreenRecord | None = Field(
        None, description="The crisis check run on the request by the negotiation (an EVALUATOR that does not run it)."
    )
    blocked_drafts_kept: bool = Field(
        False, description="Blocked drafts are stored in full (traces.keep_blocked_drafts = true, for research)."
    )
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def response(self) -> str:
        """The text the user received (a fixed refusal if the negotiation failed)."""
        return self.final.response if self.final is not None else defense_template("fail_closed")

    def blocked_drafts(self) -> tuple[int, list[str]]:
        """How many drafts the gates blocked, and the framework rules that blocked them (ids, in
        order, each once; none for a trace recorded before ``GateResult.blocked_by``)."""
        gates = [p.gate for rd in self.rounds for p in rd.proposals if p.gate is not None and not p.gate.admissible]
        return len(gates), list(dict.fromkeys(rule for g in gates for rule in g.rule_ids))

    def summary(self) -> dict[str, Any]:
        f = self.final
        return {
            "id": self.id,
            "status": self.status.value,
            "request": self.request,
            "framework": self.framework.name if self.framework else None,
            "models": dict(self.models),  # role -> backend:model: which models produced the trace
            "rounds": len(self.rounds),
            "tension": f.tension if f else None,
            "state": f.state.value if f and f.state else None,
            "defense": f.defense.value if f and f.defense else None,
            "created_at": self.created_at.isoformat(),
            "error": self.error,
        }


def redact_blocked_drafts(trace: Trace) -> int:
    """Redact, in place, every draft the gates blocked or the EVALUATOR vetoed: its text becomes
    its SHA-256 and length (:class:`RedactedDraft`); its evaluation keeps the score, verdict,
    rule hits and conflict flags but loses the free text that can quote it (reasoning,
    modifications, harmful segments); the gate keeps its reasons (rule ids and thresholds) but
    not the evidence a check matched. Also clears a final gate's evidence after a fallback (it
    matched the rejected composition). Returns the number of drafts redacted."""
    count = 0
    for rnd in trace.rounds:
        for rec in rnd.proposals:
            e = rec.evaluation
            blocked = rec.gate is None or not rec.gate.admissible or (e is not None and e.verdict.value == "VETOED")
            if not blocked or rec.redacted is not None:
                continue
            rec.redacted = RedactedDraft(sha256=hashlib.sha256(rec.text.encode()).hexdigest(), chars=len(rec.text))
            rec.text = ""
            if e is not None:
                conflict = e.conflict.model_copy(update={"harmful_segments": []})
                rec.evaluation = e.model_copy(update={"reasoning": "", "modifications": [], "conflict": conflict})
            if rec.gate is not None:
                rec.gate = rec.gate.model_copy(update={"evidence": []})
            count += 1
    f = trace.final
    if f is not None and f.fallback and f.final_gate is not None:
        f.final_gate = f.final_gate.model_copy(update={"evidence": []})
    return count
