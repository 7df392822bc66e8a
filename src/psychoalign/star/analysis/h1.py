"""H1 in STAR's analysis: does tension T go with human inter-annotator disagreement?

The statistics H1 and the boundary experiments rest on: Kruskal–Wallis with effect sizes,
Spearman's ρ with a bootstrap CI and a permutation p-value, mean with a bootstrap CI, and the
stratified view by T bin; and :func:`h1_section`, the report's H1 section for a rating file whose
items carry a tension (a STAR campaign that targeted PsychoAlign). They live here, not with the
experiments, so that STAR's report needs nothing above it; the experiments import them.

Point values come from scipy (``kruskal``, ``spearmanr``); what scipy does not give — effect sizes,
resampling intervals, permutation p-values — is computed here, vectorised, with a seeded generator
so every report is reproducible. Formulas and their sources are in docs/boundary.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray
from scipy import stats as sps

from ...errors import InputError
from .agreement import item_disagreement
from .data import RatingData
from .targets import mixed_reason

__all__ = ["DEFAULT_BINS", "MIN_MEAN_CI", "binarise", "kruskal", "mean_ci", "spearman", "tension_bins"]

#: Low / medium / high tension: below the paper's healthy-equilibrium threshold (0.3), up to its
#: "high-tension" threshold (T > 0.5), above it.
DEFAULT_BINS: tuple[float, float] = (0.3, 0.5)


@dataclass(frozen=True)
class KruskalResult:
    """Kruskal–Wallis H test across groups (H2), with two effect sizes.

    ``epsilon2`` = H / (n − 1) (Tomczak & Tomczak 2014); ``eta2_h`` = (H − k + 1) / (n − k)
    (Cohen 2008), floored at 0 by nothing: a negative value means less separation than chance.
    ``epsilon2_null`` = (k − 1) / (n − 1): ε² expected with no effect at all (E[H] = k − 1 under
    the null), so a small sample's ε² is read against it (20 values in 10 groups: 0.47).
    ``p_method`` says where ``p`` comes from: the chi-square approximation, or (a group under
    :data:`MIN_KRUSKAL_GROUP` values) a seeded permutation test."""

    h: float
    df: int
    p: float
    epsilon2: float
    eta2_h: float
    n: int
    groups: int
    sizes: dict[str, int]
    epsilon2_null: float = 0.0
    p_method: str = "chi-square approximation"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: A group with fewer values than this: H's chi-square approximation does not hold (two groups of
#: three, fully separated, gave p = 0.0495 where the exact p is 0.1), so p is a permutation one.
MIN_KRUSKAL_GROUP = 5
#: Permutations behind that p-value (its Monte Carlo standard error is at most 0.0025).
KRUSKAL_PERMUTATIONS = 40_000


def _kruskal_permutation_p(values: list[NDArray[np.float64]], n_perm: int, seed: int) -> float:
    """P(H_perm >= H) over seeded reassignments of the pooled values to groups of the same sizes,
    counting the observed one ((hits + 1) / (n_perm + 1)). The tie correction and n are the same
    for every reassignment, so H orders as the sum of squared rank sums over group sizes."""
    sizes = np.array([v.size for v in values])
    ranks = np.asarray(sps.rankdata(np.concatenate(values)), dtype=np.float64)
    n = ranks.size
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])

    def score(r: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.asarray((np.add.reduceat(r, starts, axis=-1) ** 2 / sizes).sum(axis=-1), dtype=np.float64)

    observed = float(score(ranks))
    rng = np.random.default_rng(seed)
    hits = 0
    for start in range(0, n_perm, 2000):
        b = min(2000, n_perm - start)
        perm = np.argsort(rng.random((b, n)), axis=1)
        hits += int((score(ranks[perm]) >= observed - 1e-9 * max(1.0, abs(observed))).sum())
    return (hits + 1) / (n_perm + 1)


def kruskal(groups: Mapping[str, ArrayLike], *, seed: int = 0, n_perm: int = KRUSKAL_PERMUTATIONS) -> KruskalResult:
    """Kruskal–Wallis over named groups (NaN values dropped; groups left empty are skipped). With a
    group under :data:`MIN_KRUSKAL_GROUP` values, p is a permutation p-value (``n_perm``, ``seed``)."""
    clean = {name: _finite_array(vals) for name, vals in groups.items()}
    clean = {name: v for name, v in clean.items() if v.size}
    if len(clean) < 2:
        raise InputError(
            f"Kruskal–Wallis needs at least 2 groups with values, got {len(clean)}",
            hint="the corpus needs requests from 2 or more domains that negotiated successfully",
        )
    n = sum(v.size for v in clean.values())
    k = len(clean)
    if n <= k:
        raise InputError(f"Kruskal–Wallis needs more values ({n}) than groups ({k})")
    pooled = np.concatenate(list(clean.values()))
    if np.all(pooled == pooled[0]):
        # No ranks to compare: H = 0, p = 1 would read as "measured, no difference" when the
        # data (a backend that ignores sampling, a judge that gives one score) carry no information.
        raise InputError(
            f"every value is the same ({float(pooled[0]):g} in all {n}): there are no ranks to compare",
            hint="the groups need values that differ; check that the model's scores vary at all",
        )
    h, p = sps.kruskal(*clean.values())
    method = "chi-square approximation"
    if min(v.size for v in clean.values()) < MIN_KRUSKAL_GROUP:
        p = _kruskal_permutation_p(list(clean.values()), n_perm, seed)
        method = (
            f"permutation ({n_perm:,} seeded): a group has fewer than {MIN_KRUSKAL_GROUP} values, "
            "where the chi-square approximation does not hold"
        )
    return KruskalResult(
        h=float(h),
        df=k - 1,
        p=float(p),
        epsilon2=float(h) / (n - 1),
        eta2_h=(float(h) - k + 1) / (n - k),
        n=n,
        groups=k,
        sizes={g: int(v.size) for g, v in clean.items()},
        epsilon2_null=(k - 1) / (n - 1),
        p_method=method,
    )


#: Fewer pairs than this: ρ and its permutation p only. A percentile bootstrap over a handful of
#: pairs is degenerate (three ordered pairs give [1, 1]) and scipy's t approximation of p is not
#: valid there (three ordered pairs give p = 0).
MIN_SPEARMAN_CI = 10


@dataclass(frozen=True)
class SpearmanResult:
    """ρ with a percentile bootstrap CI over (x, y) pairs and a two-sided permutation p-value
    ((count of |ρ_perm| ≥ |ρ| + 1) / (permutations + 1), so never 0). Below
    :data:`MIN_SPEARMAN_CI` pairs no interval and no asymptotic p (None); the asymptotic p is
    also None when it comes out 0 (|ρ| = 1), which no finite sample supports."""

    rho: float | None
    ci_low: float | None
    ci_high: float | None
    p_permutation: float | None
    p_asymptotic: float | None
    n: int
    n_boot: int
    n_perm: int
    level: float
    seed: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _finite_array(values: ArrayLike) -> NDArray[np.float64]:
    arr = np.asarray(values, dtype=np.float64).ravel()
    return arr[np.isfinite(arr)]


def _rank_rows(x: NDArray[np.float64]) -> NDArray[np.float64]:
    return np.asarray(sps.rankdata(x, axis=-1), dtype=np.float64)


def _pearson_rows(a: NDArray[np.float64], b: NDArray[np.float64]) -> NDArray[np.float64]:
    """Row-wise Pearson r of two (B, n) arrays; NaN for a constant row."""
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    num = (a * b).sum(axis=-1)
    den = np.sqrt((a * a).sum(axis=-1) * (b * b).sum(axis=-1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(num / den, dtype=np.float64)


def spearman(
    x: ArrayLike,
    y: ArrayLike,
    *,
    n_boot: int = 2000,
    n_perm: int = 5000,
    level: float = 0.95,
    seed: int = 0,
) -> SpearmanResult:
    """Spearman's ρ(x, y) over pairs where both are finite (ties: average ranks, as scipy)."""
    xa = np.asarray(x, dtype=np.float64).ravel()
    ya = np.asarray(y, dtype=np.float64).ravel()
    if xa.shape != ya.shape:
        raise InputError(f"spearman: x has {xa.size} values and y {ya.size}")
    ok = np.isfinite(xa) & np.isfinite(ya)
    xa, ya = xa[ok], ya[ok]
    n = int(xa.size)
    empty = SpearmanResult(None, None, None, None, None, n, n_boot, n_perm, level, seed)
    if n < 3 or np.all(xa == xa[0]) or np.all(ya == ya[0]):
        return empty
    res = sps.spearmanr(xa, ya)
    rho = float(res.statistic)
    p_asym = float(res.pvalue)
    rng = np.random.default_rng(seed)
    rx, ry = _rank_rows(xa), _rank_rows(ya)
    # Permutation: shuffle y's ranks against x's ranks (ranks are invariant under permutation).
    hits = 0
    for start in range(0, n_perm, 1000):
        b = min(1000, n_perm - start)
        perm = np.argsort(rng.random((b, n)), axis=1)
        r = _pearson_rows(np.broadcast_to(rx, (b, n)), ry[perm])
        hits += int((np.abs(r) >= abs(rho) - 1e-12).sum())
    p_perm = (hits + 1) / (n_perm + 1)
    # Bootstrap: resample pairs, re-rank each resample.
    draws: list[NDArray[np.float64]] = []
    for start in range(0, n_boot, 500):
        b = min(500, n_boot - start)
        idx = rng.integers(0, n, size=(b, n))
        draws.append(_pearson_rows(_rank_rows(xa[idx]), _rank_rows(ya[idx])))
    sample = np.concatenate(draws)
    sample = sample[np.isfinite(sample)]
    tail = (1 - level) / 2 * 100
    lo, hi = (float(v) for v in np.percentile(sample, [tail, 100 - tail])) if sample.size else (math.nan, math.nan)
    few = n < MIN_SPEARMAN_CI
    return SpearmanResult(
        rho=rho,
        ci_low=lo if math.isfinite(lo) and not few else None,
        ci_high=hi if math.isfinite(hi) and not few else None,
        p_permutation=p_perm,
        p_asymptotic=p_asym if math.isfinite(p_asym) and p_asym > 0 and not few else None,
        n=n,
        n_boot=n_boot,
        n_perm=n_perm,
        level=level,
        seed=seed,
    )


