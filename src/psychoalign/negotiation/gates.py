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
from collections.abc import Sequence

from ..agents.schemas import Evaluation, Verdict
from ..frameworks import Framework, Layer
from ..frameworks.doses import DoseContext, opens_with_yes, read_request
from ..textio import skeleton
from ..traces.model import GateBlock, GateResult

__all__ = ["GateBlock", "GateResult", "Layer1Enforcer", "TauFilter", "apply_gates"]

#: A gate's reason in words (user-facing, as ``GateResult.reasons`` holds it) and as data.
Block = tuple[str, GateBlock]
NO_EVALUATION = "no evaluation: fail closed"

#: The id a rule hit is recorded under when it names no rule of the framework.
UNKNOWN_RULE = "?"
#: A free-text field that shares a run of this many characters (after normalisation) with a
#: blocked draft is treated as carrying that draft, and dropped.
ECHO_CHARS = 12


#: How many texts a :class:`Layer1Enforcer` remembers the matches of.
_REMEMBERED = 64


class Layer1Enforcer:
    """The deterministic checks of a framework's universal rules, for one request's texts.

    ``request``: the user's request the checked texts answer. It is context, never checked here:
    it tells the dose limits who the answer is for (a child, and the weight the request states)
    and which medicine it asks about (:func:`~psychoalign.frameworks.doses.read_request`). Without it,
    doses are read as before: for an adult, the medicine named in the checked text. ``earlier``:
    the conversation's earlier user turns, oldest first, for a child named there ("My son is 6."
    then "How much can he have?"); kept in :attr:`earlier` for the EVALUATOR's tasks, so an
    EVALUATOR that applies the checks itself (the embedded classifier, here or remote) reads them
    too."""

    def __init__(self, framework: Framework, request: str = "", earlier: Sequence[str] = ()) -> None:
        self.framework = framework
        self.earlier: list[str] = list(earlier) if request else []
        self.request: DoseContext | None = read_request(request, earlier) if request else None
        # text, model_text -> matches: a negotiation checks the same text more than once (a draft
        # at its gate, then as the final text adopted verbatim; a blocked draft for the rules that
        # fired), and the checks are regex work on every universal rule.
        self._found: dict[tuple[str, bool], tuple[tuple[str, str], ...]] = {}

    def matches(self, text: str, *, model_text: bool = True) -> list[tuple[str, str]]:
        """(rule id, matched evidence) for every universal rule whose deterministic check fires.
        ``model_text=False`` for a user's words (dose limits are read in model text only)."""
        key = (text, model_text)
        found = self._found.get(key)
        if found is None:
            if len(self._found) >= _REMEMBERED:
                self._found.clear()
            found = self._found[key] = tuple(self._match(text, model_text))
        return list(found)

    def _match(self, text: str, model_text: bool) -> list[tuple[str, str]]:
        found = []
        for rule in self.framework.universal:
            if rule.check is not None:
                evidence = rule.check.find(text, model_text=model_text, request=self.request)
                if evidence is not None:
                    found.append((rule.id, evidence))
        if model_text and (hazard := self._yes_to_hazard(text)) is not None:
            found.append(hazard)
        return found

    def _yes_to_hazard(self, text: str) -> tuple[str, str] | None:
        """(the hazard rule, evidence) when ``text`` opens with a plain yes to a request that
        involves a known hazard ("Can I mix bleach and vinegar?" "Yes, …"): the hazard is the
        framework's word that the answer is no, so a yes contradicts the warning that follows it
        (:func:`~psychoalign.frameworks.doses.opens_with_yes`; a qualified yes passes)."""
        if self.request is None or not opens_with_yes(text):
            return None
        for channel in self.framework.hazard_channels(self.request.request, self.earlier):
            rule = next((r for r in channel.rules if r in self.framework.hazard_rule_ids), None)
            if rule is not None:
                return rule, f"a plain yes to a request with a known hazard ({channel.id})"
        return None

    def deterministic(self, text: str, *, model_text: bool = True) -> list[str]:
        """Reasons from the framework's own checks (no model involved); they name the rule only."""
        return [reason for reason, _ in self.deterministic_blocks(text, model_text=model_text)]

    def deterministic_blocks(self, text: str, *, model_text: bool = True) -> list[Block]:
        """:meth:`deterministic`, each reason with its record for the trace."""
        return [
            (f"{rule_id}: deterministic check matched", GateBlock(gate="layer1", check="rule_check", rule=rule_id))
            for rule_id, _ in self.matches(text, model_text=model_text)
        ]

    def check(self, text: str, evaluation: Evaluation | None) -> list[str]:
        return [reason for reason, _ in self.blocks(text, evaluation)]

    def blocks(self, text: str, evaluation: Evaluation | None) -> list[Block]:
        """Why the Layer-1 gate blocks ``text`` (none: it passes), each reason with its record."""
        reasons = self.deterministic_blocks(text)
        if evaluation is None:
            return [*reasons, (NO_EVALUATION, GateBlock(gate="layer1", check="no_evaluation"))]
        for hit in evaluation.rule_hits:
            # The layer is already in the closed vocabulary (schemas.parse_layer: unparseable ->
            # universal); the id is resolved ignoring case, punctuation, look-alike letters and
            # misspellings (Framework.resolve). A hit blocks when it is filed under 'universal'
            # (even with an unknown id), names a universal rule whatever layer it was filed
            # under, or has an id that cannot be placed at all (fail closed).
            match = self.framework.resolve(hit.rule_id)
            if hit.layer is Layer.UNIVERSAL or match.layer is Layer.UNIVERSAL or not match.placeable:
                # Name the framework's rule, never the model's spelling (it could carry any text).
                rule = match.rule.id if match.rule is not None else None
                reasons.append(
                    (
                        f"{rule or 'unknown rule'}: evaluator reported a universal-layer violation",
                        GateBlock(gate="layer1", check="evaluator_hit", rule=rule),
                    )
                )
        return reasons


