"""How a negotiation ends: the request screen that can decide before any draft, the choice
among the rounds' proposals, the defense mechanism, the MEDIATOR's composition and the dual
gate (a part of :class:`~psychoalign.negotiation.engine.Negotiator`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ..agents.messages import (
    NO_PROPOSAL,
    ComposeTask,
    EvaluateTask,
)
from ..agents.schemas import Evaluation, Verdict
from ..frameworks import Framework, Layer
from ..models.crisis_check import BAND_FLOOR
from ..traces.model import (
    AlignmentContribution,
    ChannelLine,
    FinalDecision,
    ProposalRecord,
    RequestScreen,
    Trace,
)
from ._roles import _Roles
from .bus import MessageBus
from .decision import (
    Gates,
    Reply,
    beside_answer,
    closing_line,
    contribution,
    fired_rules,
    guarded_evaluation,
    reaction,
    refusal,
    repressed,
    with_hazard_warnings,
)
from .defense import (
    DefenseContext,
    DefenseMechanism,
    compose_instruction,
    repression_source,
    select_mechanism,
    template,
)
from .gates import GateResult, Layer1Enforcer, canonical_hits
from .tension import SystemState, classify_state, tension

#: What the EVALUATOR is shown as the "proposal" when it screens a request before any draft.
SCREEN_PROPOSAL = "(no answer has been written yet: judge whether any answer to this request could be acceptable)"


def _evaluate(request: str, context: str, proposal: str, layer1: Layer1Enforcer, framework: Any) -> EvaluateTask:
    """The EVALUATOR's task for one text: the request screen, a composed reply or the final one."""
    return EvaluateTask(
        request=request, context=context, proposal=proposal, earlier=layer1.earlier, framework=framework
    )


def band_score(trace: Trace) -> tuple[float, list[str]] | None:
    """The crisis check's score for the request, and which tiers gave it ('floor', the band vote's
    label), when an evaluation of it put it in the possible-risk band (the negotiation's crisis
    screen's, else the request screen's, else a draft's: the request's score is the same for every
    text)."""
    screen = trace.crisis_screen
    if screen is not None and screen.band is not None:
        # the negotiation's own crisis screen (an LLM EVALUATOR)
        return screen.band, list(screen.band_by or [BAND_FLOOR])
    evaluations = [trace.screen.evaluation] if trace.screen is not None else []
    evaluations += [rec.evaluation for rd in trace.rounds for rec in rd.proposals]
    for e in evaluations:
        if e is not None and e.crisis_band is not None:
            return e.crisis_band, list(e.crisis_band_by or [BAND_FLOOR])
    return None


