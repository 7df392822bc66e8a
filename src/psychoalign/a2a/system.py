"""The whole PsychoAlign system (gates and all) as one A2A agent.

Its reply is the MEDIATOR's final response; tension, state, defense and the trace id travel in
the response artifact's data part and metadata. Decision (docs/a2a.md): a deadlock that ended in
Sublimation or Displacement maps to ``input-required`` — the request has a legitimate core that a
clarification could unlock — every other deadlock completes with the structured refusal.
Follow-ups in the same A2A context carry the conversation, and its cross-turn tension track: each
turn is filed under the (caller identity, context id) key and reads the context's earlier turns
back from the trace store (docs/negotiation.md, "Cross-turn tension").
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from a2a.helpers import new_data_part, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import AgentCard, AgentSkill, Part
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

from ..negotiation.defense import DefenseMechanism
from ..negotiation.engine import Negotiator
from ..negotiation.tension import SystemState
from ..negotiation.track import conversation_ref
from ..traces.model import Trace, TraceStatus
from .server import _card, a2a_app

__all__ = ["SystemExecutor", "build_system_app", "system_card"]

CLARIFY = "Could you say more about what you need this for, so I can help within the rules?"
MAX_HISTORY = 6


def outcome(trace: Trace) -> dict[str, Any]:
    """The negotiation's facts for the artifact's data part and metadata. A2A JSON is camelCase."""
    f = trace.final
    return {
        "traceId": trace.id,
        "status": trace.status.value,
        "rounds": len(trace.rounds),
        "tension": f.tension if f else None,
        "state": f.state.value if f and f.state else None,
        "defense": f.defense.value if f and f.defense else None,
        "framework": trace.framework.name if trace.framework else None,
    }


def _with_history(history: list[tuple[str, str]], text: str) -> str:
    if not history:
        return text
    turns = "\n".join(f"User: {u}\nAssistant: {a}" for u, a in history[-MAX_HISTORY:])
    return f"Earlier in this conversation:\n{turns}\n\nCurrent request: {text}"


class SystemExecutor(AgentExecutor):
    """Runs one negotiation per A2A task.

    ``frameworks`` are the names a client may select with message metadata ``framework``
    (the deployment's ``frameworks()``; default: only ``framework``). Anything else, a path
    included, is rejected without being read.
    """

    def __init__(
        self, negotiator: Negotiator, framework: str = "general", frameworks: Sequence[str] | None = None
    ) -> None:
        self.negotiator = negotiator
        self.framework = framework
        self.frameworks = [framework, *(f for f in (frameworks or ()) if f != framework)]
        self.history: dict[str, list[tuple[str, str]]] = {}  # (identity, context id) -> turns

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        await event_queue.enqueue_event(task)
        # Build the updater from the stored task: a follow-up with only task_id gets a fresh
        # context_id from the SDK (a2a-python #1206), which would not match the task.
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input().strip()
        if not text:
            await updater.reject(updater.new_agent_message([Part(text="empty request: send a text part")]))
            return
        meta = MessageToDict(context.message.metadata) if context.message.HasField("metadata") else {}
        requested = meta.get("framework", self.framework)
        if not isinstance(requested, str) or requested not in self.frameworks:
            # The deployment, not the client, decides: never load what a client names.
            why = f"this agent offers the framework(s): {', '.join(self.frameworks)}"
            await updater.reject(updater.new_agent_message([Part(text=f"framework not offered; {why}")]))
            return
        client_context = meta.get("context")
        await updater.start_work(updater.new_agent_message([Part(text="negotiating")]))
        # Contexts are per caller: the history and the track are keyed by the authenticated
        # identity, so a caller naming another caller's context id reaches nothing of theirs.
        user = context.call_context.user if context.call_context is not None else None
        identity = user.user_name if user is not None and user.is_authenticated else ""
        history = self.history.setdefault(f"{identity}\x00{task.context_id}", [])
        trace = await self.negotiator.negotiate(
            _with_history(history, text),
            framework=requested,
            context=client_context if isinstance(client_context, str) else None,
            metadata={"a2a_context_id": task.context_id, "a2a_task_id": task.id},
            conversation=conversation_ref(f"a2a\x00{identity}", (), task.context_id),
        )
        info = outcome(trace)
        await updater.add_artifact(
            parts=[Part(text=trace.response), new_data_part(info)], name="response", metadata=info, last_chunk=True
        )
        history.append((text, trace.response))
        del history[:-MAX_HISTORY]
        f = trace.final
        if trace.status is TraceStatus.FAILED:
            await updater.failed(updater.new_agent_message([Part(text=trace.response)], metadata=info))
        elif (
            f is not None
            and f.state is SystemState.DEADLOCK
            and f.defense
            in (
                DefenseMechanism.SUBLIMATION,
                DefenseMechanism.DISPLACEMENT,
            )
        ):
            await updater.requires_input(updater.new_agent_message([Part(text=CLARIFY)], metadata=info))
        else:
            await updater.complete(updater.new_agent_message([Part(text=trace.response)], metadata=info))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def system_card(base_url: str, auth: bool, grpc_url: str | None = None) -> AgentCard:
    skill = AgentSkill(
        id="negotiate",
        name="Negotiated answer",
        description=(
            "Answers a request after a DRIVE / EVALUATOR / MEDIATOR negotiation under an ethical framework. "
            "Send text; optional message metadata {framework (one the deployment offers), context}. The response "
            "artifact carries the answer (text) and {traceId, status, rounds, tension, state, defense, framework} "
            "(data)."
        ),
        tags=["psychoalign", "alignment", "safety", "negotiation"],
        examples=["Is it safe to take ibuprofen with paracetamol?"],
        input_modes=["text/plain"],
        output_modes=["text/plain", "application/json"],
    )
    return _card(
        "PsychoAlign",
        "Negotiated, auditable answers with a per-request alignment tension.",
        base_url,
        [skill],
        auth,
        grpc_url,
    )


def build_system_app(
    negotiator: Negotiator,
    base_url: str,
    *,
    framework: str = "general",
    token: str | None = None,
    frameworks: Sequence[str] | None = None,
    api_key_digests: Sequence[str] = (),
    grpc_url: str | None = None,
) -> Starlette:
    """The system agent as a Starlette app (mountable in the web app).

    Clients authenticate with ``token`` (identity ``user``) or any key whose SHA-256 hex digest
    is in ``api_key_digests`` (identity ``key:<first 12 hex>``; tasks are scoped per identity).
    With neither, the app is open: callers that serve it must restrict it (the CLI refuses unless
    ``--insecure`` on loopback). ``frameworks`` are the names a client may select (default: only
    ``framework``)."""
    tokens = {"user": token} if token else None
    digests = {d.lower(): f"key:{d.lower()[:12]}" for d in api_key_digests}
    auth = bool(token) or bool(digests)
    executor = SystemExecutor(negotiator, framework, frameworks)
    return a2a_app(executor, system_card(base_url, auth=auth, grpc_url=grpc_url), tokens, digests=digests)
