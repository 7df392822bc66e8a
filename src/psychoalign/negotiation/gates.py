"""Programmatic safety gates. They run in the engine, outside any agent, and the MEDIATOR cannot skip them.

* Layer-1 enforcer: a text fails when the EVALUATOR reports a universal-layer rule hit, or when
  any deterministic check of a universal rule matches the text.
* Tau filter: a proposal passes only with score >= tau*100 and a verdict other than VETOED.
* Free-text guard: EVALUATOR free text that flows onward (safe channel, adjacent topic,
  stakeholders, modifications) is bounded, and dropped when it trips a Layer-1 check or repeats
  a blocked draft of the negotiation.

Gate *reasons* are user-facing (the CLI prints them): they name rules, never quote text. What a
deterministic check matched is kept in ``evidence``, which is internal (``--show-internal``).
"""

from __future__ import annotations

import re
import unicodedata

from pydantic import BaseModel, ConfigDict, Field

from ..agents.schemas import Evaluation, Verdict
from ..frameworks import Framework, Layer

__all__ = ["ECHO_CHARS", "FreeTextGuard", "GateResult", "Layer1Enforcer", "TauFilter", "apply_gates", "clean_line"]

#: A free-text field that shares a run of this many characters (after normalisation) with a
#: blocked draft is treated as carrying that draft, and dropped.
ECHO_CHARS = 12


class GateResult(BaseModel):
    model_config = ConfigDict(frozen=True)

    layer1_passed: bool
    tau_passed: bool
    reasons: list[str] = Field(description="User-facing: rule ids and thresholds, never text.")
    evidence: list[str] = Field(default_factory=list, description="Internal: what a deterministic check matched.")

    @property
    def admissible(self) -> bool:
        return self.layer1_passed and self.tau_passed


class Layer1Enforcer:
    def __init__(self, framework: Framework) -> None:
        self.framework = framework

    def matches(self, text: str) -> list[tuple[str, str]]:
        """(rule id, matched evidence) for every universal rule whose deterministic check fires."""
        found = []
        for rule in self.framework.universal:
            if rule.check is not None:
                evidence = rule.check.find(text)
                if evidence is not None:
                    found.append((rule.id, evidence))
        return found

    def deterministic(self, text: str) -> list[str]:
        """Reasons from the framework's own checks (no model involved); they name the rule only."""
        return [f"{rule_id}: deterministic check matched" for rule_id, _ in self.matches(text)]

    def check(self, text: str, evaluation: Evaluation | None) -> list[str]:
        reasons = self.deterministic(text)
        if evaluation is None:
            return [*reasons, "no evaluation: fail closed"]
        for hit in evaluation.rule_hits:
            # The layer is already in the closed vocabulary (schemas.parse_layer: unparseable ->
            # universal); the id is resolved ignoring case, punctuation, look-alike letters and
            # misspellings (Framework.resolve). A hit blocks when it is filed under 'universal'
            # (even with an unknown id), names a universal rule whatever layer it was filed
            # under, or has an id that cannot be placed at all (fail closed).
            match = self.framework.resolve(hit.rule_id)
            if hit.layer is Layer.UNIVERSAL or match.layer is Layer.UNIVERSAL or not match.placeable:
                # Name the framework's rule, never the model's spelling (it could carry any text).
                name = match.rule.id if match.rule is not None else "unknown rule"
                reasons.append(f"{name}: evaluator reported a universal-layer violation")
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
    evidence = [f"{rule_id}: {match}" for rule_id, match in layer1.matches(text)]
    return GateResult(layer1_passed=not l1, tau_passed=not t, reasons=[*l1, *t], evidence=evidence)


# -- free text from the EVALUATOR --------------------------------------------------------------------
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u200b-\u200f\u202a-\u202e\u2066-\u2069]+")


def clean_line(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters: no control or bidi characters, no newlines (they
    could fake structure in a prompt), cut at a word boundary."""
    line = " ".join(_CONTROL.sub(" ", unicodedata.normalize("NFC", text)).split())
    if len(line) <= limit:
        return line
    cut = line[:limit].rsplit(" ", 1)[0]
    return cut or line[:limit]


def _fold(text: str) -> str:
    return " ".join(re.findall(r"\w+", unicodedata.normalize("NFKC", text).casefold()))


class FreeTextGuard:
    """Checks EVALUATOR free text before it flows onward (into a prompt or a composed answer).

    ``block(draft)`` registers every draft the gates blocked in this negotiation; ``clean(text,
    limit)`` returns the bounded text, or ``""`` when it trips a Layer-1 check or shares a run of
    :data:`ECHO_CHARS` characters (or the whole field, if shorter) with a blocked draft, compared
    case- and punctuation-insensitively.
    """

    def __init__(self, layer1: Layer1Enforcer) -> None:
        self.layer1 = layer1
        self._blocked: list[str] = []  # folded drafts, space-padded
        self._windows: set[str] = set()  # every ECHO_CHARS-long run of a blocked draft

    def block(self, draft: str) -> None:
        folded = f" {_fold(draft)} "
        if folded.strip() and folded not in self._blocked:
            self._blocked.append(folded)
            self._windows.update(folded[i : i + ECHO_CHARS] for i in range(len(folded) - ECHO_CHARS + 1))

    def echoes_blocked(self, text: str) -> bool:
        folded = _fold(text)
        if not folded:
            return False
        if len(folded) < ECHO_CHARS:  # a short field: does a blocked draft contain it as words?
            return any(f" {folded} " in draft for draft in self._blocked)
        return any(folded[i : i + ECHO_CHARS] in self._windows for i in range(len(folded) - ECHO_CHARS + 1))

    def clean(self, text: str, limit: int) -> str:
        line = clean_line(text, limit)
        if not line or self.layer1.matches(line) or self.echoes_blocked(line):
            return ""
        return line
