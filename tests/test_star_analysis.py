"""STAR analyses, cross-checked against established implementations on real and synthetic data."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import krippendorff
import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.proportion import proportions_ztest

from psychoalign.errors import InputError
from psychoalign.star.analysis import alpha, analyze, item_disagreement, load, write_report
from psychoalign.star.analysis.data import detect
from psychoalign.star.analysis.stats import (
    agreement_section,
    counts_matrix,
    group_comparison,
    ingroup_section,
    intersectional_section,
)

from .conftest import SHARED_DATA
from .test_cli import cli

DICES = SHARED_DATA / "dices_judgebench" / "dices_990.json"
DIASAFETY = SHARED_DATA / "diasafety_cc" / "diasafety_cc.json"
XSTEST = SHARED_DATA / "xstest" / "xstest_v2_completions_llama2orig.csv"


@pytest.mark.parametrize("metric", ["nominal", "ordinal"])
def test_alpha_matches_krippendorff_on_dices(metric: str) -> None:
    data = load(DICES)
    counts, _ = counts_matrix(data.annotations, len(data.scale))
    ours = alpha(counts, metric)  # type: ignore[arg-type]
    ref = krippendorff.alpha(value_counts=counts, level_of_measurement=metric)
    assert ours == pytest.approx(ref, abs=1e-12)
    assert 0.1 < ours < 0.3  # DICES is famously low-agreement


def test_alpha_matches_krippendorff_on_diasafety_with_rater_ids() -> None:
    data = load(DIASAFETY)
    wide = data.annotations.pivot(index="rater_id", columns="item_id", values="value")
    ref = krippendorff.alpha(reliability_data=wide.to_numpy(dtype=float), level_of_measurement="nominal")
    counts, _ = counts_matrix(data.annotations, 2)
    assert alpha(counts, "nominal") == pytest.approx(ref, abs=1e-12)
    for country in ("Nigeria", "India"):
        part = data.annotations[data.annotations["rater_group"] == country]
        sub = part.pivot(index="rater_id", columns="item_id", values="value").to_numpy(dtype=float)
        c, _ = counts_matrix(part, 2)
        assert alpha(c, "nominal") == pytest.approx(
            krippendorff.alpha(reliability_data=sub, level_of_measurement="nominal")
        )


def test_item_disagreement_is_one_minus_item_alpha() -> None:
    counts = np.array([[3, 0], [0, 3], [2, 1], [1, 2]], dtype=float)
    scores = item_disagreement(counts, "nominal")
    assert scores[0] == 0 and scores[1] == 0
    assert scores[2] == pytest.approx(scores[3])
    assert scores[2] > 0


def test_group_comparison_matches_statsmodels_on_diasafety() -> None:
    data = load(DIASAFETY)
    section = ingroup_section(data)["rater_groups"]
    ann = data.annotations
    s = [int((ann[ann["rater_group"] == g]["value"] == 1).sum()) for g in ("India", "Nigeria")]
    n = [int((ann["rater_group"] == g).sum()) for g in ("India", "Nigeria")]
    z, p = proportions_ztest(np.array(s), np.array(n))
    assert section["z"] == pytest.approx(z)
    assert section["p_value"] == pytest.approx(p)
    assert section["India"]["n"] == 3285


def synthetic_star(
    rng: np.random.Generator, n: int, in_effect: float = 0.0, interaction: float = 0.0
) -> list[dict[str, Any]]:
    races, genders = ["Asian", "Black", "Hispanic", "White"], ["Female", "Male"]
    rows = []
    for i in range(n):
        race, gender = races[i % 4], genders[(i // 4) % 2]
        base = 0.35 + (interaction if (race == "Black" and gender == "Female") else 0.0)
        row: dict[str, Any] = {
            "dialogue_id": f"d{i}",
            "status": "submitted",
            "rule": ["hate-speech", "stereotypes"][i % 2],
            "area": "misinformation",
            "cell": f"c{i % 24}",
            "target_group": f"{race} × {gender}",
            "target_race": race,
            "target_gender": gender,
            "red_teamer_in_group": bool(i % 2),
            "turns": [{"role": "target", "text": "x", "tension": float(rng.random())}],
        }
        for k in (1, 2):
            in_group = bool(rng.random() < 0.5)
            p = base + (in_effect if in_group else 0.0)
            broken = rng.random() < p
            row[f"annotator{k}_rating"] = int(rng.choice([1, 2]) if broken else rng.choice([3, 4]))
            row[f"annotator{k}_in_group"] = in_group
            row[f"annotator{k}_id"] = f"a{rng.integers(0, 50)}"
        rows.append(row)
    return rows


def to_data(tmp_path: Path, rows: list[dict[str, Any]], name: str = "star") -> Any:
    path = tmp_path / f"{name}.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows))
    return load(path)


def test_ingroup_test_keeps_its_nominal_rate_without_an_effect(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    rejections = 0
    runs = 200
    for i in range(runs):
        data = to_data(tmp_path, synthetic_star(rng, 200), f"null{i % 2}")
        result = ingroup_section(data)["annotators_overall"]
        rejections += result["p_value"] < 0.05
    assert 0.015 <= rejections / runs <= 0.095


def test_ingroup_test_finds_a_planted_effect(tmp_path: Path) -> None:
    data = to_data(tmp_path, synthetic_star(np.random.default_rng(2), 800, in_effect=0.15))
    result = ingroup_section(data)
    overall = result["annotators_overall"]
    assert overall["p_value"] < 0.001
    assert overall["in-group"]["rate"] > overall["out-group"]["rate"]
    assert all("p_value_holm" in v for v in result["annotators_by_rule"].values())


def test_intersectional_model_finds_a_planted_interaction_only_when_present(tmp_path: Path) -> None:
    with_it = intersectional_section(
        to_data(tmp_path, synthetic_star(np.random.default_rng(3), 1600, interaction=0.35), "a")
    )
    assert with_it["lr_test"]["p_value"] < 0.001
    without = intersectional_section(to_data(tmp_path, synthetic_star(np.random.default_rng(4), 1600), "b"))
    assert without["lr_test"]["p_value"] > 0.01
    assert without["lr_test"]["df"] == 3
    ors = with_it["odds_ratios"]
    key = next(k for k in ors if ":" in k and "Black" in k and "Male" in k)
    assert ors[key]["odds_ratio"] < 1  # the interaction is the Black x Female cell, Male is the contrast


def test_not_computable_sections_and_the_report_still_written(tmp_path: Path) -> None:
    expert = load(SHARED_DATA / "dices_judgebench" / "dices_350_expert.json")
    assert agreement_section(expert)["computable"] is False
    assert "one rating per item" in agreement_section(expert)["reason"]
    small = to_data(tmp_path, synthetic_star(np.random.default_rng(5), 6))
    assert group_comparison((1, 2), (3, 4), ("a", "b"))["computable"] is False
    assert intersectional_section(small)["computable"] is False
    report = analyze([expert, small], n_boot=50)
    write_report(report, [expert, small], tmp_path / "out")
    assert (tmp_path / "out" / "report.html").read_text().count("Not computable") >= 3


def test_detection_and_bad_files(tmp_path: Path) -> None:
    assert detect(DICES) == "dices"
    assert detect(DIASAFETY) == "diasafety-cc"
    assert detect(XSTEST) == "xstest"
    assert detect(SHARED_DATA / "anthropic_hh_harmless_base" / "test.jsonl.gz") == "anthropic-hh"
    bad = tmp_path / "x.json"
    bad.write_text('[{"what": 1}]')
    with pytest.raises(InputError, match="no adapter recognises"):
        detect(bad)
    with pytest.raises(InputError, match="does not match the 'diasafety-cc' format"):
        load(bad, "diasafety-cc")


def test_missing_is_missing(tmp_path: Path) -> None:
    rows = synthetic_star(np.random.default_rng(6), 20)
    rows[0]["annotator2_rating"] = None
    data = to_data(tmp_path, rows)
    assert len(data.annotations) == 39
    dices = load(DICES)
    binary, _ = counts_matrix(dices.annotations, 3, dices.positive, dices.excluded)
    assert binary.sum() == len(dices.annotations) - int((dices.annotations["value"] == 1).sum())  # Unsure left out


def test_cli_analyze_escapes_and_writes_everything(tmp_path: Path) -> None:
    rows = synthetic_star(np.random.default_rng(7), 120)
    rows[0]["rule"] = "<script>alert(1)</script>"
    star = tmp_path / "export.jsonl"
    star.write_text("\n".join(json.dumps(r) for r in rows))
    out = cli(
        "star", "analyze", str(star), "--compare", f"dia={DIASAFETY}", "--out", str(tmp_path / "r"), "--bootstrap", "50"
    )
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
def test_embedding_map_with_the_offline_minilm(tmp_path: Path) -> None:
    from psychoalign.star.analysis.embedding import embedding_section, minilm_embedder

    dia = load(DIASAFETY)
    hh = load(SHARED_DATA / "anthropic_hh_harmless_base" / "test.jsonl.gz", name="anthropic-hh")
    section = embedding_section([dia, hh], per_dataset=60, n_clusters=5, seed=0, embedder=minilm_embedder())
    assert section["computable"]
    assert sum(sum(v.values()) for v in section["cluster_by_dataset"].values()) == 120
    assert all(section["top_terms"][c] for c in section["top_terms"])
