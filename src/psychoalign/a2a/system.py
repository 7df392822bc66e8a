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

import asyncio
import functools
import logging
import warnings
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Any

from a2a.helpers import new_data_part, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskStore, TaskUpdater
from a2a.types import AgentCard, AgentSkill, Part
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette

from ..frameworks import load_framework
from ..judges.outcome import reply_channels, reply_kind, reply_rules
from ..negotiation.engine import Negotiator
from ..negotiation.track import conversation_ref
from ..storage import describe_error
from ..traces.model import DefenseMechanism, SystemState, Trace, TraceStatus
from ..traces.store import SQLTraceStore, TraceStore
from .server import MAX_BODY_BYTES, _card, a2a_app

__all__ = ["a2a_task_store", "build_system_app"]

_log = logging.getLogger(__name__)

CLARIFY = "Could you say more about what you need this for, so I can help within the rules?"
MAX_HISTORY = 6
#: Most characters of earlier turns carried into a follow-up's context (oldest dropped first),
#: the default of /v1's serve.max_conversation_chars.
MAX_HISTORY_CHARS = 32_000
#: Most conversations (caller identity, context id) whose turns are remembered; the least
#: recently used is forgotten first (its track stays in the trace store).
MAX_CONVERSATIONS = 10_000


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
        # what the client received, as /v1's psychoalign object says it (judges/outcome.py)
        "outcome": reply_kind(trace),
        "rules": reply_rules(trace),
        "channels": reply_channels(trace),
    }


def build_context(base: str, instructions: str | None, history: Sequence[tuple[str, str]]) -> str | None:
    """The negotiation context of an A2A turn, as /v1 builds it (web/openai_api.build_context):
    the framework's deployment context first (a client cannot replace it), then the client's
    ``context`` metadata as instructions from the application, then the earlier turns of this
    context (the most recent that fit in :data:`MAX_HISTORY_CHARS`). ``None`` when there is
    nothing beyond the deployment context."""
    turns: list[str] = []
    size = 0
    for user, answer in reversed(history[-MAX_HISTORY:]):
        turn = f"User: {user}\nAssistant: {answer}"
        size += len(turn)
        if size > MAX_HISTORY_CHARS:
            break
        turns.insert(0, turn)
    extra = (instructions or "").strip()
    if not extra and not turns:
        return None
    parts = [base.strip()] if base.strip() else []
    if extra:
        parts.append("Instructions from the application:\n" + extra)
    if turns:
        parts.append("Earlier in this conversation:\n" + "\n".join(turns))
    return "\n\n".join(parts)


def _accepts_json(context: RequestContext) -> bool:
    """Whether the client takes the answer's data part (``application/json``): yes unless its
    ``acceptedOutputModes`` leave JSON out (A2A 1.0 ``SendMessageConfiguration``: the media
    types the client accepts for response parts, which the agent uses to tailor its output). A
    client that asked for ``text/plain`` alone gets the text part alone."""
    config = context.configuration
    modes = [m.split(";", 1)[0].strip().lower() for m in (config.accepted_output_modes if config else ())]
    return not modes or any(m in ("application/json", "application/*", "*/*") for m in modes)


