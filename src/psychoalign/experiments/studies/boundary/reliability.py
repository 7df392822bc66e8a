"""Intraclass correlation for test–retest reliability of tension: ICC(2,1) and ICC(3,1) with 95 % CIs.

Targets (rows) are requests, raters (columns) are repeated runs. The two-way ANOVA mean squares and
the confidence intervals follow Shrout & Fleiss (1979) and McGraw & Wong (1996), in the same form as
``pingouin.intraclass_corr`` (the tests check equality with it to 1e-9). Requests with a missing run
are dropped (listwise), as pingouin does; how many were dropped is part of the result.

* ICC(2,1) — two-way random effects, absolute agreement, single run: the runs are a random sample of
  possible runs and a run that shifts every T up counts as disagreement. **Our default for retest.**
* ICC(3,1) — two-way mixed effects, consistency: a constant shift between runs is forgiven.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats as sps

from ....errors import InputError


@dataclass(frozen=True)
class ICCResult:
    """Both ICC forms for one targets × runs matrix. ``None`` where undefined (no variance)."""

    icc2: float | None
    icc2_ci: tuple[float, float] | None
    icc3: float | None
    icc3_ci: tuple[float, float] | None
    n_targets: int
    n_runs: int
    dropped_targets: int
    ms_rows: float
    ms_cols: float
    ms_error: float

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for key in ("icc2_ci", "icc3_ci"):
            out[key] = list(out[key]) if out[key] is not None else None
        return out


def _finite(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def icc(matrix: ArrayLike, *, level: float = 0.95) -> ICCResult:
    """ICC(2,1) and ICC(3,1) of ``matrix`` (targets × runs; NaN = missing).

    Raises :class:`InputError` when fewer than 2 complete targets or fewer than 2 runs remain.
    """
    x = np.asarray(matrix, dtype=np.float64)
    if x.ndim != 2:
        raise InputError(f"ICC needs a targets × runs matrix, got {x.ndim} dimension(s)")
    complete = ~np.isnan(x).any(axis=1)
    dropped = int((~complete).sum())
    x = x[complete]
    n, k = x.shape
    if k < 2:
        raise InputError(f"ICC needs at least 2 runs, got {k}", hint="repeat the corpus with --repeats 2 or more")
    if n < 2:
        raise InputError(
            f"ICC needs at least 2 requests with a tension in every run, got {n}",
            hint="check the failed negotiations in the report",
        )
    grand = x.mean()
    ss_rows = k * ((x.mean(axis=1) - grand) ** 2).sum()
    ss_cols = n * ((x.mean(axis=0) - grand) ** 2).sum()
    ss_total = ((x - grand) ** 2).sum()
    ss_err = ss_total - ss_rows - ss_cols
    df_r, df_c, df_e = n - 1, k - 1, (n - 1) * (k - 1)
    msr, msc, mse = ss_rows / df_r, ss_cols / df_c, ss_err / df_e
    a = 1 - level
    with np.errstate(divide="ignore", invalid="ignore"):
        icc2 = (msr - mse) / (msr + (k - 1) * mse + k * (msc - mse) / n)
        icc3 = (msr - mse) / (msr + (k - 1) * mse)
        # ICC(3,1): exact F-based interval.
        f3 = msr / mse
        f3l = f3 / sps.f.ppf(1 - a / 2, df_r, df_e)
        f3u = f3 * sps.f.ppf(1 - a / 2, df_e, df_r)
        l3 = (f3l - 1) / (f3l + (k - 1))
        u3 = (f3u - 1) / (f3u + (k - 1))
        # ICC(2,1): Satterthwaite-approximated degrees of freedom (McGraw & Wong 1996, case 2A).
        fj = msc / mse
        vn = df_e * (k * icc2 * fj + n * (1 + (k - 1) * icc2) - k * icc2) ** 2
        vd = df_r * k**2 * icc2**2 * fj**2 + (n * (1 + (k - 1) * icc2) - k * icc2) ** 2
        v = vn / vd
        f2u = sps.f.ppf(1 - a / 2, n - 1, v)
        f2l = sps.f.ppf(1 - a / 2, v, n - 1)
        l2 = n * (msr - f2u * mse) / (f2u * (k * msc + (k * n - k - n) * mse) + n * msr)
        u2 = n * (f2l * msr - mse) / (k * msc + (k * n - k - n) * mse + n * f2l * msr)

    def ci(lo: float, hi: float) -> tuple[float, float] | None:
        return (float(lo), float(hi)) if math.isfinite(lo) and math.isfinite(hi) else None

    i2, i3 = _finite(float(icc2)), _finite(float(icc3))
    return ICCResult(
        icc2=i2,
        icc2_ci=ci(float(l2), float(u2)) if i2 is not None else None,
        icc3=i3,
        icc3_ci=ci(float(l3), float(u3)) if i3 is not None else None,
        n_targets=n,
        n_runs=k,
        dropped_targets=dropped,
        ms_rows=float(msr),
        ms_cols=float(msc),
        ms_error=float(mse),
    )
