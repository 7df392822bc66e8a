"""The message bus: every inter-agent message passes here, and only the MEDIATOR's routes exist.

Invariant (paper §2.4 (1)): there is no DRIVE <-> EVALUATOR channel. The bus refuses any
(sender, recipient, task) triple outside :data:`ROUTES`, whatever transport carries it. Agents
never hold a reference to the bus, the transport or each other.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

from ..agents.agents import DriveAgent, EvaluatorAgent, MediatorAgent
from ..agents.messages import (
    AgentReply,
    AgentRole,
    AssessTask,
    ComposeTask,
    DriveTask,
    EvaluateBatchTask,
    EvaluateTask,
    framework_json_size,
)
from ..errors import PsychoAlignError
from ..models import ChatModel
from ..traces.model import AgentStats

__all__ = ["InProcessTransport"]

Task = DriveTask | EvaluateTask | EvaluateBatchTask | AssessTask | ComposeTask
#: Observes each agent call (telemetry): called with (recipient, task kind) before the call, its
#: context is entered around the call and the function it yields is given the reply on success.
CallObserver = Callable[[str, str], AbstractContextManager[Callable[["AgentReply[Any]"], None]]]

#: (sender, recipient) -> task kinds allowed. Everything else is refused.
ROUTES: dict[tuple[str, str], frozenset[str]] = {
    ("mediator", "drive"): frozenset({"drive"}),
    ("mediator", "evaluator"): frozenset({"evaluate", "evaluate_batch"}),
    ("mediator", "mediator"): frozenset({"assess", "compose"}),
}


class RouteViolationError(PsychoAlignError):
    """A message tried a route the architecture forbids (e.g. DRIVE -> EVALUATOR)."""


class AgentTransport(Protocol):
    """Carries one task to one agent and returns its validated reply.

    Implementations: :class:`InProcessTransport` (direct calls) and the A2A transport.
    A transport must raise (never return partial output) when the agent fails.
    """

    async def deliver(self, recipient: AgentRole, task: Task) -> AgentReply[Any]: ...


class InProcessTransport:
    """Direct calls to agent objects in this process (no sockets)."""

    def __init__(
        self,
        drive: DriveAgent | None = None,
        evaluator: EvaluatorAgent | None = None,
        mediator: MediatorAgent | None = None,
    ) -> None:
        # A role service hosts one agent; the in-process negotiation hosts all three.
        self._drive = drive
        self._evaluator = evaluator
        self._mediator = mediator

    def model_of(self, role: str) -> ChatModel | None:
        """The model behind the agent hosted for ``role`` here, or None (not hosted)."""
        agent = {"drive": self._drive, "evaluator": self._evaluator, "mediator": self._mediator}.get(role)
        model: ChatModel | None = getattr(agent, "model", None)
        return model

    async def deliver(self, recipient: AgentRole, task: Task) -> AgentReply[Any]:
        if recipient == "drive" and isinstance(task, DriveTask) and self._drive is not None:
            return await self._drive.propose(task)
        if recipient == "evaluator" and isinstance(task, EvaluateTask) and self._evaluator is not None:
            return await self._evaluator.evaluate(task)
        if recipient == "evaluator" and isinstance(task, EvaluateBatchTask) and self._evaluator is not None:
            return await self._evaluator.evaluate_batch(task)
        if recipient == "mediator" and isinstance(task, AssessTask) and self._mediator is not None:
            return await self._mediator.assess(task)
        if recipient == "mediator" and isinstance(task, ComposeTask) and self._mediator is not None:
            return await self._mediator.compose(task)
        raise RouteViolationError(f"agent '{recipient}' is not hosted here or does not accept '{task.kind}' tasks")


def _bits(payload: str) -> int:
    return 8 * len(payload.encode())


def _task_bits(task: Task) -> int:
    """``_bits(task.model_dump_json())``, without encoding the framework an EVALUATOR task
    carries (about 12 kB for ``general``, the same for every task) at every call: the task's
    JSON without it, plus ``,"framework":`` and the framework's own JSON."""
    framework = getattr(task, "framework", None)
    if not framework:
        return _bits(task.model_dump_json())
    rest = task.model_dump_json(exclude={"framework"})
    return _bits(rest) + 8 * (len(_FRAMEWORK_KEY) + framework_json_size(framework))


_FRAMEWORK_KEY = b',"framework":'


def _info_bits(payload: str) -> int:
    """Information content of a reply, as its zlib-compressed size (level 9)."""
    return 8 * len(zlib.compress(payload.encode(), 9))


class MessageBus:
    def __init__(self, transport: AgentTransport, observer: CallObserver | None = None) -> None:
        self._transport = transport
        self._observer = observer
        self.stats: dict[str, AgentStats] = {r: AgentStats() for r in ("drive", "evaluator", "mediator")}
        self.log: list[tuple[str, str, str, float]] = []  # (sender, recipient, kind, t)

    async def send(self, sender: str, recipient: AgentRole, task: Task) -> AgentReply[Any]:
        allowed = ROUTES.get((sender, recipient), frozenset())
        if task.kind not in allowed:
            raise RouteViolationError(f"route {sender} -> {recipient} ({task.kind}) is not allowed")
        self.log.append((sender, recipient, task.kind, time.time()))
        if self._observer is None:
            reply = await self._deliver(recipient, task)
        else:
            with self._observer(recipient, task.kind) as done:
                reply = await self._deliver(recipient, task)
                done(reply)
        stats = self.stats[recipient]
        stats.calls += 1
        stats.prompt_tokens += reply.usage.prompt_tokens
        stats.completion_tokens += reply.usage.completion_tokens
        stats.latency_s += reply.latency_s
        # Tasks are counted raw only: compressing them (an EVALUATOR task carries the whole
        # framework) cost about a tenth of a negotiation's CPU for a figure nothing reads.
        stats.bits_received += _task_bits(task)
        reply_json = reply.output.model_dump_json()
        stats.bits_sent += _bits(reply_json)
        stats.info_bits_sent += _info_bits(reply_json)
        stats.model = reply.model
        if reply.host not in stats.hosts:
            stats.hosts.append(reply.host)
        return reply

    async def _deliver(self, recipient: AgentRole, task: Task) -> AgentReply[Any]:
        try:
            return await self._transport.deliver(recipient, task)
        except PsychoAlignError as exc:  # name the agent whose call failed (errors.public_message)
            exc.agent = exc.agent or recipient
            raise
