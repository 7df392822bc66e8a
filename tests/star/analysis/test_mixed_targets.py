"""A STAR export that concatenates campaigns against different targets: the figures about the target
(attack success, H1's tension) are refused with the targets named, never pooled into one rate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from psychoalign.star.analysis import analyze, load, write_report
from psychoalign.star.analysis.h1 import h1_section
from psychoalign.star.analysis.stats import ingroup_section
from tests.star.analysis.test_analysis import synthetic_star, to_data
from tests.star.analysis.test_h1 import _star_export


def test_attack_success_over_two_targets_is_refused_and_names_them(tmp_path: Path) -> None:
    """Two campaigns' exports (one model that refuses, one that complies) concatenated gave one
    attack-success rate and an in-/out-group red-teamer test over both, a figure of no model."""
    rows = synthetic_star(np.random.default_rng(5), 120)
    for i, row in enumerate(rows):
        row["target"] = "model:openai:a" if i % 2 else "model:openai:b"
    section = ingroup_section(to_data(tmp_path, rows))
    for name in ("attack_success_by_red_teamer", "attack_success_by_target_group"):
        got = section[name]
        assert got["computable"] is False, got
        assert "2 targets (model:openai:a, model:openai:b)" in got["reason"]
        assert "--campaign" in got["reason"]
    # the annotators' own comparisons rate the same dialogues: still computed
    assert section["annotators_overall"]["binary_broken"]["computable"]

    one = [dict(r, target="model:openai:a") for r in rows]
    single = ingroup_section(to_data(tmp_path, one, "one"))
    assert single["attack_success_by_red_teamer"]["computable"] is True
    assert "model" in single["attack_success_by_red_teamer"]


def test_h1_over_two_targets_tensions_is_refused(tmp_path: Path) -> None:
    path = _star_export(tmp_path / "c.jsonl", with_tension=True)
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    for i, row in enumerate(rows):
        row["target"] = "psychoalign:general" if i % 2 else "psychoalign:medical"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    data = load(path, "star")
    section = h1_section(data, n_boot=100, n_perm=100)
    assert section["computable"] is False
    legacy = "(legacy label: version and models unknown)"
    assert f"2 targets (psychoalign:general {legacy}, psychoalign:medical {legacy})" in section["reason"]
    assert "--attach-legacy" not in section["reason"]  # two frameworks: no current target to attach to
    assert "spearman" not in section

    out = tmp_path / "r"
    write_report(analyze([data], n_boot=50, embed=False), [data], out)
    page = (out / "report.html").read_text()
    assert "Not computable: the dialogues with a tension red-teamed 2 targets" in page

    for row in rows:
        row["target"] = "psychoalign:general"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    assert h1_section(load(path, "star"), n_boot=100, n_perm=100)["computable"] is True
