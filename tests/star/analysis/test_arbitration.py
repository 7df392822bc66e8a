"""The arbitration share comes with its interval, and "sided with" reads the annotators in order."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from statsmodels.stats.proportion import proportion_confint

from psychoalign.star.analysis import analyze, write_report
from psychoalign.star.analysis.stats import arbitration_section
from tests.star.analysis.test_analysis import to_data


def _rows(n: int, diverging: int) -> list[dict[str, Any]]:
    rows = []
    for i in range(n):
        split = i < diverging
        rows.append(
            {
                "dialogue_id": f"d{i:03d}",
                "status": "submitted",
                "rule": "harassment",
                "annotator1_id": f"a{i % 7}",
                "annotator1_rating": 1 if split else 2,
                "annotator2_id": f"b{i % 5}",
                "annotator2_rating": 4 if split else 2,
                # the arbitrator always agrees with the first annotator
                "arbitration_needed": split,
                "arbitrator_id": "z" if split else None,
                "arbitrator_rating": 1 if split else None,
            }
        )
    return rows


def test_the_share_needing_arbitration_has_a_wilson_interval(tmp_path: Path) -> None:
    """ "Share needing arbitration 46 %" on 24 dialogues read as a measured rate; its interval runs
    from about a quarter to two thirds."""
    data = to_data(tmp_path, _rows(24, 11))
    section = arbitration_section(data)
    assert section["arbitration_triggered"] == 11 and section["dialogues_with_two_annotations"] == 24
    low, high = proportion_confint(11, 24, method="wilson")
    assert section["trigger_rate_ci95"] == [low, high]
    out = tmp_path / "r"
    write_report(analyze([data], n_boot=50, embed=False), [data], out)
    assert f"46% [95% CI {low:.0%}, {high:.0%}]" in (out / "report.html").read_text()


def test_sided_with_keeps_the_first_and_second_annotator_apart(tmp_path: Path) -> None:
    """A dialogue's two annotations keep their order when sorted by dialogue (a stable sort), so
    agreement with the first annotator is never credited to the second."""
    section = arbitration_section(to_data(tmp_path, _rows(300, 120)))
    assert section["arbitrator_sided_with"] == {"annotator1": 120, "annotator2": 0, "between": 0, "missing": 0}
