"""The arbitration share comes with its interval, and "sided with" reads the annotators in order."""

from __future__ import annotations

import json
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


def _verdicts(first: int, second: int, between: int) -> list[dict[str, Any]]:
    """Arbitrated dialogues: ``first`` rated 1 and 4 and arbitrated 1 (the first annotator's side),
    ``second`` rated 1 and 4 and arbitrated 4, ``between`` rated 1 and 3 and arbitrated 2."""
    rows = _rows(first + second + between, first + second + between)
    for i, row in enumerate(rows):
        if i >= first + second:  # ratings 1 and 3, arbitrated 2: as close to both
            row["annotator2_rating"], row["arbitrator_rating"] = 3, 2
        elif i >= first:
            row["arbitrator_rating"] = 4
    return rows


def test_sided_with_shares_have_a_wilson_interval_and_n(tmp_path: Path) -> None:
    """ "Arbitrator sided with: first annotator 12" had no denominator and no interval; each share
    now comes with the number arbitrated and Wilson's 95 % interval, in report.json and the page."""
    from psychoalign.star.analysis.report import sided_summary

    data = to_data(tmp_path, _verdicts(12, 6, 2))
    section = arbitration_section(data)
    shares = section["arbitrator_sided_with_shares"]
    assert section["arbitrator_sided_with"] == {"annotator1": 12, "annotator2": 6, "between": 2, "missing": 0}
    assert shares["n"] == 20 and "warning" not in shares
    for side, k in (("annotator1", 12), ("annotator2", 6), ("between", 2)):
        low, high = proportion_confint(k, 20, method="wilson")
        assert shares[side] == {"count": k, "share": k / 20, "ci95": [low, high]}
    low, high = proportion_confint(12, 20, method="wilson")
    line = sided_summary(section)
    assert line is not None and f"closer to the first annotator 12 (60% of 20 arbitrated [95% CI {low:.0%}" in line
    out = tmp_path / "r"
    report = analyze([data], n_boot=50, embed=False)
    write_report(report, [data], out)
    assert json.loads((out / "report.json").read_text())["datasets"]["star"]["arbitration"][
        "arbitrator_sided_with_shares"
    ] == json.loads(json.dumps(shares))
    page = (out / "report.html").read_text()
    cell = f"<td>60% of 20 arbitrated [95% CI {low:.0%}, {high:.0%}]</td>"
    assert "<td>arbitrator&#x27;s rating closer to the first annotator</td><td>12</td>" + cell in page


def test_sided_with_on_few_arbitrations_gives_no_interval_and_says_why(tmp_path: Path) -> None:
    """Under the agreement's small-sample rule (fewer than 10 items: no interval, a warning), the
    shares of 3 arbitrated dialogues carry no interval and the report says why; none arbitrated:
    no share at all."""
    data = to_data(tmp_path, _verdicts(2, 1, 0))
    shares = arbitration_section(data)["arbitrator_sided_with_shares"]
    assert shares["n"] == 3 and shares["annotator1"] == {"count": 2, "share": 2 / 3, "ci95": None}
    assert "only 3 dialogues arbitrated: no interval on fewer than 10" in shares["warning"]
    out = tmp_path / "r"
    write_report(analyze([data], n_boot=50, embed=False), [data], out)
    page = (out / "report.html").read_text()
    assert "<td>67% of 3 arbitrated, no interval: fewer than 10</td>" in page
    assert "<strong>Small sample:</strong> only 3 dialogues arbitrated" in page
    waiting = [{**r, "arbitrator_id": None, "arbitrator_rating": None} for r in _rows(4, 4)]
    none = arbitration_section(to_data(tmp_path, waiting, "waiting"))["arbitrator_sided_with_shares"]
    assert none == {"n": 0, "min_n": 10, "reason": "no dialogue arbitrated yet: no share to give"}


def test_a_dialogue_arbitrated_twice_is_left_out_and_counted(tmp_path: Path) -> None:
    """One arbitration per dialogue in the store; two exports merged can hold a dialogue with two
    arbitrators. It has no one verdict: left out of the shares and counted, never a crash."""
    rows = _verdicts(11, 0, 0)
    rows.append({**rows[0], "arbitrator_id": "y", "arbitrator_rating": 4})
    section = arbitration_section(to_data(tmp_path, rows))
    assert section["arbitrated_more_than_once"] == 1
    assert section["arbitrator_sided_with"] == {"annotator1": 10, "annotator2": 0, "between": 0, "missing": 0}
    assert section["arbitrator_sided_with_shares"]["n"] == 10