class _Deciding(_Roles):
    """The request screen and the decision after the rounds (docs/negotiation.md, steps 6-8)."""

    async def _decide_on_request(self, trace: Trace, bus: MessageBus, gates: Gates) -> bool:
        """Deviation from the paper (docs/negotiation.md, "When the request decides"): when no
        answer to the request could pass the gates, the negotiation ends before any DRIVE call,
        so no harmful draft is written, paid for or stored. The request decides when it trips a
        universal rule's check or request check (no model call), when an earlier user turn in the
        cross-turn window trips the self-harm rule's (a person at risk), or when an EVALUATOR that
        judges requests names a universal rule the request trips (the embedded crisis check) or
        puts the ceiling of any answer below tau. The response is composed by the
        defense table from the framework, as for a negotiation in which every draft was blocked.
        Returns whether the request decided (``trace.final`` is then set)."""
        fw, fw_payload, layer1, tau, guard, _ = gates
        rules = fw.universal_request_rules(trace.request)
        # A person who said "I want to die" a few turns ago and now asks "How many of them would it
        # take?": the self-harm rule an earlier turn set off decides this turn as well, as does a
        # rule the request completes only with an earlier turn ("My dog is a spaniel." then "Can I
        # give him my ibuprofen?").
        universal = {r.id for r in fw.universal}
        rules += [r for r in self._from_earlier(trace, fw) if r in universal and r not in rules]
        evaluation: Evaluation | None = None
        if not rules and self._judges_requests():
            task = _evaluate(trace.request, trace.context, SCREEN_PROPOSAL, layer1, fw_payload)
            evaluation = canonical_hits((await bus.send("mediator", "evaluator", task)).output, fw)
            # A universal rule the screen names was tripped by the request alone (the screen's
            # proposal is fixed text): the embedded EVALUATOR's crisis check fires the framework's
            # self-harm rule this way, and it decides as a request check match does.
            rules = [h.rule_id for h in evaluation.rule_hits if h.layer is Layer.UNIVERSAL and h.rule_id in universal]
        ceiling = evaluation.ceiling if evaluation is not None else None
        decided = bool(rules) or (ceiling is not None and ceiling < tau.tau * 100)
        trace.screen = RequestScreen(decided=decided, rules=rules, ceiling=ceiling, evaluation=evaluation)
        if not decided:
            return False
        await self._emit(trace, "deciding")
        p = self.params
        withheld: list[str] = []
        evals = [guarded_evaluation(evaluation, guard, p.final_gate, withheld)] if evaluation is not None else []
        fired = set(rules) | set(fw.request_rules(trace.request)) | set(self._from_earlier(trace, fw))
        fired.update(hit.rule_id for e in evals for hit in e.rule_hits)
        ctx = DefenseContext(
            chosen_text=None,
            chosen_eval=None,
            round_evals=evals,
            deadlock=True,
            framework=fw,
            verified=p.final_gate,
            fired=[r.id for r in fw.rules() if r.id in fired],
            request=trace.request,
            earlier=layer1.earlier,
        )
        mechanism, reply = await self._respond(bus, trace.request, trace.context, ctx, layer1)
        final_gate: GateResult | None = None
        fallback = False
        if reply.composed_by != "template":  # a MEDIATOR redirect (Sublimation, Displacement): the dual gate
            await self._emit(trace, "final_gate")
            task = _evaluate(trace.request, trace.context, reply.text, layer1, fw_payload)
            final_eval = (await bus.send("mediator", "evaluator", task)).output
            final_gate = gates.gate(reply.text, final_eval)
            if not final_gate.admissible:
                fallback = True
                mechanism, reply = self._fallback(ctx)
        # A known hazard's warning leads a redirect (after a crisis message); a refusal opens with it.
        response, channels = with_hazard_warnings(reply.text, reply.channels, ctx)
        trace.final = FinalDecision(
            response=response,
            state=SystemState.DEADLOCK,
            defense=mechanism,
            composed_by=reply.composed_by,
            final_gate=final_gate,
            fallback=fallback,
            withheld=withheld,
            channels=channels,
        )
        trace.contribution = AlignmentContribution()
        return True

    def _round_context(
        self,
        trace: Trace,
        deciding: Sequence[ProposalRecord],
        drafts: Sequence[ProposalRecord],
        gates: Gates,
        *,
        chosen: ProposalRecord | None = None,
        deadlock: bool = True,
        judged: Callable[[Evaluation], Evaluation] = lambda e: e,
    ) -> DefenseContext:
        """The decision's view of a round whose drafts are ``deciding``: their evaluations (as
        ``judged`` gives them), the blocked ones, and the rules set off by the request and by
        ``drafts`` (every round's so far, ``deciding`` included)."""
        fw, layer1 = gates.fw, gates.layer1
        return DefenseContext(
            chosen_text=chosen.text if chosen else None,
            chosen_eval=judged(chosen.evaluation) if chosen and chosen.evaluation else None,
            round_evals=[judged(rec.evaluation) for rec in deciding if rec.evaluation is not None],
            deadlock=deadlock,
            framework=fw,
            blocked=[
                (rec.text, judged(rec.evaluation))
                for rec in deciding
                if rec.evaluation is not None and not (rec.gate and rec.gate.admissible)
            ],
            verified=self.params.final_gate,
            # Every round's: a rule an earlier round's drafts tripped (the dose label, self-harm)
            # still chooses the channel when the last round's drafts failed for other reasons.
            fired=fired_rules(trace.request, list(drafts), fw, layer1, also=self._from_earlier(trace, fw)),
            request=trace.request,
            earlier=layer1.earlier,
        )

    async def _decide(self, trace: Trace, bus: MessageBus, gates: Gates, context: str) -> None:
        p = self.params
        _, fw_payload, layer1, _, guard, _ = gates
        chosen_round, chosen = self._choose(trace)
        deadlock = not trace.converged
        withheld: list[str] = []

        def guarded(e: Evaluation) -> Evaluation:
            return guarded_evaluation(e, guard, p.final_gate, withheld)

        ctx = self._round_context(
            trace,
            trace.rounds[-1].proposals,
            [rec for rd in trace.rounds for rec in rd.proposals],
            gates,
            chosen=chosen,
            deadlock=deadlock,
            judged=guarded,
        )
        # Beside an answer, a figure rule a blocked draft tripped chooses no channel when the answer
        # given no longer states that figure wrong (decision.beside_answer); a refusal keeps it.
        given = beside_answer(ctx, chosen.text, layer1) if chosen is not None else ctx
        mechanism, reply = await self._respond(bus, trace.request, context, given, layer1)
        response, composed_by, channels = reply

        # Dual gate: the final text passes the gates again, unless it is a fixed template
        # (framework text and constant strings only: no model output to check).
        final_gate: GateResult | None = None
        final_eval: Evaluation | None = None
        fallback = False
        if composed_by != "template":
            # An approved proposal adopted verbatim *is* the text the EVALUATOR just judged and the
            # gates passed: it is not re-evaluated (fast path), but its deterministic Layer-1
            # checks run again below like any final text's. A draft adopted although not approved
            # outright (an embedded MEDIATOR's conditional band) is evaluated again, unless the
            # EVALUATOR is deterministic: it would give the same evaluation, which the gates passed.
            judged = (
                chosen is not None
                and chosen.evaluation is not None
                and chosen.gate is not None
                and chosen.gate.admissible
                and response == chosen.text
                and (chosen.evaluation.verdict is Verdict.APPROVED or self._evaluator_deterministic())
            )
            if p.final_gate and not (p.fast_path and composed_by == "adopted" and judged):
                await self._emit(trace, "final_gate")
                task = _evaluate(trace.request, context, response, layer1, fw_payload)
                final_eval = (await bus.send("mediator", "evaluator", task)).output
                final_gate = gates.gate(response, final_eval)
            else:  # adopted, or only gated proposal text is used (see _compose_unverified): re-run the checks
                final_gate = gates.recheck(response)
            if not final_gate.admissible:
                fallback = True
                mechanism, (response, composed_by, channels) = self._fallback(ctx)
        closing = ctx if fallback else beside_answer(given, response, layer1)
        support = closing.supportive()
        if support is not None and support.text not in response:
            # A person at risk always gets the crisis channel, also beside an answer (framework text).
            line = closing.support_line("closing_line")
            response, channels = closing_line(response, line), [*channels, line]
        # A known hazard's warning leads whatever answers the request (framework text), after a
        # crisis message that opens it; a refusal opens with it already (decision.hazard_refusal).
        response, channels = with_hazard_warnings(response, channels, ctx)

        last = trace.rounds[-1]
        ref = chosen or last.proposals[last.lead]  # no choice: the last round's lead is what was contested
        u_d = ref.utility
        # A response the dual gate rejected earns no alignment credit: u_V = 0.
        u_v = 0.0 if fallback else (ref.evaluation.score / 100 if ref.evaluation else 0.0)
        t_final = tension(u_d, u_v)
        state = classify_state(
            final_tension=t_final,
            u_d=u_d,
            u_v=u_v,
            round_tensions=[rd.tension for rd in trace.rounds],
            converged=trace.converged,
            threshold=p.healthy_threshold,
        )
        if fallback and state is not SystemState.DEADLOCK:
            # The DRIVE's answer had to be overruled at the last gate: never an equilibrium.
            state = SystemState.DRIVE_DOMINANT
        trace.final = FinalDecision(
            response=response,
            chosen_round=chosen_round if chosen else None,
            chosen_rank=chosen.rank if chosen else None,
            u_d=u_d,
            u_v=u_v,
            tension=t_final,
            state=state,
            defense=mechanism,
            composed_by=composed_by,
            final_gate=final_gate,
            fallback=fallback,
            withheld=withheld,
            channels=channels,
        )
        trace.contribution = contribution(trace, chosen, None if fallback else final_eval)

    def _possible_risk(self, trace: Trace, fw: Framework) -> None:
        """The possible-risk band (docs/negotiation.md, "The possible-risk band"): when the
        EVALUATOR put the request in the crisis check's band (below routing, at or above the band's
        floor), the reply, answer or refusal as the negotiation decided, ends with the framework's
        soft crisis line (framework text), recorded as a closing-line channel with the score in
        ``final.crisis_band``. Never beside a routed crisis reply (it already carries the channel),
        and a refusal's offer to rephrase gives way to the harmful-request alternative: a person who
        may be at risk is not coached to reword. Off with ``crisis_band = false``."""
        final = trace.final
        if final is None or not self.params.crisis_band:
            return
        band = band_score(trace)
        channel = next((c for c in fw.safe_channels if c.band_line.strip()), None)
        if band is None or channel is None:
            return
        if any(channel.id in line.channels for line in final.channels or ()) or channel.text in final.response:
            return
        line = ChannelLine(placement="closing_line", channels=[channel.id], text=channel.render_band_line())
        response = final.response.replace(template("default_alternative"), template("harmful_alternative"))
        final.response = f"{response}\n\n{line.text}" if response else line.text
        final.channels = [*(final.channels or ()), line]
        final.crisis_band, final.crisis_band_by = band

    async def _respond(
        self, bus: MessageBus, request: str, context: str, ctx: DefenseContext, layer1: Layer1Enforcer
    ) -> tuple[DefenseMechanism | None, Reply]:
        """The defense mechanism for ``ctx`` and the reply it composes: who composed it (the
        MEDIATOR when the final gate checks its text, else gated text only) and the channels in it."""
        mechanism = select_mechanism(ctx, layer1)
        if self.params.final_gate:
            return mechanism, await self._compose(bus, request, context, mechanism, ctx, layer1)
        return mechanism, self._compose_unverified(mechanism, ctx, layer1)

    @classmethod
    def _fallback(cls, ctx: DefenseContext) -> tuple[DefenseMechanism, Reply]:
        """What replaces a response the final gate rejected: the refusal, supportive when a person is at risk."""
        mechanism = DefenseMechanism.SUBLIMATION if ctx.supportive() else DefenseMechanism.RATIONALIZATION
        return mechanism, refusal(ctx)._replace(composed_by="fallback")

    def _choose(self, trace: Trace) -> tuple[int, ProposalRecord | None]:
        """Converged: the last round's lead. Deadlock: the highest-scoring admissible proposal
        seen in any round (ties: higher objective, then earlier round)."""
        if trace.converged:
            last = trace.rounds[-1]
            return last.index, last.proposals[last.lead]
        best: tuple[int, ProposalRecord] | None = None
        for rd in trace.rounds:
            for rec in rd.proposals:
                if rec.gate is None or not rec.gate.admissible or rec.evaluation is None:
                    continue
                key = (rec.evaluation.score, rec.objective or 0.0)
                if best is None or key > (best[1].evaluation.score, best[1].objective or 0.0):  # type: ignore[union-attr]
                    best = (rd.index, rec)
        return (best[0], best[1]) if best else (0, None)

    async def _compose(
        self,
        bus: MessageBus,
        request: str,
        context: str,
        mechanism: DefenseMechanism | None,
        ctx: DefenseContext,
        layer1: Layer1Enforcer,
    ) -> Reply:
        """The reply. Only admissible proposal text, or a draft filtered by Repression, ever
        enters here; whatever is not a template then passes the dual gate."""
        if mechanism is DefenseMechanism.RATIONALIZATION or (
            mechanism is DefenseMechanism.SUBLIMATION and ctx.chosen_text is None and ctx.supportive()
        ):
            return refusal(ctx)
        if mechanism is DefenseMechanism.REACTION_FORMATION:
            return reaction(ctx)
        if mechanism is DefenseMechanism.REPRESSION:
            source = repression_source(ctx, layer1)
            assert source is not None
            return repressed(*source, ctx, layer1)
        approved_as_is = (
            ctx.chosen_eval is not None
            and ctx.chosen_eval.verdict is Verdict.APPROVED
            and not ctx.chosen_eval.modifications
        )
        if mechanism is None and approved_as_is and ctx.chosen_text is not None:
            return Reply(ctx.chosen_text, "adopted", [])  # the MEDIATOR adopts an approved proposal verbatim
        if mechanism in (None, DefenseMechanism.SUBLIMATION) and ctx.chosen_text is not None and self._plain_mediator():
            # The conditional band on an embedded MEDIATOR (a gated draft that was not approved
            # outright): a 135M model asked to apply the EVALUATOR's changes rewrites the answer,
            # and can turn it into agreement with a request's premise. The gated draft is adopted
            # as it is instead, with Sublimation's channel if a rule fired (docs/embedded.md).
            return self._compose_unverified(mechanism, ctx, layer1)
        modifications = list(ctx.chosen_eval.modifications) if ctx.chosen_eval else []
        task = ComposeTask(
            request=request,
            context=context,
            proposal=ctx.chosen_text or NO_PROPOSAL,
            modifications=modifications,
            instruction=compose_instruction(mechanism, ctx),
        )
        text = (await bus.send("mediator", "mediator", task)).output.response.strip()
        ref = ctx.reference
        channels: list[ChannelLine] = []
        if mechanism is DefenseMechanism.SUBLIMATION:
            line = ctx.safe_channel_line()
            if line is not None and line.text.lower() not in text.lower():
                text, channels = closing_line(text, line), [line]
        elif mechanism is DefenseMechanism.DISPLACEMENT and ref is not None:
            text = f"{template('displacement_prefix', adjacent_topic=ref.conflict.safe_adjacent_topic.strip())} {text}"
        elif mechanism is DefenseMechanism.PROJECTION and ref is not None:
            bullets = "\n".join(f"- {s}" for s in ref.conflict.stakeholders)
            text = f"{text}\n\n{template('projection_header')}\n{bullets}"
        return Reply(text, "mediator", channels)

    def _compose_unverified(
        self, mechanism: DefenseMechanism | None, ctx: DefenseContext, layer1: Layer1Enforcer
    ) -> Reply:
        """``final_gate = false``: nothing would evaluate new text, so none is written. The
        response is an admissible proposal (verbatim, or with Repression's sentences removed),
        or a fixed template with framework text; the MEDIATOR's composition is not used and the
        EVALUATOR's free text was dropped (so Projection and Displacement cannot be selected)."""
        if ctx.chosen_text is None:
            if mechanism is DefenseMechanism.REACTION_FORMATION:
                return reaction(ctx)
            return refusal(ctx)
        if mechanism is DefenseMechanism.REPRESSION and ctx.chosen_eval is not None:
            return repressed(ctx.chosen_text, ctx.chosen_eval, ctx, layer1)
        if mechanism is DefenseMechanism.SUBLIMATION and (line := ctx.framework_line("closing_line")) is not None:
            return Reply(closing_line(ctx.chosen_text, line), "adopted", [line])
        return Reply(ctx.chosen_text, "adopted", [])
