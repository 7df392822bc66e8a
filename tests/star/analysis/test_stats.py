"""Group tests on tiny groups: groups with fewer than MIN_GROUP_RATERS raters are described, not
tested; perfect separation is reported, never an infinite odds ratio; raters per group beside every
test; the false-positive rate stays nominal with 1, 2, 3 and 5 raters in a group."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from psychoalign.star.analysis.simulate import false_positive_rate, simulate
from psychoalign.star.analysis.stats import MIN_GROUP_RATERS, compare_binary, compare_ordinal


@pytest.mark.parametrize("rare", [1, 2, 3, 5])
def test_false_positive_rate_is_nominal_with_a_tiny_group(rare: int) -> None:
    """No true effect; one group of ``rare`` raters beside two balanced groups (40 raters, 400 items,
    3 ratings each, rater and item SD 1). Before the rule, such groups gave 18-82 % false positives."""
    result = false_positive_rate("attribute", reps=100, seed=11, n_items=400, n_raters=40, per_item=3, rare=rare)
    low, high = result["ci95"]
    assert result["fitted"] == 100
    assert low <= 0.05 <= high, result
    if rare < MIN_GROUP_RATERS:
        assert result["rare_tested"] == 0  # described, not tested
    else:
        assert result["rare_tested"] == 100
        assert result["rare_rejection_rate"] <= 0.1, result


def test_popquorn_like_one_rater_group_gets_no_p_value() -> None:
    """One rater forms a group (and rates everything positive: perfectly separated as well): the
    balanced groups are compared, the one-rater group is described with its rater count, untested."""
    frame = simulate(np.random.default_rng(3), "attribute", n_items=300, n_raters=41, per_item=3, rare=1)
    y = frame["y"].to_numpy().copy()
    y[(frame["attr"] == "rare").to_numpy()] = 1
    result = compare_binary(frame, "attr", y)
    assert result["groups"]["rare"]["n_raters"] == 1 and result["groups"]["rare"]["n_ratings"] >= 10
    assert "rare" not in result["tested_groups"] and "rare (1 rater)" in result["not_tested"]
    assert all("rare" not in name for name in result["model"]["terms"])
    p = result["model"]["joint_test"]["p_value"]
    assert p is not None and p >= 0.05
    assert set(result["tested_groups"]) == {"A", "B"}
    assert all(v["raters"] >= MIN_GROUP_RATERS for v in result["tested_groups"].values())
    assert result["rater_level"]["raters"] == [v["raters"] for v in result["tested_groups"].values()]


def test_perfect_separation_is_reported_not_an_infinite_odds_ratio() -> None:
    frame = simulate(np.random.default_rng(8), "attribute", n_items=300, n_raters=46, per_item=3, rare=6)
    y = frame["y"].to_numpy().copy()
    y[(frame["attr"] == "rare").to_numpy()] = 0  # six raters, every rating 0
    result = compare_binary(frame, "attr", y)
    assert "rare" in result["separation"] and "perfect separation" in result["separation"]["rare"]
    assert result["groups"]["rare"]["rate"] == 0.0  # still described
    terms = result["model"]["terms"]
    assert terms and all("rare" not in name for name in terms)
    assert all(math.isfinite(t["odds_ratio"]) and all(map(math.isfinite, t["ci95"])) for t in terms.values())


def test_ordinal_tiny_groups_follow_the_same_rule() -> None:
    frame = simulate(np.random.default_rng(9), "attribute", n_items=300, n_raters=42, per_item=3, points=5, rare=2)
    result = compare_ordinal(frame, "attr", frame["y"].to_numpy())
    assert "rare (2 raters)" in result["not_tested"]
    assert set(result["tested_groups"]) == {"A", "B"}
    assert result["model"]["joint_test"]["test"] == "Wald F"  # both tested groups have 10+ raters
    frame = simulate(np.random.default_rng(9), "attribute", n_items=300, n_raters=46, per_item=3, points=5, rare=6)
    result = compare_ordinal(frame, "attr", frame["y"].to_numpy())
    assert result["tested_groups"]["rare"]["raters"] == 6
    assert result["model"]["terms"]["attr=rare"]["df"] == 5  # a group under 10 raters: its raters - 1
    assert result["model"]["joint_test"]["test"].startswith("Simes")


def test_the_report_shows_raters_per_group_beside_the_test_and_the_separation() -> None:
    from psychoalign.star.analysis.report import _comparison_html, _iso

    frame = simulate(np.random.default_rng(8), "attribute", n_items=300, n_raters=47, per_item=3, rare=7)
    y = frame["y"].to_numpy().copy()
    y[(frame["attr"] == "rare").to_numpy()] = 1
    result = compare_binary(frame, "attr", y)
    page = _comparison_html("attr", result)
    # group names are direction-isolated in sentences (the report's untrusted text)
    raters = ", ".join(f"{_iso(g)}: {v['raters']}" for g, v in result["tested_groups"].items())
    assert f"raters per tested group: {raters}" in page
    assert f"{_iso('rare')}: perfect separation: every rating is 1" in page
    assert "joint Wald F" in page  # the separated group left out, both tested groups have 10+ raters


def _two_camps(low: int, high: int, raters: int = 12, items: int = 30) -> tuple[object, np.ndarray]:
    """Half the raters give every item ``high``, the other half ``low``: no overlap, no spread."""
    import pandas as pd

    rows = [
        {"item_id": f"i{i}", "rater_id": f"r{r}", "grp": "a" if r < raters // 2 else "b"}
        for i in range(items)
        for r in range(raters)
    ]
    frame = pd.DataFrame(rows)
    return frame, np.where(frame["grp"] == "a", high, low)


def test_two_groups_at_interior_scale_points_get_no_astronomical_odds_ratio() -> None:
    """On a 1..5 scale one group rated every item 4, the other 2: the ordinal model printed an odds
    ratio of 2e-14 with p = 1e-7 and the rater-level Welch test t = -inf, p = 0.0."""
    frame, codes = _two_camps(1, 3)  # scale codes of 2 and 4
    result = compare_ordinal(frame, "grp", codes, values=[1, 2, 3, 4, 5])
    assert result["model"]["computable"] is False
    assert "perfect separation" in result["model"]["reason"] and set(result["separation"]) == {"a", "b"}
    assert result["groups"]["a"]["mean_rating"] == 4.0 and result["groups"]["b"]["mean_rating"] == 2.0  # described
    assert result["rater_level"]["computable"] is False and "no spread" in result["rater_level"]["reason"]
    binary = compare_binary(frame, "grp", (codes == 3).astype(int))
    assert binary["model"]["computable"] is False and "perfect separation" in binary["model"]["reason"]
    assert binary["rater_level"]["computable"] is False
    assert all(math.isfinite(p) and p > 0 for p in _p_values(result) + _p_values(binary))


def _p_values(result: object) -> list[float]:
    found: list[float] = []
    if isinstance(result, dict):
        for key, value in result.items():
            if key == "p_value" and isinstance(value, float):
                found.append(value)
            else:
                found.extend(_p_values(value))
    elif isinstance(result, list):
        for value in result:
            found.extend(_p_values(value))
    return found


def _split_camps(seed: int, raters: int = 40, items: int = 50) -> tuple[object, np.ndarray]:
    """Half the raters use scale codes 0-1 only, the other half 3-4 only: each group spreads over
    two points (so no group sits at one end of the scale), but the two never overlap."""
    import pandas as pd

    rng = np.random.default_rng(seed)
    rows = [
        {"item_id": f"i{i}", "rater_id": f"r{r}", "grp": "low" if r < raters // 2 else "high"}
        for i in range(items)
        for r in range(raters)
    ]
    frame = pd.DataFrame(rows)
    low = frame["grp"].eq("low").to_numpy()
    codes = np.where(low, rng.integers(0, 2, len(frame)), rng.integers(3, 5, len(frame)))
    return frame, codes


def test_groups_whose_ratings_do_not_overlap_get_no_ordinal_test() -> None:
    """One group rated 1-2, the other 4-5 (no rating shared): the proportional-odds model printed an
    odds ratio of 4.7e15 with p = 2.7e-42, an optimiser's stopping point rather than an estimate."""
    frame, codes = _split_camps(4)
    result = compare_ordinal(frame, "grp", codes, values=[1, 2, 3, 4, 5])
    assert "separation" not in result  # neither group sits at one end of the scale: the old check missed it
    assert result["model"]["computable"] is False
    reason = result["model"]["reason"]
    assert reason.startswith("ordered separation: every rating of low is at most scale code 1")
    assert "every rating of high at least 3" in reason
    assert result["groups"]["low"]["n_raters"] == 20  # still described
    assert "terms" not in result["model"]


