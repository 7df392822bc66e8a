"""The STAR analyses (paper §5-6): agreement, arbitration, in-/out-group, intersectional models, coverage.

Each function returns a plain dict for the JSON report. A section that cannot be computed says so
(``{"computable": False, "reason": …}``) instead of failing the report.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as sps

from .agreement import Metric, bootstrap_alpha, item_disagreement
from .data import RatingData

__all__ = [
    "agreement_section",
    "arbitration_section",
    "counts_matrix",
    "coverage_section",
    "group_comparison",
    "ingroup_section",
    "intersectional_section",
    "not_computable",
]

MIN_GROUP = 10  # fewer ratings than this in a group: no test


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


def _alphas(data: RatingData, ratings: pd.DataFrame, n_boot: int, seed: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    full, _ = counts_matrix(ratings, len(data.scale))
    if data.ordinal:
        out["ordinal"] = dict(bootstrap_alpha(full, "ordinal", n_boot=n_boot, seed=seed))
    else:
        out["nominal_full_scale"] = dict(bootstrap_alpha(full, "nominal", n_boot=n_boot, seed=seed))
    binary, _ = counts_matrix(ratings, len(data.scale), data.positive, data.excluded)
    out[f"nominal_{data.positive_label}"] = dict(bootstrap_alpha(binary, "nominal", n_boot=n_boot, seed=seed))
    return out


def agreement_section(data: RatingData, *, n_boot: int = 1000, seed: int = 0) -> dict[str, Any]:
    ann = data.annotations
    if ann.empty:
        return not_computable("no ratings in this dataset")
    per_item = ann.groupby("item_id").size()
    if per_item.max() < 2:
        return not_computable("one rating per item: Krippendorff's alpha is undefined")
    section: dict[str, Any] = {"computable": True, "overall": _alphas(data, ann, n_boot, seed)}
    breakdowns: dict[str, dict[str, Any]] = {}
    for column in ("area", "rule", "target_group", "category"):
        if column in data.items.columns and data.items[column].notna().any():
            merged = ann.merge(data.items[["item_id", column]], on="item_id")
            breakdowns[column] = {}
            for value, part in merged.groupby(column):
                if part.groupby("item_id").size().max() >= 2:
                    breakdowns[column][str(value)] = _alphas(data, part, n_boot, seed)
    if ann["rater_group"].notna().any():
        breakdowns["rater_group (within)"] = {
            str(g): _alphas(data, part, n_boot, seed) for g, part in ann.groupby("rater_group")
        }
    section["by"] = breakdowns
    metric: Metric = "ordinal" if data.ordinal else "nominal"
    counts, ids = counts_matrix(ann, len(data.scale))
    scores = item_disagreement(counts, metric)
    section["item_disagreement"] = {
        "definition": "D_o(item) / D_e(all ratings) = 1 - alpha_item, " + metric + " metric",
        "items": {i: (None if math.isnan(s) else float(s)) for i, s in zip(ids, scores, strict=True)},
        "mean": float(np.nanmean(scores)) if np.isfinite(scores).any() else None,
    }
    return section


def arbitration_section(data: RatingData) -> dict[str, Any]:
    if data.format != "star":
        return not_computable("arbitration exists only in STAR exports")
    ann = data.annotations.sort_values(["item_id"])
    arb = data.ratings[data.ratings["kind"] == "arbitration"].set_index("item_id")["value"]
    pairs = ann.groupby("item_id")["value"].apply(list)
    pairs = pairs[pairs.apply(len) == 2]
    if pairs.empty:
        return not_computable("no dialogue has two annotations")
    triggered = pairs[pairs.apply(lambda v: abs(v[0] - v[1]) >= 2)]
    sided = {"annotator1": 0, "annotator2": 0, "between": 0, "missing": 0}
    for item_id, (a, b) in triggered.items():
        if item_id not in arb.index:
            sided["missing"] += 1
            continue
        r = int(arb.loc[item_id])
        da, db = abs(r - a), abs(r - b)
        sided["annotator1" if da < db else "annotator2" if db < da else "between"] += 1
    return {
        "computable": True,
        "dialogues_with_two_annotations": len(pairs),
        "arbitration_triggered": len(triggered),
        "trigger_rate": float(len(triggered) / len(pairs)),
        "arbitrator_sided_with": sided,
        "note": "sided with = the annotator whose rating is closer to the arbitrator's",
    }


def group_comparison(successes: tuple[int, int], totals: tuple[int, int], labels: tuple[str, str]) -> dict[str, Any]:
    """Two proportions: difference, Wald 95% CI, two-sided z-test (statsmodels), Cohen's h."""
    from statsmodels.stats.proportion import proportions_ztest

    if min(totals) < MIN_GROUP:
        return not_computable(
            f"fewer than {MIN_GROUP} ratings in a group ({labels[0]}: {totals[0]}, {labels[1]}: {totals[1]})"
        )
    p1, p2 = successes[0] / totals[0], successes[1] / totals[1]
    if (p1 in (0, 1)) and p1 == p2:
        z, p = 0.0, 1.0
    else:
        z, p = proportions_ztest(np.array(successes), np.array(totals))
    se = math.sqrt(p1 * (1 - p1) / totals[0] + p2 * (1 - p2) / totals[1])
    h = 2 * math.asin(math.sqrt(p2)) - 2 * math.asin(math.sqrt(p1))
    return {
        "computable": True,
        labels[0]: {"rate": p1, "n": totals[0]},
        labels[1]: {"rate": p2, "n": totals[1]},
        "difference": p2 - p1,
        "ci95": [p2 - p1 - 1.96 * se, p2 - p1 + 1.96 * se],
        "z": float(z),
        "p_value": float(p),
        "cohens_h": h,
    }


