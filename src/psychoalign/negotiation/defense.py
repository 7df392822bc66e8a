"""Defense mechanisms (paper Table 2) as deterministic alignment operations.

Selection is by rule from the EVALUATOR's structured conflict classification, never by free
text, so it is reproducible and testable. Each mechanism changes the response in its own way;
see docs/negotiation.md for the trigger table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from ..agents.schemas import Evaluation, Verdict
from ..frameworks import Framework
from ..frameworks.facts import states_figures
from ..frameworks.model import SafeChannel
from ..prompts import defense_template as template
from ..prompts import load_prompt_yaml
from ..traces.model import ChannelLine, DefenseMechanism
from .gates import Layer1Enforcer

__all__ = ["DefenseContext", "DefenseMechanism", "select_mechanism", "template"]

#: Where a safe channel sits in the answer (ChannelLine.placement).
Placement = Literal["closing_line", "in_reply", "warning"]


def hazard_lines(
    framework: Framework, request: str, response: str = "", earlier: Sequence[str] = ()
) -> list[ChannelLine]:
    """The warnings of the known hazards ``request`` matches that ``response`` does not carry yet,
    in framework order, with the conversation's ``earlier`` user turns where the request completes
    a hazard only with them (:meth:`~psychoalign.frameworks.model.Framework.hazard_channels`). They
    depend on the user's words alone, so a stream can send them first."""
    return [
        ChannelLine(placement="warning", channels=[c.id], text=c.text.strip(), rules=list(c.rules))
        for c in framework.hazard_channels(request, earlier)
        if c.text.strip() not in response
    ]


