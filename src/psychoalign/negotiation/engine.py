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
import os
import socket
from collections.abc import Awaitable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..agents.agents import DriveAgent, EvaluatorAgent, MediatorAgent
from ..agents.messages import (
    NO_PROPOSAL,
    AssessItem,
    AssessTask,
    ComposeTask,
    DriveTask,
    EvaluateBatchTask,
    EvaluateTask,
)
from ..agents.schemas import Evaluation, Verdict
from ..config import Settings, load_settings
from ..errors import ConfigError, InputError, ModelError, PsychoAlignError, public_message, redact
from ..frameworks import Framework, Layer, load_framework
from ..models import ChatModel, build_model
from ..storage import describe_error
from ..textio import normalise_text
from ..traces.model import (
    AlignmentContribution,
    ChannelLine,
    FinalDecision,
    ProposalRecord,
    RequestScreen,
    RoundRecord,
    Trace,
    TraceStatus,
    redact_blocked_drafts,
)
from ..traces.store import StoreError, TraceStore
from .bus import AgentTransport, CallObserver, InProcessTransport, MessageBus
from .decision import (
    AnswerCheck,
    Gates,
    Reply,
    closing_line,
    contribution,
    fired_rules,
    guarded_evaluation,
    refusal,
    relay_feedback,
    rules_text,
    with_hazard_warnings,
)
from .defense import (
    DefenseContext,
    DefenseMechanism,
    compose_instruction,
    repress,
    repression_source,
    select_mechanism,
    template,
)
from .events import EventHook, NegotiationEvent, emit
from .gates import FreeTextGuard, GateResult, Layer1Enforcer, TauFilter, canonical_hits
from .params import NegotiationParams, negotiation_source, parse_params
from .progressive import WindowStream, release_in_windows
from .tension import SystemState, classify_state, tension
from .track import ConversationRef, CrossTurnRecord, assess, turn_signal, unavailable

_log = logging.getLogger(__name__)
ROLES = ("drive", "evaluator", "mediator")
#: What the EVALUATOR is shown as the "proposal" when it screens a request before any draft.
SCREEN_PROPOSAL = "(no answer has been written yet: judge whether any answer to this request could be acceptable)"


def _evaluate(request: str, context: str, proposal: str, layer1: Layer1Enforcer, framework: Any) -> EvaluateTask:
    """The EVALUATOR's task for one text: the request screen, a composed reply or the final one."""
    return EvaluateTask(
        request=request, context=context, proposal=proposal, earlier=layer1.earlier, framework=framework
    )


