"""Regression models for group comparisons that hold under rater and item effects.

Ratings are not independent: one rater rates many items (some raters are lenient, some strict) and
one item is rated by several raters (some items are borderline). A test that treats every rating as
independent (the two-proportion z-test) is anti-conservative when the compared groups are rater
attributes or vary within raters. Here every comparison is a regression — logistic for binary
outcomes, proportional-odds (ordinal logistic) for ordered scales (statsmodels ``Logit`` and
``OrderedModel``) — with cluster-robust (sandwich) standard errors clustered two-way by rater and
by item (Cameron, Gelbach & Miller 2011) when both are known and items carry several ratings, by
rater alone otherwise. The logistic model corrects for few raters: its rater term is the
bias-reduced CR2 sandwich (Bell & McCaffrey 2002) and each coefficient is tested with t on its
Bell–McCaffrey (Satterthwaite) degrees of freedom, at most G − 1 (``cr2_covariance``). The
proportional-odds model uses the plain sandwich with t and F on G − 1 denominator degrees of
freedom, G the smaller number of clusters. The false-positive
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


def _summarise(params: pd.Series, cov: pd.DataFrame, names: list[str], dfs: dict[str, float]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in names:
        df = dfs[name]
        crit = float(sps.t.ppf(0.975, df))
        b = float(params[name])
        se = float(np.sqrt(cov.loc[name, name])) if cov.loc[name, name] > 0 else float("nan")
        t = b / se if se > 0 else float("nan")
        out[name] = {
            "coef": b,
            "odds_ratio": _exp(b),
            "se": se,
            "ci95": [_exp(b - crit * se), _exp(b + crit * se)],
            "p_value": float(2 * sps.t.sf(abs(t), df)) if np.isfinite(t) else None,
            "df": df,
        }
    return out


def wald(params: pd.Series, cov: pd.DataFrame, names: list[str], df: float) -> dict[str, Any]:
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
    model: str,
    n: int,
    fitted: tuple[Any, pd.DataFrame, dict[str, int]],
    names: list[str],
    test: list[str],
    dfs: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The summary of a fit; ``dfs``: per-term denominator df (default G - 1 for every term). The
    joint test takes the smallest df of its terms (with one term: that term's t-test)."""
    res, cov, sizes = fitted
    dfs = dfs or {name: float(_df(sizes)) for name in names}
    return {
        "model": model,
        "clusters": sizes,
        "n": n,
        "converged": bool(res.mle_retvals.get("converged", True)),
        "terms": _summarise(res.params, cov, names, dfs),
        "joint_test": wald(res.params, cov, test, min((dfs[t] for t in test), default=float(_df(sizes)))),
    }


def _logit_cr2(
    res: Any, exog: pd.DataFrame, frame: pd.DataFrame, names: list[str]
) -> tuple[pd.DataFrame, dict[str, int], dict[str, float]]:
    """Cluster-robust covariance of a fitted Logit with the small-cluster correction on the first
    clustering dimension (raters when known; a rater attribute varies only there): its sandwich
    term is CR2 (``cr2_covariance``) and each term gets its Bell-McCaffrey df, capped at G - 1.
    With two-way clustering the item and rater x item terms are the usual ones (Cameron, Gelbach &
    Miller 2011, each with statsmodels' G/(G-1) (N-1)/(N-K) factor); when that sum is not positive
    for ``names``, rater only. The covariance, the cluster sizes used, the df per term."""
    groups, sizes = cluster_groups(frame)
    x = exog.to_numpy(dtype=float)
    y = np.asarray(res.model.endog, dtype=float)
    mu = np.clip(np.asarray(res.predict(), dtype=float), 1e-12, 1 - 1e-12)
    sw = np.sqrt(mu * (1.0 - mu))
    xw, ew = x * sw[:, None], (y - mu) / sw
    first = groups if groups.ndim == 1 else groups[:, 0]
    cols = [list(exog.columns).index(name) for name in names]
    contrasts = np.eye(x.shape[1])[cols]
    with threadpool_limits_blas():
        cov, bm = cr2_covariance(xw, ew, first, contrasts)
        if groups.ndim == 2:
            n, k = x.shape
            scores = x * (y - mu)[:, None]
            bread = np.linalg.inv(xw.T @ xw)
            pairs = pd.factorize(groups[:, 0].astype(np.int64) * (int(groups[:, 1].max()) + 1) + groups[:, 1])[0]
            extra = np.zeros((k, k))
            for codes, sign in ((groups[:, 1], 1.0), (pairs, -1.0)):
                meat, g = _cr1_meat(scores, codes)
                extra += sign * g / max(g - 1, 1) * (n - 1) / max(n - k, 1) * (bread @ meat @ bread)
            two_way = pd.DataFrame(cov + extra, index=exog.columns, columns=exog.columns)
            if _usable(two_way, names):
                cap = _df(sizes)
                return two_way, sizes, {nm: float(min(d, cap)) for nm, d in zip(names, bm, strict=True)}
            first_dim = next(iter(sizes))
            sizes = {first_dim: sizes[first_dim]}
    cap = _df(sizes)
    frame_cov = pd.DataFrame(cov, index=exog.columns, columns=exog.columns)
    return frame_cov, sizes, {nm: float(min(d, cap)) for nm, d in zip(names, bm, strict=True)}


