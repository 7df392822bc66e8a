"""How PsychoAlign tasks and replies travel as A2A data parts (structured, schema-checked on arrival).

A2A JSON is camelCase, so the data parts are too (``taskJson``, ``replyJson``, and in the
structured form every key of the task or reply: ``ruleHits``, ``latencyS``). Decoding accepts
both spellings, so services of the previous release (snake_case keys) still interoperate.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import TypeAdapter, ValidationError

from ..agents.messages import (
    AgentReply,
    AssessTask,
    ComposeTask,
    DriveTask,
    EvaluateBatchTask,
    EvaluateTask,
    framework_json,
    task_json,
)
from ..agents.schemas import DriveOutput, Evaluation, EvaluationBatch, MediatorAssessment, MediatorCompose
from ..errors import EndpointError
from ..jsonguard import loads_bounded

Task = DriveTask | EvaluateTask | EvaluateBatchTask | AssessTask | ComposeTask
_TASK = TypeAdapter(Task)
_KINDS: tuple[type[Task], ...] = (DriveTask, EvaluateTask, EvaluateBatchTask, AssessTask, ComposeTask)
_BY_KIND: dict[str, type[Task]] = {cls.model_fields["kind"].default: cls for cls in _KINDS}
OUTPUT_TYPES: dict[str, type[Any]] = {
    "drive": DriveOutput,
    "evaluate": Evaluation,
    "evaluate_batch": EvaluationBatch,
    "assess": MediatorAssessment,
    "compose": MediatorCompose,
}
# Parametrise the generic reply once per kind, not on every call.
_REPLY_TYPES: dict[str, Any] = {kind: AgentReply[out] for kind, out in OUTPUT_TYPES.items()}  # type: ignore[valid-type]


def _camel(key: str) -> str:
    return re.sub(r"_([a-z0-9])", lambda m: m.group(1).upper(), key)


def _snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), key)


def _keys(value: Any, rename: Any) -> Any:
    """``value`` with every dict key renamed (field names only: no payload holds data keys; the
    framework travels as a JSON string)."""
    if isinstance(value, dict):
        return {rename(k): _keys(v, rename) for k, v in value.items()}
    if isinstance(value, list):
        return [_keys(v, rename) for v in value]
    return value


def _string(data: dict[str, Any], camel: str, snake: str) -> str | None:
    value = data.get(camel, data.get(snake))
    return value if isinstance(value, str) else None


def encode_task(task: Task, *, packed: bool = False) -> dict[str, Any]:
    """The task as an A2A data part. ``packed``: the whole task as one JSON string (``taskJson``),
    which is what PsychoAlign's own transport sends: protobuf's JSON conversion and the SDK's
    required-field check walk every nested value of a Struct in Python, a string costs one value.
    The service answers a packed task with a packed reply (``replyJson``)."""
    if packed:
        return {"psychoalign": "task", "taskJson": task_json(task)}
    framework = getattr(task, "framework", None)
    body = task.model_dump(mode="json", exclude={"framework"})
    if framework is not None:
        # The framework is a large nested document that never changes within a negotiation;
        # protobuf Struct conversion of it cost ~3 ms per call, a JSON string costs almost nothing.
        body["framework_json"] = framework_json(framework)
    return {"psychoalign": "task", "task": _keys(body, _camel)}


def is_packed(data: Any) -> bool:
    return isinstance(data, dict) and _string(data, "taskJson", "task_json") is not None


def decode_task(data: Any) -> Task:
    """Raises ValueError naming what is wrong (the server rejects the A2A task with it)."""
    if not isinstance(data, dict) or data.get("psychoalign") != "task":
        raise ValueError("expected a data part {'psychoalign': 'task', 'task': {...}} or {..., 'taskJson': '...'}")
    packed = _string(data, "taskJson", "task_json")
    body: Any = None
    try:
        if packed is not None:
            return _TASK.validate_json(packed)
        body = _keys(dict(data["task"]), _snake)
        if isinstance(body.get("framework_json"), str):
            body["framework"] = loads_bounded(body.pop("framework_json"))
        return _TASK.validate_python(body)
    except ValidationError:
        raise ValueError(_why_invalid(packed, body)) from None
    except (KeyError, TypeError, ValueError) as exc:  # ValueError: JSON, bounds
        raise ValueError(f"invalid task: {str(exc).splitlines()[0]}") from None


def _why_invalid(packed: str | None, body: Any) -> str:
    """One line for a task that failed its schema: its kind, the first field at fault and what is
    wrong with it (the union's own message lists every member's errors on many lines)."""
    if packed is not None:
        try:
            body = loads_bounded(packed)
        except ValueError as exc:
            return f"invalid task: {str(exc).splitlines()[0]}"
    if not isinstance(body, dict):
        return "invalid task: the task must be a JSON object"
    kinds = ", ".join(sorted(_BY_KIND))
    kind = body.get("kind")
    if kind is None:
        return f"invalid task: no kind: send one of {kinds}"
    cls = _BY_KIND.get(kind) if isinstance(kind, str) else None
    if cls is None:
        return f"invalid task: kind {str(kind)[:40]!r} is not one of {kinds}"
    try:
        cls.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(task)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        return f"invalid task: {kind} task at {where}: {first['msg']}{more}"
    return f"invalid task: {kind} task"


def encode_reply(reply: AgentReply[Any], *, packed: bool = False) -> dict[str, Any]:
    if packed:
        return {"psychoalign": "reply", "replyJson": reply.model_dump_json()}
    return {"psychoalign": "reply", "reply": _keys(reply.model_dump(mode="json"), _camel)}


def decode_reply(kind: str, data: Any, host: str) -> AgentReply[Any]:
    """Model output crossing the network is untrusted: validate it against the task's schema."""
    try:
        if not isinstance(data, dict) or data.get("psychoalign") != "reply":
            raise ValueError("not a PsychoAlign reply")
        packed_json = _string(data, "replyJson", "reply_json")
        if packed_json is not None:
            packed: AgentReply[Any] = _REPLY_TYPES[kind].model_validate_json(packed_json)
            return packed.model_copy(update={"host": host})
        body = _keys(dict(data["reply"]), _snake)
        body["host"] = host
        reply: AgentReply[Any] = _REPLY_TYPES[kind].model_validate(body)
        return reply
    except (ValidationError, ValueError, KeyError, TypeError) as exc:
        raise EndpointError(
            f"agent sent an invalid '{kind}' reply", detail=f"{host}: {str(exc).splitlines()[0]}"
        ) from None
