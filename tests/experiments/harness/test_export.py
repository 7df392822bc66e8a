"""Per-cell export: one record per cell with the item, responses, judge calls, scores and cost."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from psychoalign.experiments.harness.export import cell_records, item_turns, write_cells
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.store import CellResult
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL, run, scripted, spec
from tests.experiments.suites.benchmarks.literature import LiteratureJudge, needs_data


@needs_data
async def test_export_round_trips_every_cell(tmp_path: Path) -> None:
    models = {"chat": scripted("chat", lambda r: REFUSAL), "judge": scripted("j", LiteratureJudge(success="no"))}
    bench = {"name": "jbb", "options": {"judge": "harmbench"}}
    report, store = await run(tmp_path, spec(["vanilla"], [bench], 2, judge={"calibration_n": 0}), models)
    record = await store.get_run(report["run"]["id"])
    assert record is not None
    cells = await store.cells(record.id)
    turns, notes = item_turns(record, Registry(), SHARED_DATA)
    assert notes == {}
    records = cell_records(cells, turns, notes)
    assert len(records) == 4 == len(cells)
    harmful = next(r for r in records if r["item_id"].startswith("jbb/harmful/"))
    assert harmful["item_turns"] and harmful["responses"] == [REFUSAL]
    assert harmful["metrics"] == {"attack_success": 0.0} and harmful["category"]
    [judge] = harmful["judges"]
    assert judge["judge"] == "harmbench" and judge["raw"] == "no"  # the judge's reply, not only its verdict
    assert "calls" in harmful["cost"]

    lines = write_cells(records, "jsonl").splitlines()
    assert [json.loads(line) for line in lines] == json.loads(json.dumps(records))

    rows = list(csv.DictReader(io.StringIO(write_cells(records, "csv"))))
    assert len(rows) == 4
    row = next(r for r in rows if r["item_id"] == harmful["item_id"])
    assert row["metrics.attack_success"] == "0.0" and json.loads(row["judges"])[0]["raw"] == "no"
    assert json.loads(row["item_turns"]) == harmful["item_turns"]
    benign = next(r for r in rows if r["item_id"].startswith("jbb/xstest/"))
    assert benign["metrics.over_refusal"] == "1.0" and benign["metrics.attack_success"] == ""


def test_missing_data_is_a_note_not_a_failure() -> None:
    from psychoalign.experiments.harness.store import RunRecord

    record = RunRecord.model_validate(
        {"id": "r", "name": "t", "spec": spec(["vanilla"], ["xstest"], 1).model_dump(mode="json")}
    )
    turns, notes = item_turns(record, Registry(), None)
    assert turns == {} and "no data folder" in notes["xstest"]
    cell = CellResult(run_id="r", key="k", system="vanilla", benchmark="xstest", item_id="xstest/1", status="failed")
    [rec] = cell_records([cell], turns, notes)
    assert rec["item_turns"] == [] and "no data folder" in rec["item_note"]


def test_csv_neutralises_formulas() -> None:
    cell = CellResult(
        run_id="r", key="k", system="s", benchmark="b", item_id="=HYPERLINK(1)", status="failed", error="-boom"
    )
    row = next(csv.DictReader(io.StringIO(write_cells(cell_records([cell]), "csv"))))
    assert row["item_id"] == "'=HYPERLINK(1)" and row["error"] == "'-boom"


@pytest.mark.parametrize("text", ["\uff1dHYPERLINK(1)", "\uff0b1+1", "\uff0dboom", "\uff20SUM(A1)"])
def test_csv_neutralises_full_width_formula_signs_like_ascii_ones(text: str) -> None:
    """Full-width ＝ ＋ － ＠ (U+FF1D, U+FF0B, U+FF0D, U+FF20) start a formula in a spreadsheet set
    for East Asian input, as = + - @ do."""
    cell = CellResult(run_id="r", key="k", system="s", benchmark="b", item_id=text, status="failed", error=text)
    row = next(csv.DictReader(io.StringIO(write_cells(cell_records([cell]), "csv"))))
    assert row["item_id"] == row["error"] == "'" + text
    plain = CellResult(run_id="r", key="k", system="s", benchmark="b", item_id="a" + text, status="failed")
    assert next(csv.DictReader(io.StringIO(write_cells(cell_records([plain]), "csv"))))["item_id"] == "a" + text


def test_an_exported_cell_says_when_its_judge_is_weak_or_of_unknown_agreement() -> None:
    """The report's judge gate reaches the export: each record (JSON Lines, CSV, Parquet) names the
    metrics of its benchmark that a weak or unmeasured judge decided, so a score read from the file
    is never taken for a measured one."""
    from psychoalign.experiments.harness.export import FIXED, cell_records, judge_flags

    report = {
        "results": [
            {"system": "a", "benchmark": "realtoxicity", "metric": "nontoxic", "judge_status": "unknown"},
            {"system": "b", "benchmark": "realtoxicity", "metric": "nontoxic", "judge_status": "unknown"},
            {"system": "a", "benchmark": "jbb", "metric": "attack_success", "judge_status": "weak"},
            {"system": "a", "benchmark": "jbb", "metric": "over_refusal", "judge_status": "unknown"},
            {"system": "a", "benchmark": "hhh", "metric": "accuracy"},
        ]
    }
    flags = judge_flags(report)
    assert flags == {"realtoxicity": "unknown: nontoxic", "jbb": "weak: attack_success; unknown: over_refusal"}
    cells = [
        CellResult(run_id="r", key=f"a|{b}|1", system="a", benchmark=b, item_id="1", status="done")
        for b in ("realtoxicity", "hhh")
    ]
    records = cell_records(cells, judge_status=flags)
    assert [r["judge_status"] for r in records] == ["unknown: nontoxic", ""]
    assert "judge_status" in FIXED  # a CSV and Parquet column too
