"""`psychoalign experiment cells RUN --format csv|jsonl`: a run's cells exported from the store."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import yaml

from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL
from tests.experiments.suites.benchmarks.literature import needs_data


@needs_data
def test_cells_export_csv_and_jsonl(tmp_path: Path) -> None:
    from tests.cli.test_main import cli

    chat = tmp_path / "chat.yaml"
    chat.write_text(yaml.safe_dump({"rules": [], "default": REFUSAL}))
    judge = tmp_path / "judge.yaml"
    judge.write_text(yaml.safe_dump({"rules": [], "default": "no"}))
    config = tmp_path / "psychoalign.toml"
    config.write_text(
        f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{SHARED_DATA}"\n'
        f'[roles.chat]\nbackend = "scripted"\nscript = "{chat}"\n'
        f'[roles.judge]\nbackend = "scripted"\nscript = "{judge}"\n'
    )
    spec_file = tmp_path / "lit.yaml"
    spec_file.write_text(
        "name: lit\nsystems: [vanilla]\nn: 2\njudge: {calibration_n: 0}\n"
        "benchmarks: [{name: harmbench, options: {judge: harmbench}},\n"
        "  {name: strongreject, options: {judge: harmbench}}]\n"
    )
    res = cli("experiment", "run", str(spec_file), "--out", str(tmp_path / "out"), "--no-progress", "-c", str(config))
    assert res.returncode == 0, res.stderr
    run_id = json.loads((tmp_path / "out" / "results.json").read_text())["run"]["id"]

    jsonl = cli("experiment", "cells", run_id[:10], "--format", "jsonl", "-c", str(config))
    assert jsonl.returncode == 0, jsonl.stderr
    records = [json.loads(line) for line in jsonl.stdout.splitlines()]
    assert len(records) == 4 and {r["benchmark"] for r in records} == {"harmbench", "strongreject"}
    assert all(r["item_turns"] and r["responses"] == [REFUSAL] and r["judges"][0]["raw"] == "no" for r in records)
    # calibration_n 0: the LLM judge is unmeasured, which the report calls weak; so does every record
    assert all("weak: attack_success" in r["judge_status"] for r in records), records[0]["judge_status"]

    out = tmp_path / "cells.csv"
    res = cli(
        "experiment", "cells", run_id, "--format", "csv", "--benchmark", "harmbench", "-o", str(out), "-c", str(config)
    )
    assert res.returncode == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert len(rows) == 2 and all(r["metrics.attack_success"] == "0.0" for r in rows)
    assert all("weak: attack_success" in r["judge_status"] for r in rows)

    bad = cli("experiment", "cells", run_id, "--format", "xlsx", "-c", str(config))
    assert bad.returncode == 2 and "unknown --format" in bad.stderr and "Traceback" not in bad.stderr
    missing = cli("experiment", "cells", "nope", "-c", str(config))
    assert missing.returncode == 2 and "no run 'nope'" in missing.stderr
