"""The judge validity gate, and scores corrected for a judge's measured error.

A judge is believed only when its agreement with labelled answers it was not fitted on is clearly
better than chance. :func:`gate` reads one judge's calibration (agreement on ``n`` labelled items,
the agreement chance alone would give, Cohen's kappa when the task is binary) and says ``weak``
when the agreement's Wilson 95 % interval reaches chance or kappa is below :data:`MIN_KAPPA`
(Landis & Koch's "fair" band and below). The report then marks every column that judge decides.

:func:`rogan_gladen` corrects a share measured by an imperfect binary judge (Rogan & Gladen 1978):
``p = (q + Sp - 1) / (Se + Sp - 1)`` for an observed share ``q``, clipped to [0, 1]. Its interval
is a Monte Carlo one that carries the sampling error of the share and the calibration error of
sensitivity and specificity (each drawn from its Jeffreys Beta posterior, on the effective number
of rows when the labelled rows repeat prompts: :func:`calibration_rates`), so a judge measured on
few labels, or on many answers to few prompts, gives a wide corrected interval. A sensitivity or
specificity may be a product of factors (a success that needs two judges' verdicts, assumed
independent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from .stats import wilson_ci

#: Kappa below this marks a judge weak.
MIN_KAPPA = 0.4

#: Fewer labelled items than this mark a judge weak, however well it did on them: five right out
#: of five clear chance (Wilson 95 % interval [0.566, 1]) yet show next to nothing about the judge,
#: and a constructed check of four pairs is a smoke test, not a validation.
MIN_LABELLED = 30

#: (right, total): a measured rate, e.g. sensitivity = (true positives, labelled positives); on
#: labelled rows that repeat prompts, both scaled to the effective number of rows.
Rate = tuple[float, float]


def gate(calibration: Mapping[str, Any], default_chance: float = 0.5) -> dict[str, Any]:
    """The gate's fields for one judge's measured calibration: the agreement's interval, the chance
    level it is compared with, ``status`` (``measured`` or ``weak``) and, when weak, why. Weak: the
    interval reaches chance, kappa is below :data:`MIN_KAPPA`, fewer than :data:`MIN_LABELLED`
    items were judged, or the labels are in sample (``held_out`` False: the judge was written,
    tuned or picked on them, so its agreement there is optimistic). With ``n_eff`` (labelled rows
    that repeat prompts, see :mod:`.calibration`) the interval rests on the effective n."""
    agreement = calibration.get("agreement")
    n = int(calibration.get("n") or 0)
    if agreement is None or n == 0:
        return {"status": "weak", "weak_reason": "no labelled item was judged", "agreement_ci": None}
    chance = calibration.get("chance")
    chance = float(default_chance if chance is None else chance)
    lo, hi, n_eff = share_interval(float(agreement), n, calibration.get("n_eff"))
    basis = f"n={n}, {calibration.get('prompts')} prompts, effective n {n_eff:.1f}" if n_eff < n else f"n={n}"
    reasons: list[str] = []
    if lo <= chance:
        # a whole interval under chance is worse than a coin (ties, an inverted scale), not "at" it
        where = "is below" if hi < chance else "reaches"
        reasons.append(f"agreement {agreement:.3f} [{lo:.3f}, {hi:.3f}] ({basis}) {where} chance {chance:.3f}")
    kappa = calibration.get("kappa")
    if kappa is not None and float(kappa) < MIN_KAPPA:
        reasons.append(f"κ {float(kappa):.3f} < {MIN_KAPPA}")
    if n < MIN_LABELLED:
        reasons.append(f"only {n} labelled items judged (fewer than {MIN_LABELLED}: too few to validate a judge)")
    if calibration.get("held_out") is False:
        reasons.append("measured in sample (on labels it was written, tuned or picked on): its agreement is optimistic")
    out: dict[str, Any] = {
        "agreement_ci": [round(lo, 3), round(hi, 3)],
        "chance": round(chance, 3),
        "status": "weak" if reasons else "measured",
    }
    if reasons:
        out["weak_reason"] = "; ".join(reasons)
    return out


def share_interval(share: float, n: int, n_eff: float | None = None) -> tuple[float, float, float]:
    """(low, high, effective n): the Wilson 95 % interval of a judge's agreement (or sensitivity,
    specificity) over ``n`` labelled rows, on ``n_eff`` when the rows repeat prompts (a
    calibration's clustering, :func:`.calibration.clustering`): the interval the gate reads and
    ``judge eval-*`` prints."""
    if n_eff is not None and float(n_eff) < n:
        # rows answering the same prompt are not independent: the interval rests on the effective n
        lo, hi = wilson_ci(share * float(n_eff), float(n_eff))
        return lo, hi, float(n_eff)
    lo, hi = wilson_ci(round(share * n), n)
    return lo, hi, float(n)


def confusion_rates(
    confusion: Mapping[str, int] | None, rates_n_eff: Mapping[str, float] | None = None
) -> tuple[Rate, Rate] | None:
    """(sensitivity, specificity) as rates from ``{"tp", "fn", "tn", "fp"}`` counts. With
    ``rates_n_eff`` (a calibration's, when its labelled rows repeat prompts) a rate is scaled to
    its effective number of rows: the same share, drawn with the spread of that many independent
    rows, so the corrected interval carries the clustering of the judge's validation set."""
    if not confusion:
        return None
    tp, fn, tn, fp = (int(confusion.get(k, 0)) for k in ("tp", "fn", "tn", "fp"))
    if tp + fn == 0 or tn + fp == 0:
        return None
    effective = rates_n_eff or {}

    def rate(right: int, total: int, name: str) -> Rate:
        n_eff = effective.get(name)
        if n_eff is None or not 0 < float(n_eff) < total:
            return (right, total)
        return (right * float(n_eff) / total, float(n_eff))

    return rate(tp, tp + fn, "sensitivity"), rate(tn, tn + fp, "specificity")


def calibration_rates(calibration: Mapping[str, Any] | None) -> tuple[Rate, Rate] | None:
    """:func:`confusion_rates` of a stored calibration, on its clustering when it has one (a
    calibration stored before it was recorded: on the rows)."""
    calibration = calibration or {}
    return confusion_rates(calibration.get("confusion"), calibration.get("rates_n_eff"))


def _point(rates: Sequence[Rate]) -> float:
    return math.prod(k / n for k, n in rates)


def _draw(rng: np.random.Generator, rates: Sequence[Rate], draws: int) -> np.ndarray:
    out = np.ones(draws)
    for k, n in rates:
        out *= rng.beta(k + 0.5, n - k + 0.5, size=draws)
    return out


def rogan_gladen(
    successes: int,
    n: int,
    sensitivity: Sequence[Rate],
    specificity: Sequence[Rate],
    *,
    seed: int,
    draws: int = 4000,
    n_eff: float | None = None,
) -> dict[str, Any]:
    """The corrected share of ``successes`` in ``n`` and its 95 % interval (see the module doc).

    ``n_eff``: the effective number of rows when they are not independent (a share pooled over
    rows that repeat items: :func:`~psychoalign.experiments.harness.stats.clustered_wilson_ci`);
    the share's sampling error is drawn as if ``n_eff`` rows had been seen, the point is unchanged.

    ``mean`` is None when the judge is no better than a coin (Se + Sp <= 1): nothing can be
    corrected; the interval is None when n < 2 (no spread to describe)."""
    se, sp = _point(sensitivity), _point(specificity)
    youden = se + sp - 1
    if n == 0 or youden <= 0:
        return {"mean": None, "ci_low": None, "ci_high": None, "se": round(se, 3), "sp": round(sp, 3)}
    q = successes / n
    mean = min(1.0, max(0.0, (q + sp - 1) / youden))
    out: dict[str, Any] = {
        "mean": round(mean, 3),
        "ci_low": None,
        "ci_high": None,
        "se": round(se, 3),
        "sp": round(sp, 3),
    }
    if n < 2:
        return out
    rng = np.random.default_rng(seed)
    rows = float(n) if n_eff is None else n_eff
    qs = rng.beta(successes * rows / n + 0.5, (n - successes) * rows / n + 0.5, size=draws)
    ses, sps = _draw(rng, sensitivity, draws), _draw(rng, specificity, draws)
    j = ses + sps - 1
    ok = j > 0
    corrected = np.clip((qs[ok] + sps[ok] - 1) / j[ok], 0.0, 1.0)
    if ok.mean() < 0.975:  # the judge may be at chance: the interval spans everything
        out.update(ci_low=0.0, ci_high=1.0)
    else:
        out.update(
            ci_low=round(float(np.percentile(corrected, 2.5)), 3),
            ci_high=round(float(np.percentile(corrected, 97.5)), 3),
        )
    return out
