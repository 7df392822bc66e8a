"""What a decision is built from, outside the loop itself: the MEDIATOR's structured relay to the
DRIVE, the EVALUATOR's free text bounded before it flows onward, refusals and rule lists from
framework text only, and the alignment contribution of each stage."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any, NamedTuple

from ..agents.schemas import Evaluation
from ..frameworks import Framework
from ..traces.model import AlignmentContribution, ChannelLine, GateBlock, GateResult, ProposalRecord, Trace
from .defense import DefenseContext, _sentences, figures_only, repress, template
from .gates import FreeTextGuard, Layer1Enforcer, TauFilter, apply_gates, gate_result

#: A caller's own deterministic check of an answer (the gateway's tool-call gate): the reasons it
#: blocks for (rule-like ids, never the text), or none.
AnswerCheck = Callable[[str], list[str]]

# Bounds on EVALUATOR free text that flows onward (characters, one line each).
LIMITS = {"safe_channel": 120, "safe_adjacent_topic": 120, "stakeholder": 60, "modification": 200}


class Gates(NamedTuple):
    """What one negotiation's texts are judged by: its framework (and the payload the EVALUATOR
    is sent), the Layer-1 rules, tau, the guard that remembers every blocked draft, and the
    caller's extra check, applied wherever the Layer-1 checks are."""

    fw: Framework
    fw_payload: dict[str, Any]
    layer1: Layer1Enforcer
    tau: TauFilter
    guard: FreeTextGuard
    extra: AnswerCheck | None = None

    def gate(self, text: str, evaluation: Evaluation | None) -> GateResult:
        """The dual gate on ``text`` as the EVALUATOR judged it."""
        return self._extra(apply_gates(self.layer1, self.tau, text, evaluation), text)

    def recheck(self, text: str) -> GateResult:
        """The deterministic checks alone, for text the EVALUATOR already judged as it is."""
        return self._extra(gate_result(self.layer1.deterministic_blocks(text), []), text)

    def _extra(self, result: GateResult, text: str) -> GateResult:
        reasons = self.extra(text) if self.extra is not None else []
        if not reasons:
            return result
        # The caller's reasons are its own words (rule-like ids, never text): recorded as its check.
        blocks = [*(result.blocked_by or []), *(GateBlock(gate="caller", check="caller_check") for _ in reasons)]
        return result.model_copy(
            update={"layer1_passed": False, "reasons": [*result.reasons, *reasons], "blocked_by": blocks}
        )


def relay_feedback(records: list[ProposalRecord], fw: Framework) -> str:
    """The MEDIATOR's relay to the DRIVE: structured findings, never the EVALUATOR's words.

    Per proposal: score, verdict, gate outcome, the framework rules hit (by the framework's
    own id and text: a hit the framework does not know is counted, not quoted), the number of
    required changes and the conflict flags. The EVALUATOR's modifications, reasoning and
    other free text never reach the DRIVE: that would be a DRIVE<->EVALUATOR text channel.
    """
    lines = []
    for rec in records:
        e = rec.evaluation
        if e is None:
            continue
        known = {rule.id: rule for hit in e.rule_hits if (rule := fw.rule(hit.rule_id)) is not None}
        unknown = sum(1 for hit in e.rule_hits if fw.rule(hit.rule_id) is None)
        rules = "; ".join(f"{rid} ({rule.text})" for rid, rule in known.items()) or "none"
        if unknown:
            rules += f"; {unknown} unnamed"
        c = e.conflict
        flags = [
            name
            for name, on in (
                ("harmful intent", c.harmful_intent),
                ("manipulation attempt", c.adversarial_intent),
                ("harm to third parties", c.third_party_harm),
                (f"{len(c.harmful_segments)} harmful sentence(s)", bool(c.harmful_segments)),
            )
            if on
        ]
        gate = "passed the gates" if rec.gate and rec.gate.admissible else "blocked by the gates"
        lines.append(
            f"Proposal {rec.rank}: score {e.score}/100, {e.verdict.value}, {gate}. Rules: {rules}. "
            f"Changes required: {len(e.modifications)}. Concerns: {', '.join(flags) or 'none'}."
        )
    return "\n".join(lines)


