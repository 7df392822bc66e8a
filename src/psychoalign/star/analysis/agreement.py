"""Krippendorff's alpha from per-unit value counts, with bootstrap intervals and per-item disagreement.

Implemented on the coincidence matrix (Krippendorff 2011, "Computing Krippendorff's alpha-
reliability"), vectorised with numpy; cross-checked in tests against the ``krippendorff`` package.
Only value counts per unit are needed, so data without rater ids (DICES) works too.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import NDArray

Metric = Literal["nominal", "ordinal", "interval"]
FloatArray = NDArray[np.float64]

#: Fewer items rated more than once than this: alpha is reported without an interval and with a
#: small-sample warning (a bootstrap over a handful of items gives an interval that looks exact
#: and means nothing). On one item alpha is not reported at all: it compares the item's ratings
#: with themselves, so it is 0 (or undefined) whatever the raters did.
MIN_ALPHA_ITEMS = 10

#: Bootstrap draws closer than this count as one value: the interval has no width.
_NO_SPREAD = 1e-9

#: Why alpha is undefined on items rated more than once: D_e is 0 (the raters may well agree).
NO_VARIATION = "undefined: every rating is the same value, so there is no variation to set agreement against"


def small_sample(result: dict[str, float | int | None]) -> dict[str, float | int | str | None]:
    """``result`` (a :func:`bootstrap_alpha` dict) as a report states it: on one item no alpha, on
    fewer than :data:`MIN_ALPHA_ITEMS` items no interval; either with a ``warning`` saying why."""
    units = int(result.get("units") or 0)
    out: dict[str, float | int | str | None] = dict(result)
    if units >= 1 and result.get("alpha") is None:
        out["reason"] = NO_VARIATION
    point = result.get("alpha")
    if units >= MIN_ALPHA_ITEMS and result.get("no_spread") and point is not None:
        out["warning"] = (
            f"every bootstrap resample of the {units} items gave alpha {float(point):.3f}: the items all "
            "agree (or all disagree) in one pattern, so the resamples cannot show how far alpha could move; no "
            "interval is given rather than one of zero width, and the next items rated may move alpha"
        )
    if units == 0 or units >= MIN_ALPHA_ITEMS:
        return out
    out["ci_low"] = out["ci_high"] = None
    if units == 1:
        out["alpha"] = None
        out["warning"] = (
            "only one item was rated more than once: alpha on one item is 0 (or undefined) by construction, "
            "so none is reported"
        )
    else:
        out["warning"] = (
            f"only {units} items were rated more than once: no interval on fewer than {MIN_ALPHA_ITEMS} items, "
            "and alpha can swing widely with the next rating"
        )
    return out


def value_counts(units: list[list[int]], n_values: int) -> FloatArray:
    """Units x values matrix of counts from lists of value indices (0..n_values-1) per unit."""
    out = np.zeros((len(units), n_values))
    for i, values in enumerate(units):
        for v in values:
            out[i, v] += 1
    return out


def _pairable(counts: FloatArray) -> FloatArray:
    m = counts.sum(axis=1)
    return np.asarray(counts[m >= 2], dtype=np.float64)


def _unit_coincidences(counts: FloatArray) -> FloatArray:
    """Per-unit contribution to the coincidence matrix: (U, V, V)."""
    m = counts.sum(axis=1)
    outer = counts[:, :, None] * counts[:, None, :]
    diag = np.einsum("uv,vk->uvk", counts, np.eye(counts.shape[1]))
    return np.asarray((outer - diag) / (m - 1)[:, None, None], dtype=np.float64)


def _delta2(n_v: FloatArray, metric: Metric, values: FloatArray | None = None) -> FloatArray:
    """Squared distances between values; ``n_v`` (..., V) may carry a leading batch axis."""
    k = n_v.shape[-1]
    idx = np.arange(k)
    if metric == "nominal":
        d = (idx[:, None] != idx[None, :]).astype(np.float64)
        return np.broadcast_to(d, (*n_v.shape[:-1], k, k)).copy()
    if metric == "interval":
        vals = np.arange(k, dtype=np.float64) if values is None else values
        d = (vals[:, None] - vals[None, :]) ** 2
        return np.broadcast_to(d, (*n_v.shape[:-1], k, k)).copy()
    # ordinal: (sum of n_g for g between v and k) - (n_v + n_k)/2, squared
    cum = np.cumsum(n_v, axis=-1)
    lo = np.minimum(idx[:, None], idx[None, :])
    hi = np.maximum(idx[:, None], idx[None, :])
    cum_hi = np.take(cum, hi, axis=-1)
    cum_before_lo = np.take(np.concatenate([np.zeros((*n_v.shape[:-1], 1)), cum], axis=-1), lo, axis=-1)
    between = cum_hi - cum_before_lo
    half = (np.take(n_v, idx, axis=-1)[..., :, None] + np.take(n_v, idx, axis=-1)[..., None, :]) / 2
    return np.asarray((between - half) ** 2, dtype=np.float64)


def _alpha_from_o(o: FloatArray, metric: Metric, values: FloatArray | None = None) -> FloatArray:
    """alpha for one (V,V) or a batch (B,V,V) of coincidence matrices."""
    n_v = o.sum(axis=-1)
    n = n_v.sum(axis=-1)
    d2 = _delta2(n_v, metric, values)
    observed = (o * d2).sum(axis=(-2, -1))
    expected = (n_v[..., :, None] * n_v[..., None, :] * d2).sum(axis=(-2, -1))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(1.0 - (n - 1) * observed / expected, dtype=np.float64)


class AlphaResult(dict[str, float | int | None]):
    """alpha, its bootstrap interval and the sample sizes (a plain dict for the JSON report)."""


def _vals(values: list[float] | FloatArray | None) -> FloatArray | None:
    return None if values is None else np.asarray(values, dtype=np.float64)


def alpha(counts: FloatArray, metric: Metric = "nominal", values: list[float] | FloatArray | None = None) -> float:
    """Krippendorff's alpha; NaN when it is undefined (fewer than two pairable values, or no variation).
    ``values`` are the numeric scale points for the interval metric (default 0..V-1, equal spacing)."""
    counts = _pairable(np.asarray(counts, dtype=np.float64))
    if counts.shape[0] == 0:
        return float("nan")
    o = _unit_coincidences(counts).sum(axis=0)
    return float(_alpha_from_o(o, metric, _vals(values)))


def bootstrap_alpha(
    counts: FloatArray,
    metric: Metric = "nominal",
    *,
    n_boot: int = 1000,
    seed: int = 0,
    level: float = 0.95,
    values: list[float] | FloatArray | None = None,
) -> AlphaResult:
    """alpha with a percentile bootstrap interval over units (units resampled with replacement).

    When every resample gives the same alpha (all units agree perfectly, or all disagree in one
    pattern), there is no interval: a zero-width one would read as an exact figure. ``no_spread``
    says so (:func:`small_sample` words the warning)."""
    counts = _pairable(np.asarray(counts, dtype=np.float64))
    units = counts.shape[0]
    if units == 0:
        return AlphaResult(alpha=None, ci_low=None, ci_high=None, units=0, values=0)
    per_unit = _unit_coincidences(counts).reshape(units, -1)
    vals = _vals(values)
    point = float(_alpha_from_o(per_unit.sum(axis=0).reshape(counts.shape[1], -1), metric, vals))
    rng = np.random.default_rng(seed)
    draws: list[FloatArray] = []
    for start in range(0, n_boot, 200):  # chunks keep memory bounded for large data
        b = min(200, n_boot - start)
        weights = rng.multinomial(units, np.full(units, 1.0 / units), size=b).astype(np.float64)
        o = (weights @ per_unit).reshape(b, counts.shape[1], counts.shape[1])
        draws.append(_alpha_from_o(o, metric, vals))
    sample = np.concatenate(draws)
    sample = sample[np.isfinite(sample)]
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(sample, [tail, 100 - tail]) if sample.size else (np.nan, np.nan)
    result = AlphaResult(
        alpha=None if np.isnan(point) else point,
        ci_low=None if np.isnan(low) else float(low),
        ci_high=None if np.isnan(high) else float(high),
        units=int(units),
        values=int(counts.sum()),
    )
    if units >= 2 and sample.size and float(np.ptp(sample)) <= _NO_SPREAD:
        result.update(ci_low=None, ci_high=None, no_spread=True)
    return result


def item_disagreement(
    counts: FloatArray, metric: Metric = "nominal", values: list[float] | FloatArray | None = None
) -> FloatArray:
    """Per unit: D_o(unit) / D_e(all) = 1 - alpha_item (0 = the raters agree; ~1 = chance level).
    NaN for units with fewer than two values, and for every unit when only one unit is pairable: D_e
    then comes from that unit alone, so its score is 1 whatever the raters did. This is the per-item
    score H1 correlates with tension."""
    counts = np.asarray(counts, dtype=np.float64)
    pairable = counts[counts.sum(axis=1) >= 2]
    out = np.full(counts.shape[0], np.nan)
    if pairable.shape[0] < 2:
        return out
    o = _unit_coincidences(pairable).sum(axis=0)
    n_v = o.sum(axis=1)
    n = n_v.sum()
    d2 = _delta2(n_v, metric, _vals(values))
    expected = (n_v[:, None] * n_v[None, :] * d2).sum() / (n * (n - 1))
    m = counts.sum(axis=1)
    ok = m >= 2
    pairs = counts[:, :, None] * counts[:, None, :]
    within = (pairs * d2[None]).sum(axis=(1, 2))
    with np.errstate(divide="ignore", invalid="ignore"):
        out[ok] = within[ok] / (m[ok] * (m[ok] - 1)) / expected
    return out