@dataclass(frozen=True)
class MeanCI:
    """Mean with a percentile bootstrap CI (None when fewer than 2 values, or when every value is
    the same: ``sd`` is then 0; or on fewer than :data:`MIN_MEAN_CI` values: ``note`` says so)."""

    mean: float | None
    ci_low: float | None
    ci_high: float | None
    n: int
    sd: float | None = None
    note: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: Fewer values than this: a mean gets no bootstrap interval. The percentile bootstrap's "95 %"
#: interval holds the true mean in about half of two-value samples and three in four of three-value
#: ones (tests/experiments/harness/test_stats.py measures it).
MIN_MEAN_CI = 10


def mean_ci(values: ArrayLike, *, n_boot: int = 2000, level: float = 0.95, seed: int = 0) -> MeanCI:
    v = _finite_array(values)
    if v.size == 0:
        return MeanCI(None, None, None, 0)
    if v.size == 1:
        return MeanCI(float(v[0]), None, None, 1)
    if np.all(v == v[0]):  # nothing varied: a bootstrap gives [x, x], which reads as certainty
        return MeanCI(float(v[0]), None, None, int(v.size), 0.0)
    if v.size < MIN_MEAN_CI:
        note = f"fewer than {MIN_MEAN_CI} values: a bootstrap interval would cover far less than 95 %"
        return MeanCI(float(v.mean()), None, None, int(v.size), float(v.std(ddof=1)), note)
    rng = np.random.default_rng(seed)
    means = v[rng.integers(0, v.size, size=(n_boot, v.size))].mean(axis=1)
    tail = (1 - level) / 2 * 100
    lo, hi = np.percentile(means, [tail, 100 - tail])
    return MeanCI(float(v.mean()), float(lo), float(hi), int(v.size), float(v.std(ddof=1)))