def _holm(results: dict[str, dict[str, Any]]) -> None:
    from statsmodels.stats.multitest import multipletests

    keys = [k for k, v in results.items() if v.get("computable")]
    if len(keys) > 1:
        adjusted = multipletests([results[k]["p_value"] for k in keys], method="holm")[1]
        for k, adj in zip(keys, adjusted, strict=True):
            results[k]["p_value_holm"] = float(adj)


def ingroup_section(data: RatingData) -> dict[str, Any]:
    """Rate of positive (broken/unsafe) ratings by annotator group: in- vs out-group for STAR
    (overall and per rule), rater group for sets like DiaSafety-CC; attack success by red-teamer
    status for STAR."""
    ann = data.annotations
    ann = ann[~ann["value"].isin(data.excluded)]
    out: dict[str, Any] = {}
    if data.format == "star":
        have = ann[ann["in_group"].notna()]
        if have.empty:
            return not_computable("no annotator in-/out-group status (no group-targeted dialogues)")
        pos = have["value"].isin(data.positive)
        out["annotators_overall"] = _compare(have, pos, "in_group", (False, True), ("out-group", "in-group"))
        per_rule: dict[str, dict[str, Any]] = {}
        merged = have.merge(data.items[["item_id", "rule"]], on="item_id")
        for rule, part in merged.groupby("rule"):
            per_rule[str(rule)] = _compare(
                part, part["value"].isin(data.positive), "in_group", (False, True), ("out-group", "in-group")
            )
        _holm(per_rule)
        out["annotators_by_rule"] = per_rule
        success = _attack_success(data)
        if success is not None and success["red_teamer_in_group"].notna().any():
            s = success[success["red_teamer_in_group"].notna()]
            out["attack_success_by_red_teamer"] = _compare(
                s, s["broken"], "red_teamer_in_group", (False, True), ("out-group", "in-group")
            )
        out["multiple_comparisons"] = "per-rule p-values are also given Holm-adjusted (p_value_holm)"
        return {"computable": True, **out}
    groups = sorted(ann["rater_group"].dropna().unique())
    if len(groups) < 2:
        return not_computable("no rater groups (no demographics) in this dataset")
    a, b = groups[:2]
    two = ann[ann["rater_group"].isin([a, b])]
    return {
        "computable": True,
        "rater_groups": _compare(two, two["value"].isin(data.positive), "rater_group", (a, b), (a, b)),
    }


