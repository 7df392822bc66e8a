"""MT-Bench: both turns graded, the second seeing the first, scores normalised."""

from __future__ import annotations

from pathlib import Path

from psychoalign.models import ChatRequest, ScriptedBackend
from tests.experiments.helpers import Judge, cell, last_user, run, scripted, spec


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


async def test_mt_bench_ratings_are_whole_numbers_as_fastchat_asks(tmp_path: Path) -> None:
    judge = Judge(rating=lambda r: 4.123)
    models = {"chat": scripted("chat", lambda r: "An answer."), "judge": scripted("j", judge)}
    report, store = await run(tmp_path, spec(["vanilla"], ["mt-bench"], 1, judge={"calibration_n": 0}), models)
    assert cell(report, "vanilla", "mt-bench", "score")["failed"] == 1  # a fraction is not a rating: not judged
    cells = await store.cells(report["run"]["id"])
    assert "junk" in (cells[0].error or "")
    backend = models["judge"].backend
    assert isinstance(backend, ScriptedBackend)
    asked = next(r for r in backend.requests if r.schema_name == "mt_bench")
    assert asked.json_schema is not None and asked.json_schema["properties"]["rating"]["type"] == "integer"