def guarded_evaluation(e: Evaluation, guard: FreeTextGuard, use_free_text: bool, withheld: list[str]) -> Evaluation:
    """``e`` with its onward-flowing free text bounded and checked (gates.FreeTextGuard).
    Without ``use_free_text`` (final_gate off: nothing would check what it becomes), it is
    all dropped. Every dropped field is named in ``withheld`` for the trace."""

    def one(name: str, text: str, limit: int) -> str:
        kept = guard.clean(text, limit) if use_free_text else ""
        if text.strip() and not kept and name not in withheld:
            withheld.append(name)
        return kept

    c = e.conflict
    stakeholders = [one("stakeholders", x, LIMITS["stakeholder"]) for x in c.stakeholders]
    conflict = c.model_copy(
        update={
            "safe_channel": one("safe_channel", c.safe_channel, LIMITS["safe_channel"]),
            "safe_adjacent_topic": one("safe_adjacent_topic", c.safe_adjacent_topic, LIMITS["safe_adjacent_topic"]),
            "stakeholders": [x for x in stakeholders if x],
        }
    )
    mods = [one("modifications", m, LIMITS["modification"]) for m in e.modifications]
    return e.model_copy(update={"conflict": conflict, "modifications": [m for m in mods if m]})


class Reply(NamedTuple):
    """A composed response, who composed it, and the safe channels the engine put in it."""

    text: str
    composed_by: str
    channels: list[ChannelLine]


def refusal(ctx: DefenseContext, given: str = "") -> Reply:
    """The refusal, from framework text and fixed templates only. A rule whose channel carries
    a supportive message (self-harm) gets that message with the channel, never "rephrase" (a
    known hazard's warning follows the crisis message, and leads any other channel's message:
    :func:`with_hazard_warnings`). A request that involves a
    known hazard gets :func:`hazard_refusal`. Otherwise the rules that fired and their channels,
    or, when no rule with a channel fired, the offer to help with a rephrased request -- unless
    the request itself was judged harmful: inviting a reworded harmful request only coaches the
    next attempt. A refusal for a wrong figure whose right value the framework states (a
    weekly-only medicine's schedule) ends with it. ``given`` is what the user already has ahead of
    it (a progressive stream's released text): a warning it carries is not repeated."""
    support = ctx.supportive()
    if support is not None:
        return Reply(
            support.render_message(ctx.contradicted_facts(support.rules)), "template", [ctx.support_line("in_reply")]
        )
    line = ctx.framework_line("in_reply")
    if ctx.framework.hazard_channels(ctx.request, ctx.earlier):
        return hazard_refusal(ctx, ctx.hazard_lines(given), line)
    if line is not None:
        alternative = template("channel_alternative", safe_channel=line.text)
    else:
        alternative = template("harmful_alternative" if ctx.harmful else "default_alternative")
    text = template("rationalization", rules=rules_text(ctx), alternative=alternative)
    if facts := _figure_facts(ctx):
        text = f"{text}\n{facts}"
    return Reply(text, "template", [line] if line is not None else [])


def hazard_refusal(ctx: DefenseContext, hazards: list[ChannelLine], line: ChannelLine | None) -> Reply:
    """A refusal of a request that involves known hazards: their warnings first, in framework
    order (for "my toddler is choking" the warning is the help, and a person in an emergency must
    not read a refusal before it), then the right value of a wrong figure when the framework states
    one, then one closing line that declines the rest without inviting a reworded request, with
    ``line``'s channel (a fired rule's place to go) when there is one. Framework text and fixed
    templates only; the trace lists the channels in the order the reply gives them."""
    closing = template("hazard_refusal", rules=rules_text(ctx))
    if line is not None:
        closing = f"{closing} {template('sublimation_channel', safe_channel=line.text)}"
    facts = _figure_facts(ctx)
    text = "\n\n".join([*(h.text for h in hazards), *([facts] if facts else []), closing])
    return Reply(text, "template", [*hazards, *([line] if line is not None else [])])


def reaction(ctx: DefenseContext) -> Reply:
    """Reaction Formation's reply to a manipulation attempt: the fixed text naming the rules that
    stay in force; for a request that involves a known hazard, :func:`hazard_refusal` (its warning
    first, and no invitation to ask again)."""
    if hazards := ctx.hazard_lines(""):
        return hazard_refusal(ctx, hazards, None)
    return Reply(template("reaction_formation", rules=rules_text(ctx)), "template", [])