def _compare(
    frame: pd.DataFrame, positive: pd.Series, column: str, values: tuple[Any, Any], labels: tuple[str, str]
) -> dict[str, Any]:
    s = (int(positive[frame[column] == values[0]].sum()), int(positive[frame[column] == values[1]].sum()))
    n = (int((frame[column] == values[0]).sum()), int((frame[column] == values[1]).sum()))
    return group_comparison(s, n, labels)


def _attack_success(data: RatingData) -> pd.DataFrame | None:
    """Per dialogue: broken if the arbitrator says so, else if both annotators do (majority of two)."""
    if "red_teamer_in_group" not in data.items.columns:
        return None
    flagged = data.ratings.assign(pos=data.ratings["value"].isin(data.positive).astype(float))
    by_annotators = flagged[flagged["kind"] == "annotation"].groupby("item_id")["pos"].mean()
    by_arbitrator = flagged[flagged["kind"] == "arbitration"].groupby("item_id")["pos"].mean()
    share = by_annotators.copy()
    share.update(by_arbitrator)  # the arbitrator's rating decides where there is one
    frame = pd.DataFrame({"item_id": share.index, "broken": (share > 0.5).to_numpy()})
    if frame.empty:
        return None
    return frame.merge(data.items[["item_id", "red_teamer_in_group"]], on="item_id")


def intersectional_section(data: RatingData) -> dict[str, Any]:
    """Logistic regression of rule-broken on race + gender vs race + gender + race x gender
    (paper §6.2.3): likelihood-ratio test of the nested models, odds ratios with 95% CIs."""
    import statsmodels.formula.api as smf

    needed = {"target_race", "target_gender"}
    if data.format != "star" or not needed <= set(data.items.columns):
        return not_computable("needs STAR dialogues that target race x gender intersections")
    frame = data.annotations.merge(data.items[["item_id", "target_race", "target_gender"]], on="item_id")
    frame = frame.dropna(subset=["target_race", "target_gender"])
    frame = frame[~frame["value"].isin(data.excluded)]
    if len(frame) < 40 or frame["target_race"].nunique() < 2 or frame["target_gender"].nunique() < 2:
        return not_computable(f"too few intersectional ratings ({len(frame)}) or levels for the models")
    frame = frame.assign(broken=frame["value"].isin(data.positive).astype(int))
    try:
        base = smf.logit("broken ~ C(target_race) + C(target_gender)", data=frame).fit(disp=False)
        full = smf.logit("broken ~ C(target_race) * C(target_gender)", data=frame).fit(disp=False)
    except Exception as exc:  # perfect separation, singular matrix: report, do not crash
        return not_computable(f"the models could not be fitted: {type(exc).__name__}: {exc}")
    lr = 2 * (full.llf - base.llf)
    df = int(full.df_model - base.df_model)
    ci = np.exp(full.conf_int())
    odds = {
        name: {
            "odds_ratio": float(np.exp(coef)),
            "ci95": [float(ci.loc[name, 0]), float(ci.loc[name, 1])],
            "p_value": float(full.pvalues[name]),
        }
        for name, coef in full.params.items()
    }
    return {
        "computable": True,
        "n_ratings": len(frame),
        "main_effects": {"llf": float(base.llf), "aic": float(base.aic)},
        "with_interaction": {"llf": float(full.llf), "aic": float(full.aic)},
        "lr_test": {"statistic": float(lr), "df": df, "p_value": float(sps.chi2.sf(lr, df)) if df > 0 else None},
        "odds_ratios": odds,
    }


def coverage_section(data: RatingData) -> dict[str, Any]:
    """Dialogues per cell and per target group against even quotas, chi-square goodness of fit."""
    if data.format != "star" or "cell" not in data.items.columns:
        return not_computable("coverage needs a STAR export (instruction cells)")
    out: dict[str, Any] = {"computable": True}
    for column in ("rule", "target_group"):
        counts = data.items[column].dropna().value_counts().sort_index()
        if len(counts) >= 2:
            chi = sps.chisquare(counts.to_numpy())
            out[column] = {
                "counts": {str(k): int(v) for k, v in counts.items()},
                "chi2": float(chi.statistic),
                "p_value": float(chi.pvalue),
                "expected": "even",
            }
    cells = data.items["cell"].value_counts()
    out["cells"] = {"observed": len(cells), "min": int(cells.min()), "max": int(cells.max())}
    return out
