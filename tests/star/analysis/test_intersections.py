"""The tiny-group rule on intersectional (race × gender) cells: a cell with too few raters is
described, not tested; a perfectly separated cell is reported, never an infinite odds ratio."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
from statsmodels.stats.proportion import proportion_confint

from psychoalign.star.analysis.intersections import intersectional_section
from psychoalign.star.analysis.stats import MIN_GROUP_RATERS
from tests.star.analysis.test_analysis import synthetic_star, to_data


def _tiny_cell(rows: list[dict[str, Any]], k: int, dialogues: int = 12) -> None:
    """A POPQUORN-like case: ``dialogues`` more dialogues on one new race × gender cell, every one
    annotated by the same ``k`` lenient annotators who call everything broken (a rater effect, not
    a group effect)."""
    for i in range(dialogues):
        row = dict(rows[0], dialogue_id=f"tiny{i}", target_race="Pacific Islander", target_gender="Female")
        row["target_group"] = "Pacific Islander × Female"
        row["annotator1_id"], row["annotator2_id"] = f"solo{i % k}", f"solo{(i + 1) % k}"
        row["annotator1_rating"] = row["annotator2_rating"] = 1
        rows.append(row)


def _odds_ratios(fit: dict[str, Any]) -> list[float]:
    return [t["odds_ratio"] for t in fit.get("terms", {}).values()]


def test_a_cell_of_few_raters_is_described_never_tested(tmp_path: Path) -> None:
    rows = synthetic_star(np.random.default_rng(21), 800)
    _tiny_cell(rows, k=2)
    pooled = intersectional_section(to_data(tmp_path, rows))["pooled"]
    cell = pooled["cells"]["Pacific Islander × Female"]
    assert (cell["status"], cell["why"], cell["n_ratings"], cell["n_raters"]) == ("described", "2 raters", 24, 2)
    assert cell["rate"] == 1.0  # described: its rate is shown
    assert f"{MIN_GROUP_RATERS} raters are described only: Pacific Islander × Female (2 raters)" in pooled["not_tested"]
    assert not any("Pacific Islander" in name for name in pooled["terms"])  # no term, so no p-value for it
    assert pooled["clusters"]["rater"] == 50  # the two lenient annotators are not in the model
    assert sum(c["status"] == "tested" for c in pooled["cells"].values()) == 8


def test_a_perfectly_separated_cell_is_reported_not_given_an_infinite_odds_ratio(tmp_path: Path) -> None:
    rows = synthetic_star(np.random.default_rng(22), 800)
    for r in rows:
        if (r["target_race"], r["target_gender"]) == ("Hispanic", "Male"):
            r["annotator1_rating"] = r["annotator2_rating"] = 1  # every rating broken, many raters
    section = intersectional_section(to_data(tmp_path, rows))
    pooled = section["pooled"]
    assert pooled["cells"]["Hispanic × Male"]["status"] == "separated"
    assert pooled["separation"]["Hispanic × Male"].startswith("perfect separation: every rating is 1")
    # the other 7 cells are modelled; the interaction the missing cell identified is gone, the rest tested
    assert pooled.get("computable", True) and pooled["interaction_test"]["df"][0] == 2
    for fit in [pooled, *section["by_rule"].values()]:
        assert all(math.isfinite(o) and 1e-3 < o < 1e3 for o in _odds_ratios(fit))


def test_tiny_cells_keep_the_interaction_test_at_its_nominal_level() -> None:
    """Seeded small simulation: no true effect, a 1-, 2- or 3-rater cell of lenient annotators
    beside balanced cells. The interaction test rejects at 0.05 no more often than the nominal
    level's binomial interval allows, and the tiny cell is never tested."""
    from psychoalign.star.analysis.intersections import _model

    reps = 24
    rejected = tested_tiny = 0
    rng = np.random.default_rng(2026)
    for rep in range(reps):
        frame = _frame(rng, tiny_raters=1 + rep % 3)
        fit = _model(frame, covariates=False)
        p = fit["interaction_test"]["p_value"]
        rejected += p < 0.05
        tiny = fit["cells"]["Pacific Islander × Female"]
        assert tiny["why"] == f"{1 + rep % 3} rater{'s' if rep % 3 else ''}"
        tested_tiny += tiny["status"] == "tested"
    low, high = proportion_confint(rejected, reps, alpha=0.05, method="wilson")
    assert tested_tiny == 0
    assert low <= 0.05 <= high, (rejected, reps)


