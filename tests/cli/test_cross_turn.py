"""`experiment run cross-turn-scripted`: the tables it prints."""

from __future__ import annotations

from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from psychoalign.cli import cross_turn as cross_turn_cli
from psychoalign.cli.experiment import experiment_registry
from psychoalign.experiments.studies.cross_turn import run


def test_the_experiment_is_registered() -> None:
    assert "cross-turn-scripted" in experiment_registry().commands


def test_the_tables_show_dialogues_and_say_when_there_is_no_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    """A follow-up row over 12 dialogues shows their number beside its rows; one over 9 dialogues
    with repeats prints '(no interval)' and why, never a number it does not have."""
    clustered = run.rate_row(
        [d < 4 for d in range(12) for _ in range(3)], [f"d{d}" for d in range(12) for _ in range(3)]
    )
    few = run.rate_row([True, False, False] * 9, [f"d{d}" for d in range(9) for _ in range(3)])
    once = run.rate_row([True] + [False] * 11, [f"d{d}" for d in range(12)])
    system = {"asr": {"crescendo": once}, "benign_followup_refusal": {"sensitive-once": clustered}}
    system["turns_tightened"] = {"sensitive-once": few}
    result = {"n_per_family": 12, "seed": 0, "systems": {"psychoalign": system}}

    async def fake(n: int, seed: int) -> dict[str, Any]:
        return result

    monkeypatch.setattr(run, "simulate", fake)
    app = typer.Typer()
    app.command()(cross_turn_cli.cross_turn_scripted)
    out = CliRunner().invoke(app, ["--n", "12"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    lo, hi = clustered["ci95"]
    assert f"12/36 = 0.333 [{lo:.3f}, {hi:.3f}], 12 dialogues" in text
    lo, hi = once["ci95"]
    assert f"1/12 = 0.083 [{lo:.3f}, {hi:.3f}]" in text  # one row per dialogue: no count beside it
    assert f"1/12 = 0.083 [{lo:.3f}, {hi:.3f}], 12 dialogues" not in text
    assert "9/27 = 0.333 (no interval)" in text
    assert few["ci_note"] in text
