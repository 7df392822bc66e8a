"""The response head's hand-written held-out files (bench/data/answers_heldout_v1.yaml, read by
``bench/response_head.py``, and any file in ``BLIND``, written blind and scored once, explicitly,
with its ``--file``) stay held out: each holds 48 acceptable and 48 unacceptable request/answer
pairs, no answer twice, and none of its answers repeats a response the head trains on
(``project_responses.yaml`` and ``project_short_answers.yaml``; with the evaluation data, every
training response the bench checks) by the bench's rule: the same normalised text, or content words
overlapping by Jaccard >= 0.5. A later file repeats no answer and no request of an earlier one.
These tests compare text only: none embeds or scores an item."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bench.request_head import _norm, repeats
from bench.response_head import ANSWERS

from tests.conftest import SHARED_DATA

ROOT = Path(__file__).parents[2]
BENCH_DATA = ROOT / "bench" / "data"
#: Written blind: not in the bench's list, so no build's default report reads it before it is
#: scored, once, explicitly with ``--file``; then it goes into ``ANSWERS``.
BLIND: tuple[Path, ...] = ()
#: Answers that repeat a training response written after the file: one correct answer of
#: answers_heldout_v2.yaml (ladder safety) is close to one of ``project_long_responses.yaml``, written
#: at the same time without sight of it. The bench counts it and leaves it out of every figure; a new
#: repeat fails here.
KNOWN_REPEATS = {"answers_heldout_v2.yaml": 1}
#: The bench's files, then the blind ones (every answers file was written blind).
HELDOUTS = (*ANSWERS, *BLIND)
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


def _items(path: Path) -> dict[str, list[dict[str, str]]]:
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(data, dict) and set(data) == set(SIDES), path.name
    return {side: list(data[side]) for side in SIDES}


def _answers(path: Path) -> list[str]:
    return [item["answer"] for items in _items(path).values() for item in items]


def _requests(path: Path) -> list[str]:
    return [item["request"] for items in _items(path).values() for item in items]


@pytest.mark.parametrize("path", HELDOUTS, ids=lambda p: p.name)
def test_each_side_holds_48_pairs_with_a_request_and_an_answer(path: Path) -> None:
    for side, items in _items(path).items():
        assert len(items) == 48, (path.name, side)
        for item in items:
            assert isinstance(item, dict) and set(item) == {"request", "answer"}, (side, item)
            assert all(isinstance(item[k], str) and item[k].strip() for k in ("request", "answer")), (side, item)


@pytest.mark.parametrize("path", HELDOUTS, ids=lambda p: p.name)
def test_no_answer_appears_twice(path: Path) -> None:
    answers = [_norm(a) for a in _answers(path)]
    assert len(set(answers)) == len(answers) == 96


@pytest.mark.parametrize("path", HELDOUTS, ids=lambda p: p.name)
def test_no_answer_repeats_a_training_response(path: Path) -> None:
    training = [t for p in TRAINING for t in _strings(yaml.safe_load(p.read_text(encoding="utf-8")))]
    assert len(training) > 300
    assert repeats(_answers(path), training) == set()


def test_every_answers_file_on_disk_is_in_the_bench_list_or_blind() -> None:
    """An answers file is either read by the bench or waiting blind, never both, never neither."""
    on_disk = sorted(p.name for p in BENCH_DATA.glob("answers_heldout*.yaml"))
    assert sorted(p.name for p in HELDOUTS) == on_disk
    assert not set(BLIND) & set(ANSWERS)
    assert all(p.is_file() for p in BLIND)


@pytest.mark.parametrize("index", range(1, len(HELDOUTS)), ids=lambda i: HELDOUTS[i].name)
def test_a_later_answers_file_repeats_no_answer_and_no_request_of_an_earlier_one(index: int) -> None:
    later = HELDOUTS[index]
    earlier = HELDOUTS[:index]
    assert repeats(_answers(later), [a for p in earlier for a in _answers(p)]) == set()
    assert repeats(_requests(later), [r for p in earlier for r in _requests(p)]) == set()


@pytest.mark.needs_data
@pytest.mark.parametrize("path", HELDOUTS, ids=lambda p: p.name)
def test_no_answer_repeats_a_response_the_bench_checks(path: Path) -> None:
    """The bench's own check before any figure (the corpus's responses with the project-written
    safety answers), run here on every answers file, the blind ones included."""
    from bench.response_head import training_texts

    responses, _ = training_texts(SHARED_DATA)
    assert len(responses) > 1000
    assert len(repeats(_answers(path), responses)) == KNOWN_REPEATS.get(path.name, 0)