class SystemExecutor(AgentExecutor):
    """Runs one negotiation per A2A task.

    ``frameworks`` are the names a client may select with message metadata ``framework``
    (the deployment's ``frameworks()``; default: only ``framework``). Anything else, a path
    included, is rejected without being read. Message metadata ``context`` is added to the
    framework's deployment context as instructions from the application, never in its place.
    """

    def __init__(
        self,
        negotiator: Negotiator,
        framework: str = "general",
        frameworks: Sequence[str] | None = None,
        on_trace: Callable[[Trace], None] | None = None,
    ) -> None:
        self.negotiator = negotiator
        self.on_trace = on_trace  # sees every finished negotiation (the server's metrics)
        self.framework = framework
        self.frameworks = [framework, *(f for f in (frameworks or ()) if f != framework)]
        # (identity, context id) -> earlier turns, least recently used first.
        self.history: OrderedDict[str, list[tuple[str, str]]] = OrderedDict()

    def _turns(self, key: str) -> list[tuple[str, str]]:
        turns = self.history.pop(key, None)
        self.history[key] = turns if turns is not None else []
        while len(self.history) > MAX_CONVERSATIONS:
            self.history.popitem(last=False)
        return self.history[key]

    async def _earlier(self, key: str, look_up: Sequence[str]) -> list[tuple[str, str]]:
        """The context's earlier turns (request, answer), oldest first. Read from the trace store,
        the server's own record, so any process sharing the store (``serve --workers N``) and a
        restarted server continue a conversation; in memory when there is no store. A turn that
        cannot be read is left out (the cross-turn track fails closed on its own)."""
        store = self.negotiator.store
        if store is None:
            return list(self._turns(key))
        try:
            traces = await store.conversation(look_up, limit=MAX_HISTORY)
        except Exception as exc:  # the context is a convenience; the track handles a broken store
            _log.warning("earlier turns of an A2A context unavailable: %r", exc)
            return []
        return [(t.request, t.response) for t in traces]

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        existing = context.current_task
        task = existing or new_task_from_user_message(context.message)
        if existing is None:
            # A new task is the first event. A follow-up to a task waiting for input is not sent
            # again: the SDK would ignore it and drop the follow-up message from the history.
            await event_queue.enqueue_event(task)
        # Build the updater from the stored task: a follow-up with only task_id gets a fresh
        # context_id from the SDK (a2a-python #1206), which would not match the task.
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        text = context.get_user_input().strip()
        limit = self.negotiator.params.max_request_chars
        meta = MessageToDict(context.message.metadata) if context.message.HasField("metadata") else {}
        requested = meta.get("framework", self.framework)
        client_context = meta.get("context")
        problem = ""
        other = next((i for i, part in enumerate(context.message.parts) if part.WhichOneof("content") != "text"), None)
        if other is not None:
            # Negotiating the text alone would answer a request the client did not send (the
            # file or data it meant the agent to read left out): refused, never silently dropped.
            kind = context.message.parts[other].WhichOneof("content")
            problem = f"part {other} is a {kind} part: this agent reads text parts only; send its content as text"
        elif not text:
            problem = "empty request: send a text part"
        elif len(text) > limit:
            problem = f"the request is {len(text)} characters, over the limit of {limit}: shorten it"
        elif not isinstance(requested, str) or requested not in self.frameworks:
            # The deployment, not the client, decides: never load what a client names.
            problem = f"framework not offered; this agent offers the framework(s): {', '.join(self.frameworks)}"
        elif client_context is not None and not isinstance(client_context, str):
            problem = "metadata 'context' must be a string"
        elif client_context is not None and len(client_context) > limit:
            problem = f"metadata 'context' is {len(client_context)} characters, over the limit of {limit}"
        if problem:
            await updater.reject(updater.new_agent_message([Part(text=problem)]))
            return
        await updater.start_work(updater.new_agent_message([Part(text="negotiating")]))
        # Contexts are per caller: the history and the track are keyed by the authenticated
        # identity, so a caller naming another caller's context id reaches nothing of theirs.
        user = context.call_context.user if context.call_context is not None else None
        identity = user.user_name if user is not None and user.is_authenticated else ""
        conversation = conversation_ref(f"a2a\x00{identity}", (), task.context_id)
        history = await self._earlier(f"{identity}\x00{task.context_id}", conversation.look_up)
        framework = load_framework(requested)  # read once a request, handed to the negotiation
        trace = await self.negotiator.negotiate(
            text,
            framework=framework,
            context=build_context(framework.deployment_context, client_context, history),
            metadata={"a2a_context_id": task.context_id, "a2a_task_id": task.id, "turn": len(history) + 1},
            conversation=conversation,
            earlier=[request for request, _ in history],  # a dose for the child an earlier turn names
        )
        if self.on_trace is not None:
            self.on_trace(trace)
        info = outcome(trace)
        parts = [Part(text=trace.response)]
        if _accepts_json(context):  # the facts stay in the artifact's metadata either way
            parts.append(new_data_part(info))
        await updater.add_artifact(parts=parts, name="response", metadata=info, last_chunk=True)
        if self.negotiator.store is None:  # remembered here only when no trace store records the turns
            turns = self._turns(f"{identity}\x00{task.context_id}")
            turns.append((text, trace.response))
            del turns[:-MAX_HISTORY]
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


#: The table A2A tasks live in when they share the trace store's database.
A2A_TASK_TABLE = "psychoalign_a2a_tasks"


def a2a_task_store(store: TraceStore | None) -> TaskStore | None:
    """A task store in ``store``'s database (its own table), so every process serving the same
    deployment (``psychoalign serve --workers N``) sees the same tasks: a client's get, list,
    cancel or follow-up may reach any worker. None (the SDK's in-memory store) without one."""
    if not isinstance(store, SQLTraceStore):
        return None
    task_store: TaskStore = _database_task_store_class()(store.engine)
    return task_store


