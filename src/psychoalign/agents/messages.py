"""Messages the MEDIATOR's runtime sends to each agent, and the envelope agents reply with.

Each task carries only what its recipient may see: the EVALUATOR gets one proposal's text and
never the DRIVE's other proposals or identity; the DRIVE gets only feedback the MEDIATOR relays.
"""

from __future__ import annotations

from typing import Any, Generic, Literal, TypeVar

import pydantic_core
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from ..models.types import Usage
from .schemas import DriveOutput, Evaluation, EvaluationBatch, MediatorAssessment, MediatorCompose

__all__ = ["NO_PROPOSAL", "AgentReply", "AgentRole", "AssessItem", "EvaluateBatchTask"]

#: ``ComposeTask.proposal`` when nothing passed the gates (the defense composes without a draft).
NO_PROPOSAL = "(no proposal passed the safety gates)"

AgentRole = Literal["drive", "evaluator", "mediator"]

#: The framework payloads encoded last, newest first: (the payload, a copy of it as it was, its
#: JSON, the JSON's UTF-8 bytes). The payload is held, so its id is not reused while it is here.
_FRAMEWORK_JSON: list[tuple[dict[str, Any], dict[str, Any], str, bytes]] = []


def _same_payload(held: dict[str, Any], framework: dict[str, Any]) -> bool:
    """``framework`` is ``held`` or a shallow copy of it: the same keys in the same order, each
    bound to the same object. Validation copies a dict field's top level, so every task built
    from the one shared payload holds a new dict of the same values."""
    if held is framework:
        return True
    if len(held) != len(framework):
        return False
    return all(k1 == k2 and v1 is v2 for (k1, v1), (k2, v2) in zip(held.items(), framework.items(), strict=True))


def _framework_encoded(framework: dict[str, Any]) -> tuple[str, int]:
    for held, copy, text, raw in _FRAMEWORK_JSON:
        # the same payload, unchanged since (a payload is shared and must not change; if one did,
        # it is encoded again, never sent as it was)
        if _same_payload(held, framework) and copy == framework:
            return text, len(raw)
    raw = pydantic_core.to_json(framework)
    # A payload decoded from a message (a role service gets a new one with every task) encodes
    # to a JSON held here already: that entry's copy is its content too, no parse is needed.
    known = next((entry for entry in _FRAMEWORK_JSON if entry[3] == raw), None)
    copy, text = (known[1], known[2]) if known is not None else (pydantic_core.from_json(raw), raw.decode())
    _FRAMEWORK_JSON.insert(0, (framework, copy, text, raw))
    del _FRAMEWORK_JSON[8:]
    return text, len(raw)


def framework_json(framework: dict[str, Any]) -> str:
    """The framework payload of a task as JSON, exactly as it is inside the task's own JSON
    (``task.model_dump_json()``): the one encoding the agents, the bus's bit count and the A2A
    codec use. Encoded once per payload: every EVALUATOR task carries the same one (about 14 kB
    for ``general``)."""
    return _framework_encoded(framework)[0]


def framework_json_size(framework: dict[str, Any]) -> int:
    """UTF-8 bytes of :func:`framework_json` (what the framework adds to a message's size)."""
    return _framework_encoded(framework)[1]


def task_json(task: BaseModel) -> str:
    """``task.model_dump_json()``, with the framework an EVALUATOR task carries (its last field)
    taken from :func:`framework_json` instead of encoded again at every call."""
    framework = getattr(task, "framework", None)
    if not isinstance(framework, dict) or next(reversed(type(task).model_fields)) != "framework":
        return task.model_dump_json()
    rest = task.model_dump_json(exclude={"framework"})
    return f'{rest[:-1]},"framework":{framework_json(framework)}}}'


T = TypeVar("T", DriveOutput, Evaluation, EvaluationBatch, MediatorAssessment, MediatorCompose)


class _Task(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    request: str
    context: str


class DriveTask(_Task):
    kind: Literal["drive"] = "drive"
    n: int = Field(3, ge=1, le=8)
    feedback: str | None = None
    first: int = Field(0, ge=0, le=7, description="Proposals already written this round: write different ones.")


#: ``EvaluateTask.earlier``: what it is, for both task kinds.
_EARLIER = (
    "The conversation's earlier user turns, oldest first: read by the framework's deterministic checks "
    "(a dose for the child an earlier turn names). Left out of the task's JSON when empty, so a task "
    "without any is what services of the previous release read."
)


class _Judged(_Task):
    """What both EVALUATOR tasks carry beside the request: the conversation's earlier user turns."""

    @model_serializer(mode="wrap")
    def _turns_when_any(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        if isinstance(data, dict) and not getattr(self, "earlier", None):
            data.pop("earlier", None)
        return data


class EvaluateTask(_Judged):
    kind: Literal["evaluate"] = "evaluate"
    proposal: str
    earlier: list[str] = Field(default_factory=list, description=_EARLIER)
    framework: dict[str, Any] = Field(description="The framework content (Framework.model_dump()).")


class EvaluateBatchTask(_Judged):
    """One round's proposals in one message. The EVALUATOR still judges each in its own model
    call, seeing only that proposal: batching saves network round trips, not independence."""

    kind: Literal["evaluate_batch"] = "evaluate_batch"
    proposals: list[str] = Field(min_length=1, max_length=8)
    earlier: list[str] = Field(default_factory=list, description=_EARLIER)
    framework: dict[str, Any] = Field(description="The framework content (Framework.model_dump()).")

    def single(self, proposal: str) -> EvaluateTask:
        return EvaluateTask(
            request=self.request,
            context=self.context,
            proposal=proposal,
            earlier=self.earlier,
            framework=self.framework,
        )


class AssessItem(BaseModel):
    model_config = ConfigDict(frozen=True)

    text: str
    utility: float
    score: int
    verdict: str


class AssessTask(_Task):
    kind: Literal["assess"] = "assess"
    items: list[AssessItem]


class ComposeTask(_Task):
    kind: Literal["compose"] = "compose"
    proposal: str
    modifications: list[str] = Field(default_factory=list)
    instruction: str


class AgentReply(BaseModel, Generic[T]):
    """An agent's typed output plus the accounting the trace needs."""

    model_config = ConfigDict(frozen=True)

    output: T
    usage: Usage = Usage()
    latency_s: float = 0.0
    model: str = ""
    host: str = "in-process"
