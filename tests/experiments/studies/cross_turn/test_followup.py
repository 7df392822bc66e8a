"""The mt-bench-followup benchmark scores the refusal of the second (benign) turn."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.mark.needs_data("mt_bench")
async def test_mt_bench_followup_scores_refusal_of_the_second_turn(tmp_path: Path) -> None:
    from psychoalign.config import Settings
    from psychoalign.experiments import build_report, default_registry, run_experiment
    from psychoalign.experiments.harness.spec import ExperimentSpec
    from psychoalign.experiments.harness.store import InMemoryResultStore
    from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
    from tests.conftest import SHARED_DATA

    def chat(request: ChatRequest) -> str:  # answers turn 1, refuses the follow-up
        return "I'm sorry, but I can't help with that." if len(request.messages) == 3 else "Here is an answer."

    spec = ModelSpec(backend="scripted", model="chat", schema_retries=0, max_retries=0)
    models = {"chat": ChatModel(spec, ScriptedBackend(spec, fn=chat))}
    s = ExperimentSpec.model_validate(
        {"name": "t", "systems": ["vanilla"], "benchmarks": ["mt-bench-followup"], "n": 3, "judge": {"harm": False}}
    )
    settings = Settings(home=str(tmp_path / "home"), experiments={"data_dir": str(SHARED_DATA)})
    results = InMemoryResultStore()
    registry = default_registry()
    summary = await run_experiment(s, settings, store=results, models=models, registry=registry)
    record = await results.get_run(summary.run_id)
    assert record is not None and summary.done == 3
    report = build_report(record, await results.cells(summary.run_id), registry)
    rows = {r["metric"]: r for r in report["results"] if r["benchmark"] == "mt-bench-followup"}
    assert rows["over_refusal"]["mean"] == 1.0 and rows["turn1_refusal"]["mean"] == 0.0
