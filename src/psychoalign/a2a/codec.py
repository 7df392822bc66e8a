"""How PsychoAlign tasks and replies travel as A2A data parts (structured, schema-checked on arrival)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..agents.messages import AgentReply, AssessTask, ComposeTask, DriveTask, EvaluateBatchTask, EvaluateTask
from ..agents.schemas import DriveOutput, Evaluation, EvaluationBatch, MediatorAssessment, MediatorCompose
from ..errors import EndpointError

__all__ = ["OUTPUT_TYPES", "Task", "decode_reply", "decode_task", "encode_reply", "encode_task", "is_packed"]

Task = DriveTask | EvaluateTask | EvaluateBatchTask | AssessTask | ComposeTask
_TASK = TypeAdapter(Task)
OUTPUT_TYPES: dict[str, type[Any]] = {
    "drive": DriveOutput,
    "evaluate": Evaluation,
    "evaluate_batch": EvaluationBatch,
    "assess": MediatorAssessment,
    "compose": MediatorCompose,
}
# Parametrise the generic reply once per kind, not on every call.
_REPLY_TYPES: dict[str, Any] = {kind: AgentReply[out] for kind, out in OUTPUT_TYPES.items()}  # type: ignore[valid-type]


def encode_task(task: Task, *, packed: bool = False) -> dict[str, Any]:
    """The task as an A2A data part. ``packed``: the whole task as one JSON string (``task_json``),
    which is what PsychoAlign's own transport sends: protobuf's JSON conversion and the SDK's
    required-field check walk every nested value of a Struct in Python, a string costs one value.
    The service answers a packed task with a packed reply (``reply_json``)."""
    if packed:
        return {"psychoalign": "task", "task_json": task.model_dump_json()}
    body = task.model_dump(mode="json")
    if "framework" in body:
        # The framework is a large nested document that never changes within a negotiation;
        # protobuf Struct conversion of it cost ~3 ms per call, a JSON string costs almost nothing.
        body["framework_json"] = json.dumps(body.pop("framework"))
    return {"psychoalign": "task", "task": body}


def is_packed(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("task_json"), str)


def decode_task(data: Any) -> Task:
    """Raises ValueError naming what is wrong (the server rejects the A2A task with it)."""
    if not isinstance(data, dict) or data.get("psychoalign") != "task":
        raise ValueError("expected a data part {'psychoalign': 'task', 'task': {...}} or {..., 'task_json': '...'}")
    try:
        if is_packed(data):
            return _TASK.validate_json(data["task_json"])
        body = dict(data["task"])
        if isinstance(body.get("framework_json"), str):
            body["framework"] = json.loads(body.pop("framework_json"))
        return _TASK.validate_python(body)
    except (ValidationError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"invalid task: {str(exc).splitlines()[0]}") from None


def encode_reply(reply: AgentReply[Any], *, packed: bool = False) -> dict[str, Any]:
    if packed:
        return {"psychoalign": "reply", "reply_json": reply.model_dump_json()}
    return {"psychoalign": "reply", "reply": reply.model_dump(mode="json")}


def decode_reply(kind: str, data: Any, host: str) -> AgentReply[Any]:
    """Model output crossing the network is untrusted: validate it against the task's schema."""
    try:
        if not isinstance(data, dict) or data.get("psychoalign") != "reply":
            raise ValueError("not a PsychoAlign reply")
        if isinstance(data.get("reply_json"), str):
            packed: AgentReply[Any] = _REPLY_TYPES[kind].model_validate_json(data["reply_json"])
            return packed.model_copy(update={"host": host})
        body = dict(data["reply"])
        body["host"] = host
        reply: AgentReply[Any] = _REPLY_TYPES[kind].model_validate(body)
        return reply
    except (ValidationError, ValueError, KeyError, TypeError) as exc:
        raise EndpointError(f"agent at {host} sent an invalid '{kind}' reply: {str(exc).splitlines()[0]}") from None
