"""The negotiation loop: one request in, one gated response and one trace out.

Read this file top to bottom to follow a request: validate -> rounds of (DRIVE proposes,
EVALUATOR scores each proposal, gates filter, MEDIATOR assesses) until early exit, convergence
or k rounds -> choose -> defense mechanism -> MEDIATOR composes -> dual gate -> trace.
Every agent call goes through the :class:`MessageBus` as the MEDIATOR.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..agents.messages import (
    AssessItem,
    AssessTask,
    DriveTask,
    EvaluateBatchTask,
)
from ..agents.schemas import Evaluation, Verdict
from ..errors import InputError, ModelError, PsychoAlignError, public_message, redact
from ..frameworks import Framework, load_framework
from ..storage import describe_error
from ..textio import normalise_text
from ..traces.model import (
    FinalDecision,
    ProposalRecord,
    RoundRecord,
    Trace,
    TraceStatus,
    redact_blocked_drafts,
)
from ..traces.store import StoreError
from ._deciding import SCREEN_PROPOSAL as SCREEN_PROPOSAL  # named by bench/quoted_screen.py
from ._deciding import _Deciding
from .bus import CallObserver, MessageBus
from .decision import (
    AnswerCheck,
    Gates,
    relay_feedback,
)
from .defense import DefenseContext, DefenseMechanism, figures_only, select_mechanism, template
from .events import EventHook, NegotiationEvent, emit
from .gates import FreeTextGuard, Layer1Enforcer, TauFilter, canonical_hits
from .progressive import WindowStream, release_in_windows
from .tension import tension
from .track import ConversationRef, CrossTurnRecord, assess, turn_signal, unavailable

_log = logging.getLogger(__name__)


class Negotiator(_Deciding):
    """Runs negotiations. Reusable and safe for concurrent ``negotiate`` calls.

    ``models`` overrides the per-role models from ``settings`` (used by tests and benchmarks);
    ``transport`` is how agents are reached: in-process by default; settings whose ``a2a.urls``
    name remote agents need one (``psychoalign.a2a.remote_transport(settings)``), so a negotiator
    never runs in-process agents when the configuration put them elsewhere.
    """

    async def negotiate(
        self,
        request: str,
        *,
        framework: str | Path | Framework = "general",
        context: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        on_event: EventHook | None = None,
        conversation: ConversationRef | None = None,
        answer_check: AnswerCheck | None = None,
        stream: WindowStream | None = None,
        on_call: CallObserver | None = None,
        earlier: Sequence[str] | None = None,
    ) -> Trace:
        """Negotiate one request. Never raises for model, input or storage failures: the returned
        trace has ``status == FAILED``, the reason in ``error`` (one line, no SQL), and a fixed
        refusal as response. Request and context are normalised first (textio.normalise_text).
        ``on_event`` observes progress (stage names and numbers only, never agent text).
        ``conversation`` (server-derived keys, :func:`~psychoalign.negotiation.track.conversation_ref`)
        files this turn in its conversation and lets the earlier turns' tension track tighten tau
        (``cross_turn``; docs/negotiation.md). ``answer_check`` adds the caller's own deterministic
        check to the gates (the gateway's tool-call gate): its reasons block a draft and the final
        text as a Layer-1 check does. ``stream`` releases the DRIVE's draft in gated windows
        instead of negotiating it whole (negotiation/progressive.py). ``on_call`` observes each
        agent call (telemetry). ``earlier``: the conversation's earlier user turns, oldest first
        (the most recent ``cross_turn_history`` are kept); ``None`` reads them from the
        conversation's stored turns when ``conversation`` finds any. Every draft and the reply
        are checked in their context as in the request's, so a dose is held to the child an
        earlier turn names ("My son is 2." then "How much ibuprofen can I give him?"). The models
        see the conversation through ``context``; these turns feed the deterministic checks (the
        gates, and an EVALUATOR that applies them itself)."""
        clean = normalise_text(request)
        trace = Trace(
            request=clean, context=normalise_text(context or ""), params=self.params, metadata=dict(metadata or {})
        )
        if clean != request:
            trace.metadata["request_normalised"] = True
        trace.metadata.setdefault("owner", self._owner)
        bus = MessageBus(self.transport, observer=on_call)
        self._hooks[trace.id] = on_event
        try:
            trace.models = self.model_labels()
            trace.cross_turn, stored = await self._track(trace, conversation)
            turns = [normalise_text(t) for t in (stored if earlier is None else earlier)]
            trace.earlier = [t for t in turns if t.strip()][-self.params.cross_turn_history :]
            if self.store is not None:
                await self._stored(self.store.start(trace), "record")
            if on_event is not None:  # no observer: no event is built
                await emit(on_event, NegotiationEvent(stage="started", trace_id=trace.id))
            async with asyncio.timeout(self.params.timeout_s):
                await self._run(trace, bus, framework, trace.context or None, answer_check, stream)
            trace.status = TraceStatus.COMPLETED
        except (PsychoAlignError, TimeoutError) as exc:
            self._fail(trace, exc, stream)
        except Exception as exc:  # fail closed on anything, including bugs
            _log.exception("negotiation %s failed unexpectedly", trace.id)
            self._fail(trace, exc, stream)
        except BaseException as exc:  # cancelled: record, then let it propagate
            self._fail(trace, exc, stream)
            await self._save(trace, bus)
            raise
        finally:
            self._hooks.pop(trace.id, None)
        await self._save(trace, bus)
        return trace

    async def _track(self, trace: Trace, conversation: ConversationRef | None) -> tuple[CrossTurnRecord, list[str]]:
        """The conversation's tension track for this turn, read from the trace store (the server's
        own records of the earlier turns), and those turns' requests, oldest first. Never raises:
        history that cannot be read gives the fail-closed record (tau at the cap) with the reason."""
        p = self.params
        if not p.cross_turn or conversation is None or not conversation.look_up:
            return assess(conversation, [], p), []
        if self.store is None:
            return unavailable(conversation, p, "no trace store: earlier turns are not recorded"), []
        try:
            async with asyncio.timeout(p.timeout_s):
                earlier = await self.store.conversation(
                    conversation.look_up, limit=p.cross_turn_history, exclude=trace.id
                )
            history = [turn_signal(t, p) for t in earlier]
        except Exception as exc:  # a read failure must not open the gates: fail closed
            _log.warning("cross-turn history unavailable: %r", exc)
            reason = "timed out" if isinstance(exc, TimeoutError) else describe_error(exc)
            return unavailable(conversation, p, f"could not read the conversation's earlier turns: {reason}"), []
        return assess(conversation, history, p), [t.request for t in earlier]

    @staticmethod
    async def _stored(operation: Awaitable[None], what: str) -> None:
        """Run a store operation; any failure becomes one clean line (never SQL or parameters)."""
        try:
            await operation
        except PsychoAlignError:
            raise
        except Exception as exc:
            # debug, not warning: the StoreError raised says the same to the caller, and a warning
            # reached a CLI user as a second stderr line beside the one error line
            _log.debug("trace store failed: %r", exc)
            raise StoreError(f"could not {what} the trace: {describe_error(exc)}", hint="check store_url") from None

    @staticmethod
    def _fail(trace: Trace, exc: BaseException, stream: WindowStream | None = None) -> None:
        trace.status = TraceStatus.FAILED
        if isinstance(exc, TimeoutError):
            trace.error = f"negotiation exceeded timeout_s={trace.params.timeout_s:g}"
        elif isinstance(exc, PsychoAlignError):
            # Messages may quote input (a file name from argv can hold lone surrogates): the
            # trace must stay storable and printable. ``error`` is the failure class users see;
            # what a provider said back is internal (``error_detail``, redacted, bounded).
            trace.error = normalise_text(public_message(exc))
            trace.error_detail = normalise_text(redact(exc.detail)) or None
        elif isinstance(exc, asyncio.CancelledError):  # its message is ours (e.g. server shutdown), never data
            trace.error = f"cancelled: {exc}" if str(exc) else "cancelled"
        else:  # a bug: name it, without internals that could carry data
            trace.error = f"internal error ({type(exc).__name__})"
        # Fail closed: whatever was computed, the user gets a fixed text and no model output.
        trace.final = FinalDecision(
            response=template("fail_closed"), composed_by="fallback", fallback=True, channels=[]
        )
        if stream is not None and stream.released:  # windows already sent stay in the record of what was sent
            trace.final.response = f"{stream.text}\n\n{trace.final.response}"
            trace.metadata["stream"] = stream.record(cut=True)

    async def _save(self, trace: Trace, bus: MessageBus) -> None:
        trace.agents = dict(bus.stats)  # the bus is this negotiation's alone: its counters are not copied
        trace.finished_at = datetime.now(UTC)
        # Nothing harmful at rest by default: blocked drafts leave as hash and length, also in the
        # trace returned to the caller (the CLI, the viewer and exports read the same record).
        if self.settings.traces.keep_blocked_drafts:
            trace.blocked_drafts_kept = True
        else:
            redact_blocked_drafts(trace)
        if self.store is None:
            return
        try:
            await self._stored(self.store.finish(trace), "store")
        except StoreError as exc:
            # The user must not get an answer the audit trail does not hold: fail closed, and
            # try to leave the failed version (the running row is otherwise recovered later).
            self._fail(trace, exc)
            with contextlib.suppress(Exception):
                await self.store.finish(trace)

    async def _run(
        self,
        trace: Trace,
        bus: MessageBus,
        framework: str | Path | Framework,
        context: str | None,
        answer_check: AnswerCheck | None = None,
        stream: WindowStream | None = None,
    ) -> None:
        p = self.params
        request = trace.request
        if not request.strip():
            raise InputError("the request is empty", hint="pass a non-empty request")
        if len(request) > p.max_request_chars:
            raise InputError(
                f"the request is {len(request)} characters, over the limit of {p.max_request_chars}",
                hint="shorten it or raise negotiation.max_request_chars",
            )
        fw = framework if isinstance(framework, Framework) else load_framework(framework)
        trace.framework = fw.stamp
        context = context or fw.deployment_context
        trace.context = context
        for i, turn in enumerate(trace.earlier):
            if len(turn) > p.max_request_chars:
                raise InputError(
                    f"earlier user turn {i + 1} is {len(turn)} characters, over the limit of {p.max_request_chars}",
                    hint="shorten it or raise negotiation.max_request_chars",
                )
        # The cross-turn track may have tightened tau for this turn (never loosened it).
        # The request, with the conversation's earlier user turns, is the context every model
        # text is checked in (a dose for the child the request or an earlier turn names).
        layer1, tau = (
            Layer1Enforcer(fw, request, trace.earlier),
            TauFilter(trace.cross_turn.tau_effective if trace.cross_turn else p.tau),
        )
        guard = FreeTextGuard(layer1)  # remembers every blocked draft of this negotiation
        fw_payload = fw.payload()
        gates = Gates(fw, fw_payload, layer1, tau, guard, answer_check)
        await self._screen_crisis(trace, fw)
        if p.decide_on_request and await self._decide_on_request(trace, bus, gates):
            self._possible_risk(trace, fw)
            return
        if stream is not None:
            await release_in_windows(trace, bus, gates, context, stream, self._emit)
            self._possible_risk(trace, fw)
            return

        feedback: str | None = None
        converged = False
        for r in range(1, p.k + 1):
            await self._emit(trace, "round", round=r)
            # 1-3. DRIVE proposes, EVALUATOR scores, gates filter. Fast path (docs/negotiation.md):
            # round 1 asks for one proposal first and for the other n - 1 only if that one is not
            # accepted outright; later rounds ask for n at once, unless the DRIVE writes one answer
            # per model call anyway (an embedded, plain DRIVE): then every round asks one first.
            want = 1 if p.fast_path and (r == 1 or self._plain_drive()) else p.n_proposals
            records = await self._propose(bus, request, context, want, 0, feedback, gates)
            corrected: bool | None = None  # a correction replaces the redraws (None: not judged yet)
            if (
                want < p.n_proposals
                and not self._accepted(records[0])
                and not self._confident(records[0], tau)
                and not self._at_ceiling(records, tau)
                and not (corrected := self._correctable(trace, records, gates))
            ):
                corrected = None  # the round has more drafts now: judged again below
                more = await self._propose(bus, request, context, p.n_proposals - want, want, feedback, gates)
                records = sorted([*records, *more], key=lambda rec: -rec.utility)  # stable: earlier first on ties
                for i, rec in enumerate(records, start=1):
                    rec.rank = i
            admissible = [rec for rec in records if rec.gate is not None and rec.gate.admissible]
            for rec in records:
                if rec not in admissible:
                    guard.block(rec.text)
            # 4. MEDIATOR judges feasibility of admissible proposals only; the objective picks the lead.
            # With one admissible proposal there is nothing to choose between: no assessment call.
            if len(admissible) > 1 or (admissible and not p.fast_path):
                await self._assess(bus, request, context, admissible)
            # Without an admissible proposal the DRIVE's favourite is what the disagreement is about.
            lead = max(admissible, key=lambda rec: rec.objective or 0.0) if admissible else records[0]
            round_record = RoundRecord(
                index=r,
                proposals=records,
                lead=records.index(lead),
                tension=lead.tension or 0.0,
                admissible=len(admissible),
            )
            trace.rounds.append(round_record)
            await self._emit(
                trace,
                "evaluated",
                round=r,
                proposals=len(records),
                admissible=len(admissible),
                tension=round_record.tension,
            )
            # 5. Exit tests (docs/negotiation.md).
            if self._accepted(lead):
                round_record.exit = "early_exit" if r == 1 else "accepted"
                converged = True
                break
            if self._confident(lead, tau):  # a deviation: docs/negotiation.md, "A conditional draft ..."
                round_record.exit = "confident"
                converged = True
                break
            if r > 1 and admissible and abs(round_record.tension - trace.rounds[-2].tension) < p.epsilon:
                round_record.exit = "converged"
                converged = True
                break
            if corrected if corrected is not None else self._correctable(trace, records, gates):
                # A deviation: docs/negotiation.md, "A wrong figure the framework states right". The
                # decision withholds the wrong sentence and states the fact instead of a redraw.
                round_record.exit = "corrected"
                break
            if p.fast_path and self._at_ceiling(records, tau):
                # No other draft can score higher: converged on the lead if it is admissible,
                # else a deadlock with nothing to give (docs/negotiation.md, "the ceiling").
                round_record.exit = "ceiling"
                converged = bool(admissible)
                break
            if r < p.k:
                feedback = relay_feedback(records, fw)
                round_record.feedback_to_drive = feedback

        trace.converged = converged
        await self._emit(trace, "deciding")
        await self._decide(trace, bus, gates, context)
        self._possible_risk(trace, fw)

    async def _propose(
        self,
        bus: MessageBus,
        request: str,
        context: str,
        n: int,
        first: int,
        feedback: str | None,
        gates: Gates,
    ) -> list[ProposalRecord]:
        """``n`` DRIVE proposals (``first`` already written this round), each evaluated in its own
        model call (one EVALUATOR message), gated; ranked by utility."""
        task = DriveTask(
            request=request, context=self._drive_context(context, gates), n=n, feedback=feedback, first=first
        )
        drive = await bus.send("mediator", "drive", task)
        proposals = sorted(drive.output.proposals, key=lambda x: -x.utility)[:n]
        batch = EvaluateBatchTask(
            request=request,
            context=context,
            proposals=[x.text for x in proposals],
            earlier=gates.layer1.earlier,
            framework=gates.fw_payload,
        )
        evals: list[Evaluation] = (await bus.send("mediator", "evaluator", batch)).output.evaluations
        if len(evals) != len(proposals):  # a remote EVALUATOR answered for the wrong proposals
            raise ModelError(f"the evaluator returned {len(evals)} evaluations for {len(proposals)} proposals")
        return [
            ProposalRecord(
                rank=first + i + 1,
                text=x.text,
                utility=x.utility,
                evaluation=canonical_hits(e, gates.fw),  # ids as the gate read them
                gate=gates.gate(x.text, e),
                tension=tension(x.utility, e.score / 100),
            )
            for i, (x, e) in enumerate(zip(proposals, evals, strict=True))
        ]

    def _at_ceiling(self, records: list[ProposalRecord], tau: TauFilter) -> bool:
        """Fast path: the EVALUATOR declared the highest score any answer to this request can get
        (``Evaluation.ceiling``), and either it is below the safety floor (no draft can ever pass
        the tau gate) or an admissible proposal already reaches it (no draft can score higher).
        Either way further drafts could not change the outcome: they are not asked for."""
        if not self.params.fast_path:
            return False
        ceilings = [rec.evaluation.ceiling for rec in records if rec.evaluation is not None]
        if not ceilings or any(c is None for c in ceilings):
            return False
        ceiling = min(c for c in ceilings if c is not None)
        if ceiling < tau.tau * 100:
            return True
        return any(
            rec.gate is not None
            and rec.gate.admissible
            and rec.evaluation is not None
            and rec.evaluation.score >= ceiling
            for rec in records
        )

    def _accepted(self, rec: ProposalRecord) -> bool:
        """Admissible, APPROVED and scored at least eta: the negotiation can stop here."""
        e = rec.evaluation
        return (
            rec.gate is not None
            and rec.gate.admissible
            and e is not None
            and e.verdict is Verdict.APPROVED
            and e.score / 100 >= self.params.eta
        )

    def _confident(self, rec: ProposalRecord, tau: TauFilter) -> bool:
        """Deviation from the paper (docs/negotiation.md, "A conditional draft for a confident
        request"): an admissible CONDITIONAL draft that trips no rule, has no harmful sentence
        and no intent flag, for a request whose ceiling (the classifier's P(request)) is at or
        above ``confident_request``, with tau as configured (not tightened by the conversation),
        ends the drafting: it is adopted as the paper's conditional acceptance would adopt it,
        without first asking for drafts that could only score higher. A VETOED draft never
        qualifies (it is not admissible)."""
        p, e = self.params, rec.evaluation
        return (
            p.adopt_conditional
            and rec.gate is not None
            and rec.gate.admissible
            and e is not None
            and e.verdict is Verdict.CONDITIONAL
            and e.ceiling is not None
            and e.ceiling >= round(p.confident_request * 100, 6)
            and tau.tau <= p.tau
            and not e.rule_hits
            and not (e.conflict.harmful_intent or e.conflict.adversarial_intent or e.conflict.third_party_harm)
            and not e.conflict.harmful_segments
        )

    def _correctable(self, trace: Trace, records: list[ProposalRecord], gates: Gates) -> bool:
        """Deviation from the paper (docs/negotiation.md, "A wrong figure the framework states
        right"): no proposal of the round is admissible and one was blocked only for stating a wrong
        figure that the framework states right (a checked fact or conversion, a weekly-only
        medicine's schedule), with the decision after the rounds giving the user that draft with
        the sentence left out and the fact stated (Repression), or the fact alone when the draft is
        all wrong figure (the figure channel's message). Drafting stops there: a redraw could only
        be blocked again or give another answer to the same figure, which the checked fact already
        states. Never with ``final_gate`` off (nothing would evaluate what is kept), for a
        manipulation attempt, a draft with a harmful sentence or harm to others, harmful intent
        apart from the figure, another rule that fired (a person at risk included) or a caller's
        check that blocks the draft."""
        p = self.params
        if not (p.correct_figures and p.final_gate):
            return False
        if any(rec.gate is not None and rec.gate.admissible for rec in records):
            return False
        # The context the decision after the rounds builds if drafting stops here (this round deciding).
        drafts = [*(rec for rd in trace.rounds for rec in rd.proposals), *records]
        ctx = self._round_context(trace, records, drafts, gates)
        return any(self._only_figure(rec, ctx, gates) for rec in records)

    def _only_figure(self, rec: ProposalRecord, ctx: DefenseContext, gates: Gates) -> bool:
        """``rec``'s only fault is a wrong figure the framework states right (:meth:`_correctable`),
        and the decision given ``ctx`` (the round's) leaves it out or states the fact."""
        e, fw, layer1 = rec.evaluation, gates.fw, gates.layer1
        if e is None or rec.gate is None:
            return False
        figures = fw.figure_rule_ids
        c = e.conflict
        if c.adversarial_intent or c.third_party_harm or c.harmful_segments:
            return False
        if c.harmful_intent and not any(hit.rule_id in figures for hit in e.rule_hits):
            return False
        if gates.extra is not None and gates.extra(rec.text):
            return False
        broke = figures_only(rec.text, e, ctx, layer1)
        if not broke or not fw.contradicted_facts(rec.text, broke):
            return False
        # What the decision will give: the draft with the sentence left out, or the figure's message.
        mechanism = select_mechanism(ctx, layer1)
        support = ctx.supportive()
        return mechanism is DefenseMechanism.REPRESSION or (
            mechanism is DefenseMechanism.SUBLIMATION and support is not None and set(support.rules) <= figures
        )

    async def _assess(self, bus: MessageBus, request: str, context: str, admissible: list[ProposalRecord]) -> None:
        p = self.params
        items = [
            AssessItem(
                text=rec.text, utility=rec.utility, score=rec.evaluation.score, verdict=rec.evaluation.verdict.value
            )
            for rec in admissible
            if rec.evaluation is not None
        ]
        reply = await bus.send("mediator", "mediator", AssessTask(request=request, context=context, items=items))
        feasibility = {a.proposal: a.feasibility for a in reply.output.assessments}
        for i, rec in enumerate(admissible, start=1):
            assert rec.evaluation is not None
            rec.feasibility = feasibility.get(i, 0.0)  # an unrated proposal gets no feasibility credit
            rec.objective = (
                p.alpha * rec.utility + p.beta * rec.evaluation.score / 100 + p.gamma * rec.feasibility
            ) / (p.alpha + p.beta + p.gamma)
