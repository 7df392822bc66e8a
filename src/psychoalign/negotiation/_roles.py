"""The three agents a negotiator reaches (in process or over a transport) and what their
backends can do: the base of :class:`~psychoalign.negotiation.engine.Negotiator`."""

from __future__ import annotations

import asyncio
import os
import socket
from collections.abc import Mapping
from typing import Any

from ..agents.agents import DriveAgent, EvaluatorAgent, MediatorAgent
from ..config import Settings, load_settings
from ..errors import ConfigError
from ..frameworks import Framework
from ..models import ChatModel, build_model
from ..models.crisis_check import CrisisScreen, crisis_hits
from ..models.identity import model_identity
from ..traces.model import CrisisScreenRecord, Trace
from ..traces.store import TraceStore
from .bus import AgentTransport, InProcessTransport
from .decision import Gates
from .events import EventHook, NegotiationEvent, emit
from .params import NegotiationParams, negotiation_source, parse_params

ROLES = ("drive", "evaluator", "mediator")


class _Roles:
    """The settings, parameters, per-role models and transport of a negotiator, and what the
    backends behind them can do (which changes how many calls a negotiation makes, never what
    passes the gates).

    ``models`` overrides the per-role models from ``settings`` (used by tests and benchmarks);
    ``transport`` is how agents are reached: in-process by default; settings whose ``a2a.urls``
    name remote agents need one (``psychoalign.a2a.remote_transport(settings)``), so a negotiator
    never runs in-process agents when the configuration put them elsewhere. ``crisis`` is the crisis
    check the negotiation runs on a request when its EVALUATOR does not (default: the shipped one,
    loaded on first use; tests pass a small one).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        params: NegotiationParams | None = None,
        models: Mapping[str, ChatModel] | None = None,
        transport: AgentTransport | None = None,
        store: TraceStore | None = None,
        crisis: CrisisScreen | None = None,
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
        self._crisis = crisis
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

    def model_identities(self) -> dict[str, Any]:
        """Per role, what about its model changes its answers (:func:`model_identity`): the model
        an in-process agent runs (a transport given agents of its own: theirs, not the
        settings'), or the URL a remote agent is reached at (its model is not visible here)."""
        transport = self.transport
        if not isinstance(transport, InProcessTransport):
            urls: dict[str, str] = getattr(transport, "urls", {})
            return {r: {"a2a": urls.get(r, type(transport).__name__)} for r in ROLES}
        out: dict[str, Any] = {}
        for role in ROLES:
            model = transport.model_of(role) or self._model(role)
            out[role] = model_identity(model.spec, model.backend)
        return out

    async def aclose(self) -> None:
        for model in self._models.values():
            await model.aclose()
        closer = getattr(self._transport, "aclose", None)
        if closer is not None:
            await closer()

    async def _emit(self, trace: Trace, stage: Any, **data: Any) -> None:
        hook = self._hooks.get(trace.id)
        if hook is not None:  # no observer (the common case): no event is built
            await emit(hook, NegotiationEvent(stage=stage, trace_id=trace.id, **data))

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
        (:meth:`Framework.at_risk_rules`), and those the negotiation's own crisis screen fired on
        this request (:meth:`_screen_crisis`): a universal one decides the request, and any is fired
        with the request's own, so a person at risk gets the crisis channel in this turn's reply."""
        earlier = fw.at_risk_rules(trace.earlier[-self.params.cross_turn_window :]) if trace.earlier else []
        screened = trace.crisis_screen.rules if trace.crisis_screen is not None else []
        return [*earlier, *(r for r in screened if r not in earlier)]

    def _from_earlier(self, trace: Trace, fw: Framework) -> list[str]:
        """:meth:`_at_risk_earlier`, and the rules this request completes only with the earlier
        user turns of the cross-turn window (:meth:`Framework.completed_rules`: "My dog is a
        spaniel." then "Can I give him my ibuprofen?"): they decide and fire as the request's own."""
        at_risk = self._at_risk_earlier(trace, fw)
        window = trace.earlier[-self.params.cross_turn_window :] if trace.earlier else []
        completed = fw.completed_rules(trace.request, window) if window else []
        return [*at_risk, *(r for r in completed if r not in at_risk)]

    async def screen_crisis(self, request: str, fw: Framework, *, always: bool = False) -> CrisisScreenRecord | None:
        """The crisis check on ``request`` alone, as this negotiator runs it when its EVALUATOR does
        not (an LLM, an endpoint, a remote agent: only the embedded classifier judges requests and
        runs it itself), so routing to the crisis channel and the possible-risk band do not depend
        on the EVALUATOR's backend (docs/negotiation.md, "The crisis check on every backend").
        ``always``: also beside an embedded EVALUATOR (a guardrail input check asks no EVALUATOR).
        None when ``crisis_screen`` is off or the EVALUATOR runs it. No model call: the MiniLM
        encoder, loaded on the first request, runs off the event loop."""
        if not self.params.crisis_screen or (not always and self._judges_requests()):
            return None
        if self._crisis is None:
            self._crisis = CrisisScreen()
        verdict = await asyncio.to_thread(self._crisis.screen, request)
        rules = [hit["rule_id"] for hit in crisis_hits(fw)] if verdict.fired else []
        return CrisisScreenRecord(
            fired=verdict.fired, rules=rules, band=verdict.band, band_by=verdict.band_by, check=verdict.check
        )

    async def _screen_crisis(self, trace: Trace, fw: Framework) -> None:
        trace.crisis_screen = await self.screen_crisis(trace.request, fw)
