"""The STAR analyses (paper §5-6): agreement, expert vs crowd, group comparisons, arbitration,
in-/out-group, coverage (the intersectional models: ``intersections``).

Each function returns a plain dict for the JSON report. A section that cannot be computed says so
(``{"computable": False, "reason": …}``) instead of failing the report. Group comparisons are
regressions with rater- and item-clustered standard errors (``models``); raw proportions are
kept as description only.
"""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint

from ...intervals import MIN_CLUSTERS as MIN_ARBITRATORS
from ...intervals import repeated_rows_ci
from .agreement import MIN_ALPHA_ITEMS, bootstrap_alpha, item_disagreement, small_sample
from .data import MAX_LEVELS, Metric, RatingData
from .models import MIN_CLUSTERS, design, fit_binary, fit_ordinal
from .targets import mixed_reason, targets_of

MIN_GROUP = 10  # fewer ratings than this in a group: described, not tested
#: Fewer distinct raters than this in a group: described, not tested. A group's coefficient is
#: estimated from its raters' cluster scores alone; with 1-3 raters the sandwich variance collapses
#: and a null difference is "significant" most of the time (see docs/star-analysis.md).
MIN_GROUP_RATERS = 5


def not_computable(reason: str) -> dict[str, Any]:
    return {"computable": False, "reason": reason}


def counts_matrix(
    ratings: pd.DataFrame, n_values: int, binary: set[int] | None = None, excluded: set[int] | None = None
) -> tuple[np.ndarray, list[str]]:
    """Units x values counts. With ``binary`` the values collapse to {0: not positive, 1: positive}
    and ``excluded`` values are dropped (missing, not zero)."""
    frame = ratings[["item_id", "value"]]
    if binary is not None:
        frame = frame[~frame["value"].isin(excluded or set())]
        frame = frame.assign(value=frame["value"].isin(binary).astype(int))
        n_values = 2
    table = pd.crosstab(frame["item_id"], frame["value"]).reindex(columns=range(n_values), fill_value=0)
    return table.to_numpy(dtype=np.float64), [str(i) for i in table.index]


def _binary_key(data: RatingData) -> str:
    return f"nominal_{data.positive_label}"


