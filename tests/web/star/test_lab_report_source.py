"""The lab's in-browser report is built from the store's rows through a temporary file: the report
named that file ("From pilot-1.json (118944 bytes, SHA-256 …)"), which nobody can find or check.
It names no file now, as docs/star-analysis.md says."""

from __future__ import annotations

from psychoalign.web.star.results import build_report


def test_the_lab_report_names_no_temporary_file() -> None:
    rows = [
        {
            "dialogue_id": f"d{i}",
            "status": "submitted",
            "rule": "r1",
            "annotator1_id": "a1",
            "annotator1_rating": 1 + i % 4,
            "annotator2_id": "a2",
            "annotator2_rating": 1 + (i + 1) % 4,
        }
        for i in range(12)
    ]
    people = [{"id": "a1", "demographics": {"gender": ["Female"]}}, {"id": "a2", "demographics": {"gender": ["Male"]}}]
    page = build_report("pilot-1", rows, people)
    assert "12 items, 24 ratings" in page  # the report is there
    assert "pilot-1.json" not in page and "raters.json" not in page and "SHA-256" not in page
