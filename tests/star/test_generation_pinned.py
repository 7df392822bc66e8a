"""Instruction generation is reproducible: the same seed gives the same instructions, byte for byte.

The digests pin the output of :func:`generate_instructions` (ids, parameters, sampled topics, the
shuffled order and the rendered text) for a few seeds and options, so a change meant to make
generation faster cannot change what a campaign stores. A change of the output made on purpose
(a new template, a new parameter) updates them in the same commit, and says so.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from psychoalign.star import generate_instructions, load_parameters, load_policy
from psychoalign.star.instructions import Instruction

POLICY = load_policy()
SPACE = load_parameters()

PINNED = [
    (2000, {"seed": 0}, "d23948278c8243ad758ab09a307718dd3205c51d8f15ee876017a194ba6d94c1"),
    (997, {"seed": 7, "balance": "flat"}, "999d7f7e7d6255f290b2e6dfb1e66f564ecd2d64ae43f493cd51cd59a1aa7bac"),
    (
        61,
        {"seed": 3, "rules": ["hate-speech", "medical-advice"]},
        "01c04c70748dbb42c17e43180513583bab386d1aa17798f4d4f2b3184b6a5c19",
    ),
]


def _digest(items: list[Instruction]) -> str:
    h = hashlib.sha256()
    for item in items:
        h.update(item.model_dump_json().encode())
        h.update(b"\n")
    return h.hexdigest()


@pytest.mark.parametrize(("n", "options", "digest"), PINNED)
def test_generation_output_is_pinned(n: int, options: dict[str, Any], digest: str) -> None:
    assert _digest(generate_instructions(POLICY, SPACE, n, **options)) == digest


def test_generated_instructions_are_valid_and_independent() -> None:
    """Each instruction validates as its model and owns its dicts: changing one's parameters (a
    caller's copy-and-edit) leaves its cell siblings as they were."""
    items = generate_instructions(POLICY, SPACE, 2000, seed=5)
    for item in items:
        assert Instruction.model_validate(item.model_dump()) == item
    first = items[0]
    siblings = [i for i in items[1:] if i.cell == first.cell and i.sampled == first.sampled]
    assert siblings
    before = [dict(s.params) for s in siblings]
    first.params["adversariality"] = "changed"
    first.sampled["topic"] = "changed"
    assert [dict(s.params) for s in siblings] == before
    assert all(s.sampled.get("topic") != "changed" for s in siblings)
