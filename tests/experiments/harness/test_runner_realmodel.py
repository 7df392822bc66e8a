"""The experiment harness on the embedded default model, end to end (N = 2 per benchmark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from psychoalign.config import load_settings
from psychoalign.experiments import ExperimentSpec, build_report, run_experiment, write_report
from psychoalign.experiments.harness.store import SQLResultStore
from psychoalign.traces import SQLTraceStore
from tests.conftest import SHARED_DATA

pytestmark = [pytest.mark.realmodel, pytest.mark.needs_data()]


async def test_embedded_model_runs_every_benchmark_and_a_negotiation(tmp_path: Path) -> None:
    settings = load_settings(
        environ={
            "PSYCHOALIGN_DEFAULTS__MAX_TOKENS": "64",
            "PSYCHOALIGN_HOME": str(tmp_path / "home"),
            "PSYCHOALIGN_EXPERIMENTS__DATA_DIR": str(SHARED_DATA),
        }
    )
    spec = ExperimentSpec.model_validate(
        {
            "name": "smoke",
            "n": 2,
            "concurrency": 1,
            "systems": [
                "vanilla",
                {"name": "psychoalign", "negotiation": {"k": 1, "n_proposals": 1}, "options": {}},
            ],
            "benchmarks": ["hhh", "advbench", "mt-bench", "realtoxicity", "xstest"],
            "judge": {"calibration_n": 20, "harm": False, "choice_model": False},  # model judge: MT-Bench
        }
    )
    # the negotiation only on AdvBench: the real path, kept cheap
    url = f"sqlite:///{tmp_path / 'r.db'}"
    store, traces = SQLResultStore(url), SQLTraceStore(url)
    vanilla = spec.with_overrides(systems=["vanilla"])
    negotiated = spec.with_overrides(systems=["psychoalign"], benchmarks=["advbench"], n=1)
    for s in (vanilla, negotiated):
        summary = await run_experiment(s, settings, store=store, trace_store=traces)
        assert summary.ran == summary.total
    cells = await store.cells(vanilla.run_id())
    assert len(cells) == 2 * 4 + 4  # XSTest: 2 safe + 2 unsafe
    for c in cells:
        assert c.status in ("done", "failed")
        assert c.status == "failed" or all(0.0 <= v <= 1.0 for v in c.metrics.values())
        assert c.status == "done" or c.error  # a failure always carries its reason
        assert c.cost["calls"] >= 1 or c.status == "failed"
    # offline judges never fail: the refusal and toxicity benchmarks are scored
    assert all(c.status == "done" for c in cells if c.benchmark in ("xstest", "realtoxicity"))
    for c in await store.cells(negotiated.run_id()):
        assert len(c.trace_ids) == 1 and await traces.get(c.trace_ids[0]) is not None
    record = await store.get_run(vanilla.run_id())
    assert record is not None
    report = build_report(record, await store.cells(vanilla.run_id()))
    json_path, html_path = write_report(report, tmp_path / "out")
    assert json.loads(json_path.read_text())["status"]["running"] == 0
    # the embedded model serves one call at a time, and judges MT-Bench in plain text: flagged weak
    # (its grader is checked on the first calibration_n = 20 capability pairs: fewer than 30, so weak at best)
    assert report["run"]["concurrency"]["serial_models"] == ["local:smollm2-135m-instruct"]
    mt = next(j for j in report["judges"] if j["benchmark"] == "mt-bench")
    assert "weak" in mt and mt["status"] == "weak" and mt["n"] == 20
    assert all(r.verdict.get("format") == "fastchat" for c in cells if c.benchmark == "mt-bench" for r in c.judges)
    assert "<b>Weak judge" in html_path.read_text()
    assert html_path.read_text().count("<tr>") > 5
    await store.close()
    await traces.close()