def test_overlapping_groups_are_still_tested_and_a_third_group_can_complete_a_split() -> None:
    """Groups that overlap (a low-group rating above a high-group one) are fitted as before. A split
    is found across several groups too (a and b at or below code 2, c at or above it)."""
    import pandas as pd

    frame, codes = _split_camps(5)
    codes = codes.copy()
    codes[:20] = 4  # the low raters give the first item code 4, above the high group's lowest (3)
    fitted = compare_ordinal(frame, "grp", codes)
    assert fitted["model"].get("computable", True) and fitted["model"]["terms"]
    rows = [{"item_id": f"i{i}", "rater_id": f"r{r}", "grp": "abc"[r % 3]} for i in range(40) for r in range(30)]
    three = pd.DataFrame(rows)
    rng = np.random.default_rng(6)
    y = np.select(
        [three["grp"].eq("a"), three["grp"].eq("b")],
        [rng.integers(0, 3, len(three)), rng.integers(1, 3, len(three))],
        rng.integers(2, 5, len(three)),
    )
    result = compare_ordinal(three, "grp", y)
    assert result["model"]["computable"] is False
    assert result["model"]["reason"].startswith("ordered separation: every rating of a, b is at most scale code 2")


def test_star_table2_rater_level_t_test_matches_scipy_on_per_rater_means_from_the_export(tmp_path: Path) -> None:
    """The paper's comparative t-test of in- vs out-group annotators (Table 2), recomputed from the
    export rows alone: per rater, the mean rating (and share broken) on dialogues where they were
    in-group and where they were out-group; a paired t-test (scipy) over raters who rated in both.
    The report's numbers, and its unit (raters, not ratings), must be the same."""
    from scipy import stats as sps

    from psychoalign.star.analysis import load
    from psychoalign.star.analysis.stats import ingroup_section

    rng = np.random.default_rng(7)
    rows = []
    for i in range(120):
        a, b = rng.choice(12, size=2, replace=False)
        row: dict[str, object] = {"dialogue_id": f"d{i}", "status": "submitted", "rule": "hate-speech"}
        for slot, rater in (("annotator1", a), ("annotator2", b)):
            in_group = bool(rng.random() < 0.5)
            shift = 0.4 if in_group else 0.0
            rating = int(np.clip(round(rng.normal(2.5 - shift + 0.2 * (rater % 3), 0.9)), 1, 4))
            row |= {f"{slot}_id": f"r{rater}", f"{slot}_rating": rating, f"{slot}_in_group": in_group}
        rows.append(row)
    path = tmp_path / "export.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    result = ingroup_section(load(path))["annotators_overall"]

    long = pd.DataFrame(
        [
            {"rater": r[f"{s}_id"], "in": r[f"{s}_in_group"], "rating": r[f"{s}_rating"]}
            for r in rows
            for s in ("annotator1", "annotator2")
        ]
    )
    long["broken"] = (long["rating"] <= 2).astype(float)
    for view, column in (("ordinal", "rating"), ("binary_broken", "broken")):
        means = long.groupby(["rater", "in"])[column].mean().unstack().dropna()
        expected = sps.ttest_rel(means[True], means[False])
        got = result[view]["rater_level"]
        assert got["raters"] == len(means) == 12
        assert abs(got["statistic"]) == pytest.approx(abs(expected.statistic), rel=1e-9)
        assert got["p_value"] == pytest.approx(expected.pvalue, rel=1e-9)
    groups = result["binary_broken"]["groups"]
    assert groups["in-group"]["n_ratings"] + groups["out-group"]["n_ratings"] == 240
    assert groups["in-group"]["rate"] == pytest.approx(long.loc[long["in"], "broken"].mean())
