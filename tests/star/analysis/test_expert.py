"""Experts vs crowd on few items or one label: Cohen's kappa and alpha follow the small-sample rule
of the agreement section (no interval below MIN_ALPHA_ITEMS items, a warning; no alpha on one item),
an undefined kappa is null with its reason (never NaN in report.json), and the JSON says what the
HTML says."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from statsmodels.stats.inter_rater import cohens_kappa

from psychoalign.star.analysis import analyze, load, write_report
from psychoalign.star.analysis.agreement import MIN_ALPHA_ITEMS
from psychoalign.star.analysis.mapping import mapping_from
from psychoalign.star.analysis.stats import expert_section

MAPPING = {"item_col": "item", "rater_col": "rater", "rating_col": "score", "order": "No,Yes"}


def write(tmp_path: Path, crowd: list[list[str]], expert: list[str]) -> Path:
    """One row per rating: ``crowd[i]`` are item i's crowd ratings, ``expert[i]`` its expert's."""
    rows = []
    for i, (labels, e) in enumerate(zip(crowd, expert, strict=True)):
        rows += [{"item": f"i{i}", "rater": f"c{r}", "score": s, "pool": "crowd"} for r, s in enumerate(labels)]
        rows.append({"item": f"i{i}", "rater": "e0", "score": e, "pool": "expert"})
    path = tmp_path / "ratings.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def test_few_items_give_no_interval_and_a_warning_in_the_json(tmp_path: Path) -> None:
    """Three items: the HTML said 'none: fewer than 10 items' while report.json carried alpha's
    bootstrap interval [-0.67, 1.0] over those three items, and kappa had no warning anywhere."""
    crowd = [["No", "No", "Yes"], ["Yes", "Yes", "No"], ["No", "No", "No"]]
    data = load(write(tmp_path, crowd, ["No", "Yes", "Yes"]), mapping=mapping_from(MAPPING))
    section = expert_section(data, n_boot=200)
    view = section["full_scale"]
    assert view["items"] == 3 < MIN_ALPHA_ITEMS
    assert view["alpha"]["ci_low"] is None and view["alpha"]["ci_high"] is None
    assert "only 3 items" in view["alpha"]["warning"]
    expected = cohens_kappa(np.array([[1, 1], [0, 1]])).kappa  # crowd No/Yes/No vs expert No/Yes/Yes
    assert view["cohens_kappa"] == pytest.approx(expected)
    assert view["cohens_kappa_ci"] is None
    assert "3 items" in view["warning"]
    report = analyze([data], n_boot=50, embed=False)
    write_report(report, [data], tmp_path / "out")
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "only 3 items" in page


def test_one_label_throughout_gives_no_kappa_and_valid_json(tmp_path: Path) -> None:
    """Crowd and expert say 'No' on every item: agreement 1.0, but kappa is 0/0. It was NaN in
    report.json (not JSON: a browser's JSON.parse rejects the file) and 'nan' in the HTML."""
    crowd = [["No", "No", "No"]] * 12
    data = load(write(tmp_path, crowd, ["No"] * 12), mapping=mapping_from(MAPPING))
    view = expert_section(data, n_boot=50)["full_scale"]
    assert view["agreement"] == 1.0
    assert view["cohens_kappa"] is None and view["cohens_kappa_ci"] is None
    assert "one label" in view["cohens_kappa_reason"]
    report = analyze([data], n_boot=50, embed=False)
    write_report(report, [data], tmp_path / "out")
    text = (tmp_path / "out" / "report.json").read_text(encoding="utf-8")
    json.loads(text, parse_constant=lambda c: pytest.fail(f"report.json holds {c}"))
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert ">nan<" not in page and "one label" in page


def test_enough_items_give_kappa_with_statsmodels_interval(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    truth = rng.integers(0, 2, 40)
    labels = ["No", "Yes"]
    crowd = [[labels[int(t)] if rng.random() < 0.8 else labels[1 - int(t)] for _ in range(5)] for t in truth]
    expert = [labels[int(t)] if rng.random() < 0.9 else labels[1 - int(t)] for t in truth]
    data = load(write(tmp_path, crowd, expert), mapping=mapping_from(MAPPING))
    view = expert_section(data, n_boot=100)["full_scale"]
    assert view["items"] >= MIN_ALPHA_ITEMS and "warning" not in view
    majority = pd.Series([max(set(c), key=c.count) for c in crowd])
    table = pd.crosstab(majority, pd.Series(expert)).to_numpy()
    ref = cohens_kappa(table)
    assert view["items"] == 40
    assert view["cohens_kappa"] == pytest.approx(ref.kappa)
    assert view["cohens_kappa_ci"] == pytest.approx([ref.kappa_low, ref.kappa_upp])
    assert view["alpha"]["ci_low"] is not None


def test_items_where_the_experts_tie_are_counted_apart_from_crowd_ties(tmp_path: Path) -> None:
    """Two experts who split on an item leave it out like a crowd tie; it was counted as an item
    'without a crowd majority', though the crowd had one."""
    rows = []
    for i in range(4):
        rows += [{"item": f"i{i}", "rater": f"c{r}", "score": "No", "pool": "crowd"} for r in range(3)]
        rows += [
            {"item": f"i{i}", "rater": "e0", "score": "No", "pool": "expert"},
            {"item": f"i{i}", "rater": "e1", "score": "Yes" if i == 0 else "No", "pool": "expert"},
        ]
    path = tmp_path / "ties.csv"
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    view = expert_section(load(path, mapping=mapping_from(MAPPING)), n_boot=20)["full_scale"]
    assert view["items"] == 3
    assert view["items_without_majority"] == 0 and view["items_without_expert_majority"] == 1


def test_experts_with_one_label_throughout_give_no_kappa_of_zero(tmp_path: Path) -> None:
    """The experts say 'No' on every item while the crowd varies: observed agreement equals chance
    agreement whatever the crowd does, so kappa is 0 by construction. It was reported as
    cohens_kappa 0.0, a measurement of agreement at chance; now none, with the reason."""
    crowd = [["No", "No", "No"]] * 9 + [["Yes", "Yes", "No"]] * 3
    data = load(write(tmp_path, crowd, ["No"] * 12), mapping=mapping_from(MAPPING))
    view = expert_section(data, n_boot=50)["full_scale"]
    assert view["agreement"] == 0.75
    assert view["cohens_kappa"] is None and view["cohens_kappa_ci"] is None
    assert view["cohens_kappa_reason"].startswith("undefined: the experts gave one label throughout")
    crowd_constant = load(write(tmp_path, [["No"] * 3] * 12, ["No"] * 9 + ["Yes"] * 3), mapping=mapping_from(MAPPING))
    reason = expert_section(crowd_constant, n_boot=50)["full_scale"]["cohens_kappa_reason"]
    assert reason.startswith("undefined: the crowd gave one label throughout")
