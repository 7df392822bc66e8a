"""The arbitration share comes with its interval, "sided with" reads the annotators in order, and
its shares' intervals are clustered by arbitrator (one arbitrator's decisions are not independent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
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


def _verdicts(first: int, second: int, between: int, arbitrators: int | None = None) -> list[dict[str, Any]]:
    """Arbitrated dialogues: ``first`` rated 1 and 4 and arbitrated 1 (the first annotator's side),
    ``second`` rated 1 and 4 and arbitrated 4, ``between`` rated 1 and 3 and arbitrated 2; decided
    by ``arbitrators`` arbitrators in turn (None: each dialogue by its own)."""
    rows = _rows(first + second + between, first + second + between)
    for i, row in enumerate(rows):
        row["arbitrator_id"] = f"z{i if arbitrators is None else i % arbitrators}"
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
        low, high = proportion_confint(k, 20, method="wilson")  # 20 arbitrators, one decision each
        assert shares[side] == {"count": k, "share": k / 20, "ci95": pytest.approx([low, high], abs=1e-12)}
    low, high = proportion_confint(12, 20, method="wilson")
    line = sided_summary(section)
    assert line is not None and f"closer to the first annotator 12 (60% of 20 arbitrated [95% CI {low:.0%}" in line
    assert line.startswith("arbitrator sided with (20 arbitrators): ")
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


def test_one_arbitrator_s_decisions_give_no_interval_and_say_why(tmp_path: Path) -> None:
    """Twenty arbitrations by one arbitrator showed "60% of 20 [95% CI 39%, 78%]" as if they were
    twenty independent verdicts; they are one person's leaning. No interval, a warning naming it,
    in report.json, the page and ``star analyze``'s line; the same without arbitrator ids."""
    from psychoalign.star.analysis.report import sided_summary

    data = to_data(tmp_path, _verdicts(12, 6, 2, arbitrators=1))
    section = arbitration_section(data)
    shares = section["arbitrator_sided_with_shares"]
    assert shares["arbitrators"] == 1 and shares["annotator1"] == {"count": 12, "share": 0.6, "ci95": None}
    assert shares["no_interval"].startswith("one arbitrator decided all 20: one arbitrator's decisions are not")
    assert shares["warning"] == shares["no_interval"] and "at least 10" in shares["warning"]
    line = sided_summary(section)
    assert line is not None and "closer to the first annotator 12 (60% of 20 arbitrated, no interval)" in line
    assert line.endswith("these shares describe that arbitrator")
    out = tmp_path / "r"
    write_report(analyze([data], n_boot=50, embed=False), [data], out)
    page = (out / "report.html").read_text()
    assert "<td>60% of 20 arbitrated, no interval</td>" in page
    assert "<strong>No interval:</strong> one arbitrator decided all 20" in page
    four = arbitration_section(to_data(tmp_path, _verdicts(12, 6, 2, arbitrators=4), "four"))
    assert four["arbitrator_sided_with_shares"]["no_interval"].startswith("4 arbitrators decided all 20")
    unnamed = [{**r, "arbitrator_id": None} for r in _verdicts(12, 6, 2)]
    shares = arbitration_section(to_data(tmp_path, unnamed, "unnamed"))["arbitrator_sided_with_shares"]
    assert shares["annotator1"]["ci95"] is None and "arbitrators" not in shares
    assert shares["no_interval"].startswith("20 of 20 arbitrations name no arbitrator")


def _reference_interval(values: list[bool], clusters: list[str]) -> tuple[float, float]:
    """The 95 % interval of a share clustered by arbitrator, computed apart from the package: the
    cluster-robust variance of an intercept-only regression from statsmodels, for clusters of
    equal size scaled by G / (G - 1) (the CR2 correction), Student's t with G - 1 degrees of freedom,
    and statsmodels' Wilson interval on the effective n that variance gives."""
    import numpy as np
    import statsmodels.api as sm
    from scipy.stats import norm, t

    y = np.asarray(values, dtype=float)
    groups = np.unique(clusters, return_inverse=True)[1]
    g = groups.max() + 1
    fit = sm.OLS(y, np.ones(len(y))).fit(cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False})
    variance = float(fit.bse[0]) ** 2 * g / (g - 1)
    p = float(y.mean())
    z = norm.ppf(0.975)
    n_eff = min(len(y), p * (1 - p) / variance * (z / t.ppf(0.975, g - 1)) ** 2)
    low, high = proportion_confint(p * n_eff, n_eff, alpha=0.05, method="wilson")
    return float(low), float(high)


