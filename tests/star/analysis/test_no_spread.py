"""A bootstrap interval with no width: when every dialogue's two ratings agree perfectly (or all
disagree in one pattern), every resample gives the same alpha and the percentile interval was
[1.00, 1.00] on 40 dialogues, an exact-looking figure the data cannot support. Now no interval is
given and the report says why, in the JSON, the HTML and the lead's panel."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from psychoalign.star.analysis import analyze, bootstrap_alpha, load, write_report
from psychoalign.star.analysis.agreement import small_sample, value_counts


def _export(path: Path, pairs: list[tuple[int, int]]) -> Path:
    rows = [
        {
            "dialogue_id": f"d{i}",
            "status": "submitted",
            "rule": "r1",
            "annotator1_id": "a1",
            "annotator1_rating": a,
            "annotator2_id": "a2",
            "annotator2_rating": b,
        }
        for i, (a, b) in enumerate(pairs)
    ]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_perfect_agreement_has_no_zero_width_interval() -> None:
    counts = value_counts([[0, 0] if i % 2 else [3, 3] for i in range(40)], 4)
    got = bootstrap_alpha(counts, "ordinal", n_boot=200)
    assert got["alpha"] == 1.0 and got["ci_low"] is None and got["ci_high"] is None and got["no_spread"]
    said = small_sample(got)
    assert "every bootstrap resample of the 40 items gave alpha 1.000" in str(said["warning"])
    # one pattern of disagreement (every pair 1 vs 3): the same, at a negative alpha
    worse = small_sample(bootstrap_alpha(value_counts([[0, 2], [2, 0]] * 20, 4), "ordinal", n_boot=200))
    assert worse["alpha"] is not None and worse["alpha"] < 0 and worse["ci_low"] is None and worse["warning"]
    # data with spread keep their interval and no warning
    rng = np.random.default_rng(0)
    mixed = bootstrap_alpha(value_counts([list(rng.integers(0, 4, 2)) for _ in range(40)], 4), "ordinal", n_boot=200)
    assert mixed["ci_low"] is not None and mixed["ci_high"] > mixed["ci_low"] and "no_spread" not in mixed


def test_report_says_no_interval_and_why(tmp_path: Path) -> None:
    data = load(_export(tmp_path / "agree.jsonl", [(1, 1) if i % 2 else (4, 4) for i in range(40)]), "star")
    out = tmp_path / "r"
    write_report(analyze([data], n_boot=100, embed=False), [data], out)
    ordinal = json.loads((out / "report.json").read_text())["datasets"]["agree"]["agreement"]["overall"]["ordinal"]
    assert ordinal["alpha"] == 1.0 and ordinal["ci_low"] is None and ordinal["ci_high"] is None
    assert ordinal["no_spread"] is True and "gave alpha 1.000" in ordinal["warning"]
    page = (out / "report.html").read_text()
    assert "none: every resample gave the same alpha" in page and "[1.000, 1.000]" not in page
    assert "<strong>No interval:</strong> every bootstrap resample of the 40 items" in page


def test_lead_panel_gives_no_zero_width_interval() -> None:
    from psychoalign.web.star.results import panel_results, render_panel
    from psychoalign.web.templating import Templates

    rows = [
        {"status": "submitted", "rule": "r", "annotator1_rating": a, "annotator2_rating": a}
        for a in [1, 4] * 10  # 20 dialogues rated twice, every pair in agreement
    ]
    results = panel_results(rows, planned=20)
    assert results["alpha"]["value"] == 1.0 and results["alpha"]["ci"] is None and results["alpha"]["no_spread"]
    html = render_panel(Templates(None), "c", results)
    assert 'id="results-no-spread"' in html and "95% interval" not in html