@dataclass(frozen=True)
class DefenseContext:
    """What selection looks at. Evaluations here have passed the free-text guard already.

    ``chosen`` is an admissible proposal (text, evaluation) or None; ``blocked`` holds the
    deciding round's blocked drafts with their evaluations, DRIVE's favourite first;
    ``verified`` says whether new text (a filtered draft, a composition) is evaluated again
    before it reaches the user (the dual gate). ``fired`` holds the framework ids of the rules
    this request set off (its own checks, every round's rule hits, the checks a blocked draft
    tripped): they choose the safe channels offered (:meth:`channels`), with ``request``, which
    picks a false claim's own correction among its rule's channels. ``unjudged`` holds drafts the
    deterministic checks blocked before the EVALUATOR judged them (a stream cut in its first
    window): they have no evaluation, but the facts they contradicted are stated as a blocked
    draft's are (:meth:`contradicted_facts`), so a stream's refusal is the whole path's.
    ``earlier`` holds the conversation's earlier user turns, oldest first: a known hazard the
    request completes only with them is warned of too (:meth:`hazard_lines`).
    """

    chosen_text: str | None
    chosen_eval: Evaluation | None
    round_evals: Sequence[Evaluation]  # every evaluation of the deciding round
    deadlock: bool
    framework: Framework
    blocked: Sequence[tuple[str, Evaluation]] = ()
    verified: bool = True
    fired: Sequence[str] = ()
    request: str = ""
    unjudged: Sequence[str] = ()
    earlier: Sequence[str] = ()

    @property
    def reference(self) -> Evaluation | None:
        """The chosen proposal's evaluation, else the deciding round's best-scoring one."""
        if self.chosen_eval is not None:
            return self.chosen_eval
        return max(self.round_evals, key=lambda e: e.score, default=None)

    @property
    def adversarial(self) -> bool:
        """The request is an attack: any evaluation of the deciding round says so (the flag is
        about the request, which every evaluation saw; the cautious reading wins)."""
        return any(e.conflict.adversarial_intent for e in self.round_evals)

    @property
    def harmful(self) -> bool:
        """The request aims at harm: any evaluation of the deciding round says so."""
        return any(e.conflict.harmful_intent for e in self.round_evals)

    @property
    def legitimate_need(self) -> bool:
        ref = self.reference
        return ref is not None and ref.conflict.legitimate_need

    def channels(self) -> tuple[SafeChannel, ...]:
        """The framework's channels for the rules that fired (none when no rule fired). A known
        hazard's warning is no place to go: it is added beside the answer (:meth:`hazard_lines`)."""
        return tuple(c for c in self.framework.channels_for(self.fired, self.request) if not c.hazard)

    def hazard_lines(self, response: str) -> list[ChannelLine]:
        """The warnings of the known hazards the request matches that ``response`` does not
        carry yet (framework text, docs/frameworks.md "Known hazards"): they lead the reply."""
        return hazard_lines(self.framework, self.request, response, self.earlier)

    def contradicted_facts(self, rules: Iterable[str] = ()) -> str:
        """The checked facts the blocked drafts contradicted, stated right (framework text), for a
        channel's ``{facts}``: only those of ``rules`` when it names any; "" when none did."""
        texts = [*(text for text, _ in self.blocked), *self.unjudged]
        found = [fact for text in texts for fact in self.framework.contradicted_facts(text, rules, self.request)]
        return " ".join(dict.fromkeys(found))

    def supportive(self) -> SafeChannel | None:
        """The first fitting channel that carries a supportive message (self-harm), if any. A
        channel of figure rules only (a wrong fact's correction) is passed over while a universal
        rule that fired has a channel but none with a message: that rule's refusal, with its
        channel, comes first (child-safe's wrong dose points to a trusted adult, not only to the
        fact a conversion beside it got wrong)."""
        fitting = self.channels()
        figures = self.framework.figure_rule_ids
        messaged = {rule for c in fitting if c.message.strip() for rule in c.rules}
        universal = {r.id for r in self.framework.universal}
        plain = any(r in universal and r not in messaged and any(r in c.rules for c in fitting) for r in self.fired)
        for channel in fitting:
            if channel.message.strip() and not (plain and channel.rules and set(channel.rules) <= figures):
                return channel
        return None

    def safe_channel(self) -> str:
        """Where to redirect: the EVALUATOR's channel for this request, else the framework's
        channels for the rules that fired; "" when neither names one (no redirect is offered)."""
        ref = self.reference
        if ref is not None and ref.conflict.safe_channel.strip():
            return ref.conflict.safe_channel.strip()
        return self.framework_channel()

    def framework_channel(self) -> str:
        """The framework's channels for the rules that fired, joined ("" if none fits)."""
        return " or ".join(c.text for c in self.channels()[:2])

    def channel_rules(self, channels: Sequence[SafeChannel]) -> list[str]:
        """The fired rules ``channels`` serve (framework order): a channel's own rules, and for a
        channel naming none, the fired rules no channel names (Framework.channels_for)."""
        covered = {r for c in self.framework.safe_channels for r in c.rules}
        return [r for r in self.fired if any(r in c.rules or (not c.rules and r not in covered) for c in channels)]

    def framework_line(self, placement: Placement) -> ChannelLine | None:
        """What :meth:`framework_channel` points to, as the trace records it (None: no channel)."""
        channels = self.channels()[:2]
        if not channels:
            return None
        return ChannelLine(
            placement=placement,
            channels=[c.id for c in channels],
            text=" or ".join(c.text for c in channels),
            rules=self.channel_rules(channels),
        )

    def support_line(self, placement: Placement) -> ChannelLine:
        """The supportive channel (:meth:`supportive`, which must be set) as the trace records it."""
        support = self.supportive()
        assert support is not None
        rules = self.channel_rules([support])
        return ChannelLine(placement=placement, channels=[support.id], text=support.text, rules=rules)

    def safe_channel_line(self) -> ChannelLine | None:
        """What :meth:`safe_channel` points to, as a closing line (None: no channel). A channel
        the EVALUATOR named has no framework id; the rules are those that fired."""
        ref = self.reference
        if ref is not None and ref.conflict.safe_channel.strip():
            return ChannelLine(placement="closing_line", text=ref.conflict.safe_channel.strip(), rules=list(self.fired))
        return self.framework_line("closing_line")


def _sentences(text: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s.strip()]


_DIGIT = re.compile(r"\d")
#: A list item's marker at the start of a line: "3. ", "3) ", "- ", "* ", "• ".
_LIST_MARKER = re.compile(r"(?:\d{1,3}[.)]|[-*•+])[ \t]+")


def _states_figure(sentence: str) -> bool:
    """A sentence with a digit, or a figure in words a fact reads ("It keeps for up to a week.")."""
    return bool(_DIGIT.search(sentence)) or states_figures(sentence)


def _norm(text: str) -> str:
    return re.sub(r"\W+", " ", text).strip().lower()


