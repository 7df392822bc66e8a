"""Regression models for group comparisons that hold under rater and item effects.

Ratings are not independent: one rater rates many items (some raters are lenient, some strict) and
one item is rated by several raters (some items are borderline). A test that treats every rating as
independent (the two-proportion z-test) is anti-conservative when the compared groups are rater
attributes or vary within raters. Here every comparison is a regression — logistic for binary
outcomes, proportional-odds (ordinal logistic) for ordered scales (statsmodels ``Logit`` and
``OrderedModel``) — with cluster-robust (sandwich) standard errors clustered two-way by rater and
by item (Cameron, Gelbach & Miller 2011) when both are known and items carry several ratings, by
rater alone otherwise. Inference uses t and F distributions with G − 1 denominator degrees of
freedom, G the smaller number of clusters (the usual few-cluster correction). The false-positive
rate of this procedure under rater and item effects is measured by ``simulate.false_positive_rate``
(a test and ``bench/star_analysis.py``).
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

MIN_CLUSTERS = 10  # fewer raters than this: cluster-robust inference is not trustworthy, no test


def cluster_groups(
    frame: pd.DataFrame, *, by: tuple[str, ...] = ("rater_id", "item_id")
) -> tuple[np.ndarray, dict[str, int]]:
    """Integer cluster codes (n,) or (n, 2) and the number of clusters per dimension.

    Item clustering is used only when items carry two or more ratings on average (otherwise an
    item is its own cluster and adds nothing); rater clustering only when rater ids are known."""
    dims: list[str] = []
    for col in by:
        if col not in frame.columns or frame[col].isna().any():
            continue
        n = frame[col].nunique()
        if col == "item_id" and len(frame) < 2 * n:
            continue
        dims.append(col)
    if not dims:
        dims = ["item_id"] if "item_id" in frame.columns else []
    codes = [pd.factorize(frame[c])[0] for c in dims]
    sizes = {c.removesuffix("_id"): int(frame[c].nunique()) for c in dims}
    if not codes:
        return np.arange(len(frame)), {"rating": len(frame)}
    return (codes[0] if len(codes) == 1 else np.column_stack(codes)), sizes


def design(
    frame: pd.DataFrame, column: str, reference: Any | None = None, *, prefix: str | None = None
) -> pd.DataFrame:
    """Treatment-coded dummies for a categorical column; the reference is the most frequent level
    unless given. Column names are ``prefix=level``."""
    values = frame[column].astype(str)
    levels = values.value_counts().index.tolist()
    ref = str(reference) if reference is not None else levels[0]
    name = prefix or column
    cols = {f"{name}={lvl}": (values == lvl).astype(float).to_numpy() for lvl in sorted(levels) if lvl != ref}
    return pd.DataFrame(cols, index=frame.index)


def _exp(x: float) -> float:
    return float(np.exp(np.clip(x, -700.0, 700.0)))


def _df(sizes: dict[str, int]) -> int:
    return max(1, min(sizes.values()) - 1)


def _summarise(params: pd.Series, cov: pd.DataFrame, names: list[str], df: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    crit = float(sps.t.ppf(0.975, df))
    for name in names:
        b = float(params[name])
        se = float(np.sqrt(cov.loc[name, name])) if cov.loc[name, name] > 0 else float("nan")
        t = b / se if se > 0 else float("nan")
        out[name] = {
            "coef": b,
            "odds_ratio": _exp(b),
            "se": se,
            "ci95": [_exp(b - crit * se), _exp(b + crit * se)],
            "p_value": float(2 * sps.t.sf(abs(t), df)) if np.isfinite(t) else None,
        }
    return out


def wald(params: pd.Series, cov: pd.DataFrame, names: list[str], df: int) -> dict[str, Any]:
    """Joint Wald test that ``names`` are all zero, as F(q, df) with the cluster-robust covariance."""
    if not names:
        return {"statistic": None, "df": [0, df], "p_value": None}
    b = params[names].to_numpy()
    v = cov.loc[names, names].to_numpy()
    try:
        chi2 = float(b @ np.linalg.solve(v, b))
    except np.linalg.LinAlgError:
        chi2 = float(b @ np.linalg.pinv(v) @ b)
    q = len(names)
    f = chi2 / q
    return {"statistic": f, "df": [q, df], "p_value": float(sps.f.sf(f, q, df)), "test": "Wald F"}


def _robust(fit_fn: Any, groups: np.ndarray) -> Any:
    # One BLAS thread: these fits make thousands of tiny matrix products, which multithreaded
    # OpenBLAS runs up to 60x slower on a busy machine (measured: bench/star_analysis.py).
    from threadpoolctl import threadpool_limits

    with warnings.catch_warnings(), threadpool_limits(limits=1, user_api="blas"):
        warnings.simplefilter("ignore")
        return fit_fn(cov_type="cluster", cov_kwds={"groups": groups})


def _usable(cov: pd.DataFrame, names: list[str]) -> bool:
    d = np.diag(cov.loc[names, names].to_numpy()) if names else np.array([1.0])
    return bool(np.all(np.isfinite(d)) and np.all(d > 0))


def _fit_clustered(fit_fn: Any, frame: pd.DataFrame, names: list[str]) -> tuple[Any, pd.DataFrame, dict[str, int]]:
    """``fit_fn`` with standard errors clustered as ``cluster_groups`` says; when the two-way
    sandwich is not positive for ``names``, clustered by rater only. The fit, its covariance and
    the cluster sizes used."""
    groups, sizes = cluster_groups(frame)
    res = _robust(fit_fn, groups)
    cov = res.cov_params()
    if groups.ndim == 2 and not _usable(cov, names):
        groups, sizes = groups[:, 0], {next(iter(sizes)): sizes[next(iter(sizes))]}
        res = _robust(fit_fn, groups)
        cov = res.cov_params()
    return res, cov, sizes


def _fit_result(
    model: str, n: int, fitted: tuple[Any, pd.DataFrame, dict[str, int]], names: list[str], test: list[str]
) -> dict[str, Any]:
    res, cov, sizes = fitted
    df = _df(sizes)
    return {
        "model": model,
        "clusters": sizes,
        "n": n,
        "converged": bool(res.mle_retvals.get("converged", True)),
        "terms": _summarise(res.params, cov, names, df),
        "joint_test": wald(res.params, cov, test, df),
    }


def fit_binary(
    y: np.ndarray, exog_x: pd.DataFrame, frame: pd.DataFrame, *, test: list[str] | None = None
) -> dict[str, Any]:
    """Logistic regression of a 0/1 outcome on ``exog_x`` (a constant is added) with cluster-robust
    standard errors (``cluster_groups``). Returns odds ratios, t-based CIs and p-values and a joint
    Wald test of ``test`` (default: every predictor)."""
    import statsmodels.api as sm

    exog = sm.add_constant(exog_x, has_constant="add")
    names = list(exog_x.columns)
    test = names if test is None else test
    model = sm.Logit(np.asarray(y, dtype=float), exog)
    fitted = _fit_clustered(lambda **kw: model.fit(disp=False, maxiter=200, **kw), frame, names)
    return _fit_result("logistic regression (statsmodels Logit)", len(y), fitted, names, test)


def fit_ordinal(
    y: np.ndarray, exog_x: pd.DataFrame, frame: pd.DataFrame, *, test: list[str] | None = None
) -> dict[str, Any]:
    """Proportional-odds logistic regression of an ordered outcome (integer codes, higher = further
    up the scale) on ``exog_x`` with cluster-robust standard errors. Positive coefficients mean ratings
    further up the scale; odds ratios are for being above any given scale point."""
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    names = list(exog_x.columns)
    test = names if test is None else test
    codes = np.asarray(y, dtype=int)
    present = np.unique(codes)
    endog = pd.Series(pd.Categorical(codes, categories=present, ordered=True), index=exog_x.index)
    model = OrderedModel(endog, exog_x, distr="logit")
    fitted = _fit_clustered(lambda **kw: model.fit(method="bfgs", disp=False, maxiter=500, **kw), frame, names)
    kind = "proportional-odds logistic regression (statsmodels OrderedModel)"
    return _fit_result(kind, len(codes), fitted, names, test)
