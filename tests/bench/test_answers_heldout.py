"""The response head's hand-written held-out file (bench/data/answers_heldout_v1.yaml, written
blind and scored once, explicitly, by file) stays held out: it holds 48 acceptable and 48
unacceptable request/answer pairs, no answer twice, and none of its answers repeats a response the
head trains on (``project_responses.yaml`` and ``project_short_answers.yaml``) by the bench's rule:
the same normalised text, or content words overlapping by Jaccard >= 0.5. These tests compare text
only: none embeds or scores an item."""

from __future__ import annotations

from pathlib import Path

import yaml
from bench.request_head import _norm, repeats

ROOT = Path(__file__).parents[2]
HELDOUT = ROOT / "bench" / "data" / "answers_heldout_v1.yaml"
TRAINING = tuple(
    ROOT / "src" / "psychoalign" / "models" / "classifier_data" / name
    for name in ("project_responses.yaml", "project_short_answers.yaml")
)
SIDES = ("acceptable", "unacceptable")


def _strings(value: object) -> list[str]:
    """Every string leaf of a training file (sides, then topics, then response texts)."""
    if isinstance(value, dict):
        return [t for v in value.values() for t in _strings(v)]
    if isinstance(value, list):
        return [t for v in value for t in _strings(v)]
    return [value] if isinstance(value, str) else []


def _items() -> dict[str, list[dict[str, str]]]:
    data = yaml.safe_load(HELDOUT.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and set(data) == set(SIDES)
    return {side: list(data[side]) for side in SIDES}


def test_each_side_holds_48_pairs_with_a_request_and_an_answer() -> None:
    for side, items in _items().items():
        assert len(items) == 48, side
        for item in items:
            assert isinstance(item, dict) and set(item) == {"request", "answer"}, (side, item)
            assert all(isinstance(item[k], str) and item[k].strip() for k in ("request", "answer")), (side, item)


def test_no_answer_appears_twice() -> None:
    answers = [_norm(item["answer"]) for items in _items().values() for item in items]
    assert len(set(answers)) == len(answers) == 96


def test_no_answer_repeats_a_training_response() -> None:
    training = [t for path in TRAINING for t in _strings(yaml.safe_load(path.read_text(encoding="utf-8")))]
    assert len(training) > 300
    answers = [item["answer"] for items in _items().values() for item in items]
    assert repeats(answers, training) == set()