class TauFilter:
    def __init__(self, tau: float) -> None:
        self.tau = tau

    def check(self, evaluation: Evaluation | None) -> list[str]:
        return [reason for reason, _ in self.blocks(evaluation)]

    def blocks(self, evaluation: Evaluation | None) -> list[Block]:
        """Why the tau filter blocks (none: it passes), each reason with its record."""
        if evaluation is None:
            return [(NO_EVALUATION, GateBlock(gate="tau", check="no_evaluation"))]
        reasons: list[Block] = []
        if evaluation.verdict is Verdict.VETOED:
            reasons.append(("verdict VETOED", GateBlock(gate="tau", check="vetoed")))
        if evaluation.score < self.tau * 100:
            reasons.append(
                (f"score {evaluation.score} < tau*100 = {self.tau * 100:g}", GateBlock(gate="tau", check="below_tau"))
            )
        return reasons


def canonical_hits(evaluation: Evaluation, framework: Framework) -> Evaluation:
    """``evaluation`` with each rule hit recorded as the gate read it: under the framework's own
    id, or :data:`UNKNOWN_RULE` when it names none (an id is model text: it could carry a draft,
    and traces show rule ids to people who may not see drafts); a hit whose id cannot be placed
    at all is recorded as universal, as the gate treated it."""
    hits = []
    changed = False
    for hit in evaluation.rule_hits:
        match = framework.resolve(hit.rule_id)
        rule_id = match.rule.id if match.rule is not None else UNKNOWN_RULE
        layer = hit.layer if match.placeable else Layer.UNIVERSAL
        if rule_id != hit.rule_id or layer is not hit.layer:
            changed = True
            hit = hit.model_copy(update={"rule_id": rule_id, "layer": layer})
        hits.append(hit)
    return evaluation.model_copy(update={"rule_hits": hits}) if changed else evaluation


def gate_result(layer1: list[Block], tau: list[Block], evidence: list[str] | None = None) -> GateResult:
    """The result of the Layer-1 and tau gates from their blocks: reasons in words and as data."""
    blocks = [*layer1, *tau]
    return GateResult(
        layer1_passed=not layer1,
        tau_passed=not tau,
        reasons=[reason for reason, _ in blocks],
        evidence=evidence or [],
        blocked_by=[block for _, block in blocks],
    )


def apply_gates(layer1: Layer1Enforcer, tau: TauFilter, text: str, evaluation: Evaluation | None) -> GateResult:
    # The enforcer remembers the text's matches: the evidence does not match it again.
    evidence = [f"{rule_id}: {match}" for rule_id, match in layer1.matches(text)]
    return gate_result(layer1.blocks(text, evaluation), tau.blocks(evaluation), evidence)


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


def _words(text: str) -> str:
    """Words of ``text`` as the Latin it imitates, case-folded, one space apart."""
    return " ".join(re.findall(r"[^\W_]+", skeleton(text).casefold()))


def _letters(text: str) -> str:
    """Letters and digits only: spacing, dots, dashes or zero-width characters put between the
    characters of a draft do not hide it."""
    return re.sub(r"[\W_]+", "", skeleton(text).casefold())


class FreeTextGuard:
    """Checks EVALUATOR free text before it flows onward (into a prompt or a composed answer).

    ``block(draft)`` registers every draft the gates blocked in this negotiation; ``clean(text,
    limit)`` returns the bounded text, or ``""`` when it trips a Layer-1 check or shares a run of
    :data:`ECHO_CHARS` letters and digits with a blocked draft (or, when it has fewer, appears in
    one as whole words). Both are compared as the Latin they imitate, case-insensitively, with
    everything but letters and digits removed: spaced-out, dotted, look-alike or zero-width
    spellings of a draft are the draft.
    """

    def __init__(self, layer1: Layer1Enforcer) -> None:
        self.layer1 = layer1
        self._blocked: list[str] = []  # drafts as words, space-padded
        self._windows: set[str] = set()  # every ECHO_CHARS-long run of a blocked draft's letters

    def block(self, draft: str) -> None:
        words = f" {_words(draft)} "
        if words.strip() and words not in self._blocked:
            self._blocked.append(words)
            letters = _letters(draft)
            self._windows.update(letters[i : i + ECHO_CHARS] for i in range(len(letters) - ECHO_CHARS + 1))

    def echoes_blocked(self, text: str) -> bool:
        letters = _letters(text)
        if not letters:
            return False
        if len(letters) < ECHO_CHARS:  # a short field: does a blocked draft contain it as words?
            words = _words(text)
            return any(f" {words} " in draft for draft in self._blocked)
        return any(letters[i : i + ECHO_CHARS] in self._windows for i in range(len(letters) - ECHO_CHARS + 1))

    def clean(self, text: str, limit: int) -> str:
        line = clean_line(text, limit)
        if not line or self.layer1.matches(line) or self.echoes_blocked(line):
            return ""
        return line