def _figure_facts(ctx: DefenseContext) -> str:
    """The right value of a wrong figure a blocked draft stated, when the framework states it ("")."""
    figures = [r for r in ctx.fired if r in ctx.framework.figure_rule_ids]
    return ctx.contradicted_facts(figures) if figures else ""


def repressed(text: str, evaluation: Evaluation, ctx: DefenseContext, layer1: Layer1Enforcer) -> Reply:
    """Repression's reply: ``text`` without the sentences its evaluation flags or a Layer-1 check
    trips, and a note saying so. A sentence left out for a wrong figure (a dose, an everyday fact)
    gets its rule's channel's ``withheld`` note, which states the fact where it is one and points
    to the channel (framework text); flagged segments, or a rule with no such note, get the
    general note that names the rules."""
    kept, removed = repress(text, evaluation.conflict.harmful_segments, layer1)
    figures = figures_only(text, evaluation, ctx, layer1) if ctx.chosen_text is None else []
    notes: list[str] = []
    lines: list[ChannelLine] = []
    for channel in ctx.framework.channels_for(figures, ctx.request) if figures else ():
        if channel.withheld.strip() and not channel.hazard:
            facts = " ".join(ctx.framework.contradicted_facts(text, channel.rules, ctx.request))
            notes.append(channel.render_withheld(facts, _left_out(text, kept, removed, channel.rules, layer1)))
            rules = [r for r in figures if r in channel.rules]
            lines.append(ChannelLine(placement="in_reply", channels=[channel.id], text=channel.text, rules=rules))
    if evaluation.conflict.harmful_segments or not notes:
        notes.insert(0, template("repression_note", rules=rules_text(ctx)))
    return Reply(f"{kept}\n\n" + "\n".join(notes), "filtered", lines)


def _left_out(text: str, kept: str, removed: int, rules: Sequence[str], layer1: Layer1Enforcer) -> int:
    """How many of the ``removed`` sentences of ``text`` (``kept`` is what is left) were left out
    for ``rules``: those that trip one of them on their own, at least one; every removed sentence
    when only this channel's rules fired."""
    dropped = [s for line in text.splitlines() for s in _sentences(line) if s.strip() and s.strip() not in kept]
    own = sum(1 for s in dropped if any(rule in rules for rule, _ in layer1.matches(s)))
    return max(1, min(removed, own or 1))


def refusal_text(ctx: DefenseContext) -> str:
    """The text of :func:`refusal`."""
    return refusal(ctx).text


def closing_line(text: str, line: ChannelLine) -> str:
    """``text`` with the closing line that points to ``line``'s channel (a fixed template)."""
    return f"{text}\n\n{template('sublimation_channel', safe_channel=line.text)}"


def with_hazard_warnings(text: str, channels: list[ChannelLine], ctx: DefenseContext) -> tuple[str, list[ChannelLine]]:
    """``text`` led by the warning of each known hazard the request matches that it does not
    carry yet, and ``channels`` in the order the reply now gives them. For a time-critical hazard
    ("my toddler is choking") the vetted warning is the help: it comes before an answer, a redirect
    or a refusal, so a reader who stops early (or a client's ``max_tokens``) still has it. A crisis
    message that opens the reply stays first and the warnings follow it. A refusal carries them
    already, first (:func:`hazard_refusal`): nothing is added to it."""
    lines = ctx.hazard_lines(text)
    if not lines:
        return text, channels
    warnings = "\n\n".join(line.text for line in lines)
    if opens_with_crisis(channels, ctx):
        return f"{text}\n\n{warnings}", [channels[0], *lines, *channels[1:]]
    return (f"{warnings}\n\n{text}" if text else warnings), [*lines, *channels]


def opens_with_crisis(channels: Sequence[ChannelLine], ctx: DefenseContext) -> bool:
    """The reply is the crisis channel's own message (:func:`refusal` for a person at risk): the
    supportive channel opens it and serves a rule marked ``semantic_check: self-harm``. Another
    channel's message (a safety myth's correction, a wrong dose's) is no crisis: a known hazard's
    warning leads it."""
    support = ctx.supportive()
    if not channels or support is None or channels[0] != ctx.support_line("in_reply"):
        return False
    rules = [ctx.framework.rule(r) for r in support.rules]
    return any(rule is not None and rule.semantic_check == "self-harm" for rule in rules)


