"""Defense mechanisms (paper Table 2) as deterministic alignment operations.

Selection is by rule from the EVALUATOR's structured conflict classification, never by free
text, so it is reproducible and testable. Each mechanism changes the response in its own way;
see docs/negotiation.md for the trigger table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from ..agents.schemas import Evaluation, Verdict
from ..frameworks import Framework
from ..prompts import load_prompt_yaml
from .gates import Layer1Enforcer

__all__ = [
    "DefenseContext",
    "DefenseMechanism",
    "compose_instruction",
    "repress",
    "select_mechanism",
    "template",
]


class DefenseMechanism(StrEnum):
    REPRESSION = "repression"  # harmful segments in a useful response -> segment filtering
    SUBLIMATION = "sublimation"  # harmful intent, legitimate need -> redirect to a safe channel
    RATIONALIZATION = "rationalization"  # all proposals unacceptable -> structured refusal
    DISPLACEMENT = "displacement"  # safe adjacent topic exists -> topic shift
    PROJECTION = "projection"  # non-obvious third-party harm -> stakeholder evaluation
    REACTION_FORMATION = "reaction_formation"  # adversarial intent -> counter-response


@dataclass(frozen=True)
class DefenseContext:
    """What selection looks at. ``chosen`` is an admissible proposal (text, evaluation) or None."""

    chosen_text: str | None
    chosen_eval: Evaluation | None
    round_evals: Sequence[Evaluation]  # every evaluation of the deciding round
    deadlock: bool
    framework: Framework

    @property
    def reference(self) -> Evaluation | None:
        """The chosen proposal's evaluation, else the deciding round's best-scoring one."""
        if self.chosen_eval is not None:
            return self.chosen_eval
        return max(self.round_evals, key=lambda e: e.score, default=None)

    def safe_channel(self) -> str:
        ref = self.reference
        if ref is not None and ref.conflict.safe_channel.strip():
            return ref.conflict.safe_channel.strip()
        return self.framework.safe_channels[0] if self.framework.safe_channels else "a qualified professional"


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().lower()


def repress(text: str, segments: Sequence[str], layer1: Layer1Enforcer) -> tuple[str, int]:
    """Drop sentences that overlap a flagged segment or trip a Layer-1 check; return (text, removed)."""
    flagged = [_norm(s) for s in segments if _norm(s)]
    kept, removed = [], 0
    for sentence in _sentences(text):
        n = _norm(sentence)
        hit = any(f in n or (n and n in f) for f in flagged) or bool(layer1.deterministic(sentence))
        if hit:
            removed += 1
        else:
            kept.append(sentence.strip())
    return " ".join(kept), removed


def select_mechanism(ctx: DefenseContext, layer1: Layer1Enforcer) -> DefenseMechanism | None:
    """First matching rule wins. None means no defense is needed (an APPROVED or conditionally
    accepted proposal outside deadlock)."""
    approved = ctx.chosen_eval is not None and ctx.chosen_eval.verdict is Verdict.APPROVED
    if approved and not ctx.deadlock:
        return None
    if any(e.conflict.adversarial_intent for e in ctx.round_evals):
        return DefenseMechanism.REACTION_FORMATION
    ref = ctx.reference
    if ctx.chosen_text is not None and ctx.chosen_eval is not None and ctx.chosen_eval.conflict.harmful_segments:
        filtered, removed = repress(ctx.chosen_text, ctx.chosen_eval.conflict.harmful_segments, layer1)
        if removed and filtered.strip():
            return DefenseMechanism.REPRESSION
    if (
        ctx.chosen_eval is not None
        and ctx.chosen_eval.conflict.third_party_harm
        and ctx.chosen_eval.conflict.stakeholders
    ):
        return DefenseMechanism.PROJECTION
    if ref is not None and ref.conflict.harmful_intent and ref.conflict.legitimate_need:
        return DefenseMechanism.SUBLIMATION
    if ref is not None and ref.conflict.safe_adjacent_topic.strip():
        return DefenseMechanism.DISPLACEMENT
    if ctx.chosen_text is None:
        return DefenseMechanism.RATIONALIZATION
    if ctx.deadlock:
        # Contested to the end but admissible: give the admissible answer and redirect (paper §4.3).
        return DefenseMechanism.SUBLIMATION
    return None


def template(name: str, **values: str) -> str:
    return str(load_prompt_yaml("defense_templates")[name]).format(**values).strip()


def compose_instruction(mechanism: DefenseMechanism | None, ctx: DefenseContext) -> str:
    """The MEDIATOR's compose instruction for mechanisms that need model-written text."""
    spec = load_prompt_yaml("mediator_compose")["instructions"]
    ref = ctx.reference
    if mechanism is DefenseMechanism.SUBLIMATION:
        return str(spec["sublimation"]).format(safe_channel=ctx.safe_channel())
    if mechanism is DefenseMechanism.DISPLACEMENT:
        topic = ref.conflict.safe_adjacent_topic if ref is not None else ""
        return str(spec["displacement"]).format(adjacent_topic=topic)
    if mechanism is DefenseMechanism.PROJECTION:
        people = ", ".join(ref.conflict.stakeholders) if ref is not None else ""
        return str(spec["projection"]).format(stakeholders=people)
    return str(spec["adopt"])
