"""report.json names what its numbers came from: each dataset's file (name, size, SHA-256), the
rater file joined to it, and the package version, so a report can be matched to its input."""

from __future__ import annotations

import csv
import hashlib
import json
from importlib.metadata import version
from pathlib import Path

from psychoalign.star.analysis import analyze, attach_raters, load, mapping_from, write_report

MAPPING = {"item_col": "item", "rater_col": "rater", "rating_col": "score", "scale": "1..3"}


def ratings_file(path: Path) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["item", "rater", "score"])
        for i in range(6):
            for r in range(3):
                writer.writerow([f"i{i}", f"r{r}", 1 + (i + r) % 3])
    return path


def test_report_json_carries_each_input_file_and_its_hash(tmp_path: Path) -> None:
    path = ratings_file(tmp_path / "ratings.csv")
    raters = tmp_path / "raters.csv"
    raters.write_text("rater_id,gender\nr0,woman\nr1,man\nr2,woman\n", encoding="utf-8")
    data = attach_raters(load(path, mapping=mapping_from(MAPPING)), raters)
    report = analyze([data], n_boot=20, embed=False)
    source = report["datasets"]["ratings"]["source"]
    assert source["file"] == "ratings.csv"
    assert source["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert source["bytes"] == path.stat().st_size
    assert source["raters_file"] == {
        "file": "raters.csv",
        "sha256": hashlib.sha256(raters.read_bytes()).hexdigest(),
        "bytes": raters.stat().st_size,
    }
    assert report["package"] == {"name": "psychoalign", "version": version("psychoalign")}
    write_report(report, [data], tmp_path / "out")
    written = json.loads((tmp_path / "out" / "report.json").read_text(encoding="utf-8"))
    assert written["datasets"]["ratings"]["source"]["sha256"] == source["sha256"]
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert f"From ratings.csv ({source['bytes']} bytes, SHA-256 {source['sha256'][:12]}" in page


def test_an_edited_file_gets_another_hash(tmp_path: Path) -> None:
    path = ratings_file(tmp_path / "ratings.csv")
    before = analyze([load(path, mapping=mapping_from(MAPPING))], n_boot=20, embed=False)
    path.write_text(path.read_text(encoding="utf-8").replace("i0,r0,1", "i0,r0,3"), encoding="utf-8")
    after = analyze([load(path, mapping=mapping_from(MAPPING))], n_boot=20, embed=False)
    assert before["datasets"]["ratings"]["source"]["sha256"] != after["datasets"]["ratings"]["source"]["sha256"]
