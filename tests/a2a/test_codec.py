"""The earlier user turns an EVALUATOR task carries cross A2A (both encodings), and a task without
any is encoded as before, so services of the previous release still read it."""

from __future__ import annotations

import json

import pytest

from psychoalign.a2a.codec import decode_task, encode_task
from psychoalign.agents.messages import EvaluateBatchTask, EvaluateTask, task_json

FRAMEWORK = {"name": "x", "version": "1"}


@pytest.mark.parametrize("packed", [True, False])
def test_earlier_turns_cross_the_wire(packed: bool) -> None:
    task = EvaluateBatchTask(
        request="How much ibuprofen can I give him?",
        context="",
        proposals=["Give 400 mg."],
        earlier=["My son is 2."],
        framework=FRAMEWORK,
    )
    back = decode_task(encode_task(task, packed=packed))
    assert back == task
    assert isinstance(back, EvaluateBatchTask) and back.single("Give 100 mg.").earlier == ["My son is 2."]


@pytest.mark.parametrize("packed", [True, False])
def test_a_task_without_earlier_turns_is_encoded_as_before(packed: bool) -> None:
    task = EvaluateTask(request="r", context="c", proposal="p", framework=FRAMEWORK)
    encoded = encode_task(task, packed=packed)
    body = json.loads(encoded["taskJson"]) if packed else encoded["task"]
    assert "earlier" not in body
    assert decode_task(encoded) == task
    assert json.loads(task_json(task)) == {
        "request": "r",
        "context": "c",
        "kind": "evaluate",
        "proposal": "p",
        "framework": FRAMEWORK,
    }


def _part(body: dict[str, object], packed: bool) -> dict[str, object]:
    return {"psychoalign": "task", "taskJson": json.dumps(body)} if packed else {"psychoalign": "task", "task": body}


@pytest.mark.parametrize("packed", [True, False])
@pytest.mark.parametrize(
    ("body", "message"),
    [
        # a bad task names its kind, the field and what is wrong, not "22 validation errors for union[…]"
        ({"kind": "drive", "context": "", "n": 1}, "invalid task: drive task at request: Field required"),
        ({"kind": "drive", "request": "hi", "context": "", "n": "many"}, "invalid task: drive task at n: "),
        ({"kind": "nope"}, "invalid task: kind 'nope' is not one of assess, compose, drive, evaluate, evaluate_batch"),
        ({"request": "hi"}, "invalid task: no kind: send one of assess, compose, drive, evaluate, evaluate_batch"),
    ],
)
def test_an_invalid_task_is_named_by_kind_field_and_problem(
    body: dict[str, object], message: str, packed: bool
) -> None:
    with pytest.raises(ValueError) as caught:
        decode_task(_part(body, packed))
    assert str(caught.value).startswith(message), str(caught.value)
    assert "union[" not in str(caught.value) and "\n" not in str(caught.value)