@dataclass(frozen=True)
class BinSummary:
    """One tension bin: its range, how many items, and the outcome's mean with a bootstrap CI."""

    name: str
    low: float
    high: float
    n: int
    outcome: MeanCI
    outcome_median: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def tension_bins(
    t: ArrayLike,
    outcome: ArrayLike,
    *,
    cuts: Sequence[float] = DEFAULT_BINS,
    names: Sequence[str] = ("low", "medium", "high"),
    n_boot: int = 2000,
    seed: int = 0,
) -> tuple[list[BinSummary], KruskalResult | None]:
    """The stratified view: items binned by T (``[0, c1)``, ``[c1, c2]``, ``(c2, 1]``), the outcome
    (e.g. 1 − α_item) summarised per bin, and a Kruskal–Wallis test of the outcome across bins
    (None when fewer than two bins hold items)."""
    ta = np.asarray(t, dtype=np.float64).ravel()
    ya = np.asarray(outcome, dtype=np.float64).ravel()
    if len(names) != len(cuts) + 1:
        raise InputError(f"{len(cuts)} bin cuts need {len(cuts) + 1} names, got {len(names)}")
    if list(cuts) != sorted(cuts):
        raise InputError(f"bin cuts must increase: {list(cuts)}")
    ok = np.isfinite(ta) & np.isfinite(ya)
    ta, ya = ta[ok], ya[ok]
    edges = [-math.inf, *cuts, math.inf]
    out: list[BinSummary] = []
    groups: dict[str, NDArray[np.float64]] = {}
    for i, name in enumerate(names):
        lo, hi = edges[i], edges[i + 1]
        if i == 0:
            mask = ta < hi
        elif i == len(names) - 1:
            mask = ta > lo
        elif i == len(names) - 2:
            mask = (ta >= lo) & (ta <= hi)
        else:
            mask = (ta >= lo) & (ta < hi)
        vals = ya[mask]
        groups[name] = vals
        out.append(
            BinSummary(
                name=name,
                low=max(lo, 0.0),
                high=min(hi, 1.0),
                n=int(vals.size),
                outcome=mean_ci(vals, n_boot=n_boot, seed=seed),
                outcome_median=float(np.median(vals)) if vals.size else None,
            )
        )
    try:
        kw: KruskalResult | None = kruskal(groups, seed=seed)
    except InputError:
        kw = None
    return out, kw