def test_the_clustered_interval_of_the_shares_matches_a_statsmodels_reference(tmp_path: Path) -> None:
    """12 arbitrators, 4 arbitrations each, some leaning to the first annotator and some to the
    second: each side's interval is the reference computation's, wider than Wilson's on the 48."""
    rows = _rows(48, 48)
    for i, row in enumerate(rows):
        who = i % 12
        row["arbitrator_id"] = f"arb{who}"
        leans_first = who < 7 if i < 36 else who >= 7  # most decisions follow the arbitrator's leaning
        row["arbitrator_rating"] = 1 if leans_first else 4
    section = arbitration_section(to_data(tmp_path, rows))
    shares = section["arbitrator_sided_with_shares"]
    assert shares["n"] == 48 and shares["arbitrators"] == 12 and "no_interval" not in shares
    sides = ["annotator1" if r["arbitrator_rating"] == 1 else "annotator2" for r in rows]
    clusters = [r["arbitrator_id"] for r in rows]
    for side in ("annotator1", "annotator2"):
        entry = shares[side]
        assert entry["ci_method"] == "wilson-clustered" and entry["n_eff"] < 48
        assert entry["ci95"] == pytest.approx(_reference_interval([s == side for s in sides], clusters), abs=1e-9)
        plain = proportion_confint(entry["count"], 48, method="wilson")
        assert entry["ci95"][1] - entry["ci95"][0] > plain[1] - plain[0]


def test_clustered_by_arbitrator_the_interval_covers_95_percent_where_wilson_does_not() -> None:
    """A seeded Monte Carlo: 15 arbitrators, each with a leaning of their own (the chance of siding
    with the first annotator drawn from Beta(0.6, 1.4), mean 0.3), 6 decisions each. Wilson's
    interval on the 90 decisions as if independent holds 0.3 in about 3 datasets of 4; clustered
    by arbitrator, in about 19 of 20."""
    import numpy as np

    from psychoalign.star.analysis.stats import sided_shares

    rng = np.random.default_rng(7)
    arbitrators = [f"a{i}" for i in range(15) for _ in range(6)]
    runs, naive, clustered = 600, 0, 0
    for _ in range(runs):
        lean = rng.beta(0.6, 1.4, size=15)
        first = rng.random((15, 6)) < lean[:, None]
        sides = ["annotator1" if f else "annotator2" for f in first.ravel()]
        sided = {"annotator1": sides.count("annotator1"), "annotator2": sides.count("annotator2"), "between": 0}
        low, high = proportion_confint(sided["annotator1"], 90, method="wilson")
        naive += low <= 0.3 <= high
        ci = sided_shares({**sided, "missing": 0}, list(arbitrators), sides)["annotator1"]["ci95"]
        clustered += ci[0] <= 0.3 <= ci[1]
    assert naive / runs < 0.85
    assert 0.93 <= clustered / runs <= 0.98


def test_the_share_needing_arbitration_of_a_few_annotators_has_no_interval(tmp_path: Path) -> None:
    """Whether two ratings diverge depends on who rated: 24 dialogues all rated by the same two
    annotators showed "46% [95% CI 28%, 65%]" as a rate of arbitration in general. Under 10
    annotators the share is given without an interval, and the report says why."""
    rows = [{**r, "annotator1_id": "a", "annotator2_id": "b"} for r in _rows(24, 11)]
    data = to_data(tmp_path, rows)
    section = arbitration_section(data)
    assert section["trigger_rate"] == 11 / 24 and section["trigger_rate_ci95"] is None
    assert section["trigger_rate_note"].startswith("the 24 dialogues were rated by 2 annotators: whether two ratings")
    out = tmp_path / "r"
    write_report(analyze([data], n_boot=50, embed=False), [data], out)
    assert "46%, no interval: the 24 dialogues were rated by 2 annotators" in (out / "report.html").read_text()
