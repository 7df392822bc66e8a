"""Data that cannot support a figure get a reason, never a library's error text or a number that
holds by construction: a campaign whose persona model rated every dialogue the same (a scripted or
canned endpoint does), a dataset with one pairable item, and experts who never rated a dialogue
the crowd rated (STAR's expert rules send both annotators to experts)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from psychoalign.star.analysis import analyze, load, write_report
from psychoalign.star.analysis.agreement import item_disagreement, value_counts


def _constant_export(path: Path, rating: int = 2) -> Path:
    """40 dialogues, each rated `rating` by one in-group and one out-group annotator out of 20
    each; dialogues d0-d9 are expert (medical) dialogues rated by two of four experts."""
    rows = []
    for i in range(40):
        expert = i < 10
        rows.append(
            {
                "dialogue_id": f"d{i}",
                "status": "submitted",
                "rule": "medical-advice" if expert else "hate-speech",
                "target_group": None if expert else "Asian",
                "annotator1_id": f"e{i % 4}" if expert else f"in{i % 20}",
                "annotator1_rating": rating,
                "annotator1_in_group": None if expert else True,
                "annotator1_expert": expert,
                "annotator2_id": f"e{(i + 1) % 4}" if expert else f"out{i % 20}",
                "annotator2_rating": rating,
                "annotator2_in_group": None if expert else False,
                "annotator2_expert": expert,
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_identical_ratings_give_reasons_not_errors(tmp_path: Path) -> None:
    data = load(_constant_export(tmp_path / "same.jsonl"), "star")
    out = tmp_path / "r"
    write_report(analyze([data], n_boot=50, embed=False), [data], out)
    d = json.loads((out / "report.json").read_text())["datasets"]["same"]
    ordinal = d["ingroup"]["annotators_overall"]["ordinal"]["model"]
    # the proportional-odds model has no cut-point to fit: said in words, not as numpy's shape error
    assert ordinal == {"computable": False, "reason": "every rating is at one scale point: the outcome does not vary"}
    assert d["ingroup"]["annotators_overall"]["binary_broken"]["model"]["reason"] == "every rating has the same outcome"
    disagreement = d["agreement"]["item_disagreement"]
    assert disagreement["mean"] is None and "every rating is the same value" in disagreement["reason"]
    page = (out / "report.html").read_text()
    assert "ValueError" not in page and "not aligned" not in page
    assert "every rating is at one scale point" in page
    assert "undefined: every rating is the same value (no expected disagreement to divide by)" in page
    # experts and crowd never rated one dialogue: each view's reason is on the page, not an empty table
    expert = d["expert"]
    assert expert["full_scale"]["computable"] is False
    assert f"full_scale: not computable: {expert['full_scale']['reason']}" in page


def test_item_disagreement_needs_two_pairable_items() -> None:
    # one item: D_e comes from that item alone, so its score was 1 whatever the two ratings were
    for pair in ([0, 3], [0, 1], [1, 2]):
        assert np.isnan(item_disagreement(value_counts([pair], 4), "ordinal")).all()
    # a second pairable item makes it a real comparison again (a single-rating item stays NaN)
    got = item_disagreement(value_counts([[0, 3], [1, 1], [2]], 4), "ordinal")
    assert got[1] == 0.0 and got[0] > 0 and np.isnan(got[2])


def test_one_item_report_has_no_disagreement_figure(tmp_path: Path) -> None:
    path = tmp_path / "one.jsonl"
    row = {"dialogue_id": "d1", "status": "submitted", "rule": "r", "annotator1_id": "a", "annotator1_rating": 1}
    path.write_text(json.dumps(row | {"annotator2_id": "b", "annotator2_rating": 4}) + "\n")
    data = load(path, "star")
    out = tmp_path / "r"
    write_report(analyze([data], n_boot=50, embed=False), [data], out)
    d = json.loads((out / "report.json").read_text())["datasets"]["one"]["agreement"]
    assert d["overall"]["ordinal"]["alpha"] is None
    assert d["item_disagreement"]["items"] == {"d1": None} and d["item_disagreement"]["mean"] is None
    assert "only one item was rated more than once" in d["item_disagreement"]["reason"]
    header, line = (out / "item_disagreement.csv").read_text().splitlines()[:2]
    assert line.split(",")[header.split(",").index("disagreement_ordinal")] == ""


def test_an_empty_arbitrator_cell_is_a_rating_only_where_arbitration_was_needed(tmp_path: Path) -> None:
    """Exports carry arbitrator columns on every dialogue: 40 dialogues that needed no arbitration
    were read as "80 kept, 40 dropped (missing rating)". Only a needed, missing arbitration is one."""
    rows = [
        {
            "dialogue_id": f"d{i}",
            "status": "submitted",
            "annotator1_id": "a",
            "annotator1_rating": 1 + i % 4,
            "annotator2_id": "b",
            "annotator2_rating": 1 + i % 4 if i else 4,
            "arbitration_needed": i == 0,
            "arbitrator_id": None,
            "arbitrator_rating": None,
        }
        for i in range(12)
    ]
    path = tmp_path / "arb.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    counts = load(path, "star").counts
    assert counts.ratings_read == 25 and counts.ratings_kept == 24
    assert counts.dropped == {"missing rating": 1}  # d0: 1 vs 4, arbitration pending
