"""The project-written short answers the response head learns from
(``classifier_data/project_short_answers.yaml``) are short, on both sides, and fresh: none repeats
or near-repeats a text of any file under bench/data, the reference-answer set above all (its
questions, and each question with its accepted answers, since a short answer restates the answer
and the question's words). The rule is the bench's (``bench.request_head.repeats``: the same
normalised text, or content words overlapping by Jaccard >= 0.5). The older project-written
responses (``project_responses.yaml``) repeat no reference item either."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from bench.reference_answers import REFERENCE, load_reference
from bench.request_head import repeats

from psychoalign.models.safety_corpus import _package_file

BENCH_DATA = Path(__file__).parents[2] / "bench" / "data"


def _short_answers() -> dict[str, list[str]]:
    data = yaml.safe_load(_package_file("project_short_answers.yaml").read_text(encoding="utf-8"))
    return {side: [str(t) for items in data[side].values() for t in items] for side in ("acceptable", "unacceptable")}


def _project_responses() -> list[str]:
    data = yaml.safe_load(_package_file("project_responses.yaml").read_text(encoding="utf-8"))
    return [str(t) for side in data.values() for items in side.values() for t in items]


def _texts(node: object, skip: tuple[str, ...] = ("needs", "never")) -> list[str]:
    """Every text of a bench file (items may be strings or mappings such as ``{q, accept}``); the
    outcome probes' ``needs``/``never`` are patterns that judge a reply, not texts."""
    if isinstance(node, dict):
        return [t for k, v in node.items() if k not in skip for t in _texts(v, skip)]
    if isinstance(node, list):
        return [t for v in node for t in _texts(v, skip)]
    return [str(node)] if isinstance(node, str) else []


def held_texts(path: Path) -> list[str]:
    """The texts of one bench file a training answer may not repeat: every text but a request's.
    The benches hold answers against training responses and requests against training requests
    (the request heads' own tests do that), so a training answer that reads like a held-out or
    probe *request* ("Give the baby honey for its cough." beside "Can I give my 8 month old honey
    for her cough?") touches no figure; of a held-out answers file that leaves its answers."""
    return _texts(yaml.safe_load(path.read_text("utf-8")), skip=("needs", "never", "request"))


def test_both_sides_hold_short_distinct_answers() -> None:
    sides = _short_answers()
    assert len(sides["acceptable"]) >= 250 and len(sides["unacceptable"]) >= 100
    every = [t for texts in sides.values() for t in texts]
    assert len({" ".join(t.casefold().split()) for t in every}) == len(every)
    assert [t for t in every if not 1 <= len(t.split()) <= 12] == []


def test_no_short_answer_repeats_a_reference_answer_item() -> None:
    items = load_reference(REFERENCE)
    assert len(items) >= 50
    references = [
        *(i.question for i in items),
        *(f"{i.question} {' '.join(i.accept)}" for i in items),
        *(a for i in items for a in i.accept),
    ]
    mine = [t for texts in _short_answers().values() for t in texts]
    assert repeats(mine, references) == set()
    assert repeats(_project_responses(), references) == set()  # the older response data too


def test_no_short_answer_repeats_a_text_of_any_bench_file() -> None:
    held = [t for path in sorted(BENCH_DATA.glob("*.yaml")) for t in held_texts(path)]
    assert len(held) > 500
    mine = [t for texts in _short_answers().values() for t in texts]
    assert repeats(mine, held) == set()


@pytest.mark.parametrize("args", [["--keep-blocked"], ["--keep-from", "x.json"]])
def test_keeping_heads_without_naming_the_head_to_refit_is_a_one_line_error(args: list[str]) -> None:
    script = Path(__file__).parents[2] / "scripts" / "train_classifier.py"
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [
        "error: --keep-from and --keep-blocked need --only HEAD (the head to refit; the others are copied)"
    ]
