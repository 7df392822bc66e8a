"""Shared statistics: Wilson intervals equal statsmodels'."""

from __future__ import annotations

import pytest

from psychoalign.experiments.harness.stats import wilson_ci


def test_wilson_matches_statsmodels() -> None:
    from statsmodels.stats.proportion import proportion_confint

    for k, n in ((0, 10), (3, 10), (10, 10), (37, 50), (1, 1)):
        lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        got = wilson_ci(k, n)
        assert got == pytest.approx((lo, hi), abs=1e-12)
