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


def star_rows(n: int, campaign: str, *, rated: int) -> list[dict[str, object]]:
    """``n`` dialogues of ``campaign``, the first ``rated`` with both annotations, the rest in progress."""
    return [
        {
            "dialogue_id": f"{campaign}-d{i}",
            "campaign": campaign,
            "status": "submitted" if i < rated else "in_progress",
            "rule": "r1",
            "annotator1_id": "a1",
            "annotator1_rating": 1 + i % 4 if i < rated else None,
            "annotator2_id": "a2",
            "annotator2_rating": 1 + (i + i // 4) % 4 if i < rated else None,
        }
        for i in range(n)
    ]


def test_a_star_report_names_the_campaigns_it_read_and_a_rerun_with_more_work_says_so(tmp_path: Path) -> None:
    """Which campaign's data, how far along: an export taken before more annotations came in, and
    one taken after, give reports that name different counts (and different figures), never a
    stale one."""
    path = tmp_path / "export.jsonl"

    def report_of(rows: list[dict[str, object]]) -> dict[str, object]:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        report = analyze([load(path)], n_boot=20, embed=False)
        return dict(report["datasets"]["export"])

    before = report_of(star_rows(14, "pilot", rated=11) + star_rows(2, "other", rated=2))
    assert (
        "Campaigns read: other (2 dialogues: submitted 2); pilot (14 dialogues: submitted 11, in_progress 3)"
        in (before["notes"])
    )
    after = report_of(star_rows(14, "pilot", rated=14) + star_rows(2, "other", rated=2))
    assert "Campaigns read: other (2 dialogues: submitted 2); pilot (14 dialogues: submitted 14)" in after["notes"]
    assert before["source"]["sha256"] != after["source"]["sha256"]  # type: ignore[index]
    assert before["ratings"] == 26 and after["ratings"] == 32
    alpha_before = before["agreement"]["overall"]["ordinal"]["alpha"]  # type: ignore[index]
    alpha_after = after["agreement"]["overall"]["ordinal"]["alpha"]  # type: ignore[index]
    assert alpha_before != alpha_after
