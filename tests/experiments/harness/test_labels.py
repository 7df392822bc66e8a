"""Calibration files are read once on an experiment run: a user's own labelled file (checked with
the spec, hashed into the run's identity, measured at the end) and JailbreakBench's judge
comparison set (which several judges are calibrated on)."""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL

#: Files opened while a test watches (see _watch): path -> times opened.
_OPENED: Counter[str] = Counter()
_WATCHING: list[bool] = [False]


def _hook(event: str, args: tuple[object, ...]) -> None:
    if _WATCHING[0] and event == "open" and isinstance(args[0], str):
        _OPENED[args[0]] += 1


sys.addaudithook(_hook)  # a hook cannot be removed: it counts only while a test watches


def _rows(n: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = [{"prompt": f"q{i}", "response": REFUSAL, "refused": True} for i in range(n)]
    rows += [{"prompt": f"q{i}", "response": f"Here is {i}: 42.", "refused": False} for i in range(n)]
    return rows


@pytest.mark.needs_data("xstest", "harmbench", "jailbreakbench")
def test_an_experiment_run_reads_each_calibration_file_once(tmp_path: Path) -> None:
    from psychoalign.cli.main import app

    chat = tmp_path / "chat.yaml"
    chat.write_text(yaml.safe_dump({"rules": [], "default": REFUSAL}))
    judge = tmp_path / "judge.yaml"
    # the harm judge answers in JSON; the HarmBench classifier prompt is answered "no"
    rules = [{"match": "instance of the behaviour", "reply": "no"}]
    judge.write_text(yaml.safe_dump({"rules": rules, "default": {"harmful": False, "reason": "x"}}))
    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in _rows(6)) + "\n")
    config = tmp_path / "p.toml"
    config.write_text(
        f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{SHARED_DATA}"\n'
        f'[roles.chat]\nbackend = "scripted"\nscript = "{chat}"\n'
        f'[roles.judge]\nbackend = "scripted"\nscript = "{judge}"\n'
    )
    spec = tmp_path / "s.yaml"
    spec.write_text(
        "name: s\nsystems: [vanilla]\nbenchmarks: [xstest, harmbench]\nn: 2\n"
        f"judge: {{labels: {{refusal: {labels}}}, calibration_n: 10}}\n"
    )
    args = ["experiment", "run", str(spec), "--no-progress", "-c", str(config), "--out", str(tmp_path / "out")]
    _OPENED.clear()
    _WATCHING[0] = True
    try:
        result = CliRunner().invoke(app, args)
    finally:
        _WATCHING[0] = False
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "out" / "results.json").read_text())
    judges = {j["benchmark"]: j for j in report["judges"]}
    assert judges["xstest"]["reference"].startswith("user labels labels.jsonl")  # the file was measured
    assert report["run"]["identity"]["judges"]["labels"]["refusal"]  # and hashed into the identity
    comparison = str(SHARED_DATA / "jailbreakbench" / "classifier_comparison.csv")
    assert (_OPENED[str(labels)], _OPENED[comparison]) == (1, 1)


def test_a_changed_label_file_is_read_again_and_an_unchanged_one_is_not(tmp_path: Path) -> None:
    from psychoalign.experiments.harness.labels import read_user_labels

    labels = tmp_path / "labels.jsonl"
    labels.write_text("\n".join(json.dumps(r) for r in _rows(2)) + "\n")
    first = read_user_labels(labels, "refusal")
    _OPENED.clear()
    _WATCHING[0] = True
    try:
        assert read_user_labels(labels, "refusal") is first
    finally:
        _WATCHING[0] = False
    assert _OPENED[str(labels)] == 0
    labels.write_text("\n".join(json.dumps(r) for r in _rows(3)) + "\n")
    _WATCHING[0] = True
    try:
        again = read_user_labels(labels, "refusal")
    finally:
        _WATCHING[0] = False
    assert _OPENED[str(labels)] == 1
    assert (len(first.rows), len(again.rows)) == (4, 6) and first.sha256 != again.sha256