@functools.cache
def _database_task_store_class() -> Any:
    from a2a.server.tasks import DatabaseTaskStore
    from a2a.utils.errors import A2AError, InternalError, InvalidParamsError

    class SharedTaskStore(DatabaseTaskStore):
        """The SDK's database task store, with: the table made once per process (concurrent
        first requests each tried to create it: "table already exists"), and storage errors
        turned into one clean line (the SDK sent the SQL statement to the client)."""

        def __init__(self, engine: Any) -> None:
            super().__init__(engine)
            # The SDK maps a new model class for a custom table name on every store it makes,
            # and a second one on its shared metadata fails: map ours once per process.
            self.task_model = _task_model()
            self._init_lock = asyncio.Lock()

        async def initialize(self) -> None:
            async with self._init_lock:
                if not self._initialized:
                    await self._guard(super().initialize())

        async def save(self, task: Any, context: Any) -> None:
            await self._guard(super().save(task, context))

        # No task has a NUL in its id (a message naming one is refused), and PostgreSQL refuses
        # one in a query ("invalid byte sequence"), which reached the client as an internal error.
        async def get(self, task_id: str, context: Any) -> Any:
            if "\x00" in task_id:
                return None
            return await self._guard(super().get(task_id, context))

        async def list(self, params: Any, context: Any) -> Any:
            if "\x00" in params.context_id:
                raise InvalidParamsError("contextId contains a NUL character (\\u0000): remove it")
            if params.page_token and _forged_page_token(params.page_token):
                raise InvalidParamsError(
                    "pageToken is not one this server gave: send the nextPageToken of the previous page"
                )
            return await self._guard(super().list(params, context))

        async def delete(self, task_id: str, context: Any) -> None:
            if "\x00" not in task_id:
                await self._guard(super().delete(task_id, context))

        @staticmethod
        async def _guard(operation: Any) -> Any:
            try:
                return await operation
            except A2AError:
                raise
            except Exception as exc:
                _log.warning("A2A task store failed: %r", exc)
                raise InternalError(message=f"task store unavailable: {describe_error(exc)}") from None

    return SharedTaskStore


#: The range of a protobuf Timestamp, in seconds: a page token's time outside it is not one the SDK made.
_TIMESTAMP_SECONDS = (-62135596800, 253402300799)


def _forged_page_token(token: str) -> bool:
    """Whether a ListTasks page token could not have come from this server: a task id with a NUL
    (PostgreSQL refuses the query) or a time a Timestamp cannot hold (the SDK raised ValueError);
    both reached the client as an internal error. A token the SDK cannot read it refuses itself."""
    from a2a.utils.errors import InvalidParamsError
    from a2a.utils.task import decode_list_tasks_cursor, decode_page_token

    cursor = decode_list_tasks_cursor(token)
    if cursor is not None:
        ns = cursor.timestamp_ns
        low, high = _TIMESTAMP_SECONDS
        return "\x00" in cursor.task_id or (ns is not None and not low <= ns // 1_000_000_000 <= high)
    try:
        return "\x00" in decode_page_token(token)
    except InvalidParamsError:
        return False


@functools.cache
def _task_model() -> Any:
    from a2a.server.models import create_task_model

    with warnings.catch_warnings():  # the SDK names every mapped class TaskModel: harmless here
        warnings.simplefilter("ignore")
        return create_task_model(A2A_TASK_TABLE)


def system_card(base_url: str, auth: bool, grpc_url: str | None = None) -> AgentCard:
    skill = AgentSkill(
        id="negotiate",
        name="Negotiated answer",
        description=(
            "Answers a request after a DRIVE / EVALUATOR / MEDIATOR negotiation under an ethical framework. "
            "Send text; optional message metadata {framework (one the deployment offers), context}. The response "
            "artifact carries the answer (text) and {traceId, status, rounds, tension, state, defense, framework, "
            "outcome (answered, filtered, redirected, refused, failed), rules, channels} (data)."
        ),
        tags=["psychoalign", "alignment", "safety", "negotiation"],
        examples=["Is it safe to take ibuprofen with paracetamol?"],
        input_modes=["text/plain"],
        output_modes=["text/plain", "application/json"],
    )
    # Text in only: a part of another declared media type is the protocol's ContentTypeNotSupported
    # (the handler checks input modes), not a task rejected after the fact.
    return _card(
        "PsychoAlign",
        "Negotiated, auditable answers with a per-request alignment tension.",
        base_url,
        [skill],
        auth,
        grpc_url,
        input_modes=("text/plain",),
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
    max_body_bytes: int = MAX_BODY_BYTES,
    task_store: TaskStore | None = None,
    on_trace: Callable[[Trace], None] | None = None,
) -> Starlette:
    """The system agent as a Starlette app (mountable in the web app). ``on_trace`` is called
    with each finished negotiation's trace (``psychoalign serve`` counts them in ``/metrics``).

    Clients authenticate with ``token`` (identity ``user``) or any key whose SHA-256 hex digest
    is in ``api_key_digests`` (identity ``key:<first 12 hex>``; tasks are scoped per identity).
    With neither, the app is open: callers that serve it must restrict it (the CLI refuses unless
    ``--insecure`` on loopback). ``frameworks`` are the names a client may select (default: only
    ``framework``)."""
    tokens = {"user": token} if token else None
    digests = {d.lower(): f"key:{d.lower()[:12]}" for d in api_key_digests}
    auth = bool(token) or bool(digests)
    executor = SystemExecutor(negotiator, framework, frameworks, on_trace)
    card = system_card(base_url, auth=auth, grpc_url=grpc_url)
    return a2a_app(executor, card, tokens, digests=digests, max_body_bytes=max_body_bytes, task_store=task_store)
