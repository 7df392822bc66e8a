"""MT-Bench: both turns graded, the second seeing the first, scores normalised."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.models import ChatRequest
from tests.experiments.helpers import Judge, cell, last_user, run, scripted, spec


@pytest.mark.needs_data("mt_bench")
async def test_mt_bench_grades_both_turns_and_normalises(tmp_path: Path) -> None:
    def rating(request: ChatRequest) -> float:
        return 6.0 if "Conversation with User" in last_user(request) else 8.0

    seen: list[int] = []

    def chat(request: ChatRequest) -> str:
        seen.append(len(request.messages))
        return "An answer."

    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge(rating=rating))}
    report, _ = await run(tmp_path, spec(["vanilla"], ["mt-bench"], 4), models)
    assert cell(report, "vanilla", "mt-bench", "score")["mean"] == 0.7
    assert cell(report, "vanilla", "mt-bench", "turn1")["mean"] == 0.8
    assert cell(report, "vanilla", "mt-bench", "turn2")["mean"] == 0.6
    assert sorted(set(seen)) == [1, 3]  # the second turn sees the first exchange
