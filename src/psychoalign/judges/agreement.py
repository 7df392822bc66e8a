"""A binary judge against reference labels: agreement, sensitivity, specificity and Cohen's kappa,
each with its 95 % interval (Wilson for the three shares, the asymptotic interval for kappa, both
from statsmodels), so a figure from 100 labels is never read as more precise than it is."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import BaseModel
from statsmodels.stats.inter_rater import cohens_kappa
from statsmodels.stats.proportion import proportion_confint

__all__ = ["BinaryAgreement", "binary_agreement", "figures_shown", "from_confusion"]

Interval = tuple[float, float]


class BinaryAgreement(BaseModel):
    """The judge's verdicts against the labels (positive: the label's True)."""

    n: int
    positives: int
    tp: int
    fp: int
    fn: int
    tn: int
    agreement: float
    agreement_ci: Interval
    sensitivity: float | None
    sensitivity_ci: Interval | None
    specificity: float | None
    specificity_ci: Interval | None
    kappa: float | None
    kappa_ci: Interval | None

    def line(self) -> str:
        """One line for a terminal: every figure with its interval."""

        def show(x: float | None, ci: Interval | None) -> str:
            return "n/a" if x is None or ci is None else f"{x:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"

        return (
            f"agreement {show(self.agreement, self.agreement_ci)}, sensitivity "
            f"{show(self.sensitivity, self.sensitivity_ci)}, "
            f"specificity {show(self.specificity, self.specificity_ci)}, "
            f"κ {show(self.kappa, self.kappa_ci)}; n = {self.n} ({self.positives} positive)"
        )


def wilson(k: int, n: int) -> Interval | None:
    """The 95 % Wilson interval of the share ``k / n`` (rounded to 3 places); None when ``n`` is 0."""
    if n == 0:
        return None
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    return round(float(lo), 3), round(float(hi), 3)


def _share(k: int, n: int) -> tuple[float | None, Interval | None]:
    return (round(k / n, 3), wilson(k, n)) if n else (None, None)


def from_confusion(confusion: Mapping[str, int]) -> BinaryAgreement:
    """The figures from ``{"tp", "fp", "fn", "tn"}`` counts."""
    tp, fp, fn, tn = (int(confusion.get(k, 0)) for k in ("tp", "fp", "fn", "tn"))
    n = tp + fp + fn + tn
    if n == 0:
        raise ValueError("no labelled item was judged")
    agreement, agreement_ci = _share(tp + tn, n)
    assert agreement is not None and agreement_ci is not None
    sensitivity, sensitivity_ci = _share(tp, tp + fn)
    specificity, specificity_ci = _share(tn, tn + fp)
    kappa: float | None = None
    kappa_ci: Interval | None = None
    table = np.array([[tp, fn], [fp, tn]], dtype=float)  # rows: label, columns: judge
    expected = ((tp + fn) * (tp + fp) + (fp + tn) * (fn + tn)) / (n * n)
    if expected < 1:
        with np.errstate(invalid="ignore", divide="ignore"):  # a constant judge: no variance to speak of
            res = cohens_kappa(table)
        kappa = round(float(res.kappa), 3)
        low, high = float(res.kappa_low), float(res.kappa_upp)
        kappa_ci = None if math.isnan(low) or math.isnan(high) else (round(low, 3), round(high, 3))
    return BinaryAgreement(
        n=n,
        positives=tp + fn,
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        agreement=agreement,
        agreement_ci=agreement_ci,
        sensitivity=sensitivity,
        sensitivity_ci=sensitivity_ci,
        specificity=specificity,
        specificity_ci=specificity_ci,
        kappa=kappa,
        kappa_ci=kappa_ci,
    )


def binary_agreement(truth: Sequence[bool], predicted: Sequence[bool]) -> BinaryAgreement:
    """The figures for paired labels and verdicts."""
    pairs = list(zip(truth, predicted, strict=True))
    return from_confusion(
        {
            "tp": sum(t and p for t, p in pairs),
            "fp": sum(p and not t for t, p in pairs),
            "fn": sum(t and not p for t, p in pairs),
            "tn": sum(not t and not p for t, p in pairs),
        }
    )


#: Fewer responses than this behind a precision or recall (its denominator): the figure's 95 %
#: interval is about 0.3 wide or wider, so the command warns that it says little.
MIN_RESPONSES = 10


def shown_interval(ci: Interval | None, n: int, *, asymptotic: bool = False) -> tuple[Interval | None, str | None]:
    """The interval to print for a figure over ``n`` responses, or None and why not. An interval of
    zero width (every response counted alike, as when a judge agrees with all of a few labels) is no
    measure of uncertainty; neither is an asymptotic (large-sample) interval, such as kappa's, over
    fewer than :data:`MIN_RESPONSES` responses. A Wilson interval stays: it is meant for small n and
    its width says how little a few responses show."""
    if ci is None:
        return None, None
    if asymptotic and n < MIN_RESPONSES:
        return None, f"n too small: {n} < {MIN_RESPONSES} responses for a large-sample interval"
    if ci[0] == ci[1]:
        return None, f"zero width over {n} responses: no spread to estimate an interval from"
    return ci, None


class FigureShown(BaseModel):
    """One figure of a binary agreement as the commands show it: value, interval or why none, n."""

    name: str
    value: float | None
    ci: Interval | None
    ci_reason: str | None
    n: int


def figures_shown(fig: BinaryAgreement) -> list[FigureShown]:
    """Agreement, sensitivity, specificity and kappa, each with the responses behind it and its
    interval, or None and the reason when the interval would mislead (:func:`shown_interval`)."""
    rows = (
        ("agreement", fig.agreement, fig.agreement_ci, fig.n, False),
        ("sensitivity", fig.sensitivity, fig.sensitivity_ci, fig.tp + fig.fn, False),
        ("specificity", fig.specificity, fig.specificity_ci, fig.tn + fig.fp, False),
        ("kappa", fig.kappa, fig.kappa_ci, fig.n, True),
    )
    out = []
    for name, value, ci, n, asymptotic in rows:
        shown, reason = shown_interval(ci, n, asymptotic=asymptotic)
        out.append(FigureShown(name=name, value=value, ci=shown, ci_reason=reason, n=n))
    return out


def small_figures(figures: Sequence[FigureShown]) -> list[str]:
    """``"<figure> (<n>)"`` for each figure resting on fewer than :data:`MIN_RESPONSES` responses."""
    return [f"{f.name} ({f.n})" for f in figures if f.value is not None and f.n < MIN_RESPONSES]
