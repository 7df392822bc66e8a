"""Rating data with rater and item effects, to measure the false-positive rate of group comparisons.

Each rating is Bernoulli(logit⁻¹(b + u_rater + v_item + effect · group)), with rater leniency
u ~ N(0, rater_sd²) and item difficulty v ~ N(0, item_sd²). Two designs:

* ``star``: the STAR in-/out-group comparison. Raters and items (dialogues) each belong to one of
  ``n_groups`` demographic groups (items evenly, raters unevenly: pools of very different sizes,
  as recruitment gives); each item gets ``per_item`` annotators, each drawn from the
  item's target group with probability ``in_share`` (STAR: 62 %) and from the other groups
  otherwise; the compared variable is "annotator is in-group", which varies within raters.
* ``attribute``: a rater attribute (e.g. gender) shared by half of the raters; each item is rated
  by ``per_item`` raters drawn at random; the compared variable is constant within raters. With
  ``rare = K``, K of the raters form a third group ("rare") beside the two balanced ones: the
  POPQUORN case of a demographic answered by one or a few raters.

Data generation is vectorised (numpy), so hundreds of replications run in seconds; the analysis
under test is the report's own code path (``stats.compare_binary``).
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pandas as pd
from scipy import stats as sps

Design = Literal["star", "attribute"]


def simulate(
    rng: np.random.Generator,
    design: Design = "star",
    *,
    n_items: int = 300,
    n_raters: int = 60,
    per_item: int = 2,
    rater_sd: float = 1.0,
    item_sd: float = 1.0,
    base: float = -0.4,
    effect: float = 0.0,
    n_groups: int = 8,
    in_share: float = 0.62,
    points: int = 2,
    rare: int = 0,
) -> pd.DataFrame:
    """One simulated dataset: columns item_id, rater_id, group (bool), attr (the group's label) and
    y (0/1, or 0..points-1 on a Likert scale)."""
    u = rng.normal(0.0, rater_sd, n_raters)
    v = rng.normal(0.0, item_sd, n_items)
    items = np.repeat(np.arange(n_items), per_item)
    if design == "star":
        # unequal pools, as in recruitment: per_item raters per group, the rest with weights 1..n_groups
        floor = np.repeat(np.arange(n_groups), per_item)
        weights = np.arange(1, n_groups + 1, dtype=float)
        rest = rng.choice(n_groups, max(0, n_raters - floor.size), p=weights / weights.sum())
        rater_group = np.concatenate([floor, rest])[:n_raters]
        item_group = rng.integers(0, n_groups, n_items)
        members = [np.flatnonzero(rater_group == g) for g in range(n_groups)]
        others = [np.flatnonzero(rater_group != g) for g in range(n_groups)]
        want_in = rng.random(items.size) < in_share
        target = item_group[items]
        raters = np.empty(items.size, dtype=int)
        todo = np.ones(items.size, dtype=bool)
        rounds = 0
        while todo.any():  # draw, then redraw the slots that repeat a rater of the same item
            pick = rng.random(items.size)
            for g in range(n_groups):
                here = todo & (target == g)
                inside, outside = here & want_in, here & ~want_in
                raters[inside] = members[g][(pick[inside] * len(members[g])).astype(int)]
                raters[outside] = others[g][(pick[outside] * len(others[g])).astype(int)]
            slots = raters.reshape(n_items, per_item)
            dup = np.zeros_like(slots, dtype=bool)
            for k in range(1, per_item):
                dup[:, k] = (slots[:, :k] == slots[:, k : k + 1]).any(axis=1)
            todo = dup.ravel()
            rounds += 1
            if rounds > 50:  # a pool smaller than per_item: fill the slot from the other groups
                want_in &= ~todo
        group = rater_group[raters] == target
        attr = np.where(group, "in", "out")
    else:
        # distinct raters per item: a random permutation's first per_item entries, vectorised
        raters = np.argsort(rng.random((n_items, n_raters)), axis=1)[:, :per_item].ravel()
        rater_attr = np.arange(n_raters) % 2 == 1
        group = rater_attr[raters]
        labels = np.where(rater_attr, "B", "A").astype(object)
        if rare:
            labels[n_raters - rare :] = "rare"
        attr = labels[raters].astype(str)
    eta = base + u[raters] + v[items] + effect * group
    if points == 2:
        y = (rng.random(items.size) < 1.0 / (1.0 + np.exp(-eta))).astype(int)
    else:  # a Likert scale: a logistic latent cut at evenly spaced thresholds (proportional odds)
        latent = eta + rng.logistic(0.0, 1.0, items.size)
        y = np.searchsorted(np.linspace(-1.5, 1.5, points - 1), latent)
    return pd.DataFrame(
        {
            "item_id": items.astype(str),
            "rater_id": np.char.add("r", raters.astype(str)),
            "group": group,
            "attr": attr,
            "y": y,
        }
    )


def false_positive_rate(
    design: Design = "star", *, reps: int = 400, seed: int = 0, level: float = 0.05, **kwargs: Any
) -> dict[str, Any]:
    """Share of ``reps`` null datasets (effect 0) in which the report's group comparison rejects at
    ``level``, with a Wilson 95 % interval; also the naive two-proportion z-test on the same data."""
    from statsmodels.stats.proportion import proportion_confint, proportions_ztest

    from .stats import compare_binary

    rng = np.random.default_rng(seed)
    rejected = naive = fitted = rare_tested = rare_rejected = 0
    for _ in range(reps):
        frame = simulate(rng, design, **kwargs)
        result = compare_binary(frame, "attr", frame["y"].to_numpy())
        p = result.get("model", {}).get("joint_test", {}).get("p_value")
        if p is not None:
            fitted += 1
            rejected += p < level
        rare_term = result.get("model", {}).get("terms", {}).get("attr=rare")
        if rare_term is not None and rare_term.get("p_value") is not None:
            rare_tested += 1
            rare_rejected += rare_term["p_value"] < level
        counts = frame.groupby("attr")["y"].agg(["sum", "count"])
        if len(counts) == 2:
            _, p_naive = proportions_ztest(counts["sum"].to_numpy(), counts["count"].to_numpy())
        else:  # 3+ groups: the chi-squared test of the rating-level table (same naivety)
            table = np.column_stack([counts["sum"], counts["count"] - counts["sum"]])
            p_naive = sps.chi2_contingency(table)[1]
        naive += p_naive < level
    low, high = proportion_confint(rejected, max(fitted, 1), alpha=0.05, method="wilson")
    return {
        "design": design,
        "replications": reps,
        "fitted": fitted,
        "level": level,
        "rejection_rate": rejected / max(fitted, 1),
        "ci95": [float(low), float(high)],
        "naive_ztest_rate": naive / reps,
        "settings": kwargs,
        "binomial_p_vs_nominal": float(sps.binomtest(rejected, max(fitted, 1), level).pvalue),
        # the rare group's own term (``rare`` > 0): how often it was tested, and rejected when it was
        "rare_tested": rare_tested,
        "rare_rejection_rate": rare_rejected / rare_tested if rare_tested else None,
    }