def repress(text: str, segments: Sequence[str], layer1: Layer1Enforcer) -> tuple[str, int]:
    """Drop sentences that overlap a flagged segment or trip a Layer-1 check; return (text, removed).

    A wrong figure (a dose, an everyday fact) may be wrong only in context: "Adults take 100 mg
    once a day." names no medicine, the answer around it does. While what is kept still trips a
    figure rule (:attr:`~psychoalign.frameworks.model.Framework.figure_rule_ids`), the first
    sentence whose removal clears that rule's finding is dropped too.

    The rest keeps its lines (list items, code, paragraphs, indentation): joined into one line, a
    numbered list or a code block the user was given read as a single run-on sentence."""
    flagged = [_norm(s) for s in segments if _norm(s)]
    # (line number, indentation, sentence), None for a paragraph break
    units: list[tuple[int, str, str] | None] = []
    removed = 0
    for number, line in enumerate(text.splitlines()):
        if not line.strip():
            units.append(None)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        # a list item's marker ("3. ") is no sentence of its own: it goes with the item's sentences,
        # so dropping them all leaves no bare "3." behind; each unit carries it, and _joined writes
        # it once, before the line's first kept sentence
        marker = _LIST_MARKER.match(line.lstrip())
        if marker is not None:
            indent += marker.group(0)
            line = line.lstrip()[marker.end() :]
        for sentence in _sentences(line):
            n = _norm(sentence)
            if any(f in n or (n and n in f) for f in flagged) or layer1.deterministic(sentence):
                removed += 1
            else:
                units.append((number, indent, sentence.strip()))
    figures = layer1.framework.figure_rule_ids
    for _ in range(8):  # a draft with more wrong figures than this is not worth keeping in part
        found = layer1.matches(_joined(units))
        if not found or any(rule not in figures for rule, _ in found):
            break
        first = found[0]
        # only a sentence that states a figure: dropping the one that names the medicine would
        # clear the finding too, and leave the wrong figure in; the sentence quoting it goes first
        quoted = re.findall(r"'([^']+)'", first[1])
        stating = [i for i, unit in enumerate(units) if unit is not None and _states_figure(unit[2])]
        stating.sort(key=lambda i: not any(q in units[i][2] for q in quoted))  # type: ignore[index]
        drop = next((i for i in stating if first not in layer1.matches(_joined(units, i))), None)
        if drop is None:
            break
        del units[drop]
        removed += 1
    return _joined(units), removed


def _joined(units: Sequence[tuple[int, str, str] | None], skip: int = -1) -> str:
    """The kept sentences as text: each source line's sentences on one line with its indentation,
    one blank line between paragraphs however many went; ``skip``: a unit to leave out."""
    lines: list[str] = []
    current = -1
    for i, unit in enumerate(units):
        if i == skip:
            continue
        if unit is None:
            if lines and lines[-1]:
                lines.append("")
            current = -1
            continue
        number, indent, sentence = unit
        if number == current and lines:
            lines[-1] = f"{lines[-1]} {sentence}"
        else:
            lines.append(f"{indent}{sentence}")
            current = number
    return "\n".join(lines).strip()


def figures_only(text: str, evaluation: Evaluation, ctx: DefenseContext, layer1: Layer1Enforcer) -> list[str]:
    """The rules a blocked draft broke only by stating figures (a wrong dose, a wrong everyday
    fact: :attr:`~psychoalign.frameworks.model.Framework.figure_rule_ids`), or [] when anything
    else blocked it: another rule's check, the EVALUATOR naming another universal rule, or a
    person at risk (a universal rule other than a figure rule fired for the request); [] too when
    no channel of those rules has a ``withheld`` note (the framework has not opted in)."""
    fw = ctx.framework
    figures = fw.figure_rule_ids
    broke = [rule for rule, _ in layer1.matches(text)]
    universal = {r.id for r in fw.universal}
    named = [hit.rule_id for hit in evaluation.rule_hits if hit.rule_id in universal]
    fired = [r for r in ctx.fired if r in universal]
    if not broke or any(r not in figures for r in [*broke, *named, *fired]):
        return []
    # a framework opts in by giving the rule a channel with a `withheld` note for the user
    if not any(c.withheld.strip() for c in fw.channels_for(broke, ctx.request)):
        return []
    return broke


