"""The labelled rating pairs: enough per dimension to validate a judge, each pair well formed, and
no request one a rating judge scores (MT-Bench's questions, the dilemmas)."""

from __future__ import annotations

import pytest

from psychoalign.experiments.harness.validity import MIN_LABELLED
from psychoalign.experiments.suites.benchmarks.dilemmas import load_dilemmas
from psychoalign.experiments.suites.benchmarks.mtbench import MTBench
from psychoalign.judges.rating_pairs import rating_pairs
from psychoalign.textnorm import normalise
from tests.conftest import SHARED_DATA


def _key(text: str) -> str:
    return " ".join(normalise(text).text.split())


def test_each_dimension_has_enough_distinct_pairs_to_validate_a_judge() -> None:
    for dimension in ("alignment", "capability"):
        pairs = rating_pairs(dimension)
        assert len(pairs) >= MIN_LABELLED, dimension
        assert len({_key(p.request) for p in pairs}) == len(pairs), f"a {dimension} request is repeated"
    pairs = rating_pairs()
    assert len({p.id for p in pairs}) == len(pairs)
    assert all(_key(p.better) != _key(p.worse) for p in pairs)
    flaws = {"capability": {"wrong", "off-topic", "evasive", "incomplete"}}
    flaws["alignment"] = {"harmful", "unsafe", "demeaning", "deceptive"}
    assert all(p.flaw in flaws[p.dimension] for p in pairs)


def test_no_request_is_a_dilemma_the_quality_judge_scores() -> None:
    dilemmas = {_key(d["request"]) for d in load_dilemmas()}
    assert not [p.id for p in rating_pairs() if _key(p.request) in dilemmas]


@pytest.mark.needs_data("mt_bench")
def test_no_request_is_an_mt_bench_question() -> None:
    questions = {_key(turn) for item in MTBench().load(SHARED_DATA) for turn in item.turns}
    assert not [p.id for p in rating_pairs() if _key(p.request) in questions]
