"""How PsychoAlign tasks and replies travel as A2A data parts (structured, schema-checked on arrival)."""

from __future__ import annotations

from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..agents.messages import AgentReply, AssessTask, ComposeTask, DriveTask, EvaluateTask
from ..agents.schemas import DriveOutput, Evaluation, MediatorAssessment, MediatorCompose
from ..errors import EndpointError

__all__ = ["OUTPUT_TYPES", "Task", "decode_reply", "decode_task", "encode_reply", "encode_task"]

Task = DriveTask | EvaluateTask | AssessTask | ComposeTask
_TASK = TypeAdapter(Task)
OUTPUT_TYPES: dict[str, type[Any]] = {
    "drive": DriveOutput,
    "evaluate": Evaluation,
    "assess": MediatorAssessment,
    "compose": MediatorCompose,
}


def encode_task(task: Task) -> dict[str, Any]:
    return {"psychoalign": "task", "task": task.model_dump(mode="json")}


def decode_task(data: Any) -> Task:
    """Raises ValueError naming what is wrong (the server rejects the A2A task with it)."""
    if not isinstance(data, dict) or data.get("psychoalign") != "task":
        raise ValueError("expected a data part {'psychoalign': 'task', 'task': {...}}")
    try:
        return _TASK.validate_python(data["task"])
    except (ValidationError, KeyError) as exc:
        raise ValueError(f"invalid task: {str(exc).splitlines()[0]}") from None


def encode_reply(reply: AgentReply[Any]) -> dict[str, Any]:
    return {"psychoalign": "reply", "reply": reply.model_dump(mode="json")}


def decode_reply(kind: str, data: Any, host: str) -> AgentReply[Any]:
    """Model output crossing the network is untrusted: validate it against the task's schema."""
    try:
        if not isinstance(data, dict) or data.get("psychoalign") != "reply":
            raise ValueError("not a PsychoAlign reply")
        body = dict(data["reply"])
        body["host"] = host
        output_type: Any = OUTPUT_TYPES[kind]
        return AgentReply[output_type].model_validate(body)
    except (ValidationError, ValueError, KeyError, TypeError) as exc:
        raise EndpointError(f"agent at {host} sent an invalid '{kind}' reply: {str(exc).splitlines()[0]}") from None
