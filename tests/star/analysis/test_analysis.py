"""STAR analyses, cross-checked against established implementations on real and synthetic data
that has the structure of real data (rater and item effects, duplicates, dirty cells, odd scales)."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pandas as pd
import pytest

from psychoalign.errors import InputError
from psychoalign.star.analysis import (
    alpha,
    analyze,
    false_positive_rate,
    item_disagreement,
    item_table,
    load,
    mapping_from,
    write_report,
)
from psychoalign.star.analysis.data import detect
from psychoalign.star.analysis.intersections import intersectional_section
from psychoalign.star.analysis.items import neutralise
from psychoalign.star.analysis.stats import (
    agreement_section,
    counts_matrix,
    groups_section,
    ingroup_section,
)
from tests.cli.test_main import cli
from tests.conftest import SHARED_DATA

DICES = SHARED_DATA / "dices_judgebench" / "dices_990.json"
DICES_350 = SHARED_DATA / "dices_judgebench" / "dices_350_crowdsourced.json"
DICES_EXPERT = SHARED_DATA / "dices_judgebench" / "dices_350_expert.json"
DIASAFETY = SHARED_DATA / "diasafety_cc" / "diasafety_cc.json"
XSTEST = SHARED_DATA / "xstest" / "xstest_v2_completions_llama2orig.csv"


def reliability(ratings: pd.DataFrame) -> np.ndarray:
    """raters x items matrix (NaN = not rated) for the krippendorff package."""
    return ratings.pivot(index="rater_id", columns="item_id", values="value").to_numpy(dtype=float)


# -- alpha against the reference implementation --------------------------------------------------


@pytest.mark.needs_data("dices_judgebench")
@pytest.mark.parametrize("metric", ["nominal", "ordinal", "interval"])
def test_alpha_matches_krippendorff_on_dices(metric: str) -> None:
    data = load(DICES)
    counts, _ = counts_matrix(data.annotations, len(data.scale))
    ours = alpha(counts, metric)  # type: ignore[arg-type]
    ref = krippendorff.alpha(value_counts=counts, level_of_measurement=metric)
    assert ours == pytest.approx(ref, abs=1e-12)
    assert 0.1 < ours < 0.3  # DICES is famously low-agreement


@pytest.mark.needs_data("diasafety_cc")
def test_alpha_matches_krippendorff_on_diasafety_with_rater_ids() -> None:
    data = load(DIASAFETY)
    ref = krippendorff.alpha(reliability_data=reliability(data.annotations), level_of_measurement="nominal")
    counts, _ = counts_matrix(data.annotations, 2)
    assert alpha(counts, "nominal") == pytest.approx(ref, abs=1e-12)
    section = agreement_section(data, n_boot=20)
    for country in ("Nigeria", "India"):
        raters = data.raters.index[data.raters["country"] == country]
        part = data.annotations[data.annotations["rater_id"].isin(raters)]
        ref = krippendorff.alpha(reliability_data=reliability(part), level_of_measurement="nominal")
        assert section["by"]["country (within rater group)"][country]["nominal"]["alpha"] == pytest.approx(ref)


def test_item_disagreement_is_one_minus_item_alpha() -> None:
    counts = np.array([[3, 0], [0, 3], [2, 1], [1, 2]], dtype=float)
    scores = item_disagreement(counts, "nominal")
    assert scores[0] == 0 and scores[1] == 0
    assert scores[2] == pytest.approx(scores[3])
    assert scores[2] > 0


# -- one row per rating ----------------------------------------------------------------------------

GENDERS = ["woman", "man", "nonbinary"]


def ratings_rows(
    rng: np.random.Generator,
    *,
    n_items: int = 120,
    n_raters: int = 30,
    per_item: int = 5,
    gender_effect: float = 0.0,
    lo: int = 1,
    hi: int = 5,
) -> list[dict[str, Any]]:
    """Likert ratings from a latent model with rater leniency and item effects; raters carry gender
    (3 groups), country (2) and pool (crowd / expert)."""
    leniency = rng.normal(0, 1, n_raters)
    item_effect = rng.normal(0, 1.2, n_items)
    cuts = np.linspace(-1.5, 1.5, hi - lo)
    rows = []
    for i in range(n_items):
        for r in rng.choice(n_raters, per_item, replace=False):
            gender = GENDERS[r % 3]
            latent = item_effect[i] + leniency[r] + gender_effect * (gender == "woman") + rng.normal(0, 0.8)
            rows.append(
                {
                    "conv": f"c{i}",
                    "annotator": f"a{r}",
                    "score": int(lo + np.searchsorted(cuts, latent)),
                    "gender": gender,
                    "country": ["US", "IN"][r % 2],
                    "pool": "expert" if r < 6 else "crowd",
                    "prompt": f"prompt {i}, with a comma",
                    "topic": ["health", "politics", "crime"][i % 3],
                }
            )
    return rows


def dirty(rows: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """Add the cells real files have: numeric strings, off-scale, missing, junk, repeats, conflicts."""
    rows = [dict(r) for r in rows]
    rows[0]["score"] = "3"  # a numeric string: kept
    rows[1]["score"] = " 4.0 "  # kept
    rows[2]["score"] = "9"  # off the scale
    rows[3]["score"] = ""  # missing
    rows[4]["score"] = "n/a"  # missing
    rows[5]["score"] = "abc"  # not a number
    rows[6]["conv"] = ""  # no item id
    rows.append(dict(rows[10]))  # an exact repeat
    conflict = dict(rows[11])
    conflict["score"] = 1 if int(rows[11]["score"]) != 1 else 2
    rows.append(conflict)  # the same rater rates the same item twice, differently
    expected = {
        "not on the scale": 1,
        "missing rating": 2,
        "not a number": 1,
        "missing item id": 1,
        "repeated rating (same item, rater and value)": 1,
        "conflicting ratings by one rater for one item (all of them dropped)": 2,
    }
    return rows, expected


def write_csv(rows: list[dict[str, Any]], path: Path, delimiter: str = ",") -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter=delimiter)
        writer.writeheader()
        writer.writerows(rows)
    return path


MAPPING = {"item_col": "conv", "rater_col": "annotator", "rating_col": "score", "scale": "1..5", "text_col": "prompt"}


def test_ratings_adapter_keeps_every_rater_and_the_scale_and_counts_what_it_drops(tmp_path: Path) -> None:
    clean = ratings_rows(np.random.default_rng(0))
    rows, expected = dirty(clean)
    data = load(write_csv(rows, tmp_path / "r.csv"), mapping=mapping_from(MAPPING))
    assert data.format == "ratings" and data.scale == ["1", "2", "3", "4", "5"] and data.ordinal
    assert data.values == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert dict(data.counts.dropped) == expected
    assert data.counts.ratings_read == len(rows)
    assert data.counts.ratings_kept == len(rows) - sum(expected.values()) == len(data.ratings)
    assert data.ratings["rater_id"].nunique() == 30
    assert data.ratings.groupby("item_id").size().max() == 5  # every rater kept, not squeezed to two
    assert set(data.rater_attributes()) == {"gender", "country", "pool"}
    assert "topic" in data.item_attributes
    assert data.expert == ("pool", "expert")
    assert data.levels == ["nominal", "ordinal", "interval"] and data.default_level == "ordinal"
    wide = reliability(data.annotations)
    for level in ("nominal", "ordinal", "interval"):
        counts, _ = counts_matrix(data.annotations, 5)
        ours = alpha(counts, level, data.values)  # type: ignore[arg-type]
        assert ours == pytest.approx(krippendorff.alpha(reliability_data=wide, level_of_measurement=level), abs=1e-12)


def test_interval_alpha_uses_the_numeric_scale_points(tmp_path: Path) -> None:
    rows = ratings_rows(np.random.default_rng(1), lo=0, hi=2)
    for r in rows:
        r["score"] = [0, 1, 10][int(r["score"])]  # an odd, unevenly spaced scale
    data = load(
        write_csv(rows, tmp_path / "odd.csv"),
        mapping=mapping_from({**MAPPING, "scale": None, "order": "0,1,10"}),
    )
    counts, _ = counts_matrix(data.annotations, 3)
    wide = data.annotations.assign(value=data.annotations["value"].map({0: 0.0, 1: 1.0, 2: 10.0}))
    ref = krippendorff.alpha(reliability_data=reliability(wide), level_of_measurement="interval")
    assert alpha(counts, "interval", [0.0, 1.0, 10.0]) == pytest.approx(ref, abs=1e-12)


def test_csv_tsv_jsonl_parquet_and_one_line_jsonl_give_the_same_numbers(tmp_path: Path) -> None:
    rows = ratings_rows(np.random.default_rng(2))
    frame = pd.DataFrame(rows)
    paths = [write_csv(rows, tmp_path / "r.csv"), write_csv(rows, tmp_path / "r.tsv", "\t")]
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    frame.to_parquet(tmp_path / "r.parquet")
    paths += [tmp_path / "r.jsonl", tmp_path / "r.parquet"]
    results = []
    for path in paths:
        data = load(path, mapping=mapping_from(MAPPING))
        counts, _ = counts_matrix(data.annotations, 5)
        results.append((len(data.ratings), alpha(counts, "ordinal")))
    assert all(r == pytest.approx(results[0]) for r in results)
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps(rows[0]) + "\n")
    assert len(load(one, mapping=mapping_from(MAPPING)).ratings) == 1


def test_yaml_mapping_file_and_level_override(tmp_path: Path) -> None:
    from psychoalign.star.analysis import load_mapping

    rows = ratings_rows(np.random.default_rng(14))
    for r in rows:
        r["score"] = ["never", "sometimes", "often", "always", "constantly"][int(r["score"]) - 1]
    path = write_csv(rows, tmp_path / "labels.csv")
    mapping_file = tmp_path / "map.yaml"
    mapping_file.write_text(
        "item_col: conv\nrater_col: annotator\nrating_col: score\n"
        "order: [never, sometimes, often, always, constantly]\nlevel: interval\n"
        "positive: often, always, constantly\nrater_cols: [gender]\nauto_attributes: false\n"
    )
    data = load(path, mapping=mapping_from(load_mapping(mapping_file)))
    assert data.ordinal and data.values is None and data.default_level == "interval"
    assert data.rater_attributes() == ["gender"] and data.positive == {2, 3, 4}
    section = agreement_section(data, n_boot=10)
    assert section["default_level"] == "interval"
    assert "interval" in section["item_disagreement"]["definition"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("item_col: conv\nrating_col: score\nunknown_key: 1\n")
    with pytest.raises(InputError, match="unknown_key"):
        mapping_from(load_mapping(bad))


def test_group_comparisons_on_every_group_with_clustered_models(tmp_path: Path) -> None:
    rows = ratings_rows(np.random.default_rng(3), n_items=200, n_raters=60, gender_effect=2.0)
    data = load(
        write_csv(rows, tmp_path / "g.csv"), mapping=mapping_from({**MAPPING, "positive": "4..5", "neutral": "3"})
    )
    assert data.positive == {3, 4} and data.excluded == {2}
    section = groups_section(data)
    gender = section["attributes"]["gender"]
    for view in ("binary_positive", "ordinal"):
        comp = gender[view]
        assert set(comp["groups"]) == set(GENDERS)  # all three groups, not the first two
        model = comp["model"]
        assert model["clusters"] == {"rater": 60, "item": 200}
        assert len(model["terms"]) == 2 and model["joint_test"]["df"][0] == 2
        assert 1 <= model["joint_test"]["df"][1] <= 59  # the terms' smallest df, at most G - 1
        assert all(v["raters"] >= 10 for v in comp["tested_groups"].values())  # no small group: Wald F stands
        assert model["joint_test"]["p_value"] < 0.01  # the planted effect is found
        assert comp["rater_level"]["test"] == "one-way ANOVA on per-rater means"
    positions = {g: v["mean_rating"] for g, v in gender["ordinal"]["groups"].items()}
    assert all(1 <= p <= 5 for p in positions.values())  # on the scale's own values
    assert max(positions, key=lambda g: positions[g]) == "woman"
    ref = gender["ordinal"]["reference"]
    assert set(gender["ordinal"]["model"]["terms"]) == {f"gender={g}" for g in GENDERS if g != ref}
    for term in gender["ordinal"]["model"]["terms"].values():
        assert term["ci95"][0] < term["odds_ratio"] < term["ci95"][1]
    assert "country" in section["attributes"]
    agree = agreement_section(data, n_boot=20)
    assert set(agree["by"]["gender (within rater group)"]) == set(GENDERS)
    assert set(agree["overall"]) == {"nominal", "ordinal", "interval", "nominal_positive"}


def test_ordinal_comparison_matches_statsmodels_directly() -> None:
    from statsmodels.miscmodels.ordinal_model import OrderedModel

    from psychoalign.star.analysis.simulate import simulate
    from psychoalign.star.analysis.stats import compare_ordinal

    frame = simulate(np.random.default_rng(5), "attribute", n_items=300, n_raters=40, per_item=3, points=5)
    result = compare_ordinal(frame, "attr", frame["y"].to_numpy(), "A", [1.0, 2.0, 3.0, 4.0, 5.0])
    exog = pd.DataFrame({"b": (frame["attr"] == "B").astype(float)})
    groups = np.column_stack([pd.factorize(frame["rater_id"])[0], pd.factorize(frame["item_id"])[0]])
    ref = OrderedModel(frame["y"].to_numpy(), exog, distr="logit").fit(
        method="bfgs", disp=False, maxiter=500, cov_type="cluster", cov_kwds={"groups": groups}
    )
    term = result["model"]["terms"]["attr=B"]
    assert term["coef"] == pytest.approx(ref.params["b"], rel=1e-4)
    assert term["se"] == pytest.approx(np.sqrt(ref.cov_params().loc["b", "b"]), rel=1e-3)
    means = frame.assign(v=frame["y"] + 1).groupby("attr")["v"].mean()
    assert result["groups"]["B"]["mean_rating"] == pytest.approx(means["B"])


@pytest.mark.parametrize("design", ["star", "attribute"])
def test_group_test_keeps_its_nominal_rate_under_rater_and_item_effects(design: str) -> None:
    """No true group effect, raters differing in leniency (SD 1, logit scale) and items in difficulty
    (SD 1): the report's test must reject at its nominal 5 % (within [2 %, 8 %] over 400 datasets;
    binomial SE at 5 % is 1.1 points), where the two-proportion z-test does not."""
    result = false_positive_rate(design, reps=400, seed=7, n_items=400, n_raters=40)
    assert result["fitted"] == 400
    assert 0.02 <= result["rejection_rate"] <= 0.08, result
    if design == "attribute":
        assert result["naive_ztest_rate"] > 0.15  # the old test, same data: far off


# -- STAR exports ----------------------------------------------------------------------------------


def synthetic_star(
    rng: np.random.Generator, n: int, in_effect: float = 0.0, interaction: float = 0.0, n_annotators: int = 50
) -> list[dict[str, Any]]:
    races, genders = ["Asian", "Black", "Hispanic", "White"], ["Female", "Male"]
    rows = []
    for i in range(n):
        race, gender = races[i % 4], genders[(i // 4) % 2]
        base = 0.35 + (interaction if (race == "Black" and gender == "Female") else 0.0)
        row: dict[str, Any] = {
            "dialogue_id": f"d{i}",
            "status": "submitted",
            "rule": ["hate-speech", "stereotypes"][(i // 8) % 2],
            "area": "misinformation",
            "cell": f"c{i % 24}",
            "target_group": f"{race} × {gender}",
            "target_race": race,
            "target_gender": gender,
            "red_teamer_id": f"t{i % 30}",
            "red_teamer_in_group": bool(i % 2),
            "turns": [{"role": "target", "text": "x", "tension": float(rng.random())}],
        }
        first = int(rng.integers(0, n_annotators))
        for k in (1, 2):
            in_group = bool(rng.random() < 0.5)
            p = base + (in_effect if in_group else 0.0)
            broken = rng.random() < p
            row[f"annotator{k}_rating"] = int(rng.choice([1, 2]) if broken else rng.choice([3, 4]))
            row[f"annotator{k}_in_group"] = in_group
            row[f"annotator{k}_id"] = f"a{(first + k - 1) % n_annotators}"
        rows.append(row)
    return rows


def to_data(tmp_path: Path, rows: list[dict[str, Any]], name: str = "star") -> Any:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return load(path)


def test_star_export_csv_and_parquet_round_trip_to_the_same_numbers(tmp_path: Path) -> None:
    from psychoalign.cli.star import write_rows

    rows = synthetic_star(np.random.default_rng(8), 300, in_effect=0.1)
    rows[0]["turns"] = [{"role": "target", "text": 'a "quoted", multi\nline turn', "tension": 0.5}]
    numbers = []
    for fmt in ("jsonl", "csv", "parquet"):
        path = tmp_path / f"export.{fmt}"
        write_rows(rows, fmt, path)
        assert detect(path) == "star"
        data = load(path)
        report = analyze([data], n_boot=20, embed=False)["datasets"][data.name]
        numbers.append(
            (
                data.counts.as_dict(),
                report["agreement"]["overall"],
                report["ingroup"]["annotators_overall"]["binary_broken"]["model"]["terms"],
                float(data.items.set_index("item_id").loc["d0", "tension_mean"]),
            )
        )
    assert numbers[1] == numbers[0] and numbers[2] == numbers[0]


def test_duplicate_dialogue_rows_never_multiply_ratings(tmp_path: Path) -> None:
    rows = synthetic_star(np.random.default_rng(9), 200)
    rows += [dict(r) for r in rows[:50]]  # the same records again
    data = to_data(tmp_path, rows)
    assert len(data.items) == 200 and data.counts.items_merged == 50
    assert data.counts.dropped["repeated record (identical row)"] == 100
    assert len(data.annotations) == 400
    agree = agreement_section(data, n_boot=10)
    by_rule = agree["by"]["rule"]
    assert sum(v["ordinal"]["values"] for v in by_rule.values()) == 400  # breakdowns add up to the whole
    groups = ingroup_section(data)["annotators_overall"]["binary_broken"]["groups"]
    assert sum(g["n_ratings"] for g in groups.values()) == 400
    inter = intersectional_section(data)
    assert inter["n_ratings"] == 400
    changed = [dict(r) for r in rows[:10]]
    for r in changed:
        r["annotator1_rating"] = 5 - int(r["annotator1_rating"])  # the same annotator, a different rating
    mixed = to_data(tmp_path, rows + changed, "mixed")
    assert mixed.counts.items_merged == 60 and len(mixed.items) == 200
    assert mixed.counts.dropped["conflicting ratings by one rater for one item (all of them dropped)"] == 20
    assert mixed.counts.dropped["repeated rating (same item, rater and value)"] == 10  # annotator 2 again
    assert mixed.counts.ratings_kept == 400 - 10


def test_one_line_star_jsonl_and_strings_in_ratings(tmp_path: Path) -> None:
    row = synthetic_star(np.random.default_rng(10), 1)[0]
    row["annotator1_rating"] = "3"
    row["annotator2_rating"] = "7"
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps(row) + "\n")
    data = load(path)
    assert len(data.annotations) == 1 and data.counts.dropped == {"not on the scale": 1}


def test_star_export_with_participant_demographics_compares_annotator_groups(tmp_path: Path) -> None:
    from psychoalign.star.analysis.data import attach_raters

    data = to_data(tmp_path, synthetic_star(np.random.default_rng(15), 400))
    people = [
        {
            "id": f"a{i}",
            "demographics": {
                "gender": [["Female", "Male", "prefer not to say"][i % 3]],
                "race": ["Black", "White"][: 1 + i % 2],
            },
            "expertise": [],
            "roles": ["annotator"],
            "simulated": False,
        }
        for i in range(50)
    ]
    (tmp_path / "people.jsonl").write_text("\n".join(json.dumps(p) for p in people))
    data = attach_raters(data, tmp_path / "people.jsonl")
    assert data.raters.loc["a1", "race"] == "Black + White" and pd.isna(data.raters.loc["a2", "gender"])
    assert {"gender", "race"} <= set(data.rater_attributes())
    section = groups_section(data)
    comp = section["attributes"]["gender"]["binary_broken"]
    assert set(comp["groups"]) == {"Female", "Male"}  # prefer not to say: missing, not a group
    assert comp["model"]["clusters"]["rater"] == 34
    assert any("50 of 50 raters found" in n for n in data.notes)


def test_group_tests_are_holm_adjusted_as_one_family(tmp_path: Path) -> None:
    """Every rater attribute and intersection is one more test: each view's joint p-values get a
    Holm adjustment over all of them (the exact Holm values of that family)."""
    from statsmodels.stats.multitest import multipletests

    rows = ratings_rows(np.random.default_rng(5), n_items=200, n_raters=60)
    data = load(
        write_csv(rows, tmp_path / "h.csv"), mapping=mapping_from({**MAPPING, "positive": "4..5", "neutral": "3"})
    )
    section = groups_section(data)
    assert "Holm-adjusted" in section["multiple_comparisons"]
    family = {**section["attributes"], **{f"x {k}": v for k, v in section.get("intersections", {}).items()}}
    for view in ("binary_positive", "ordinal"):
        comps = [v[view] for v in family.values() if "p_value" in v[view]["model"].get("joint_test", {})]
        assert len(comps) >= 3  # gender, country, and their intersection at least
        raw = [c["model"]["joint_test"]["p_value"] for c in comps]
        want = multipletests(raw, method="holm")[1]
        assert [c["p_value_holm"] for c in comps] == pytest.approx(list(want))
        assert all(c["p_value_holm"] >= p for c, p in zip(comps, raw, strict=True))


def test_ingroup_comparison_is_clustered_and_finds_a_planted_effect(tmp_path: Path) -> None:
    data = to_data(tmp_path, synthetic_star(np.random.default_rng(2), 800, in_effect=0.2))
    result = ingroup_section(data)
    overall = result["annotators_overall"]["binary_broken"]
    assert overall["model"]["clusters"] == {"rater": 50, "item": 800}
    assert overall["model"]["joint_test"]["p_value"] < 0.001
    assert overall["groups"]["in-group"]["rate"] > overall["groups"]["out-group"]["rate"]
    assert overall["rater_level"]["test"].startswith("paired t-test")
    assert "ordinal" in result["annotators_overall"]
    assert all("p_value_holm" in v["binary_broken"] for v in result["annotators_by_rule"].values())
    success = result["attack_success_by_red_teamer"]
    assert success["model"]["clusters"] == {"rater": 30}
    assert set(result["attack_success_by_target_group"]["groups"]) == {
        f"{r} × {g}" for r in ("Asian", "Black", "Hispanic", "White") for g in ("Female", "Male")
    }


def test_intersectional_model_per_rule_and_pooled(tmp_path: Path) -> None:
    with_it = intersectional_section(
        to_data(tmp_path, synthetic_star(np.random.default_rng(3), 1600, interaction=0.35), "a")
    )
    assert "clustered" in with_it["method"]
    assert with_it["pooled"]["interaction_test"]["p_value"] < 0.001
    assert set(with_it["by_rule"]) == {"hate-speech", "stereotypes"}
    assert all(r["interaction_test"]["df"][0] == 3 for r in with_it["by_rule"].values())
    assert with_it["pooled"]["clusters"] == {"rater": 50, "item": 1600}
    without = intersectional_section(to_data(tmp_path, synthetic_star(np.random.default_rng(4), 1600), "b"))
    assert without["pooled"]["interaction_test"]["p_value"] > 0.01


@pytest.mark.needs_data("dices_judgebench")
def test_not_computable_sections_and_the_report_still_written(tmp_path: Path) -> None:
    expert = load(DICES_EXPERT)
    assert agreement_section(expert)["computable"] is False
    assert "one rating per item" in agreement_section(expert)["reason"]
    small = to_data(tmp_path, synthetic_star(np.random.default_rng(5), 6))
    assert intersectional_section(small)["computable"] is False
    report = analyze([expert, small], n_boot=50, embed=False)
    write_report(report, [expert, small], tmp_path / "out")
    assert (tmp_path / "out" / "report.html").read_text().count("Not computable") >= 3


@pytest.mark.needs_data("diasafety_cc")
def test_few_raters_give_description_not_a_test() -> None:
    data = load(DIASAFETY)
    comp = groups_section(data)["attributes"]["country"]["binary_unsafe"]
    assert comp["groups"]["India"]["n_ratings"] == 3285
    assert comp["model"]["computable"] is False and "6 raters" in comp["model"]["reason"]


@pytest.mark.needs_data("dices_judgebench")
def test_dices_item_text_is_the_same_in_crowd_and_expert_files() -> None:
    crowd, expert = load(DICES_350), load(DICES_EXPERT)
    joined = crowd.items.merge(expert.items, on="item_id")
    assert len(joined) == 350 and (joined["text_x"] == joined["text_y"]).all()
    assert joined["text_x"].str.contains("\n").all()  # context and response


@pytest.mark.needs_data("dices_judgebench")
def test_expert_vs_crowd_on_dices_and_within_a_ratings_file(tmp_path: Path) -> None:
    report = analyze([load(DICES_350), load(DICES_EXPERT)], n_boot=20, embed=False)
    pair = report["expert_vs_crowd"]["dices_350_crowdsourced vs dices_350_expert"]
    binary = pair["binary_unsafe"]
    table = np.array(binary["table"]["counts"])
    assert table.sum() == binary["items"] > 300
    assert binary["agreement"] == pytest.approx(np.trace(table) / table.sum())
    assert -1 <= binary["cohens_kappa"] <= 1 and binary["alpha"]["values"] == 2 * binary["items"]
    rows = ratings_rows(np.random.default_rng(11))
    data = load(write_csv(rows, tmp_path / "e.csv"), mapping=mapping_from(MAPPING))
    within = analyze([data], n_boot=20, embed=False)["datasets"]["e"]["expert"]
    assert within["computable"] and within["experts"] == "pool = expert (6 raters)"
    assert within["full_scale"]["alpha_level"] == "ordinal"


@pytest.mark.needs_data("dices_judgebench")
def test_detection_and_bad_files(tmp_path: Path) -> None:
    assert detect(DICES) == "dices"
    assert detect(DIASAFETY) == "diasafety-cc"
    assert detect(XSTEST) == "xstest"
    assert detect(SHARED_DATA / "anthropic_hh_harmless_base" / "test.jsonl.gz") == "anthropic-hh"
    bad = tmp_path / "x.json"
    bad.write_text('[{"what": [1]}]')
    with pytest.raises(InputError, match="no adapter recognises"):
        detect(bad)
    with pytest.raises(InputError, match="does not match the 'diasafety-cc' format"):
        load(bad, "diasafety-cc")
    assert load(DIASAFETY, mapping=mapping_from(MAPPING)).format == "diasafety-cc"  # known sets keep their adapter
    table = write_csv([{"a": 1, "b": 2}], tmp_path / "t.csv")
    with pytest.raises(InputError, match="needs its columns named"):
        load(table)
    with pytest.raises(InputError, match="no column 'conv'"):
        load(table, mapping=mapping_from(MAPPING))
    header_only = tmp_path / "h.csv"  # was "does not match the 'ratings' format (TypeError: operation 'and_' …)"
    header_only.write_text("conv,annotator,score,prompt\n")
    with pytest.raises(InputError, match=r"no ratings: a header and no rows") as caught:
        load(header_only, mapping=mapping_from(MAPPING))
    assert "TypeError" not in str(caught.value) and caught.value.hint
    binary = tmp_path / "b.csv"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(InputError, match="not UTF-8"):
        load(binary, mapping=mapping_from(MAPPING))


@pytest.mark.needs_data("dices_judgebench")
def test_missing_is_missing(tmp_path: Path) -> None:
    rows = synthetic_star(np.random.default_rng(6), 20)
    rows[0]["annotator2_rating"] = None
    data = to_data(tmp_path, rows)
    assert len(data.annotations) == 39 and data.counts.dropped == {"missing rating": 1}
    dices = load(DICES)
    binary, _ = counts_matrix(dices.annotations, 3, dices.positive, dices.excluded)
    assert binary.sum() == len(dices.annotations) - int((dices.annotations["value"] == 1).sum())  # Unsure left out


# -- the per-item table ----------------------------------------------------------------------------


def test_item_table_carries_every_field_and_the_csv_is_safe(tmp_path: Path) -> None:
    rows = synthetic_star(np.random.default_rng(12), 60)
    rows[0]["dialogue_id"] = '=HYPERLINK("http://x","y")'
    rows[1]["dialogue_id"] = "id, with a comma\nand a newline"
    rows[2]["rule"] = "@SUM(A1)"
    data = to_data(tmp_path, rows)
    table = item_table(data)
    for col in ("n_ratings", "disagreement_ordinal", "disagreement_broken", "share_broken", "plurality"):
        assert col in table.columns
    for col in ("tension_mean", "tension_max", "rule", "target_group", "red_teamer_in_group", "text"):
        assert col in table.columns
    assert table["tension_mean"].notna().all()
    report = analyze([data], n_boot=10, embed=False)
    write_report(report, [data], tmp_path / "out")
    with (tmp_path / "out" / "item_disagreement.csv").open(newline="", encoding="utf-8") as f:
        read = list(csv.DictReader(f))
    assert len(read) == 60
    ids = [r["item_id"] for r in read]
    assert '\'=HYPERLINK("http://x","y")' in ids and "id, with a comma\nand a newline" in ids
    assert read[2]["rule"] == "'@SUM(A1)"
    assert neutralise(-0.5) == "-0.5" and neutralise("-1+1") == "'-1+1" and neutralise(None) == ""
    for sign in "\uff1d\uff0b\uff0d\uff20":  # full-width = + - @: formulas too
        assert neutralise(f"{sign}SUM(A1)") == f"'{sign}SUM(A1)" and neutralise(f"a{sign}1") == f"a{sign}1"
    scores = report["datasets"]["star"]["agreement"]["item_disagreement"]["items"]
    by_id = {r["item_id"].removeprefix("'"): r for r in read}
    for item_id, score in list(scores.items())[:10]:
        assert float(by_id[item_id]["disagreement_ordinal"]) == pytest.approx(score)


# -- the command line ------------------------------------------------------------------------------


def test_cli_one_row_per_rating_file_end_to_end(tmp_path: Path) -> None:
    rows, expected = dirty(ratings_rows(np.random.default_rng(13), n_items=100, n_raters=24))
    path = write_csv(rows, tmp_path / "ratings.csv")
    out = cli(
        "star", "analyze", str(path), "--item-col", "conv", "--rater-col", "annotator", "--rating-col", "score",
        "--scale", "1..5", "--out", str(tmp_path / "r"), "--bootstrap", "20", "--no-embed",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert re.search(r"ratings: read \d+ ratings .* dropped 8 ", out.stderr.replace("\n", " "))
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    entry = report["datasets"]["ratings"]
    assert entry["counts"]["ratings"]["dropped"] == expected
    assert set(entry["agreement"]["overall"]) >= {"nominal", "ordinal", "interval"}
    assert set(entry["agreement"]["by"]["gender (within rater group)"]) == set(GENDERS)
    assert entry["groups"]["attributes"]["gender"]["ordinal"]["model"]["clusters"]["rater"] == 24
    page = (tmp_path / "r" / "report.html").read_text()
    assert "ratings read" in page and "not on the scale" in page


def test_cli_nothing_analysable_exits_non_zero(tmp_path: Path) -> None:
    rows = [{"conv": "c1", "annotator": "a", "score": "x"}, {"conv": "c1", "annotator": "b", "score": "9"}]
    path = write_csv(rows, tmp_path / "empty.csv")
    out = cli(
        "star", "analyze", str(path), "--item-col", "conv", "--rater-col", "annotator", "--rating-col", "score",
        "--scale", "1..5", "--out", str(tmp_path / "r"), "--no-embed",
    )  # fmt: skip
    assert out.returncode != 0
    assert "nothing to analyse" in out.stderr and "Traceback" not in out.stderr


@pytest.mark.needs_data("diasafety_cc")
def test_cli_analyze_escapes_and_writes_everything(tmp_path: Path) -> None:
    rows = synthetic_star(np.random.default_rng(7), 120)
    rows[0]["rule"] = "<script>alert(1)</script>"
    star = tmp_path / "export.jsonl"
    star.write_text("\n".join(json.dumps(r) for r in rows))
    out = cli(
        "star", "analyze", str(star), "--compare", f"dia={DIASAFETY}", "--out", str(tmp_path / "r"),
        "--bootstrap", "50", "--no-embed",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    page = (tmp_path / "r" / "report.html").read_text()
    assert "<script>alert" not in page and "&lt;script&gt;" in page
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert set(report["datasets"]) == {"export", "dia"}
    assert report["datasets"]["dia"]["agreement"]["overall"]["nominal_unsafe"]["units"] == 1095
    csv_rows = pd.read_csv(tmp_path / "r" / "item_disagreement.csv")
    assert set(csv_rows["dataset"]) == {"export", "dia"}
    bad = cli("star", "analyze", str(tmp_path / "nope.json"), "--out", str(tmp_path / "r2"))
    assert bad.returncode != 0 and "cannot read" in bad.stderr


# -- embedding map ---------------------------------------------------------------------------------


def fake_embedder(texts: list[str]) -> np.ndarray:
    """Deterministic vectors: texts from campaign k land near k (clusters are then predictable)."""
    out = []
    for t in texts:
        m = re.search(r"campaign (\d)", t)
        k = int(m.group(1)) if m else 9
        rng = np.random.default_rng(abs(hash(t)) % 2**32)
        out.append(np.eye(10)[k] * 5 + rng.normal(0, 0.1, 10))
    return np.asarray(out, dtype=np.float32)


def test_embedding_map_table_and_concentration(tmp_path: Path) -> None:
    from psychoalign.star.analysis.embedding import embedding_section

    datasets = []
    for k in range(3):
        rows = synthetic_star(np.random.default_rng(k), 120)
        for r in rows:
            r["turns"] = [{"role": "red_teamer", "text": f"campaign {k} topic {r['dialogue_id']}", "tension": None}]
        datasets.append(to_data(tmp_path, rows, f"c{k}"))
    section = embedding_section(datasets, per_dataset=100, n_clusters=6, seed=1, embedder=fake_embedder)
    assert section["computable"] and section["per_dataset"] == 100
    totals = {
        n: sum(section["cluster_by_dataset"][c][n] for c in section["cluster_by_dataset"]) for n in ("c0", "c1", "c2")
    }
    assert totals == {"c0": 100, "c1": 100, "c2": 100}  # equal-size downsampling
    for name, conc in section["concentration"].items():
        assert 0 <= conc["normalised_entropy"] <= 1
        assert conc["clusters_used"] <= 3, name  # each campaign sits in its own region of the map
    assert len(section["points"]["x"]) == 300


@pytest.mark.realmodel
@pytest.mark.needs_data("diasafety_cc", "anthropic_hh_harmless_base")
def test_embedding_map_with_the_offline_minilm(tmp_path: Path) -> None:
    from psychoalign.star.analysis.embedding import embedding_section, minilm_embedder

    dia = load(DIASAFETY)
    hh = load(SHARED_DATA / "anthropic_hh_harmless_base" / "test.jsonl.gz", name="anthropic-hh")
    section = embedding_section([dia, hh], per_dataset=60, n_clusters=5, seed=0, embedder=minilm_embedder())
    assert section["computable"]
    assert sum(sum(v.values()) for v in section["cluster_by_dataset"].values()) == 120
    assert all(section["top_terms"][c] for c in section["top_terms"])


# -- small samples: no confident number from a handful of items ------------------------------------


def _small(tmp_path: Path, lines: str, **extra: Any) -> Any:
    path = tmp_path / "small.csv"
    path.write_text("item,rater,score\n" + lines)
    values = {"item_col": "item", "rater_col": "rater", "rating_col": "score", "scale": "1..5", **extra}
    return load(path, mapping=mapping_from(values))


def test_alpha_on_one_item_is_refused_not_reported_as_zero(tmp_path: Path) -> None:
    # Only item c is rated twice: alpha on one item compares that item with itself, and is 0 by
    # construction whatever the raters did; the JSON carried alpha 0.0 with the interval [0, 0].
    data = _small(tmp_path, "a,r1,3\nb,r2,2\nc,r1,5\nc,r2,4\n")
    for level, got in agreement_section(data, n_boot=50)["overall"].items():
        assert got["alpha"] is None and got["ci_low"] is None and got["ci_high"] is None, level
        assert got["units"] == 1 and "one item" in got["warning"]


def test_alpha_on_few_items_carries_a_warning_and_no_interval_in_the_json(tmp_path: Path) -> None:
    # The HTML hides the interval below MIN_ALPHA_ITEMS items; report.json showed it (e.g. [-0.5, 0.7]
    # on two items) with no warning, so anyone reading the JSON got an interval that means nothing.
    from psychoalign.star.analysis.agreement import MIN_ALPHA_ITEMS

    data = _small(tmp_path, "a,r1,3\na,r2,4\nb,r1,1\nb,r2,2\n")
    ordinal = agreement_section(data, n_boot=50)["overall"]["ordinal"]
    assert ordinal["alpha"] == pytest.approx(0.7) and ordinal["units"] == 2
    assert ordinal["ci_low"] is None and ordinal["ci_high"] is None
    assert f"fewer than {MIN_ALPHA_ITEMS} items" in ordinal["warning"]
    rows = ratings_rows(np.random.default_rng(3), n_items=40, n_raters=6)
    many = load(write_csv(rows, tmp_path / "many.csv"), mapping=mapping_from(
        {"item_col": "conv", "rater_col": "annotator", "rating_col": "score", "scale": "1..5"}
    ))  # fmt: skip
    full = agreement_section(many, n_boot=50)["overall"]["ordinal"]
    assert full["ci_low"] is not None and "warning" not in full


def test_positive_range_outside_the_scale_is_an_error(tmp_path: Path) -> None:
    # `--positive 9..10` on a 1..5 scale named no point: the binarised view silently vanished.
    with pytest.raises(InputError, match=r"9\.\.10"):
        _small(tmp_path, "a,r1,3\na,r2,4\n", positive=["9..10"])
    with pytest.raises(InputError, match=r"0\.\.0"):
        _small(tmp_path, "a,r1,3\na,r2,4\n", neutral=["0..0"])
    assert _small(tmp_path, "a,r1,3\na,r2,4\n", positive=["4..9"]).positive == {3, 4}


def test_cli_negative_bootstrap_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.csv"
    path.write_text("item,rater,score\na,r1,3\na,r2,4\n")
    out = cli(
        "star", "analyze", str(path), "--item-col", "item", "--rater-col", "rater", "--rating-col", "score",
        "--out", str(tmp_path / "r"), "--no-embed", "--bootstrap", "-5",
    )  # fmt: skip
    assert out.returncode == 2 and "--bootstrap" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "r").exists()


def test_alpha_on_identical_ratings_says_why_it_is_undefined(tmp_path: Path) -> None:
    # Every rating 3: alpha is undefined (no variation), and the report showed a bare "—" / null.
    lines = "".join(f"i{i},r{r},3\n" for i in range(12) for r in (1, 2))
    data = _small(tmp_path, lines)
    section = agreement_section(data, n_boot=20)
    for got in section["overall"].values():
        assert got["alpha"] is None and "same value" in got["reason"]
    out = tmp_path / "r"
    write_report(analyze([data], n_boot=20, embed=False), [data], out)
    assert "undefined: every rating is the same value" in (out / "report.html").read_text()


def test_a_campaign_export_names_its_target_and_its_simulated_raters(tmp_path: Path) -> None:
    """A campaign of LLM personas gave a report of alpha and group comparisons that named neither
    the model red-teamed nor that every rater was a simulated persona."""
    rows = synthetic_star(np.random.default_rng(3), 12, n_annotators=6)
    for i, row in enumerate(rows):
        row["target"] = "model:openai:fake" if i < 8 else "psychoalign"
        row["annotator1_simulated"] = True
        row["annotator2_simulated"] = True
    data = to_data(tmp_path, rows)
    assert "Targets red-teamed: model:openai:fake (8 dialogues), psychoalign (4 dialogues)" in data.notes
    assert any(n.startswith("6 of 6 annotators are simulated") for n in data.notes)
    plain = to_data(tmp_path, synthetic_star(np.random.default_rng(3), 12), "plain")
    assert not any("simulated" in n or "Targets" in n for n in plain.notes)
