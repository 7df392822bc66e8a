"""A STAR export of campaigns whose LLM personas ran on different models: their ratings describe a
mixture of models under one name, so the analysis refuses to pool them and names the models; one
campaign's models are stated before any figure and written into report.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from psychoalign.errors import InputError
from psychoalign.star.analysis import analyze, load, write_report
from tests.cli.test_main import cli
from tests.star.analysis.test_analysis import synthetic_star

MODELS_A = {"attacker": "model:scripted:default@aaaaaaaaaaaa", "annotator": "model:openai:m@111111111111"}
MODELS_B = {"attacker": "model:scripted:default@aaaaaaaaaaaa", "annotator": "model:openai:m@222222222222"}


def _campaigns(models: list[dict[str, str] | None]) -> list[dict[str, Any]]:
    """Synthetic simulated-persona rows, campaign ``c<i>`` for every 1/len(models) of them,
    recording ``models[i]`` (None: stored before models were recorded)."""
    rows = synthetic_star(np.random.default_rng(3), 80)
    for i, row in enumerate(rows):
        k = i % len(models)
        row.update(campaign=f"c{k}", persona_models=models[k], target="model:openai:t@333333333333")
        row.update(red_teamer_simulated=True, annotator1_simulated=True, annotator2_simulated=True)
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_two_annotator_models_are_refused_and_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "two.jsonl", _campaigns([MODELS_A, MODELS_B]))
    with pytest.raises(InputError) as refused:
        load(path)
    said = str(refused.value)
    assert "its campaigns ran on different persona models" in said
    assert "c0: annotator model:openai:m@111111111111" in said and "c1: annotator model:openai:m@222222222222" in said
    assert "attacker" not in said.split("(")[1]  # only the role that differs is named
    assert "--campaign" in (refused.value.hint or "")

    out = cli("star", "analyze", str(path), "--out", str(tmp_path / "r"), "--no-embed", "--bootstrap", "0")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert next(line for line in out.stderr.splitlines() if line.strip()).startswith("error: two: its campaigns ran")
    assert not (tmp_path / "r" / "report.json").exists()


def test_one_set_of_models_is_stated_before_the_figures_and_in_the_report(tmp_path: Path) -> None:
    path = _write(tmp_path / "one.jsonl", _campaigns([MODELS_A, MODELS_A]))
    data = load(path)
    assert data.persona_models == {"models": MODELS_A, "unrecorded_campaigns": []}
    write_report(analyze([data], n_boot=0, embed=False), [data], tmp_path / "r")
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["datasets"]["one"]["persona_models"]["models"] == MODELS_A

    out = cli("star", "analyze", str(path), "--out", str(tmp_path / "cli"), "--no-embed", "--bootstrap", "0")
    assert out.returncode == 0, out.stderr
    said = out.stderr.splitlines()
    note = next(i for i, line in enumerate(said) if "Persona models: annotator model:openai:m@111111111111" in line)
    assert note < next(i for i, line in enumerate(said) if line.startswith("wrote "))


def test_simulated_work_without_recorded_models_is_named_as_unknown(tmp_path: Path) -> None:
    data = load(_write(tmp_path / "mixed.jsonl", _campaigns([MODELS_A, None])))
    assert data.persona_models["unrecorded_campaigns"] == ["c1"]
    note = next(n for n in data.notes if n.startswith("Simulated work of"))
    assert "(c1)" in note and "unknown" in note and "pooled with the recorded campaigns' work" in note
