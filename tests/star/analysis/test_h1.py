"""H1's statistics (Kruskal–Wallis, Spearman with bootstrap CI and permutation p, mean CI, T bins)
checked against scipy, and the H1 section of STAR's report for a campaign that targeted PsychoAlign."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as sps

from psychoalign.errors import InputError
from psychoalign.star.analysis.h1 import MIN_MEAN_CI, kruskal, mean_ci, spearman, tension_bins


def _star_export(path: Path, *, with_tension: bool, n: int = 40) -> Path:
    """A STAR export (the store's JSONL shape) of a campaign that targeted PsychoAlign: the higher a
    dialogue's tension, the more its two annotators disagree (planted)."""
    rows = []
    for i in range(n):
        t = i / (n - 1)
        discordant = i % 4 < round(4 * t)  # share of discordant pairs rises with t
        rows.append(
            {
                "dialogue_id": f"d{i}",
                "status": "submitted",
                "turns": [
                    {"role": "red_teamer", "text": f"attack {i}", "tension": None, "state": None, "trace_id": None},
                    {
                        "role": "target",
                        "text": f"reply {i}",
                        "tension": t if with_tension else None,
                        "state": "healthy_equilibrium",
                        "trace_id": f"tr{i}",
                    },
                ],
                "annotator1_id": "a1",
                "annotator1_rating": 1 if discordant else 4,
                "annotator2_id": "a2",
                "annotator2_rating": 4,
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_star_campaign_against_psychoalign_gets_rho_of_tension_and_disagreement(tmp_path: Path) -> None:
    from psychoalign.star.analysis.data import load
    from psychoalign.star.analysis.h1 import h1_section

    data = load(_star_export(tmp_path / "campaign.jsonl", with_tension=True), "star")
    section = h1_section(data, n_boot=300, n_perm=300)
    assert section["computable"] and section["tension"] == "tension_mean"
    s = section["spearman"]
    assert s["n"] == 40 and s["rho"] > 0.5 and s["ci_low"] > 0 and s["p_permutation"] < 0.01
    assert [b["name"] for b in section["bins"]] == ["low", "medium", "high"]
    plain = load(_star_export(tmp_path / "plain.jsonl", with_tension=False), "star")
    assert h1_section(plain) == {**h1_section(plain), "computable": False}
    assert "did not target PsychoAlign" in h1_section(plain)["reason"]


def test_h1_says_when_dialogues_against_psychoalign_stored_no_tension(tmp_path: Path) -> None:
    """A campaign against PsychoAlign whose target turns stored no tension (each negotiation ended
    in deadlock before it was scored, as the embedded default does on a plain stereotype request)
    was told "the campaign did not target PsychoAlign": wrong, and no help. The reason now counts
    the dialogues that did."""
    from psychoalign.star.analysis.data import load
    from psychoalign.star.analysis.h1 import h1_section

    path = _star_export(tmp_path / "deadlocks.jsonl", with_tension=False, n=6)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for i, row in enumerate(rows):
        row["target"] = "psychoalign:general@1.21.2#b3acc33c1aa8"
        if i < 2:
            row["turns"][1]["tension"] = 0.4
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    section = h1_section(load(path, "star"))
    assert section["computable"] is False
    assert "did not target PsychoAlign" not in section["reason"]
    assert "2 of the 6 dialogue(s) that red-teamed PsychoAlign carry a tension" in section["reason"]


def test_star_report_shows_h1_for_a_campaign_against_psychoalign(tmp_path: Path) -> None:
    from psychoalign.star.analysis import analyze, write_report
    from psychoalign.star.analysis.data import load

    data = load(_star_export(tmp_path / "campaign.jsonl", with_tension=True), "star")
    report = analyze([data], n_boot=200, embed=False)
    section = report["datasets"][data.name]["h1"]
    assert section["computable"] and section["spearman"]["rho"] > 0.5
    write_report(report, [data], tmp_path / "out")
    page = (tmp_path / "out" / "report.html").read_text()
    assert "H1: tension vs disagreement" in page and "Spearman rho(tension_mean, disagreement)" in page


def test_kruskal_equals_scipy_with_ties_and_unequal_groups() -> None:
    rng = np.random.default_rng(5)
    groups = {
        "medical": np.round(rng.uniform(0.1, 0.6, 25), 2),
        "legal": np.round(rng.uniform(0.0, 0.4, 13), 2),
        "dual_use": np.round(rng.uniform(0.0, 0.2, 31), 1),  # heavy ties
        "empty": np.array([np.nan]),
    }
    res = kruskal(groups)
    ref = sps.kruskal(groups["medical"], groups["legal"], groups["dual_use"])
    assert res.h == pytest.approx(ref.statistic, rel=1e-12)
    assert res.p == pytest.approx(ref.pvalue, rel=1e-12)
    n, k = 69, 3
    assert res.n == n and res.groups == k and res.df == 2
    assert res.epsilon2 == pytest.approx(ref.statistic / (n - 1))
    assert res.eta2_h == pytest.approx((ref.statistic - k + 1) / (n - k))
    assert "empty" not in res.sizes
    assert res.epsilon2_null == pytest.approx((k - 1) / (n - 1))


def test_epsilon2_is_read_against_its_null_expectation() -> None:
    """20 values in 10 groups with no effect: ε² averages (k - 1) / (n - 1) = 0.47, not 0."""
    rng = np.random.default_rng(0)
    # groups of two take a permutation p; ε² does not depend on it, so few permutations will do
    draws = [kruskal({str(g): rng.normal(size=2) for g in range(10)}, n_perm=100) for _ in range(400)]
    assert draws[0].epsilon2_null == pytest.approx(9 / 19)
    assert np.mean([d.epsilon2 for d in draws]) == pytest.approx(9 / 19, abs=0.03)


def test_kruskal_needs_two_groups_and_handles_constant_data() -> None:
    with pytest.raises(InputError, match="at least 2 groups"):
        kruskal({"a": [0.1, 0.2]})
    # all-identical values carry no ranks: refused, never H = 0 and p = 1 shown as a measurement
    with pytest.raises(InputError, match=r"every value is the same \(0.2 in all 5\)"):
        kruskal({"a": [0.2, 0.2], "b": [0.2, 0.2, 0.2]})


def test_spearman_point_equals_scipy_and_ci_contains_it() -> None:
    rng = np.random.default_rng(11)
    x = rng.normal(size=150)
    y = 0.5 * x + rng.normal(size=150)
    y[::10] = np.nan  # missing outcome: pairwise deletion
    res = spearman(x, y, n_boot=1000, n_perm=1000, seed=3)
    ok = np.isfinite(y)
    ref = sps.spearmanr(x[ok], y[ok])
    assert res.rho == pytest.approx(ref.statistic, rel=1e-12)
    assert res.n == int(ok.sum())
    assert res.ci_low is not None and res.ci_high is not None
    assert res.ci_low < res.rho < res.ci_high
    assert res.ci_low > 0.2  # a clear relation: the interval excludes 0
    assert res.p_permutation == pytest.approx(1 / 1001)  # never 0: (0 + 1) / (B + 1)
    assert spearman(x, y, n_boot=1000, n_perm=1000, seed=3) == res  # seeded: reproducible


def test_spearman_ci_covers_the_population_value() -> None:
    """Bivariate normal with r = 0.4: Spearman's rho_s = (6/pi) asin(r/2). 95 % intervals should
    cover it in about 95 % of samples (bounds for 150 replications: 88 %..99 %)."""
    r = 0.4
    rho_s = 6 / math.pi * math.asin(r / 2)
    rng = np.random.default_rng(21)
    cover = 0
    reps = 150
    for i in range(reps):
        xy = rng.multivariate_normal([0, 0], [[1, r], [r, 1]], size=80)
        res = spearman(xy[:, 0], xy[:, 1], n_boot=600, n_perm=10, seed=i)
        assert res.ci_low is not None and res.ci_high is not None
        cover += res.ci_low <= rho_s <= res.ci_high
    assert 0.88 <= cover / reps <= 0.99


def test_permutation_p_is_calibrated_under_the_null() -> None:
    rng = np.random.default_rng(8)
    reps = 300
    rejections = 0
    for i in range(reps):
        x = rng.integers(0, 4, size=40).astype(float)  # ties, like binned tension
        y = rng.normal(size=40)
        res = spearman(x, y, n_boot=10, n_perm=400, seed=i)
        assert res.p_permutation is not None
        rejections += res.p_permutation < 0.05
    assert 0.02 <= rejections / reps <= 0.09


def test_spearman_undefined_cases_return_none() -> None:
    assert spearman([1, 2], [1, 2]).rho is None
    assert spearman([0.3] * 10, list(range(10))).rho is None
    with pytest.raises(InputError):
        spearman([1, 2, 3], [1, 2])


def test_mean_ci_and_bins() -> None:
    m = mean_ci([0.1 * i for i in range(MIN_MEAN_CI)], n_boot=500)
    assert m.mean == pytest.approx(0.45) and m.note is None
    assert m.ci_low is not None and m.ci_high is not None and 0.0 <= m.ci_low < 0.45 < m.ci_high <= 0.9
    few = mean_ci([0.1, 0.2, 0.3, 0.4], n_boot=500)  # a bootstrap on 4 values would cover far less than 95 %
    assert (few.mean, few.ci_low, few.ci_high, few.n) == (pytest.approx(0.25), None, None, 4)
    assert few.note is not None and f"fewer than {MIN_MEAN_CI} values" in few.note
    assert mean_ci([]).mean is None and mean_ci([0.5]).ci_low is None
    flat = mean_ci([0.2, 0.2, 0.2])  # no spread: no [0.2, 0.2] interval, and sd 0 says why
    assert (flat.mean, flat.ci_low, flat.ci_high, flat.n, flat.sd) == (0.2, None, None, 3, 0.0)
    t = [0.0, 0.29, 0.3, 0.5, 0.51, 1.0]
    bins, kw = tension_bins(t, [0.1, 0.1, 0.5, 0.5, 0.9, 0.9], n_boot=100)
    assert [b.n for b in bins] == [2, 2, 2]  # 0.3 and 0.5 belong to "medium"
    assert [b.outcome.mean for b in bins] == pytest.approx([0.1, 0.5, 0.9])
    assert kw is not None and kw.groups == 3
    bins, kw = tension_bins([0.1, 0.2], [0.3, 0.4])
    assert [b.n for b in bins] == [2, 0, 0] and kw is None
    with pytest.raises(InputError, match="names"):
        tension_bins(t, t, cuts=(0.3,))


def test_spearman_on_a_handful_of_items_gives_no_interval_and_no_asymptotic_p() -> None:
    # Three perfectly ordered pairs: every bootstrap resample is ordered too, so the percentile
    # interval was [1.0, 1.0], and scipy's t approximation gave p = 0.0, beside a permutation p of
    # about 1/3 (3! orderings). Neither says anything on so few items.
    from psychoalign.star.analysis.h1 import MIN_SPEARMAN_CI

    few = spearman([0.1, 0.2, 0.3], [0.0, 0.5, 1.0], n_boot=500, n_perm=2000)
    assert few.rho == pytest.approx(1.0) and few.n == 3
    assert few.ci_low is None and few.ci_high is None and few.p_asymptotic is None
    assert few.p_permutation is not None and few.p_permutation > 0.2
    n = MIN_SPEARMAN_CI
    enough = spearman(list(range(n)), [v + (v % 3) for v in range(n)], n_boot=500, n_perm=500)
    assert enough.ci_low is not None and enough.p_asymptotic is not None and enough.p_asymptotic > 0
    perfect = spearman(list(range(40)), list(range(40)), n_boot=50, n_perm=50)
    assert perfect.p_asymptotic is None  # |rho| = 1: the t approximation's p is exactly 0, never true


def test_kruskal_on_small_groups_takes_its_p_from_permutations() -> None:
    """Two groups of three, fully separated: the chi-square approximation gave p = 0.0495
    ('significant') where the exact p is 0.1, the smallest p six values can give. Under 5 values
    in a group the p-value is a seeded permutation one, named as such."""
    res = kruskal({"a": [1.0, 2.0, 3.0], "b": [4.0, 5.0, 6.0]})
    assert sps.kruskal([1, 2, 3], [4, 5, 6]).pvalue < 0.05
    exact = sps.mannwhitneyu([1, 2, 3], [4, 5, 6], method="exact").pvalue  # 0.1
    assert res.p == pytest.approx(exact, abs=0.01)
    assert res.p_method.startswith("permutation")
    assert res.h == pytest.approx(sps.kruskal([1, 2, 3], [4, 5, 6]).statistic)
    groups = [[0.1, 0.4, 0.35, 0.2], [0.5, 0.45, 0.3, 0.6], [0.7, 0.55, 0.65, 0.3]]  # a tie across groups
    res3 = kruskal({str(i): g for i, g in enumerate(groups)})
    ref = sps.permutation_test(
        groups,
        lambda *s, axis: sps.kruskal(*s, axis=axis).statistic,
        vectorized=True,
        permutation_type="independent",
        alternative="greater",
        n_resamples=40_000,
    )  # 34,650 distinct partitions: scipy enumerates them all (exact)
    assert res3.p == pytest.approx(ref.pvalue, abs=0.01)


def test_kruskal_on_groups_of_five_or_more_keeps_the_chi_square_p() -> None:
    rng = np.random.default_rng(2)
    groups = {"a": rng.normal(size=5), "b": rng.normal(size=7)}
    res = kruskal(groups)
    assert res.p == pytest.approx(sps.kruskal(groups["a"], groups["b"]).pvalue, rel=1e-12)
    assert res.p_method == "chi-square approximation"
