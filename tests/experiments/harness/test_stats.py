"""Shared statistics of the reports: the bootstrap interval of a mean and when a report shows none
(Wilson and the clustered interval: tests/test_intervals.py)."""

from __future__ import annotations

import pytest


def test_a_graded_metric_where_every_item_scored_the_same_gets_no_interval() -> None:
    """Two dilemmas both rated 5.5 printed '0.550 [0.550, 0.550]': a zero-width interval that
    reads as certainty, from a judge that gave one rating to everything. Nothing varied, so the
    report gives the point and says so; a yes/no share keeps its Wilson interval (0/2 is wide)."""
    from psychoalign.experiments.harness.report import _stat

    flat = _stat([0.55, 0.55], binary=False, seed=0)
    assert (flat["mean"], flat["ci_low"], flat["ci_high"], flat["n"]) == (0.55, None, None, 2)
    assert flat["all_equal"] is True
    spread = _stat([0.05 * i for i in range(12)], binary=False, seed=0)
    assert spread["ci_low"] is not None and spread["ci_low"] < spread["ci_high"] and "all_equal" not in spread
    share = _stat([0.0, 0.0], binary=True, seed=0)
    assert share["ci_method"] == "wilson" and share["ci_high"] is not None and share["ci_high"] > 0.5


def test_percentile_bootstrap_covers_far_less_than_95_percent_on_few_items() -> None:
    """Why graded metrics get no interval on fewer than MIN_BOOTSTRAP_N items: on three normal
    values the '95 %' percentile bootstrap interval of the mean holds the true mean in about three
    datasets of four (on two, it is the range of the two values: one in two)."""
    import numpy as np

    from psychoalign.experiments.harness.stats import bootstrap_ci

    rng = np.random.default_rng(0)

    def coverage(n: int) -> float:
        draws = (bootstrap_ci(list(rng.normal(size=n)), r, 500) for r in range(300))
        return sum(lo <= 0.0 <= hi for lo, hi in draws) / 300

    assert 0.4 < coverage(2) < 0.6  # about one in two
    assert 0.65 < coverage(3) < 0.85  # about three in four


def test_a_graded_metric_on_fewer_than_ten_items_gets_no_interval_but_a_note() -> None:
    from psychoalign.experiments.harness.report import _stat
    from psychoalign.experiments.harness.stats import MIN_BOOTSTRAP_N

    few = _stat([0.5, 0.6, 0.7], binary=False, seed=0)
    assert (few["mean"], few["ci_low"], few["ci_high"], few["n"], few["ci_method"]) == (0.6, None, None, 3, None)
    assert f"fewer than {MIN_BOOTSTRAP_N} items" in few["ci_note"]
    enough = _stat([0.1 * i for i in range(MIN_BOOTSTRAP_N)], binary=False, seed=0)
    assert enough["ci_method"] == "bootstrap" and enough["ci_low"] < enough["mean"] < enough["ci_high"]
    assert "ci_note" not in enough
    share = _stat([0.0, 1.0, 1.0], binary=True, seed=0)  # Wilson holds on few items: kept
    assert share["ci_method"] == "wilson" and share["ci_low"] is not None


def test_one_item_is_shown_with_its_wilson_interval_or_said_to_have_none() -> None:
    """A share over one item printed "0.000 (n=1)" like a measurement: a yes/no share now keeps
    the Wilson interval of 0/1 (0 to 0.79), a graded score says it rests on one item."""
    from psychoalign.experiments.harness.report import _stat

    share = _stat([0.0], binary=True, seed=0)
    assert share["ci_method"] == "wilson" and share["ci_low"] == 0.0 and share["ci_high"] == pytest.approx(0.793)
    graded = _stat([0.7], binary=False, seed=0)
    assert (graded["ci_low"], graded["ci_high"], graded["ci_note"]) == (None, None, "one item")


def test_per_category_graded_scores_follow_the_same_rule() -> None:
    """A category of one graded item printed [x, x] (a bootstrap over one value)."""
    from psychoalign.experiments.harness.stats import mean_interval

    assert mean_interval([0.7], seed=0) == (None, None, "one item: no interval")
    lo, hi, note = mean_interval([0.2, 0.4, 0.9], seed=0)
    assert (lo, hi) == (None, None) and note is not None and "fewer than" in note
    lo, hi, note = mean_interval([0.3] * 12, seed=0)
    assert (lo, hi, note) == (None, None, "every item scored the same")
    lo, hi, note = mean_interval([0.05 * i for i in range(12)], seed=0)
    assert lo is not None and hi is not None and note is None
