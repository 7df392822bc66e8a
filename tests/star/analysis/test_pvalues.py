"""p-values are written for a reader with a floor: never ``p = 0`` or ``p = 2.7e-42`` (digits from
an approximation's far tail), but ``p < 1e-06``, in the STAR report, the boundary and H1 pages
and the boundary command's summary; the JSON keeps the computed value."""

from __future__ import annotations

from typing import Any

import pytest

from psychoalign.star.analysis.pvalues import P_FLOOR, p_text, p_value


@pytest.mark.parametrize(
    ("p", "shown"),
    [(0.0, "< 1e-06"), (2.7e-42, "< 1e-06"), (9.9e-7, "< 1e-06"), (1e-6, "1e-06"), (0.00041, "0.00041"),
     (0.0231, "0.023"), (1.0, "1.000"), (None, "—"), (float("nan"), "—")],
)  # fmt: skip
def test_p_value_has_a_floor_and_no_false_zero(p: float | None, shown: str) -> None:
    assert p_value(p) == shown


def test_p_text_reads_as_a_bound_below_the_floor() -> None:
    assert p_text(1e-116) == "p < 1e-06"
    assert p_text(0.0) == "p < 1e-06"
    assert p_text(0.04) == "p = 0.040"
    assert p_text(1e-4, "permutation p") == "permutation p = 0.0001"  # not "0.000"
    assert p_text(None, missing="–") == "p = –"
    assert P_FLOOR == 1e-6


def _comparison(p: float) -> dict[str, Any]:
    return {
        "computable": True,
        "groups": {
            "A": {"rate": 0.1, "n_ratings": 200, "n_raters": 20},
            "B": {"rate": 0.9, "n_ratings": 200, "n_raters": 20},
        },
        "reference": "A",
        "tested_groups": {"A": {"raters": 20, "ratings": 200}, "B": {"raters": 20, "ratings": 200}},
        "model": {
            "model": "logistic regression",
            "clusters": {"rater": 40, "item": 10},
            "terms": {"grp=B": {"odds_ratio": 81.0, "ci95": [20.0, 300.0], "p_value": p, "df": 39.0}},
            "joint_test": {"statistic": 400.0, "df": [1, 39.0], "p_value": p, "test": "Wald F"},
        },
        "p_value_holm": p,
        "rater_level": {"computable": True, "test": "Welch t-test on per-rater means", "statistic": 40.0,
                        "p_value": p, "raters": [20, 20]},
    }  # fmt: skip


def test_the_star_report_shows_tiny_p_values_as_a_bound() -> None:
    from psychoalign.star.analysis.report import METHODS, _comparison_html

    page = _comparison_html("grp", _comparison(2.7e-42))
    assert "e-42" not in page and "p = 0.000" not in page
    assert "p &lt; 1e-06" in page or "p < 1e-06" in page
    assert "Holm-adjusted p < 1e-06" in page
    assert "< 1e-06" in METHODS["groups"]  # the report says why
    ordinary = _comparison_html("grp", _comparison(0.0123))
    assert "p = 0.012" in ordinary


def test_boundary_and_h1_pages_and_summary_floor_p(capsys: pytest.CaptureFixture[str]) -> None:
    from psychoalign.cli.boundary import _print_boundary
    from psychoalign.experiments.studies.boundary.report import _kw

    kw = {"computable": True, "h": 250.0, "df": 9, "p": 3e-48, "epsilon2": 0.6, "epsilon2_null": 0.02,
          "eta2_h": 0.6, "n": 400, "groups": 10, "p_method": "chi-square approximation"}  # fmt: skip
    assert "p < 1e-06" in _kw(kw) and "e-48" not in _kw(kw)
    report = {
        "definition": "round1_mean",
        "domain_order": ["medical"],
        "per_domain": {"medical": {"mean": 0.5, "ci_low": 0.4, "ci_high": 0.6, "n": 40, "failed": 0, "sd": 0.1}},
        "kruskal_domains": kw,
        "counts": {"completed": 40, "items": 40, "failed": 0},
        "models": {"drive": "scripted:x"},
    }
    _print_boundary(report)
    printed = capsys.readouterr().out
    assert "p < 1e-06" in printed and "e-48" not in printed
