"""The analysis report's HTML (``star.analysis.report``) with hostile names in the data: a target
group, rule and dataset name holding a bidi override, an isolate and a zero-width space (from an
uploaded parameter file, or any dataset given to ``star analyze``)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from psychoalign.star.analysis import analyze, write_report
from tests.star.analysis.test_analysis import synthetic_star, to_data

HOSTILE = "G\u202eevil\u202c\u2067iso\u2069\u200b<b>x</b>"
CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200b\u200e\u200f\u061c]")


def test_hostile_names_in_the_data_are_shown_marked_escaped_and_isolated(tmp_path: Path) -> None:
    rows = synthetic_star(np.random.default_rng(7), 60)
    for row in rows:
        row["target_group"] = f"{row['target_group']} {HOSTILE}"
    data = to_data(tmp_path, rows, name="set\u202eevil")
    report = analyze([data], n_boot=20, embed=False)
    write_report(report, [data], tmp_path / "out")
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    raw = [page[max(0, m.start() - 60) : m.start()] for m in CONTROLS.finditer(page)]
    assert raw == [], f"{len(raw)} raw controls, each reordering the text after it: {raw[:3]}"
    assert "⟨U+202E⟩evil⟨U+202C⟩⟨U+2067⟩iso⟨U+2069⟩⟨U+200B⟩&lt;b&gt;x&lt;/b&gt;" in page
    assert "set⟨U+202E⟩evil" in page and "<b>x</b>" not in page
    # a group name inside a sentence (the raters per tested group) sits in its own isolate
    sentence = re.search(r"raters per tested group: (.*?)</p>", page)
    assert sentence is not None and sentence.group(1).startswith("<bdi dir='auto'>")
