"""The lab's in-browser report is built from the store's rows through a temporary file: the report
named that file ("From pilot-1.json (118944 bytes, SHA-256 …)"), which nobody can find or check.
It names no file now, as docs/star-analysis.md says."""

from __future__ import annotations

from psychoalign.web.star.results import build_report, data_read


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


def test_the_lab_report_names_the_store_state_it_read() -> None:
    """The lab's report has no file to name; it names the campaign's data version instead, so two
    reports of one campaign say which saw more work (a rerun after new annotations reads more)."""
    rows = [{"dialogue_id": f"d{i}", "campaign": "pilot-1", "status": "submitted", "rule": "r1"} for i in range(2)] + [
        {
            "dialogue_id": "d9",
            "campaign": "pilot-1",
            "status": "submitted",
            "rule": "r1",
            "annotator1_id": "a1",
            "annotator1_rating": 2,
            "annotator2_id": "a2",
            "annotator2_rating": 3,
        }
    ]
    page = build_report("pilot-1", rows, [], "5-1780000000000000")
    assert "campaign pilot-1 with 5 submitted task(s)" in page
    assert "latest submission 2026-05-28 20:26:40 UTC (data version 5-1780000000000000)" in page
    assert "Campaigns read: pilot-1 (3 dialogues: submitted 3)" in page
    assert data_read("fresh", "0-0").startswith("Read from the lab's store: campaign fresh with 0 submitted task(s)")
    assert "latest submission none yet" in data_read("fresh", "0-0")