class Negotiator:
    """Runs negotiations. Reusable and safe for concurrent ``negotiate`` calls.

    ``models`` overrides the per-role models from ``settings`` (used by tests and benchmarks);
    ``transport`` is how agents are reached: in-process by default; settings whose ``a2a.urls``
    name remote agents need one (``psychoalign.a2a.remote_transport(settings)``), so a negotiator
    never runs in-process agents when the configuration put them elsewhere.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        params: NegotiationParams | None = None,
        models: Mapping[str, ChatModel] | None = None,
        transport: AgentTransport | None = None,
        store: TraceStore | None = None,
    ) -> None:
        self.settings = settings or load_settings()
        if transport is None and self.settings.a2a.remote:
            raise ConfigError(
                "a2a.urls names remote agents, but the negotiator was given no transport to reach them",
                hint="pass transport=psychoalign.a2a.remote_transport(settings)",
            )
        self.params = params or parse_params(self.settings.negotiation, where=negotiation_source(self.settings))
        self.store = store
        self._models: dict[str, ChatModel] = dict(models or {})
        self._transport = transport
        self._owner = f"{socket.gethostname()}:{os.getpid()}"
        self._hooks: dict[str, EventHook | None] = {}  # trace id -> observer of that negotiation

    def _model(self, role: str) -> ChatModel:
        if role not in self._models:
            self._models[role] = build_model(self.settings.model_spec(role), cache_dir=self.settings.cache_dir())
        return self._models[role]

    @property
    def transport(self) -> AgentTransport:
        if self._transport is None:
            self._transport = InProcessTransport(
                DriveAgent(self._model("drive")),
                EvaluatorAgent(self._model("evaluator")),
                MediatorAgent(self._model("mediator")),
            )
        return self._transport

    def model_labels(self) -> dict[str, str]:
        transport = self.transport
        if not isinstance(transport, InProcessTransport):
            urls: dict[str, str] = getattr(transport, "urls", {})
            return {r: f"a2a:{urls.get(r, 'remote')}" for r in ROLES}
        return {r: self._model(r).label for r in ROLES}

    async def aclose(self) -> None:
        for model in self._models.values():
            await model.aclose()
        closer = getattr(self._transport, "aclose", None)
        if closer is not None:
            await closer()

    # ------------------------------------------------------------------------------------------
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

    async def _emit(self, trace: Trace, stage: Any, **data: Any) -> None:
        hook = self._hooks.get(trace.id)
        if hook is not None:  # no observer (the common case): no event is built
            await emit(hook, NegotiationEvent(stage=stage, trace_id=trace.id, **data))

    @staticmethod
    async def _stored(operation: Awaitable[None], what: str) -> None:
        """Run a store operation; any failure becomes one clean line (never SQL or parameters)."""
        try:
            await operation
        except PsychoAlignError:
            raise
        except Exception as exc:
            _log.warning("trace store failed: %r", exc)
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

    # ------------------------------------------------------------------------------------------
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
        if p.decide_on_request and await self._decide_on_request(trace, bus, gates):
            return
        if stream is not None:
            await release_in_windows(trace, bus, gates, context, stream, self._emit)
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
            if (
                want < p.n_proposals
                and not self._accepted(records[0])
                and not self._confident(records[0], tau)
                and not self._at_ceiling(records, tau)
            ):
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

    def _plain_drive(self) -> bool:
        """The DRIVE runs on an embedded model that writes plain text: one model call per answer,
        so asking for one first costs no extra call. A remote DRIVE's backend is not visible."""
        if not isinstance(self.transport, InProcessTransport):
            return False
        return not getattr(self._model("drive").backend, "rates_numbers", True)

    def _drive_context(self, context: str, gates: Gates) -> str:
        """The context the DRIVE is sent. An embedded (plain) DRIVE is not sent the framework's own
        deployment context when the request comes with nothing beyond it: its system turn would
        only displace the model's default one, so its draft is what a plain call writes, at a plain
        call's cost. No rule depends on it: the EVALUATOR and the gates judge every draft (the
        embedded classifier reads no context). Application instructions or a conversation so far
        are sent as they are."""
        return "" if context == gates.fw.deployment_context and self._plain_drive() else context

    def _plain_mediator(self) -> bool:
        """The MEDIATOR runs on an embedded model that writes plain text (``rates_numbers`` off):
        it is not asked to rewrite an acceptable draft. Remote MEDIATORs compose as before."""
        if not isinstance(self.transport, InProcessTransport):
            return False
        return not getattr(self._model("mediator").backend, "rates_numbers", True)

    def _evaluator_deterministic(self) -> bool:
        """The EVALUATOR gives the same evaluation for the same inputs (the embedded classifier):
        a text it has judged is not sent again. A remote one's backend is not visible: it is asked."""
        if not isinstance(self.transport, InProcessTransport):
            return False
        return bool(getattr(self._model("evaluator").backend, "deterministic", False))

    def _judges_requests(self) -> bool:
        """The EVALUATOR can screen a request before any draft at no model-token cost (the
        embedded classifier): only then is it asked. An LLM EVALUATOR (or a remote one, whose
        backend this process cannot see) is not: that would be one more call per request."""
        if not isinstance(self.transport, InProcessTransport):
            return False
        return bool(getattr(self._model("evaluator").backend, "judges_requests", False))

    def _at_risk_earlier(self, trace: Trace, fw: Framework) -> list[str]:
        """The self-harm rules an earlier user turn in the cross-turn window set off
        (:meth:`Framework.at_risk_rules`): a universal one decides the request, and any is fired
        with the request's own, so a person at risk gets the crisis channel in this turn's reply."""
        return fw.at_risk_rules(trace.earlier[-self.params.cross_turn_window :]) if trace.earlier else []

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
        # take?": the self-harm rule an earlier turn set off decides this turn as well.
        universal = {r.id for r in fw.universal}
        rules += [r for r in self._at_risk_earlier(trace, fw) if r in universal and r not in rules]
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
        fired = set(rules) | set(fw.request_rules(trace.request)) | set(self._at_risk_earlier(trace, fw))
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
        response, hazards = with_hazard_warnings(reply.text, ctx)
        trace.final = FinalDecision(
            response=response,
            state=SystemState.DEADLOCK,
            defense=mechanism,
            composed_by=reply.composed_by,
            final_gate=final_gate,
            fallback=fallback,
            withheld=withheld,
            channels=[*reply.channels, *hazards],
        )
        trace.contribution = AlignmentContribution()
        return True

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

    # ------------------------------------------------------------------------------------------
    async def _decide(self, trace: Trace, bus: MessageBus, gates: Gates, context: str) -> None:
        p = self.params
        fw, fw_payload, layer1, _, guard, _ = gates
        chosen_round, chosen = self._choose(trace)
        deadlock = not trace.converged
        withheld: list[str] = []

        def guarded(e: Evaluation) -> Evaluation:
            return guarded_evaluation(e, guard, p.final_gate, withheld)

        deciding = trace.rounds[-1].proposals
        ctx = DefenseContext(
            chosen_text=chosen.text if chosen else None,
            chosen_eval=guarded(chosen.evaluation) if chosen and chosen.evaluation else None,
            round_evals=[guarded(rec.evaluation) for rec in deciding if rec.evaluation is not None],
            deadlock=deadlock,
            framework=fw,
            blocked=[
                (rec.text, guarded(rec.evaluation))
                for rec in deciding
                if rec.evaluation is not None and not (rec.gate and rec.gate.admissible)
            ],
            verified=p.final_gate,
            # Every round's: a rule an earlier round's drafts tripped (the dose label, self-harm)
            # still chooses the channel when the last round's drafts failed for other reasons.
            fired=fired_rules(
                trace.request,
                [rec for rd in trace.rounds for rec in rd.proposals],
                fw,
                layer1,
                also=self._at_risk_earlier(trace, fw),
            ),
            request=trace.request,
        )
        mechanism, reply = await self._respond(bus, trace.request, context, ctx, layer1)
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
        support = ctx.supportive()
        if support is not None and support.text not in response:
            # A person at risk always gets the crisis channel, also beside an answer (framework text).
            line = ctx.support_line("closing_line")
            response, channels = closing_line(response, line), [*channels, line]
        # A known hazard's warning goes beside whatever answers the request (framework text).
        response, hazards = with_hazard_warnings(response, ctx)
        channels = [*channels, *hazards]

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
            return Reply(template("reaction_formation", rules=rules_text(ctx)), "template", [])
        if mechanism is DefenseMechanism.REPRESSION:
            source = repression_source(ctx, layer1)
            assert source is not None
            kept, _ = repress(source[0], source[1].conflict.harmful_segments, layer1)
            return Reply(f"{kept}\n\n{template('repression_note', rules=rules_text(ctx))}", "filtered", [])
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
                return Reply(template("reaction_formation", rules=rules_text(ctx)), "template", [])
            return refusal(ctx)
        if mechanism is DefenseMechanism.REPRESSION and ctx.chosen_eval is not None:
            kept, _ = repress(ctx.chosen_text, ctx.chosen_eval.conflict.harmful_segments, layer1)
            return Reply(f"{kept}\n\n{template('repression_note', rules=rules_text(ctx))}", "filtered", [])
        if mechanism is DefenseMechanism.SUBLIMATION and (line := ctx.framework_line("closing_line")) is not None:
            return Reply(closing_line(ctx.chosen_text, line), "adopted", [line])
        return Reply(ctx.chosen_text, "adopted", [])
