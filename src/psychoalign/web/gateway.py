"""The gateway runtime shared by every served face: one negotiator per deployment, one trace
store, the set of in-flight negotiations, and graceful draining on shutdown.

Contract: :meth:`Gateway.negotiate` never returns model text that did not pass the engine's
gates. A negotiation that fails, times out or is cut short by shutdown yields the fixed
fail-closed refusal, and its trace is stored ``failed`` with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..a2a import remote_transport
from ..config import DeploymentSettings, Settings
from ..frameworks import Framework, builtin_names, load_framework
from ..negotiation.defense import template
from ..negotiation.engine import Negotiator
from ..negotiation.events import EventHook, NegotiationEvent
from ..negotiation.progressive import WindowStream
from ..negotiation.track import ConversationRef
from ..traces.model import Trace, TraceStatus
from ..traces.store import TraceStore, open_store
from .metrics import GatewayMetrics
from .outcome import GatewayOutcome
from .telemetry import NegotiationSpans, gateway_tracing, record_finished

_log = logging.getLogger(__name__)
SHUTDOWN_REASON = "server shutting down: negotiation failed closed"


class Gateway:
    """Per-app runtime. ``negotiators`` overrides the negotiator of named deployments (tests,
    benchmarks); the others are built from ``settings.for_deployment(name)`` on first use."""

    def __init__(
        self,
        settings: Settings,
        *,
        store: TraceStore | None = None,
        negotiators: Mapping[str, Negotiator] | None = None,
        metrics: GatewayMetrics | None = None,
    ) -> None:
        self.settings = settings
        self.store = store if store is not None else open_store(settings.effective_store_url())
        self.metrics = metrics or GatewayMetrics()
        self._negotiators: dict[str, Negotiator] = dict(negotiators or {})
        self._contexts: dict[str, str] = {}
        self._builtins = frozenset(builtin_names())
        self._inflight: set[asyncio.Task[Trace]] = set()
        self._idle = asyncio.Event()
        self._idle.set()
        self.draining = False
        self.tracing = gateway_tracing(settings.serve)
        self.tracer = self.tracing.tracer  # None: no span is ever made

    # -- deployments ---------------------------------------------------------------------------
    @property
    def deployments(self) -> dict[str, DeploymentSettings]:
        return dict(self.settings.deployments)

    def negotiator(self, deployment: str) -> Negotiator:
        if deployment not in self._negotiators:
            settings = self.settings.for_deployment(deployment)
            self._negotiators[deployment] = Negotiator(settings, store=self.store, transport=remote_transport(settings))
        return self._negotiators[deployment]

    def framework(self, name: str) -> str | Framework:
        """What a negotiation under ``name`` is given: a built-in framework as an object (parsed
        once per process by :func:`load_framework`; reading and validating its YAML was a cost of
        every request); a framework file by name, read by the engine each time (an edit applies to
        the next negotiation, and a file gone missing fails that negotiation closed, as before)."""
        return load_framework(name) if name in self._builtins else name

    def loaded_framework(self, name: str) -> Framework:
        """The framework ``name`` as an object, for the gateway's own checks outside a
        negotiation (the checks API, the tool-call gate, the tool-result screen): a built-in one
        parsed once per process (:meth:`framework`), a framework file read now. A request reads it
        once and hands the object on."""
        framework = self.framework(name)
        return framework if isinstance(framework, Framework) else load_framework(framework)

    def deployment_context(self, framework: str) -> str:
        """The framework's own deployment context (kept when a client adds conversation context)."""
        if framework not in self._contexts:
            self._contexts[framework] = load_framework(framework).deployment_context
        return self._contexts[framework]

    # -- negotiations --------------------------------------------------------------------------
    @property
    def inflight(self) -> int:
        return len(self._inflight)

    async def negotiate(
        self,
        deployment: str,
        request: str,
        *,
        framework: str,
        context: str | None,
        metadata: Mapping[str, Any],
        on_event: EventHook | None = None,
        conversation: ConversationRef | None = None,
        answer_check: Callable[[str], list[str]] | None = None,
        stream: WindowStream | None = None,
        earlier: Sequence[str] | None = None,
    ) -> GatewayOutcome:
        """Run one negotiation for a client. Raises only when the caller itself is cancelled.
        ``conversation`` (server-derived keys) lets the cross-turn track read the earlier turns
        from this gateway's trace store; ``answer_check``, ``stream`` and ``earlier`` (the
        conversation's earlier user turns, for the checks) go to the engine
        (:meth:`Negotiator.negotiate`)."""
        trace_id: str | None = None
        spans = (
            NegotiationSpans(self.tracer, deployment, framework, str(metadata.get("source", "")))
            if self.tracer
            else None
        )

        async def observe(event: NegotiationEvent) -> None:
            nonlocal trace_id
            trace_id = event.trace_id
            if spans is not None:
                spans.on_event(event)
            if on_event is not None:
                await on_event(event)

        negotiator = self.negotiator(deployment)
        with spans.active() if spans is not None else contextlib.nullcontext():  # the task inherits the span
            task = asyncio.create_task(
                negotiator.negotiate(
                    request,
                    framework=self.framework(framework),
                    context=context,
                    metadata=metadata,
                    on_event=observe,
                    conversation=conversation,
                    answer_check=answer_check,
                    stream=stream,
                    on_call=spans.call if spans is not None else None,
                    earlier=earlier,
                )
            )
        self._inflight.add(task)
        self._idle.clear()
        self.metrics.inflight.inc()
        outcome: GatewayOutcome | None = None
        try:
            trace = await task
        except asyncio.CancelledError as exc:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                if spans is not None:
                    spans.finish(None, error=exc)
                raise  # our caller went away: the engine has marked the trace failed
            # The negotiation alone was cancelled (shutdown): fail closed, report the stored trace.
            outcome = self._finish(self._shutdown_outcome(deployment, trace_id))
        finally:
            self._inflight.discard(task)
            self.metrics.inflight.dec()
            if not self._inflight:
                self._idle.set()
        if outcome is None:
            outcome = self._finish(self._outcome(deployment, trace))
        if spans is not None:
            spans.finish(outcome)
        return outcome

    def observe(self, deployment: str, trace: Trace) -> None:
        """Count a negotiation run outside :meth:`negotiate` (the A2A system agent) in the
        metrics, as /v1's are counted, and give it a span when spans are on."""
        outcome = self._outcome(deployment, trace)
        self.metrics.observe_outcome(outcome)
        if self.tracer is not None:
            record_finished(self.tracer, outcome, "a2a")

    def _outcome(self, deployment: str, trace: Trace) -> GatewayOutcome:
        usage = {
            role: {"prompt_tokens": s.prompt_tokens, "completion_tokens": s.completion_tokens, "calls": s.calls}
            for role, s in trace.agents.items()
        }
        failed = trace.status is not TraceStatus.COMPLETED
        return GatewayOutcome(
            text=trace.response,
            trace=trace,
            trace_id=trace.id,
            deployment=deployment,
            failed=failed,
            reason=trace.error if failed else None,
            usage=usage,
        )

    @staticmethod
    def _shutdown_outcome(deployment: str, trace_id: str | None) -> GatewayOutcome:
        return GatewayOutcome(
            text=template("fail_closed"),
            trace=None,
            trace_id=trace_id,
            deployment=deployment,
            failed=True,
            reason=SHUTDOWN_REASON,
        )

    def _finish(self, outcome: GatewayOutcome) -> GatewayOutcome:
        self.metrics.observe_outcome(outcome)
        return outcome

    # -- shutdown ------------------------------------------------------------------------------
    async def drain(self, grace_s: float) -> int:
        """Stop taking work; give in-flight negotiations ``grace_s`` to finish, then cancel the
        rest (each fails closed and its trace is stored ``failed``). Returns how many were cut."""
        self.draining = True
        if self._inflight and grace_s > 0:
            try:
                async with asyncio.timeout(grace_s):
                    await self._idle.wait()
            except TimeoutError:
                pass
        cut = list(self._inflight)
        for task in cut:
            task.cancel(msg=SHUTDOWN_REASON)
        if cut:
            await asyncio.gather(*cut, return_exceptions=True)
            _log.warning("shutdown: %d in-flight negotiation(s) failed closed", len(cut))
        return len(cut)

    async def aclose(self) -> None:
        await self.drain(0)
        for negotiator in self._negotiators.values():
            try:
                await negotiator.aclose()
            except Exception:
                _log.warning("closing a negotiator failed", exc_info=True)
        await self.store.close()
        self.tracing.shutdown()
