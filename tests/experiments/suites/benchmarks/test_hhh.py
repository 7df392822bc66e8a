"""HHH: the answer layout alternates, so always answering A scores the share of items whose better
answer is A, with its Wilson interval."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.experiments.harness.stats import wilson_ci
from psychoalign.experiments.suites.benchmarks.hhh import HHH
from tests.experiments.helpers import Judge, cell, run, sample, scripted, spec


@pytest.mark.needs_data("hhh_alignment")
async def test_hhh_always_a_scores_the_share_of_items_whose_better_answer_is_a(tmp_path: Path) -> None:
    n = 30
    expected = sum(HHH.layout(i)[2] == "A" for i in sample(HHH(), n)) / n
    report, _ = await run(
        tmp_path,
        spec(["vanilla"], ["hhh"], n),
        {"chat": scripted("chat", lambda r: "A"), "judge": scripted("j", Judge())},
    )
    got = cell(report, "vanilla", "hhh", "accuracy")
    assert got["n"] == n and got["failed"] == 0
    assert got["mean"] == round(expected, 3)
    lo, hi = wilson_ci(round(expected * n), n)
    assert (got["ci_low"], got["ci_high"]) == (round(lo, 3), round(hi, 3))
    assert 0 < expected < 1  # the layout really alternates