def _alphas(data: RatingData, ratings: pd.DataFrame, n_boot: int, seed: int, *, all_levels: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    full, _ = counts_matrix(ratings, len(data.scale))
    levels: list[Metric] = data.levels if all_levels else [data.default_level]
    for level in levels:
        out[level] = small_sample(bootstrap_alpha(full, level, n_boot=n_boot, seed=seed, values=data.scale_values))
    if data.binary:
        binary, _ = counts_matrix(ratings, len(data.scale), data.positive, data.excluded)
        out[_binary_key(data)] = small_sample(bootstrap_alpha(binary, "nominal", n_boot=n_boot, seed=seed))
    return out


def _item_columns(data: RatingData) -> list[str]:
    cols = list(dict.fromkeys([*data.item_attributes, "area", "rule", "target_group", "category"]))
    return [
        c for c in cols if c in data.items.columns and 1 <= data.items[c].dropna().astype(str).nunique() <= MAX_LEVELS
    ]


def _with_rater_attr(ann: pd.DataFrame, data: RatingData, attr: str) -> pd.DataFrame:
    mapping = data.raters[attr].dropna().astype(str)
    return ann.assign(**{attr: ann["rater_id"].map(mapping)}).dropna(subset=[attr])


def agreement_section(data: RatingData, *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """alpha at every level the scale allows (and on the binarised view), per item attribute, within
    each rater group of every rater attribute; per-item disagreement at the default level."""
    ann = data.annotations
    if ann.empty:
        return not_computable("no ratings in this dataset")
    per_item = ann.groupby("item_id").size()
    if per_item.max() < 2:
        return not_computable("one rating per item: Krippendorff's alpha is undefined")
    section: dict[str, Any] = {
        "computable": True,
        "default_level": data.default_level,
        "levels": data.levels,
        "overall": _alphas(data, ann, n_boot, seed, all_levels=True),
    }
    breakdowns: dict[str, dict[str, Any]] = {}
    for column in _item_columns(data):
        merged = ann.merge(data.items[["item_id", column]], on="item_id")
        breakdowns[column] = {}
        for value, part in merged.groupby(merged[column].astype(str)):
            if part.groupby("item_id").size().max() >= 2:
                breakdowns[column][str(value)] = _alphas(data, part, n_boot, seed, all_levels=False)
    for attr in data.rater_attributes():
        merged = _with_rater_attr(ann, data, attr)
        within = {
            str(g): _alphas(data, part, n_boot, seed, all_levels=False)
            for g, part in merged.groupby(attr)
            if part.groupby("item_id").size().max() >= 2
        }
        if within:
            breakdowns[f"{attr} (within rater group)"] = within
    section["by"] = breakdowns
    counts, ids = counts_matrix(ann, len(data.scale))
    level = data.default_level
    scores = item_disagreement(counts, level, data.scale_values)
    section["item_disagreement"] = {
        "definition": f"D_o(item) / D_e(all ratings) = 1 - alpha_item, {level} metric",
        "items": {i: (None if math.isnan(s) else float(s)) for i, s in zip(ids, scores, strict=True)},
        "mean": float(np.nanmean(scores)) if np.isfinite(scores).any() else None,
    }
    if section["item_disagreement"]["mean"] is None:
        # say why, as alpha does: a bare dash reads like a missing number
        section["item_disagreement"]["reason"] = (
            "undefined: every rating is the same value (no expected disagreement to divide by)"
            if ann["value"].nunique() <= 1
            else "undefined: only one item was rated more than once, and its disagreement set against "
            "its own ratings is 1 by construction"
        )
    return section


# -- group comparisons -----------------------------------------------------------------------------


def _describe(frame: pd.DataFrame, column: str, y: np.ndarray, what: str) -> dict[str, dict[str, Any]]:
    work = frame.assign(__y=y)
    out: dict[str, dict[str, Any]] = {}
    for level, part in work.groupby(work[column].astype(str)):
        out[str(level)] = {
            what: float(part["__y"].mean()),
            "n_ratings": len(part),
            "n_raters": int(part["rater_id"].nunique()) if part["rater_id"].notna().all() else None,
        }
    return out


def _rater_level(frame: pd.DataFrame, column: str, y: np.ndarray, levels: list[str]) -> dict[str, Any]:
    """STAR's t-test / ANOVA view, done at the rater level so each rater counts once: per-rater means,
    then Welch's t-test (2 groups) or one-way ANOVA (3+) when the attribute is constant within
    raters, or a paired t-test over raters who rated in both groups when it varies within raters."""
    if frame["rater_id"].isna().any():
        return not_computable("no rater ids")
    work = frame.assign(__y=y, __g=frame[column].astype(str))
    work = work[work["__g"].isin(levels)]
    means = work.groupby(["rater_id", "__g"])["__y"].mean().unstack()
    constant = bool((work.groupby("rater_id")["__g"].nunique() <= 1).all())
    if constant:
        samples = [means[g].dropna().to_numpy() for g in levels if g in means]
        if len(samples) < 2 or min(len(s) for s in samples) < 2:
            return not_computable("fewer than two raters in a group")
        if all(np.ptp(s) == 0 for s in samples):
            # no spread within any group: the t statistic divides by zero (-inf, p = 0)
            return not_computable("every rater of each group has the same mean rating: no spread to test against")
        if len(samples) == 2:
            t = sps.ttest_ind(samples[1], samples[0], equal_var=False)
            return _tested("Welch t-test on per-rater means", t, [len(s) for s in samples])
        f = sps.f_oneway(*samples)
        return _tested("one-way ANOVA on per-rater means", f, [len(s) for s in samples])
    if len(levels) != 2:
        return not_computable("paired view needs exactly two groups")
    both = means[list(levels)].dropna()
    if len(both) < 3:
        return not_computable("fewer than three raters rated in both groups")
    if np.ptp((both[levels[1]] - both[levels[0]]).to_numpy()) == 0:
        return not_computable("every rater's difference between the groups is the same: no spread to test against")
    t = sps.ttest_rel(both[levels[1]], both[levels[0]])
    return _tested("paired t-test on per-rater means (raters who rated in both groups)", t, len(both))


def _tested(test: str, result: Any, raters: list[int] | int) -> dict[str, Any]:
    """A scipy test's result as the report shows it; ``raters`` per group, or in all."""
    return {
        "computable": True,
        "test": test,
        "statistic": float(result.statistic),
        "p_value": float(result.pvalue),
        "raters": raters,
    }


def _prepare(frame: pd.DataFrame, column: str, reference: str | None) -> tuple[pd.DataFrame, list[str], dict[str, str]]:
    """Keep levels with at least MIN_GROUP ratings and (rater ids known) MIN_GROUP_RATERS raters;
    the reference level first. The others: level -> why it is described only."""
    values = frame[column].astype(str)
    sizes = values.value_counts()
    raters_known = bool(frame["rater_id"].notna().all())
    raters = frame.groupby(values)["rater_id"].nunique() if raters_known else None
    keep: list[str] = []
    small: dict[str, str] = {}
    for level, n in sizes.items():
        k = int(raters[level]) if raters is not None else None
        if n < MIN_GROUP:
            small[str(level)] = f"{n} rating{'s' if n != 1 else ''}"
        elif k is not None and k < MIN_GROUP_RATERS:
            small[str(level)] = f"{k} rater{'s' if k != 1 else ''}"
        else:
            keep.append(str(level))
    if reference is not None and str(reference) in keep:
        keep.remove(str(reference))
        keep.insert(0, str(reference))
    return frame[values.isin(keep)], keep, small


def _separated(part: pd.DataFrame, column: str, levels: list[str], ordinal: bool) -> dict[str, str]:
    """Levels whose every rating sits at one end of the outcome (all 0 / all 1, or all at the
    lowest / highest scale point present): their odds ratio is infinite (perfect separation)."""
    y = part["__y"]
    low, high = y.min(), y.max()
    out: dict[str, str] = {}
    for level, ys in y.groupby(part[column].astype(str)):
        if str(level) not in levels or len(ys) == 0:
            continue
        if (ys == low).all() or (ys == high).all():
            end = ys.iloc[0]
            out[str(level)] = f"every rating is {end:g}" if not ordinal else f"every rating at scale code {end:g}"
    return out


def _ordered_split(part: pd.DataFrame, column: str, levels: list[str]) -> str | None:
    """Why the groups split into two sets whose ratings do not overlap (every rating of one set at
    or below a scale point, every rating of the other at or above it), else None. Then the model's
    likelihood keeps rising as the two sets are pushed apart: the fitted coefficient is a number
    the optimiser stopped at (an odds ratio of 1e15, a p-value of 1e-42), not an estimate. Groups
    whose ratings all sit at one end are caught first (:func:`_separated`); this is the case where
    each group uses several scale points (one group rates 1-2, the other 4-5)."""
    y = part["__y"]
    by_level = {str(lv): ys for lv, ys in y.groupby(part[column].astype(str)) if str(lv) in levels and len(ys)}
    if len(by_level) < 2:
        return None
    lows = {lv: ys.min() for lv, ys in by_level.items()}
    highs = {lv: ys.max() for lv, ys in by_level.items()}
    for cut in sorted(set(lows.values()) | set(highs.values())):
        below = sorted(lv for lv in by_level if highs[lv] <= cut and lows[lv] < cut)
        above = sorted(lv for lv in by_level if lows[lv] >= cut and lv not in below)
        if below and above and len(below) + len(above) == len(by_level):
            return (
                f"ordered separation: every rating of {', '.join(below)} is at most scale code "
                f"{max(highs[lv] for lv in below):g} and every rating of {', '.join(above)} at least "
                f"{min(lows[lv] for lv in above):g}; the odds ratio between them is infinite, so the groups "
                "are described, not tested"
            )
    return None


def _group_level_tests(model: dict[str, Any], column: str, tested: dict[str, Any], reference: str) -> None:
    """Few clusters in a group: a group's coefficient rests on its own raters' scores, so with the
    whole pool's G - 1 df a group of 5 raters was "significant" in 8 % of null datasets (1-3 raters:
    18-82 %, which is why those are not tested at all). When a tested group has fewer than
    MIN_CLUSTERS raters, each group term is tested with t on (the smaller of its group's and the
    reference's raters) - 1 df when that group is the small one, and the joint test is Simes'
    combination of the terms' t-tests (one F with the smallest group's df for every term is far too
    conservative). With every group at MIN_CLUSTERS raters or more, the model's joint Wald F stands."""
    terms = model.get("terms") or {}
    if not terms:
        return
    pooled_df = float(model["joint_test"]["df"][1])
    if min(int(v["raters"]) for v in tested.values()) >= MIN_CLUSTERS:
        for term in terms.values():
            term.setdefault("df", pooled_df)
        return
    ref_raters = int(tested[reference]["raters"])
    p_values: list[float] = []
    dfs: list[float] = []
    for name, term in terms.items():
        level = name[len(column) + 1 :]
        raters = min(int(tested.get(level, {}).get("raters") or 0), ref_raters)
        own = float(term.get("df", pooled_df))  # the model's df for this term (CR2: Bell-McCaffrey)
        df = min(float(max(1, raters - 1)), own) if raters < MIN_CLUSTERS else own
        term["df"] = df
        dfs.append(df)
        se = term["se"]
        if not (np.isfinite(se) and se > 0):
            term["p_value"] = None
            continue
        crit = float(sps.t.ppf(0.975, df))
        b = term["coef"]
        term["ci95"] = [math.exp(min(700.0, b - crit * se)), math.exp(min(700.0, b + crit * se))]
        term["p_value"] = float(2 * sps.t.sf(abs(b / se), df))
        p_values.append(term["p_value"])
    q = len(p_values)
    simes = min(1.0, min(q * p / (i + 1) for i, p in enumerate(sorted(p_values)))) if q else None
    model["joint_test"] = {
        "test": "Simes combination of the group terms' t-tests (a group under 10 raters: its raters - 1 df)",
        "statistic": None,
        "df": [q, min(dfs)],
        "p_value": simes,
    }


def _compare(
    frame: pd.DataFrame,
    column: str,
    y: np.ndarray,
    reference: str | None,
    *,
    ordinal: bool,
    what: str,
    values: list[float] | None = None,
) -> dict[str, Any]:
    frame = frame.assign(__y=np.asarray(y))
    shown = np.asarray(values, dtype=float)[frame["__y"].to_numpy()] if values is not None else frame["__y"].to_numpy()
    described = _describe(frame, column, shown, what)
    part, levels, small = _prepare(frame, column, reference)
    untestable: str | None = None
    if len(levels) >= 2 and (y_all := part["__y"]).min() != y_all.max():
        separated = _separated(part, column, levels, ordinal)
        if separated and len(levels) - len(separated) >= 2:
            # the separated groups are described (their rate says it all), the others tested
            levels = [lv for lv in levels if lv not in separated]
            part = part[part[column].astype(str).isin(levels)]
        elif separated:
            # fewer than two groups would be left to compare: a model fitted anyway puts an odds
            # ratio of ~1e-14 and a tiny p-value on the separated group (its MLE is infinite)
            untestable = (
                "perfect separation: "
                + "; ".join(f"{lv}: {why}" for lv, why in separated.items())
                + "; the odds ratio is infinite, so the groups are described, not tested"
            )
    else:
        separated = {}
    if untestable is None and len(levels) >= 2:
        untestable = _ordered_split(part, column, levels)
    out: dict[str, Any] = {"computable": True, "groups": described, "reference": levels[0] if levels else None}
    raters_known = part["rater_id"].notna().all()
    out["tested_groups"] = {
        lv: {"raters": described[lv]["n_raters"], "ratings": described[lv]["n_ratings"]} for lv in levels
    }
    if small:
        out["not_tested"] = (
            f"groups with fewer than {MIN_GROUP} ratings or {MIN_GROUP_RATERS} raters are described only: "
            + ", ".join(f"{lv} ({why})" for lv, why in small.items())
        )
    if separated:
        out["separation"] = {
            lv: f"perfect separation: {why}; its odds ratio is infinite, so the group is described, not tested"
            for lv, why in separated.items()
        }
    total_raters = int(frame["rater_id"].nunique()) if frame["rater_id"].notna().all() else None
    if len(levels) < 2 and total_raters is not None and total_raters < MIN_CLUSTERS:
        out["model"] = not_computable(
            f"{total_raters} raters: rater-clustered inference needs at least {MIN_CLUSTERS}; "
            "the rates above are description only"
        )
        return out
    if len(levels) < 2:
        out["model"] = not_computable(
            f"fewer than two groups with {MIN_GROUP}+ ratings from {MIN_GROUP_RATERS}+ raters"
        )
        return out
    if untestable is not None:
        out["model"] = not_computable(untestable)
    elif raters_known and part["rater_id"].nunique() < MIN_CLUSTERS:
        out["model"] = not_computable(
            f"{part['rater_id'].nunique()} raters: rater-clustered inference needs at least {MIN_CLUSTERS}; "
            "the rates above are description only"
        )
    else:
        exog_x = design(part, column, levels[0])
        yv = part["__y"].to_numpy()
        if yv.min() == yv.max():
            # a constant outcome has no cut-points to fit (OrderedModel fails on a shape error)
            out["model"] = not_computable(
                "every rating has the same outcome"
                if not ordinal
                else "every rating is at one scale point: the outcome does not vary"
            )
        else:
            try:
                out["model"] = (fit_ordinal if ordinal else fit_binary)(yv, exog_x, part)
                if raters_known:
                    _group_level_tests(out["model"], column, out["tested_groups"], levels[0])
            except Exception as exc:  # separation, singular design: report, do not crash
                out["model"] = not_computable(f"the model could not be fitted: {type(exc).__name__}: {exc}")
            if not raters_known and out["model"].get("computable", True):
                out["model"]["note"] = "no rater ids: clustered by item only"
    if len(levels) == 2 and not ordinal:
        a, b = (described[levels[0]][what], described[levels[1]][what])
        out["difference"] = {"of": f"{levels[1]} − {levels[0]}", "value": b - a}
    shown_part = shown[frame[column].astype(str).isin(levels).to_numpy()]
    out["rater_level"] = _rater_level(part, column, shown_part, levels)
    return out


def compare_binary(frame: pd.DataFrame, column: str, y: np.ndarray, reference: str | None = None) -> dict[str, Any]:
    """Compare a 0/1 outcome across the levels of ``column``: raw rates (description), logistic
    regression with rater- and item-clustered SEs (the test: joint Wald F over the group terms,
    odds ratios vs the reference), and the rater-level t-test / ANOVA view. ``frame`` needs
    ``item_id`` and ``rater_id`` columns."""
    return _compare(frame, column, y, reference, ordinal=False, what="rate")


def compare_ordinal(
    frame: pd.DataFrame,
    column: str,
    codes: np.ndarray,
    reference: str | None = None,
    values: list[float] | None = None,
) -> dict[str, Any]:
    """Like ``compare_binary`` for an ordered scale (integer codes 0..K-1): mean rating per group on
    the scale's ``values`` (default: the codes), proportional-odds regression with clustered SEs, and
    the rater-level view on per-rater mean ratings."""
    return _compare(frame, column, codes, reference, ordinal=True, what="mean_rating", values=values)


def _holm(results: dict[str, dict[str, Any]], path: tuple[str, ...] = ("model", "joint_test")) -> None:
    from statsmodels.stats.multitest import multipletests

    def p_of(v: dict[str, Any]) -> float | None:
        node: Any = v
        for key in path:
            node = node.get(key, {}) if isinstance(node, dict) else {}
        return node.get("p_value") if isinstance(node, dict) else None

    keys = [k for k, v in results.items() if p_of(v) is not None]
    if len(keys) > 1:
        adjusted = multipletests([p_of(results[k]) for k in keys], method="holm")[1]
        for k, adj in zip(keys, adjusted, strict=True):
            results[k]["p_value_holm"] = float(adj)


def _views(data: RatingData, frame: pd.DataFrame, column: str, reference: str | None = None) -> dict[str, Any]:
    """The binary (positive vs not) and the ordinal comparison of one grouping, as the scale allows."""
    out: dict[str, Any] = {}
    if data.binary:
        part = frame[~frame["value"].isin(data.excluded)]
        out[f"binary_{data.positive_label}"] = compare_binary(
            part, column, part["value"].isin(data.positive).astype(int).to_numpy(), reference
        )
    if data.ordinal and len(data.scale) > 2:
        out["ordinal"] = compare_ordinal(frame, column, frame["value"].to_numpy(), reference, data.scale_values)
    return out


#: Rater attributes are crossed two at a time for at most this many pairs (two models per pair).
MAX_INTERSECTIONS = 6


def groups_section(data: RatingData) -> dict[str, Any]:
    """Group comparisons on every rater attribute (all its groups, not only two), then on the
    intersections of two attributes (e.g. gender × race), each combination a group under the same
    rule: fewer than MIN_GROUP ratings or MIN_GROUP_RATERS raters, or perfectly separated, and it
    is described, not tested."""
    attrs = data.rater_attributes()
    if not attrs:
        known = [str(c) for c in data.raters.columns] if not data.raters.empty else []
        if not known:
            return not_computable("no rater attributes (demographics, expertise…) in this dataset")
        # attributes were found (the data notes say so): say why none of them is compared
        return not_computable(
            f"no rater attribute splits the raters into 2 to {MAX_LEVELS} groups (known: {', '.join(known[:8])}; "
            "the raters answered alike or not at all): nothing to compare"
        )
    ann = data.annotations
    out: dict[str, Any] = {"computable": True, "attributes": {}}
    for attr in attrs:
        frame = _with_rater_attr(ann, data, attr)
        out["attributes"][attr] = _views(data, frame, attr)
    pairs = list(itertools.combinations(attrs, 2))
    crossed: dict[str, Any] = {}
    for a, b in pairs[:MAX_INTERSECTIONS]:
        name = f"{a} × {b}"
        frame = _with_rater_attr(_with_rater_attr(ann, data, a), data, b)
        frame = frame.assign(**{name: frame[a].astype(str) + " × " + frame[b].astype(str)})
        if frame[name].nunique() >= 2:
            crossed[name] = _views(data, frame, name)
    if crossed:
        out["intersections"] = crossed
    # every attribute and intersection is one more test of "do these raters differ": with a dozen of
    # them one comes out below 0.05 by chance, so each view's joint tests are Holm-adjusted together
    family = {
        **out["attributes"],
        **{f"intersection {name}": views for name, views in crossed.items()},
    }
    for view in {v for views in family.values() for v in views}:
        _holm({name: views[view] for name, views in family.items() if view in views})
    out["multiple_comparisons"] = (
        "each view's joint tests over all rater attributes and their intersections are also given "
        "Holm-adjusted (p_value_holm), as one family"
    )
    if len(pairs) > MAX_INTERSECTIONS:
        out["intersections_note"] = (
            f"the first {MAX_INTERSECTIONS} of {len(pairs)} attribute pairs are crossed; for another, join "
            "the two attributes into one rater column before the analysis"
        )
    return out


# -- expert vs crowd -------------------------------------------------------------------------------


def _mode(values: pd.Series) -> float:
    counts = values.value_counts()
    if len(counts) > 1 and counts.iloc[0] == counts.iloc[1]:
        return float("nan")  # a tie: no majority
    return float(counts.index[0])


def _kappa(table: np.ndarray, items: int) -> dict[str, Any]:
    """Cohen's kappa of a crowd x expert table with its asymptotic 95 % interval (statsmodels). The
    interval is large-sample: on fewer than MIN_ALPHA_ITEMS items none is given and a warning says
    why. When both sides used one and the same label throughout, chance agreement is 1 and kappa
    is 0/0: null with the reason, never NaN."""
    from statsmodels.stats.inter_rater import cohens_kappa

    out: dict[str, Any] = {"cohens_kappa": None, "cohens_kappa_ci": None}
    total = table.sum()
    chance = float((table.sum(axis=0) * table.sum(axis=1)).sum() / total**2)
    one_label = [side for side, margin in (("crowd", table.sum(axis=1)), ("experts", table.sum(axis=0)))
                 if np.count_nonzero(margin) == 1]  # fmt: skip
    if chance >= 1.0:
        out["cohens_kappa_reason"] = (
            "undefined: crowd and experts gave one label throughout, so chance agreement is 1 (kappa = 0/0)"
        )
    elif one_label:
        # observed agreement then equals chance agreement whatever the other side did: kappa = 0 by
        # construction, which would read as "measured: agreement at chance"
        out["cohens_kappa_reason"] = (
            f"undefined: the {one_label[0]} gave one label throughout, so kappa is 0 by construction "
            "whatever the other side did; see the agreement and the table"
        )
    else:
        result = cohens_kappa(table)
        out["cohens_kappa"] = float(result.kappa)
        if items >= MIN_ALPHA_ITEMS and result.std_kappa > 0:
            out["cohens_kappa_ci"] = [float(result.kappa_low), float(result.kappa_upp)]
    if items < MIN_ALPHA_ITEMS:
        out["warning"] = (
            f"only {items} item{'s' if items != 1 else ''} with both labels: no interval on fewer than "
            f"{MIN_ALPHA_ITEMS} items, and kappa and alpha can swing widely with the next item"
        )
    return out


def expert_vs_crowd(
    crowd: pd.DataFrame, expert: pd.DataFrame, data: RatingData, *, n_boot: int = 1000, seed: int = 0
) -> dict[str, Any]:
    """Per item: the crowd's majority label against the experts' (majority) label, on the full scale
    and on the binarised view: exact agreement, Cohen's kappa, and alpha between the two."""

    def views() -> list[tuple[str, pd.DataFrame, pd.DataFrame, int]]:
        out = [("full_scale", crowd, expert, len(data.scale))]
        if data.binary:

            def binarise(f: pd.DataFrame) -> pd.DataFrame:
                f = f[~f["value"].isin(data.excluded)]
                return f.assign(value=f["value"].isin(data.positive).astype(int))

            out.append((f"binary_{data.positive_label}", binarise(crowd), binarise(expert), 2))
        return out

    result: dict[str, Any] = {
        "computable": True,
        "crowd_label": "plurality (ties: no majority, item left out)",
        "expert_label": "plurality of the experts (ties: item left out, counted apart)",
    }
    for name, c, e, k in views():
        cm = c.groupby("item_id")["value"].agg(_mode)
        em = e.groupby("item_id")["value"].agg(_mode)
        both = pd.concat([cm.rename("crowd"), em.rename("expert")], axis=1, join="inner")
        crowd_ties = int(both["crowd"].isna().sum())
        expert_ties = int((both["expert"].isna() & both["crowd"].notna()).sum())
        both = both.dropna().astype(int)
        if len(both) < 2:
            result[name] = not_computable("fewer than two items with both a crowd majority and an expert label")
            continue
        table = pd.crosstab(both["crowd"], both["expert"]).reindex(index=range(k), columns=range(k), fill_value=0)
        pair_counts = np.zeros((len(both), k))
        pair_counts[np.arange(len(both)), both["crowd"].to_numpy()] += 1
        pair_counts[np.arange(len(both)), both["expert"].to_numpy()] += 1
        level: Metric = data.default_level if name == "full_scale" else "nominal"
        result[name] = {
            "items": len(both),
            "items_without_majority": crowd_ties,
            "items_without_expert_majority": expert_ties,
            "agreement": float((both["crowd"] == both["expert"]).mean()),
            **_kappa(table.to_numpy(), len(both)),
            "alpha": small_sample(
                bootstrap_alpha(
                    pair_counts, level, n_boot=n_boot, seed=seed, values=data.scale_values if k > 2 else None
                )
            ),
            "alpha_level": level,
            "table": {"rows": "crowd majority", "columns": "expert", "counts": table.to_numpy().tolist()},
        }
    return result


def expert_section(data: RatingData, *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    """Within one dataset: raters whose expert attribute equals the expert value vs everyone else."""
    if data.expert is None or data.expert[0] not in data.raters.columns:
        return not_computable("no expert raters marked (pass --expert-col)")
    attr, value = data.expert
    is_expert = data.raters[attr].astype(str).str.casefold() == value.casefold()
    experts = set(data.raters.index[is_expert])
    ann = data.annotations
    mask = ann["rater_id"].isin(experts)
    if not mask.any() or mask.all():
        return not_computable(f"needs both expert ({attr} = {value}) and other raters")
    out = expert_vs_crowd(ann[~mask], ann[mask], data, n_boot=n_boot, seed=seed)
    out["experts"] = f"{attr} = {value} ({len(experts)} raters)"
    return out


# -- STAR-specific ---------------------------------------------------------------------------------


def arbitration_section(data: RatingData) -> dict[str, Any]:
    if data.format != "star":
        return not_computable("arbitration exists only in STAR exports")
    # stable: the two annotations of a dialogue keep their order (first, second annotator)
    ann = data.annotations.sort_values(["item_id"], kind="stable")
    arb = data.ratings[data.ratings["kind"] == "arbitration"].set_index("item_id")
    pairs = ann.groupby("item_id")["value"].apply(list)
    pairs = pairs[pairs.apply(len) == 2]
    if pairs.empty:
        return not_computable("no dialogue has two annotations")
    triggered = pairs[pairs.apply(lambda v: abs(v[0] - v[1]) >= 2)]
    sided = {"annotator1": 0, "annotator2": 0, "between": 0, "missing": 0}
    decisions: list[tuple[str, str | None]] = []  # (side, arbitrator) of each arbitrated dialogue
    several = 0  # a dialogue arbitrated twice (two exports merged): no one verdict, left out
    verdicts = arb["value"].groupby(level=0).agg(list)
    deciders = arb["rater_id"].groupby(level=0).agg(list)
    for item_id, (a, b) in triggered.items():
        if item_id not in verdicts.index:
            sided["missing"] += 1
            continue
        if len(verdicts.loc[item_id]) > 1:
            several += 1
            continue
        r = int(verdicts.loc[item_id][0])
        da, db = abs(r - a), abs(r - b)
        side = "annotator1" if da < db else "annotator2" if db < da else "between"
        sided[side] += 1
        who = deciders.loc[item_id][0]
        decisions.append((side, None if who is None or pd.isna(who) else str(who)))
    # who annotated the dialogues rated twice: a handful of annotators make every divergence theirs
    raters = ann[ann["item_id"].isin(pairs.index)]["rater_id"]
    annotators = None if raters.isna().any() else int(raters.nunique())
    trigger_ci: list[float] | None = None
    trigger_note: str | None = None
    if annotators is not None and annotators < MIN_CLUSTERS:
        trigger_note = (
            f"the {len(pairs)} dialogues were rated by {annotators} annotator{'s' if annotators != 1 else ''}: whether "
            "two ratings diverge depends on who rated, so the rate describes them, and no interval is given "
            f"on fewer than {MIN_CLUSTERS}"
        )
    else:
        # a share of a few dozen dialogues is not a precise figure: Wilson's interval says how wide
        trigger_ci = [float(x) for x in proportion_confint(len(triggered), len(pairs), method="wilson")]
    out: dict[str, Any] = {
        "computable": True,
        "dialogues_with_two_annotations": len(pairs),
        "arbitration_triggered": len(triggered),
        "trigger_rate": float(len(triggered) / len(pairs)),
        "trigger_rate_ci95": trigger_ci,
        **({"trigger_rate_note": trigger_note} if trigger_note else {}),
        "arbitrator_sided_with": sided,
        "arbitrator_sided_with_shares": sided_shares(sided, [who for _, who in decisions], [s for s, _ in decisions]),
        "note": "sided with = the annotator whose rating is closer to the arbitrator's",
    }
    if several:
        out["arbitrated_more_than_once"] = several
    return out


def _no_arbitrator_interval(n: int, arbitrators: list[str | None]) -> str | None:
    """Why the "sided with" shares of ``n`` decisions get no interval although there are enough of
    them: the decisions of one arbitrator are not independent, so the interval is clustered by
    arbitrator, and that needs every decision's arbitrator and, when one decided several,
    :data:`~psychoalign.intervals.MIN_CLUSTERS` arbitrators. None: an interval can be given."""
    unknown = sum(1 for a in arbitrators if a is None)
    if unknown:
        return (
            f"{unknown} of {n} arbitrations name no arbitrator: one arbitrator's decisions are not independent "
            "and cannot be clustered without the ids; export the arbitrator_id column"
        )
    count = len(set(arbitrators))
    if count < n and count < MIN_ARBITRATORS:
        who, them = ("one arbitrator", "that arbitrator") if count == 1 else (f"{count} arbitrators", "them")
        return (
            f"{who} decided all {n}: one arbitrator's decisions are not independent, and an interval clustered by "
            f"arbitrator needs at least {MIN_ARBITRATORS}; these shares describe {them}"
        )
    return None


def sided_shares(
    sided: dict[str, int], arbitrators: list[str | None] | None = None, sides: list[str] | None = None
) -> dict[str, Any]:
    """Each "sided with" count as a share of the arbitrated dialogues (``n``), with its 95 %
    interval. ``arbitrators`` and ``sides``: who decided each arbitrated dialogue and the side
    taken. One arbitrator decides many dialogues, and their decisions are not independent (an
    arbitrator who leans to the first annotator leans so throughout), so the interval is clustered
    by arbitrator (:func:`~psychoalign.intervals.repeated_rows_ci`: Wilson's on the rows when each
    arbitrator decided once, else Wilson's on the effective n from the cluster-robust variance,
    ``n_eff``, ``ci_method`` "wilson-clustered"). No interval, with ``no_interval`` saying why: on
    fewer than :data:`MIN_ALPHA_ITEMS` arbitrated dialogues (the agreement's small-sample rule,
    with a ``warning``), on fewer than :data:`~psychoalign.intervals.MIN_CLUSTERS` arbitrators
    when one decided several, or when an arbitration names no arbitrator (also a ``warning``).
    None arbitrated: no share at all (``reason``). Without ``arbitrators`` (a caller that has only
    the counts) every decision is taken to have its own unnamed arbitrator: no interval."""
    n = sided["annotator1"] + sided["annotator2"] + sided["between"]
    out: dict[str, Any] = {"n": n, "min_n": MIN_ALPHA_ITEMS}
    if n == 0:
        out["reason"] = "no dialogue arbitrated yet: no share to give"
        return out
    if arbitrators is None or sides is None:
        arbitrators, sides = [None] * n, []
    why = f"fewer than {MIN_ALPHA_ITEMS}" if n < MIN_ALPHA_ITEMS else _no_arbitrator_interval(n, arbitrators)
    if all(a is not None for a in arbitrators):
        out["arbitrators"] = len(set(arbitrators))
    for side in ("annotator1", "annotator2", "between"):
        k = sided[side]
        entry: dict[str, Any] = {"count": k, "share": k / n, "ci95": None}
        if why is None:
            got = repeated_rows_ci([s == side for s in sides], [str(a) for a in arbitrators])
            assert got is not None  # _no_arbitrator_interval let it through: enough arbitrators
            low, high, n_eff, method = got
            entry["ci95"] = [float(low), float(high)]
            if method != "wilson":
                entry.update(n_eff=round(n_eff, 1), ci_method=method)
        out[side] = entry
    if why is not None:
        out["no_interval"] = why
    if n < MIN_ALPHA_ITEMS:
        out["warning"] = (
            f"only {n} dialogue{'s' if n != 1 else ''} arbitrated: no interval on fewer than {MIN_ALPHA_ITEMS}, "
            "and these shares can swing widely with the next arbitration"
        )
    elif why is not None:
        out["warning"] = why
    return out


def ingroup_section(data: RatingData) -> dict[str, Any]:
    """STAR: broken ratings by in- vs out-group annotators, overall and per rule (paper Table 2,
    Figures 4-5), and attack success by red-teamer status (Table 8) and by target group (§5.2: odds
    ratios, ANOVA view). Every test is a clustered regression; raw rates are description."""
    if data.format != "star":
        return not_computable("in-/out-group status exists only in STAR exports (see 'groups' for rater attributes)")
    ann = data.annotations
    have = ann[ann["in_group"].notna()]
    if have.empty:
        return not_computable("no annotator in-/out-group status (no group-targeted dialogues)")
    have = have.assign(annotator=np.where(have["in_group"].astype(bool), "in-group", "out-group"))
    out: dict[str, Any] = {"computable": True, "annotators_overall": _views(data, have, "annotator", "out-group")}
    per_rule: dict[str, dict[str, Any]] = {}
    if "rule" in data.items.columns:
        merged = have.merge(data.items[["item_id", "rule"]], on="item_id")
        for rule, part in merged.groupby("rule"):
            per_rule[str(rule)] = _views(data, part, "annotator", "out-group")
        for view in {v for r in per_rule.values() for v in r}:
            sub = {r: v[view] for r, v in per_rule.items() if view in v}
            _holm(sub)
    out["annotators_by_rule"] = per_rule
    success = _attack_success(data)
    if success is not None and (mixed := mixed_targets(data)):
        out["attack_success_by_red_teamer"] = not_computable(mixed)
        out["attack_success_by_target_group"] = not_computable(mixed)
        success = None
    if success is not None:
        s = success[success["red_teamer_in_group"].notna()]
        if not s.empty:
            s = s.assign(red_teamer=np.where(s["red_teamer_in_group"].astype(bool), "in-group", "out-group"))
            out["attack_success_by_red_teamer"] = compare_binary(
                s, "red_teamer", s["broken"].astype(int).to_numpy(), "out-group"
            )
        if "target_group" in success.columns:
            t = success[success["target_group"].notna()]
            if not t.empty:
                out["attack_success_by_target_group"] = compare_binary(
                    t, "target_group", t["broken"].astype(int).to_numpy()
                )
    out["multiple_comparisons"] = "per-rule p-values are also given Holm-adjusted (p_value_holm)"
    out["design"] = (
        "annotator comparisons: one row per rating, clustered by annotator and dialogue; attack success: one row per "
        "dialogue, clustered by red teamer"
    )
    return out


def mixed_targets(data: RatingData) -> str | None:
    """Why a figure about the target cannot pool these dialogues, or None: attack success and
    tension are properties of one target, so dialogues that red-teamed several (two campaigns'
    exports concatenated, a model swapped between campaigns) would give one rate of no model."""
    targets = list(targets_of(data))
    if len(targets) < 2:
        return None
    return mixed_reason(targets, "the dialogues red-teamed", "and a rate pooled over them describes no one model")


def _attack_success(data: RatingData) -> pd.DataFrame | None:
    """Per dialogue: broken if the arbitrator says so, else if both annotators do (majority of two).
    ``rater_id`` is the red teamer (the cluster); ``item_id`` the dialogue."""
    if "red_teamer_in_group" not in data.items.columns and "target_group" not in data.items.columns:
        return None
    flagged = data.ratings.assign(pos=data.ratings["value"].isin(data.positive).astype(float))
    by_annotators = flagged[flagged["kind"] == "annotation"].groupby("item_id")["pos"].mean()
    by_arbitrator = flagged[flagged["kind"] == "arbitration"].groupby("item_id")["pos"].mean()
    share = by_annotators.copy()
    share.update(by_arbitrator)  # the arbitrator's rating decides where there is one
    frame = pd.DataFrame({"item_id": share.index.astype(str), "broken": (share > 0.5).to_numpy()})
    if frame.empty:
        return None
    cols = [c for c in ("red_teamer_in_group", "target_group", "red_teamer_id") if c in data.items.columns]
    frame = frame.merge(data.items[["item_id", *cols]], on="item_id")
    frame["rater_id"] = frame["red_teamer_id"] if "red_teamer_id" in frame.columns else None
    if "red_teamer_in_group" not in frame.columns:
        frame["red_teamer_in_group"] = None
    return frame


#: Below this many dialogues expected per group, the chi-square approximation does not hold (the
#: usual rule; at 5 vs 1 it gave p = 0.10 where the exact p is 0.22): the p-value is exact.
MIN_EXPECTED = 5.0
#: Multinomial draws behind the exact (Monte Carlo) p-value: its standard error is at most 0.0025.
EXACT_DRAWS = 40_000


def even_spread_test(counts: np.ndarray, seed: int = 0) -> dict[str, Any]:
    """Counts per group against an even spread: Pearson's chi-square, its p-value from the chi-square
    distribution when every expected count is at least MIN_EXPECTED, else from seeded multinomial
    draws under the even spread (the exact test's p, to Monte Carlo error)."""
    total, k = int(counts.sum()), len(counts)
    expected = total / k
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    if expected >= MIN_EXPECTED:
        return {
            "test": "chi-square goodness of fit",
            "chi2": chi2,
            "p_value": float(sps.chi2.sf(chi2, k - 1)),
            "expected_per_group": expected,
        }
    draws = np.random.default_rng(seed).multinomial(total, np.full(k, 1.0 / k), size=EXACT_DRAWS)
    simulated = ((draws - expected) ** 2 / expected).sum(axis=1)
    at_least = int((simulated >= chi2 - 1e-9).sum())
    return {
        "test": (
            f"exact multinomial test ({EXACT_DRAWS:,} seeded draws): fewer than {MIN_EXPECTED:g} dialogues "
            "expected per group, where the chi-square approximation does not hold"
        ),
        "chi2": chi2,
        "p_value": (at_least + 1) / (EXACT_DRAWS + 1),
        "expected_per_group": expected,
    }


def coverage_section(data: RatingData) -> dict[str, Any]:
    """Dialogues per cell and per target group against even quotas: chi-square goodness of fit, or
    the exact test on few dialogues (:func:`even_spread_test`)."""
    if data.format != "star" or "cell" not in data.items.columns:
        return not_computable("coverage needs a STAR export (instruction cells)")
    out: dict[str, Any] = {"computable": True}
    for column in ("rule", "target_group"):
        if column not in data.items.columns:
            continue
        counts = data.items[column].dropna().value_counts().sort_index()
        if len(counts) >= 2:
            out[column] = {
                "counts": {str(k): int(v) for k, v in counts.items()},
                **even_spread_test(counts.to_numpy(dtype=np.float64)),
                "expected": "even",
                "groups": len(counts),
                "note": "over the groups seen: a group with no dialogue is not in the export, so it is not counted",
            }
    cells = data.items["cell"].value_counts()
    out["cells"] = {"observed": len(cells), "min": int(cells.min()), "max": int(cells.max())}
    return out