def _frame(rng: np.random.Generator, tiny_raters: int) -> Any:
    """Ratings of 400 dialogues over 4 races x 2 genders by 40 annotators (rater leniency SD 1, no
        group effect), plus 12 dialogues on a ninth cell rated only by ``tiny_raters`` lenient raters
    (90 % broken)."""
    import pandas as pd

    races, genders = ["Asian", "Black", "Hispanic", "White"], ["Female", "Male"]
    lenient = rng.normal(0.0, 1.0, 40)
    rows = []
    for i in range(400):
        race, gender = races[i % 4], genders[(i // 4) % 2]
        for rater in rng.choice(40, 2, replace=False):
            p = 1 / (1 + math.exp(-(-0.4 + lenient[rater])))
            rows.append((f"d{i}", f"r{rater}", race, gender, int(rng.random() < p)))
    for i in range(12):
        for k in range(2):
            lenient = int(rng.random() < 0.9)  # a lenient rater, not a separated cell
            rows.append((f"t{i}", f"solo{(i + k) % tiny_raters}", "Pacific Islander", "Female", lenient))
    return pd.DataFrame(rows, columns=["item_id", "rater_id", "target_race", "target_gender", "broken"])


def test_rater_attribute_intersections_describe_a_combination_of_few_raters(tmp_path: Path) -> None:
    """gender × race of the annotators: a combination held by 2 annotators is described with its
    raters, never tested; the combinations with 5+ raters are."""
    import json

    from psychoalign.star.analysis.data import attach_raters
    from psychoalign.star.analysis.stats import groups_section

    data = to_data(tmp_path, synthetic_star(np.random.default_rng(23), 600))
    people = []
    for i in range(50):
        gender, race = ["Female", "Male"][i % 2], ["Black", "White"][(i // 2) % 2]
        if i in (0, 1):  # the only two Nonbinary annotators
            gender = "Nonbinary"
        demographics = {"gender": [gender], "race": [race]}
        people.append({"id": f"a{i}", "demographics": demographics, "expertise": [], "roles": ["annotator"]})
    (tmp_path / "people.jsonl").write_text("\n".join(json.dumps(p) for p in people))
    section = groups_section(attach_raters(data, tmp_path / "people.jsonl"))
    crossed = section["intersections"]["gender × race"]["binary_broken"]
    tiny = [g for g, d in crossed["groups"].items() if g.startswith("Nonbinary")]
    assert tiny and all(crossed["groups"][g]["n_raters"] < MIN_GROUP_RATERS for g in tiny)
    assert all(f"{g} (" in crossed["not_tested"] for g in tiny)
    assert not any("Nonbinary" in term for term in crossed["model"]["terms"])
    assert set(crossed["tested_groups"]) == {f"{g} × {r}" for g in ("Female", "Male") for r in ("Black", "White")}
    assert all(v["raters"] >= MIN_GROUP_RATERS for v in crossed["tested_groups"].values())


def test_ratings_of_one_outcome_get_no_model_and_say_why(tmp_path: Path) -> None:
    """Every one of 240 ratings broken: the logistic model did not converge and still printed
    odds ratios near 4 with p = 2e-9 for race, gender and rule. Now there is no model, no
    interval and no p-value, and the reason names the constant outcome."""
    rows = [dict(r, annotator1_rating=2, annotator2_rating=2) for r in synthetic_star(np.random.default_rng(1), 120)]
    section = intersectional_section(to_data(tmp_path, rows))
    assert section["computable"] is False
    assert section["reason"].startswith("every one of the 240 ratings is broken: the outcome does not vary")
    assert "pooled" not in section and "by_rule" not in section

    # one rule's ratings all one outcome, the other's varied: that rule alone gets no model
    mixed = synthetic_star(np.random.default_rng(1), 240)
    for r in mixed:
        if r["rule"] == "stereotypes":
            r["annotator1_rating"] = r["annotator2_rating"] = 4
    by_rule = intersectional_section(to_data(tmp_path, mixed, "mixed"))["by_rule"]
    assert by_rule["stereotypes"]["computable"] is False and "is not broken" in by_rule["stereotypes"]["reason"]
    assert "terms" not in by_rule["stereotypes"]
    assert by_rule["hate-speech"].get("computable", True) and "terms" in by_rule["hate-speech"]