def binarise(full: np.ndarray, positive: frozenset[int], excluded: frozenset[int]) -> np.ndarray:
    """Items × (not positive, positive) counts; ``excluded`` values are left out (missing)."""
    keep = [v for v in range(full.shape[1]) if v not in excluded]
    return np.column_stack(
        [
            full[:, [v for v in keep if v not in positive]].sum(axis=1),
            full[:, [v for v in keep if v in positive]].sum(axis=1),
        ]
    )


def _no_tension_reason(items: pd.DataFrame, column: str, with_tension: int) -> str:
    """Why H1 has too few items with a tension: no dialogue red-teamed PsychoAlign, or some did
    and their target turns stored no tension (a negotiation that ended before it was scored)."""
    labels = items["target"].dropna().astype(str) if "target" in items.columns else pd.Series(dtype=str)
    against = int(labels.str.startswith("psychoalign:").sum())
    if not against:
        return f"fewer than 3 items with {column}: the campaign did not target PsychoAlign"
    return (
        f"fewer than 3 items with {column}: {with_tension} of the {against} dialogue(s) that red-teamed "
        "PsychoAlign carry a tension (their target turns stored none, as when the negotiation ended "
        "before it was scored); H1 needs at least 3"
    )


def h1_section(
    data: RatingData,
    *,
    column: str = "tension_mean",
    n_boot: int = 2000,
    n_perm: int = 5000,
    seed: int = 0,
) -> dict[str, Any]:
    """H1 for a rating file whose items carry a tension (a STAR campaign that targeted
    PsychoAlign: each target turn stores its negotiation's T; ``tension_mean`` / ``tension_max``
    per dialogue). ρ(T, 1 − α_item) on the binarised view, bootstrap CI, permutation p, T bins.
    ``{"computable": False, "reason": …}`` when the items have no tension."""
    items = data.items
    with_tension = int(pd.to_numeric(items[column], errors="coerce").notna().sum()) if column in items.columns else 0
    if with_tension < 3:
        return {"computable": False, "reason": _no_tension_reason(items, column, with_tension)}
    if "target" in items.columns:
        with_t = items[pd.to_numeric(items[column], errors="coerce").notna()]
        targets = sorted({str(t) for t in with_t["target"].dropna()})
        if len(targets) > 1:
            # T is measured against each target's framework and models: one ρ over several
            # targets' tensions mixes scales and says nothing about either.
            return {
                "computable": False,
                "reason": mixed_reason(
                    targets, "the dialogues with a tension red-teamed", "whose tensions are not on one scale"
                ),
            }
    ann = data.annotations
    if ann.empty:
        return {"computable": False, "reason": "no annotations"}
    ids = [str(i) for i in items["item_id"]]
    table = pd.crosstab(ann["item_id"].astype(str), ann["value"]).reindex(
        index=ids, columns=range(len(data.scale)), fill_value=0
    )
    full = table.to_numpy(dtype=np.float64)
    if data.binary:
        dis = item_disagreement(binarise(full, frozenset(data.positive), frozenset(data.excluded)), "nominal")
        measure = f"1 - alpha_item, binarised ({data.positive_label} vs rest), nominal metric"
    else:  # no binarised view (e.g. a plain 1..5 scale): the scale itself at its default level
        dis = item_disagreement(full, data.default_level, data.scale_values)
        measure = f"1 - alpha_item on the full scale, {data.default_level} metric"
    t = pd.to_numeric(items[column], errors="coerce").to_numpy(dtype=np.float64)
    rho = spearman(t, dis, n_boot=n_boot, n_perm=n_perm, seed=seed)
    bins, kw = tension_bins(t, dis, n_boot=n_boot, seed=seed)
    return {
        "computable": rho.rho is not None,
        "reason": None if rho.rho is not None else "T or disagreement does not vary across items",
        "tension": column,
        "disagreement": measure,
        "spearman": rho.as_dict(),
        "bins": [b.as_dict() for b in bins],
        "bins_kruskal": kw.as_dict() if kw is not None else None,
    }