def fired_rules(
    request: str, records: list[ProposalRecord], fw: Framework, layer1: Layer1Enforcer, also: Sequence[str] = ()
) -> list[str]:
    """Framework ids of the rules this request set off, in framework order: the request's
    own checks (any layer), the rule hits of ``records`` (the engine passes every round's), the
    checks a blocked draft among them tripped, and ``also`` (the self-harm rules an earlier turn
    set off). They choose the safe channels (DefenseContext.channels)."""
    ids = set(fw.request_rules(request)) | set(also)
    for rec in records:
        if rec.evaluation is not None:
            ids.update(hit.rule_id for hit in rec.evaluation.rule_hits)
        if not (rec.gate and rec.gate.admissible):
            ids.update(rule_id for rule_id, _ in layer1.matches(rec.text))
    return [r.id for r in fw.rules() if r.id in ids]


def beside_answer(ctx: DefenseContext, answer: str, layer1: Layer1Enforcer) -> DefenseContext:
    """``ctx`` for the channels offered beside ``answer``, a text that passed the gates: an
    everyday-facts rule (:attr:`~psychoalign.frameworks.model.Framework.fact_rule_ids`: checked
    facts and unit conversions) that fired only because a blocked draft stated a wrong figure no
    longer applies once the answer given states the figure right or none, so it chooses no closing
    line ("There are 2.54 centimetres in an inch." is not followed by a pointer to a food safety
    agency). It stays when the request matched it, when the answer's own evaluation names it or
    when its check still matches the answer. Every other rule stays: a person at risk, a known
    hazard, a dose's label and a request-matched channel are unchanged."""
    fw = ctx.framework
    figures = fw.fact_rule_ids
    if not ctx.fired or not any(r in figures for r in ctx.fired):
        return ctx
    still = set(fw.request_rules(ctx.request)) | {rule for rule, _ in layer1.matches(answer)}
    if ctx.chosen_eval is not None:
        still.update(hit.rule_id for hit in ctx.chosen_eval.rule_hits)
    return replace(ctx, fired=[r for r in ctx.fired if r not in figures or r in still])


def rules_text(ctx: DefenseContext) -> str:
    """Framework rules that fired (DefenseContext.fired) and hit in the deciding round, as
    'id (text)'. Only framework text is used:
    ids are looked up case-insensitively and printed as the framework spells them."""
    # A known hazard's rule never refuses: a refusal does not name it.
    ids: list[str] = [r for r in ctx.fired if r not in ctx.framework.hazard_rule_ids]
    for e in ctx.round_evals:
        for hit in e.rule_hits:
            rule = ctx.framework.rule(hit.rule_id)
            if rule is not None and rule.id not in ids and rule.id not in ctx.framework.hazard_rule_ids:
                ids.append(rule.id)
    if not ids:
        return "the safety rules of this deployment"
    return "; ".join(f"{rid} ({ctx.framework.rule(rid).text})" for rid in ids[:3])  # type: ignore[union-attr]


def contribution(trace: Trace, chosen: ProposalRecord | None, final_eval: Evaluation | None) -> AlignmentContribution:
    """u_V(final) - u_V(DRIVE's round-1 favourite), split into evaluator (gating and
    selection in round 1), drive (revision across rounds) and mediator (composition) parts.
    A stage with no evaluated text carries the previous stage's value forward."""
    first = trace.rounds[0]
    top = first.proposals[0]
    baseline = top.evaluation.score / 100 if top.evaluation else None
    if baseline is None:
        return AlignmentContribution()
    adm = [r.evaluation.score / 100 for r in first.proposals if r.gate and r.gate.admissible and r.evaluation]
    after_eval = max(adm) if adm else baseline
    chosen_u_v = chosen.evaluation.score / 100 if chosen and chosen.evaluation else after_eval
    final_u_v = final_eval.score / 100 if final_eval is not None else chosen_u_v
    return AlignmentContribution(
        baseline_u_v=baseline,
        evaluator=after_eval - baseline,
        drive=chosen_u_v - after_eval,
        mediator=final_u_v - chosen_u_v,
        final_u_v=final_u_v,
    )
