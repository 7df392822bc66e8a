"""Intersectional models (paper §6.2.3) under the tiny-group rule of the group comparisons.

Rule-broken is regressed on the dialogue's target race, gender and race × gender. Each race ×
gender cell is a group like any other: a cell with fewer than ``MIN_GROUP`` ratings or
``MIN_GROUP_RATERS`` distinct annotators is described (its rate, ratings and raters), not
tested — its interaction coefficient would rest on one to four raters' leniency, and the
cluster-robust variance of such a coefficient collapses. A cell whose every rating is broken, or
none is, is perfectly separated: its odds ratio is infinite, so it is reported as such and left
out of the model rather than printed as an astronomically large odds ratio. The model then runs
on the cells left, keeping only the interaction terms those cells identify.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .data import RatingData
from .models import design, fit_binary
from .stats import MIN_GROUP, MIN_GROUP_RATERS, not_computable

#: Fewer ratings than this (in all, or in a rule) after the rule: no model.
MIN_MODEL_RATINGS = 40


def screen_cells(frame: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, dict[str, Any]]]:
    """Every race × gender cell described (rate, ratings, raters) with its ``status``: ``tested``,
    ``described`` (too few ratings or raters) or ``separated`` (every rating at one end), and why;
    and the rows of the tested cells. ``frame`` has target_race, target_gender, broken, rater_id."""
    label = frame["target_race"].astype(str) + " × " + frame["target_gender"].astype(str)
    raters_known = bool(frame["rater_id"].notna().all())
    outcome_varies = frame["broken"].nunique() > 1
    cells: dict[str, dict[str, Any]] = {}
    tested: list[str] = []
    for cell, part in frame.groupby(label):
        n, k = len(part), (int(part["rater_id"].nunique()) if raters_known else None)
        entry: dict[str, Any] = {"rate": float(part["broken"].mean()), "n_ratings": n, "n_raters": k}
        if n < MIN_GROUP:
            entry.update(status="described", why=f"{n} rating{'s' if n != 1 else ''}")
        elif k is not None and k < MIN_GROUP_RATERS:
            entry.update(status="described", why=f"{k} rater{'s' if k != 1 else ''}")
        elif outcome_varies and part["broken"].nunique() == 1:
            end = int(part["broken"].iloc[0])
            entry.update(
                status="separated",
                why=f"perfect separation: every rating is {end}; its odds ratio is infinite, so the cell is "
                "described, not tested",
            )
        else:
            entry["status"] = "tested"
            tested.append(str(cell))
        cells[str(cell)] = entry
    return frame[label.isin(tested).to_numpy()], cells


def _identified(base: pd.DataFrame, inter: pd.DataFrame) -> pd.DataFrame:
    """The interaction columns the remaining cells identify: a column that adds no rank to the
    design (a cell left out can leave one collinear with the main effects) is dropped."""
    kept: list[str] = []
    start = np.column_stack([np.ones(len(base)), base.to_numpy()])
    for col in inter.columns:
        trial = np.column_stack([start, inter[[*kept, col]].to_numpy()])
        if np.linalg.matrix_rank(trial) == trial.shape[1]:
            kept.append(str(col))
    return inter[kept]


def _fit(frame: pd.DataFrame, covariates: pd.DataFrame | None) -> dict[str, Any]:
    race = design(frame, "target_race", prefix="race")
    gender = design(frame, "target_gender", prefix="gender")
    inter = pd.DataFrame(
        {f"{r}:{g}": race[r] * gender[g] for r in race.columns for g in gender.columns}, index=frame.index
    )
    inter = inter.loc[:, inter.sum() > 0]
    mains = [race, gender] if covariates is None else [covariates, race, gender]
    inter = _identified(pd.concat(mains, axis=1), inter)
    y = frame["broken"].to_numpy()
    exog_x = pd.concat([*mains, inter], axis=1)
    if inter.shape[1] == 0:  # the cells left identify no interaction: main effects only
        fit = fit_binary(y, exog_x, frame, test=[*race.columns, *gender.columns])
        fit.pop("joint_test")
        fit["interaction_test"] = not_computable("the tested cells identify no race × gender interaction")
    else:
        fit = fit_binary(y, exog_x, frame, test=list(inter.columns))
        fit["interaction_test"] = fit.pop("joint_test")
    main = fit_binary(y, pd.concat(mains, axis=1), frame, test=[*race.columns, *gender.columns])
    fit["main_effects_test"] = {**main["joint_test"], "of": "race and gender terms, model without interaction"}
    fit["reference"] = {
        "race": str(frame["target_race"].value_counts().index[0]),
        "gender": str(frame["target_gender"].value_counts().index[0]),
    }
    return fit


def _model(frame: pd.DataFrame, covariates: bool) -> dict[str, Any]:
    """The tiny-group rule on the cells, then the model on the tested ones (with the cells' table)."""
    part, cells = screen_cells(frame)
    out: dict[str, Any]
    if frame["broken"].nunique() < 2:  # a rule whose every rating is one outcome
        out = no_variance(frame, "broken")
    elif len(part) < MIN_MODEL_RATINGS or part["target_race"].nunique() < 2 or part["target_gender"].nunique() < 2:
        out = not_computable(
            f"too few ratings ({len(part)}) or levels in the cells that can be tested "
            f"({MIN_GROUP}+ ratings from {MIN_GROUP_RATERS}+ raters, not perfectly separated)"
        )
    else:
        rules = design(part, "rule") if covariates and "rule" in part and part["rule"].nunique() > 1 else None
        try:
            out = _fit(part, rules)
        except Exception as exc:  # a singular design the screen did not foresee: report, do not crash
            out = not_computable(f"the model could not be fitted: {type(exc).__name__}: {exc}")
    out["cells"] = cells
    small = {c: e["why"] for c, e in cells.items() if e["status"] == "described"}
    if small:
        out["not_tested"] = (
            f"cells with fewer than {MIN_GROUP} ratings or {MIN_GROUP_RATERS} raters are described only: "
            + ", ".join(f"{c} ({why})" for c, why in small.items())
        )
    separated = {c: e["why"] for c, e in cells.items() if e["status"] == "separated"}
    if separated:
        out["separation"] = separated
    return out


def no_variance(frame: pd.DataFrame, label: str) -> dict[str, Any]:
    """Not computable: every rating has one outcome. A logistic model fitted anyway does not
    converge and printed odds ratios of 4 with p = 2e-9 on 240 ratings that were all broken."""
    end = "" if int(frame["broken"].iloc[0]) else "not "
    return not_computable(
        f"every one of the {len(frame)} ratings is {end}{label}: the outcome does not vary, so there is "
        "nothing to model (no odds ratio, interval or p-value)"
    )


def intersectional_section(data: RatingData) -> dict[str, Any]:
    """Logistic regression of rule-broken on target race, gender and race x gender (paper §6.2.3),
    per rule and pooled (pooled: rule as a covariate). The interaction is tested with a joint
    Wald F test on the interaction terms using rater- and dialogue-clustered standard errors (a
    likelihood-ratio test would assume independent ratings); cells too small to test, or perfectly
    separated, are described instead (module doc)."""
    needed = {"target_race", "target_gender"}
    if data.format != "star" or not needed <= set(data.items.columns):
        return not_computable("needs STAR dialogues that target race x gender intersections")
    cols = ["item_id", "target_race", "target_gender", *(["rule"] if "rule" in data.items.columns else [])]
    frame = data.annotations.merge(data.items[cols], on="item_id")
    frame = frame.dropna(subset=["target_race", "target_gender"])
    frame = frame[~frame["value"].isin(data.excluded)]
    if len(frame) < MIN_MODEL_RATINGS or frame["target_race"].nunique() < 2 or frame["target_gender"].nunique() < 2:
        return not_computable(f"too few intersectional ratings ({len(frame)}) or levels for the models")
    frame = frame.assign(broken=frame["value"].isin(data.positive).astype(int))
    if frame["broken"].nunique() < 2:  # a model of a constant fits no coefficient: its p-values are noise
        return no_variance(frame, data.positive_label)
    out: dict[str, Any] = {
        "computable": True,
        "method": (
            "logistic regression broken ~ race + gender + race×gender (treatment coding, most frequent level as "
            "reference); interaction tested with a joint Wald F test, SEs clustered by annotator and dialogue; "
            "per rule, and pooled over rules with rule as a covariate; a race × gender cell with fewer than "
            f"{MIN_GROUP} ratings or {MIN_GROUP_RATERS} annotators, or perfectly separated, is described, not tested"
        ),
        "n_ratings": len(frame),
        "pooled": _model(frame, covariates=True),
    }
    per_rule: dict[str, Any] = {}
    if "rule" in frame.columns:
        for rule, part in frame.groupby("rule"):
            if (
                len(part) < MIN_MODEL_RATINGS
                or part["target_race"].nunique() < 2
                or part["target_gender"].nunique() < 2
            ):
                per_rule[str(rule)] = not_computable(f"too few intersectional ratings ({len(part)}) or levels")
                continue
            per_rule[str(rule)] = _model(part, covariates=False)
    out["by_rule"] = per_rule
    return out