def threadpool_limits_blas() -> Any:
    """One BLAS thread (see ``_robust``)."""
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=1, user_api="blas")


def fit_binary(
    y: np.ndarray, exog_x: pd.DataFrame, frame: pd.DataFrame, *, test: list[str] | None = None
) -> dict[str, Any]:
    """Logistic regression of a 0/1 outcome on ``exog_x`` (a constant is added) with cluster-robust
    standard errors (``cluster_groups``). Returns odds ratios, t-based CIs and p-values and a joint
    Wald test of ``test`` (default: every predictor)."""
    import statsmodels.api as sm

    if len(np.unique(np.asarray(y))) < 2:  # callers check first; a fit here would not converge
        raise ValueError("the outcome does not vary: nothing to model")
    exog = sm.add_constant(exog_x, has_constant="add")
    names = list(exog_x.columns)
    test = names if test is None else test
    model = sm.Logit(np.asarray(y, dtype=float), exog)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = model.fit(disp=False, maxiter=200)
    cov, sizes, dfs = _logit_cr2(res, exog, frame, names)
    fitted = (res, cov, sizes)
    return _fit_result("logistic regression (statsmodels Logit), CR2 rater-clustered", len(y), fitted, names, test, dfs)


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


# -- small-cluster correction (logistic model) -------------------------------------------------------


def _cr1_meat(scores: np.ndarray, codes: np.ndarray) -> tuple[np.ndarray, int]:
    """Sum over clusters of the outer product of the cluster's summed scores, and the cluster count."""
    g = int(codes.max()) + 1
    summed = np.zeros((g, scores.shape[1]))
    np.add.at(summed, codes, scores)
    return summed.T @ summed, g


def cr2_covariance(
    xw: np.ndarray, ew: np.ndarray, codes: np.ndarray, contrasts: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Bell-McCaffrey bias-reduced cluster-robust covariance (CR2) and Satterthwaite degrees of
    freedom per contrast (Bell & McCaffrey 2002; Pustejovsky & Tipton 2018, working model Omega = I).

    ``xw`` (n, k) and ``ew`` (n,) are the working design and residuals: X and y - Xb for least
    squares; W^1/2 X and (y - mu) / W^1/2 for a GLM (W = mu (1 - mu) in a logistic model), so that
    ``xw.T @ ew`` are the score equations. ``codes`` are integer cluster codes 0..G-1. Each
    cluster's residuals are multiplied by A_g = (I - H_gg)^-1/2 (H_gg its block of the hat matrix),
    which undoes the downward bias of the plain sandwich with few clusters; H_gg has rank <= k, so
    A_g is applied through a k x k eigendecomposition, never an n_g x n_g one. A direction where a
    cluster's leverage is 1 gets the pseudo-inverse (weight 0), as in clubSandwich.

    Returns the (k, k) covariance and, for each row c of ``contrasts`` (default: the unit vectors),
    the degrees of freedom (tr B)^2 / tr(B^2), B = G'G with g_j = (I - H)_{., j} A_j X_j M c."""
    k = xw.shape[1]
    contrasts = np.eye(k) if contrasts is None else np.atleast_2d(contrasts)
    m = np.linalg.inv(xw.T @ xw)
    root = np.linalg.cholesky(m)  # m = root @ root.T
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    meat = np.zeros((k, k))
    w_sq: list[np.ndarray] = []  # per cluster, |w_j|^2 for each contrast
    z_rows: list[np.ndarray] = []  # per cluster, X_j' w_j for each contrast (k, c)
    mc = m @ contrasts.T  # (k, c)
    for rows in np.split(order, bounds):
        xg = xw[rows]
        u = xg @ root  # H_gg = u u'
        lam, q = np.linalg.eigh(u.T @ u)  # the nonzero eigenvalues of H_gg
        lam = np.clip(lam, 0.0, None)
        keep = lam > 1e-12
        inv_sqrt = np.where(1.0 - lam > 1e-10, 1.0 / np.sqrt(np.clip(1.0 - lam, 1e-300, None)), 0.0)
        # A v = v + V diag((1-lam)^-1/2 - 1) V' v, V = u q lam^-1/2 (orthonormal eigenvectors of H_gg)
        scale = np.where(keep, (inv_sqrt - 1.0) / np.where(keep, lam, 1.0), 0.0)
        uq = u @ q

        def ag(v: np.ndarray, uq: np.ndarray = uq, scale: np.ndarray = scale) -> np.ndarray:
            out: np.ndarray = v + uq @ (scale[:, None] * (uq.T @ v))
            return out

        s = xg.T @ ag(ew[rows][:, None])[:, 0]
        meat += np.outer(s, s)
        w = ag(xg @ mc)  # (n_g, c)
        w_sq.append((w * w).sum(axis=0))
        z_rows.append(xg.T @ w)
    cov = m @ meat @ m
    dfs = np.empty(len(contrasts))
    for i in range(len(contrasts)):
        z = np.stack([zr[:, i] for zr in z_rows])  # (G, k)
        b = np.diag([ws[i] for ws in w_sq]) - z @ m @ z.T
        dfs[i] = np.trace(b) ** 2 / max(float(np.sum(b * b)), 1e-300)
    return cov, dfs
