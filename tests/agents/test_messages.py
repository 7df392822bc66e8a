"""The framework a task carries is encoded in one place: the EVALUATOR's inputs, the bus's bit
count and the A2A data part all hold the JSON the task's own JSON holds."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from psychoalign.a2a.codec import decode_task, encode_task
from psychoalign.agents.agents import EvaluatorAgent
from psychoalign.agents.messages import (
    DriveTask,
    EvaluateBatchTask,
    EvaluateTask,
    framework_json,
    framework_json_size,
    task_json,
)
from psychoalign.frameworks import load_framework
from psychoalign.models import ChatModel
from psychoalign.models.scripted import ScriptedBackend
from psychoalign.models.spec import ModelSpec
from psychoalign.models.types import ChatRequest
from psychoalign.negotiation.bus import _bits, _task_bits
from tests.scenario import APPROVE


def _framework_in(task_json: str) -> str:
    """The framework's text inside a task's JSON (it is the last field)."""
    _, sep, rest = task_json.partition(',"framework":')
    assert sep, task_json
    return rest[:-1]


def test_the_evaluator_the_bus_and_a2a_send_the_framework_the_task_json_holds() -> None:
    payload = load_framework("general").payload()
    renamed = {**payload, "description": "ü ✓ — non-ASCII text"}
    for framework in (payload, renamed):
        task = EvaluateTask(request="Wie koche ich ein Ei?", context="", proposal="Ein Ei.", framework=framework)
        in_task = _framework_in(task.model_dump_json())
        assert framework_json(framework) == in_task
        assert framework_json_size(framework) == len(in_task.encode())
        assert _task_bits(task) == _bits(task.model_dump_json())
        # the EVALUATOR's structured inputs (what the embedded classifier reads)
        seen: list[ChatRequest] = []

        def judge(request: ChatRequest, seen: list[ChatRequest] = seen) -> str:
            seen.append(request)
            return json.dumps(APPROVE)

        spec = ModelSpec(backend="scripted", model="j", schema_retries=0, max_retries=0)
        agent = EvaluatorAgent(ChatModel(spec, ScriptedBackend(spec, fn=judge)))
        asyncio.run(agent.evaluate(task))
        assert seen[0].inputs is not None and seen[0].inputs["framework"] == in_task
        # the A2A data part (structured form) carries the same string, and decodes to the task
        part = encode_task(task)
        assert part["task"]["frameworkJson"] == in_task
        assert decode_task(part) == task


def test_a_payload_changed_after_it_was_encoded_is_encoded_again() -> None:
    payload: dict[str, Any] = json.loads(json.dumps(load_framework("general").payload()))
    before = framework_json(payload)
    payload["description"] = "changed in place"
    after = framework_json(payload)
    assert after != before and json.loads(after)["description"] == "changed in place"
    task = EvaluateTask(request="r", context="", proposal="p", framework=payload)
    assert _task_bits(task) == _bits(task.model_dump_json())


def test_tasks_built_from_one_payload_share_its_encoding() -> None:
    """Validation copies a task's framework dict (its top level): every task built from the one
    shared payload still gets the one encoding, not a new one per task."""
    payload = load_framework("general").payload()
    first = EvaluateTask(request="r", context="", proposal="p", framework=payload)
    batch = EvaluateBatchTask(request="r", context="", proposals=["a", "b"], framework=payload)
    assert first.framework is not payload  # the copy the cache must see through
    encoded = framework_json(payload)
    for task in (first, batch, batch.single("a")):
        assert framework_json(task.framework) is encoded
    # a role service decodes a new payload from every message: the same JSON, found, not parsed again
    decoded = decode_task(encode_task(first, packed=True))
    assert isinstance(decoded, EvaluateTask) and decoded.framework == payload
    assert framework_json(decoded.framework) is encoded


def test_a_copy_with_a_value_replaced_is_encoded_as_it_is() -> None:
    payload = load_framework("general").payload()
    framework_json(payload)
    copy = {**payload, "description": "replaced in the copy"}
    assert json.loads(framework_json(copy))["description"] == "replaced in the copy"
    assert json.loads(framework_json(payload))["description"] == payload["description"]
    reordered = dict(reversed(list(payload.items())))
    assert framework_json(reordered) == json.dumps(reordered, separators=(",", ":"), ensure_ascii=False)


def test_task_json_is_the_tasks_own_json() -> None:
    payload = load_framework("general").payload()
    renamed = {**payload, "description": "ü ✓ — non-ASCII text"}
    for framework in (payload, renamed):
        for task in (
            EvaluateTask(request="Wie koche ich ein Ei?", context="c", proposal="Ein Ei.", framework=framework),
            EvaluateBatchTask(request="q", context="", proposals=["a", "b"], framework=framework),
            DriveTask(request="q", context="", n=2, feedback="more"),
        ):
            assert task_json(task) == task.model_dump_json()
            assert decode_task(encode_task(task, packed=True)) == task
