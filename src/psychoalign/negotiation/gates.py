"""Programmatic safety gates. They run in the engine, outside any agent, and the MEDIATOR cannot skip them.

* Layer-1 enforcer: a text fails when the EVALUATOR reports a universal-layer rule hit, or when
  any deterministic check of a universal rule matches the text.
* Tau filter: a proposal passes only with score >= tau*100 and a verdict other than VETOED.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from ..agents.schemas import Evaluation, Verdict
from ..frameworks import Framework, Layer

__all__ = ["GateResult", "Layer1Enforcer", "TauFilter", "apply_gates"]


class GateResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    layer1_passed: bool
    tau_passed: bool
    reasons: list[str]

    @property
    def admissible(self) -> bool:
        return self.layer1_passed and self.tau_passed


class Layer1Enforcer:
    def __init__(self, framework: Framework) -> None:
        self.framework = framework

    def deterministic(self, text: str) -> list[str]:
        """Reasons from the framework's own checks (no model involved)."""
        reasons = []
        for rule in self.framework.universal:
            if rule.check is not None:
                evidence = rule.check.find(text)
                if evidence is not None:
                    reasons.append(f"{rule.id}: deterministic check matched {evidence!r}")
        return reasons

    def check(self, text: str, evaluation: Evaluation | None) -> list[str]:
        reasons = self.deterministic(text)
        if evaluation is None:
            return [*reasons, "no evaluation: fail closed"]
        for hit in evaluation.rule_hits:
            declared = self.framework.layer_of(hit.rule_id)
            # A hit the evaluator files under 'universal' counts even with an unknown id (fail closed).
            if hit.layer == Layer.UNIVERSAL.value or declared is Layer.UNIVERSAL:
                reasons.append(f"{hit.rule_id}: evaluator reported a universal-layer violation")
        return reasons


class TauFilter:
    def __init__(self, tau: float) -> None:
        self.tau = tau

    def check(self, evaluation: Evaluation | None) -> list[str]:
        if evaluation is None:
            return ["no evaluation: fail closed"]
        reasons = []
        if evaluation.verdict is Verdict.VETOED:
            reasons.append("verdict VETOED")
        if evaluation.score < self.tau * 100:
            reasons.append(f"score {evaluation.score} < tau*100 = {self.tau * 100:g}")
        return reasons


def apply_gates(layer1: Layer1Enforcer, tau: TauFilter, text: str, evaluation: Evaluation | None) -> GateResult:
    l1 = layer1.check(text, evaluation)
    t = tau.check(evaluation)
    return GateResult(layer1_passed=not l1, tau_passed=not t, reasons=[*l1, *t])
