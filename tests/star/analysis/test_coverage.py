"""Coverage against even quotas: the chi-square p-value only where its approximation holds (every
expected count at least 5); on fewer dialogues an exact (Monte Carlo) multinomial p-value, named as
such, cross-checked against scipy's exact binomial test on two groups."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from scipy import stats as sps

from psychoalign.star.analysis import load
from psychoalign.star.analysis.stats import MIN_EXPECTED, coverage_section


def star_rows(rules: list[str]) -> list[dict[str, Any]]:
    """One submitted STAR dialogue per entry of ``rules``, two annotators each."""
    return [
        {
            "dialogue_id": f"d{i}",
            "status": "submitted",
            "rule": rule,
            "area": "misinformation",
            "cell": f"c{i % 3}",
            "target_group": "Asian × Female",
            "red_teamer_id": f"t{i}",
            "annotator1_rating": 1,
            "annotator1_id": f"a{i}",
            "annotator2_rating": 2,
            "annotator2_id": f"a{i + 1}",
        }
        for i, rule in enumerate(rules)
    ]


def section(tmp_path: Path, rules: list[str]) -> dict[str, Any]:
    path = tmp_path / "star.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in star_rows(rules)), encoding="utf-8")
    return coverage_section(load(path))


def test_few_dialogues_get_an_exact_p_not_the_chi_square_approximation(tmp_path: Path) -> None:
    """5 dialogues on one rule and 1 on the other, 3 expected on each: chi-square gave p = 0.10,
    the exact test gives 0.22 (scipy's exact binomial test)."""
    rule = section(tmp_path, ["hate"] * 5 + ["stereo"])["rule"]
    assert rule["counts"] == {"hate": 5, "stereo": 1}
    assert rule["expected_per_group"] == 3.0 < MIN_EXPECTED
    assert "exact" in rule["test"]
    exact = sps.binomtest(5, 6, 0.5).pvalue
    assert rule["p_value"] == pytest.approx(exact, abs=0.01)
    assert rule["p_value"] > sps.chisquare([5, 1]).pvalue + 0.05  # the approximation was anti-conservative


def test_enough_dialogues_keep_the_chi_square_test(tmp_path: Path) -> None:
    rule = section(tmp_path, ["hate"] * 14 + ["stereo"] * 6)["rule"]
    assert rule["expected_per_group"] == 10.0
    assert rule["test"].startswith("chi-square")
    assert rule["p_value"] == pytest.approx(sps.chisquare([14, 6]).pvalue)
    assert rule["chi2"] == pytest.approx(sps.chisquare([14, 6]).statistic)


def test_the_groups_counted_are_the_ones_seen(tmp_path: Path) -> None:
    """A rule with no dialogue is not in an export: the test covers the groups seen and says so."""
    rule = section(tmp_path, ["hate"] * 12 + ["stereo"] * 12)["rule"]
    assert rule["groups"] == 2 and "no dialogue" in rule["note"]