def repression_source(ctx: DefenseContext, layer1: Layer1Enforcer) -> tuple[str, Evaluation] | None:
    """The draft Repression filters: the chosen proposal if its evaluation flags harmful
    segments; with nothing chosen, the DRIVE's favourite blocked draft of the deciding round whose
    flagged segments can be cut, or whose only fault is a wrong figure (:func:`figures_only`: the
    sentences stating it are cut), provided the rest will be evaluated again (``verified``) and
    the request is not itself harmful. Filtering must remove a sentence and keep one, and what is
    kept must pass the deterministic Layer-1 checks."""
    chosen = ctx.chosen_text is not None and ctx.chosen_eval is not None
    candidates: list[tuple[str, Evaluation]]
    if ctx.chosen_text is not None and ctx.chosen_eval is not None:
        candidates = [(ctx.chosen_text, ctx.chosen_eval)]
    elif ctx.verified and not ctx.adversarial:
        candidates = list(ctx.blocked)
    else:
        candidates = []
    figures = ctx.framework.figure_rule_ids
    # An EVALUATOR that applies the checks itself (the embedded classifier) calls a draft with a
    # wrong figure harmful: that is no harm in the request, and what is kept is evaluated again.
    harmful = any(
        e.conflict.harmful_intent and not any(hit.rule_id in figures for hit in e.rule_hits) for e in ctx.round_evals
    )
    for text, evaluation in candidates:
        if chosen:
            if not evaluation.conflict.harmful_segments:
                continue
        elif not (
            (evaluation.conflict.harmful_segments and not ctx.harmful)
            or (not harmful and figures_only(text, evaluation, ctx, layer1))
        ):
            continue
        kept, removed = repress(text, evaluation.conflict.harmful_segments, layer1)
        if removed and kept.strip() and not layer1.matches(kept):
            return text, evaluation
    return None


def select_mechanism(ctx: DefenseContext, layer1: Layer1Enforcer) -> DefenseMechanism | None:
    """The decision table of docs/negotiation.md; first matching row wins. Each mechanism fires
    on its own conflict type, and the rows are split by whether an admissible answer exists, so
    the defense always agrees with the state: with an admissible answer the negotiation converged
    (an equilibrium or dominance state) or deadlocked with something to give; with none it
    deadlocked. None means no defense: an approved answer, or a conditional acceptance."""
    if ctx.chosen_text is not None and ctx.chosen_eval is not None:
        conflict = ctx.chosen_eval.conflict
        if ctx.chosen_eval.verdict is Verdict.APPROVED and not ctx.deadlock:
            return None  # 1. approved: adopt it
        if repression_source(ctx, layer1) is not None:
            return DefenseMechanism.REPRESSION  # 2. harmful segments inside a useful answer
        if conflict.third_party_harm and conflict.stakeholders:
            return DefenseMechanism.PROJECTION  # 3. non-obvious harm to named others
        if ctx.deadlock:
            return DefenseMechanism.SUBLIMATION  # 4. contested to the end: answer and redirect
        return None  # 5. conditional acceptance: the MEDIATOR applies the modifications
    # Nothing admissible (always a deadlock): what kind of conflict blocked every draft?
    support = ctx.supportive()
    if support is not None and not (
        set(support.rules) <= ctx.framework.figure_rule_ids and repression_source(ctx, layer1) is not None
    ):
        return DefenseMechanism.SUBLIMATION  # 6a. a person at risk: support and the crisis channel, first
    # (a figure rule's channel carries a message too, but a wrong figure in a sentence of its own
    # is left out of the useful rest instead: row 7)
    if ctx.adversarial:
        return DefenseMechanism.REACTION_FORMATION  # 6. manipulation attempt
    if repression_source(ctx, layer1) is not None:
        return DefenseMechanism.REPRESSION  # 7. a useful draft blocked for a few sentences
    ref = ctx.reference
    if ctx.harmful and ctx.legitimate_need:
        return DefenseMechanism.SUBLIMATION  # 8. harmful means, legitimate need: redirect
    if not ctx.harmful and ref is not None and ref.conflict.safe_adjacent_topic.strip():
        return DefenseMechanism.DISPLACEMENT  # 9. benign intent, an adjacent safe topic
    return DefenseMechanism.RATIONALIZATION  # 10. structured refusal


def compose_instruction(mechanism: DefenseMechanism | None, ctx: DefenseContext) -> str:
    """The MEDIATOR's compose instruction for mechanisms that need model-written text."""
    spec = load_prompt_yaml("mediator_compose")["instructions"]
    ref = ctx.reference
    if mechanism is DefenseMechanism.SUBLIMATION:
        channel = ctx.safe_channel()
        if not channel:  # no rule fired and the EVALUATOR named none: redirect nowhere in particular
            return str(spec["sublimation_no_channel"])
        return str(spec["sublimation"]).format(safe_channel=channel)
    if mechanism is DefenseMechanism.DISPLACEMENT:
        topic = ref.conflict.safe_adjacent_topic if ref is not None else ""
        return str(spec["displacement"]).format(adjacent_topic=topic)
    if mechanism is DefenseMechanism.PROJECTION:
        people = ", ".join(ref.conflict.stakeholders) if ref is not None else ""
        return str(spec["projection"]).format(stakeholders=people)
    return str(spec["adopt"])
