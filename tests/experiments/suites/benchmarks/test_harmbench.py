"""HarmBench: behaviours read from the data folder, judged by the HarmBench judge tier, ASR per category."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.errors import ConfigError
from psychoalign.experiments.harness.registry import build_benchmark
from psychoalign.experiments.suites.benchmarks.harmbench import HarmBench
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL, cell, plain_model, run, scripted, spec
from tests.experiments.suites.benchmarks.literature import LiteratureJudge, needs_data

NO_CALIBRATION = {"calibration_n": 0}


@needs_data
def test_load_test_split_without_copyright() -> None:
    items = HarmBench().load(SHARED_DATA)
    assert len(items) == len({i.id for i in items}) > 0
    assert {i.data["functional"] for i in items} == {"standard", "contextual"}
    assert "copyright" not in {i.data["category"] for i in items}
    contextual = next(i for i in items if i.data["functional"] == "contextual")
    # HarmBench's contextual prompt: the context first, then the behaviour
    assert contextual.turns[0].startswith(contextual.data["context"])
    assert contextual.turns[0].endswith(contextual.data["behavior"])
    with_copyright = HarmBench({"functional": ["standard", "contextual", "copyright"], "split": "all"}).load(
        SHARED_DATA
    )
    assert len(with_copyright) == 400


def test_unknown_option_names_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="unknown option"):
        build_benchmark("harmbench", {"splits": "test"})
    with pytest.raises(ConfigError, match="option judge"):
        build_benchmark("harmbench", {"judge": "gpt"})


@needs_data
async def test_harmbench_judge_scores_asr_with_categories(tmp_path: Path) -> None:
    judge = LiteratureJudge(success="yes")
    models = {"chat": scripted("chat", lambda r: "Sure, here is how."), "judge": scripted("j", judge)}
    bench = {"name": "harmbench", "options": {"judge": "harmbench"}}
    report, _ = await run(tmp_path, spec(["vanilla"], [bench], 6, judge=NO_CALIBRATION), models)
    asr = cell(report, "vanilla", "harmbench", "attack_success")
    assert (asr["mean"], asr["n"]) == (1.0, 6)
    assert judge.calls == {"harmbench": 6}
    rows = [r for r in report["categories"] if r["benchmark"] == "harmbench"]
    assert sum(r["n"] for r in rows) == 6 and all(r["successes"] == r["n"] for r in rows)
    assert all(r["ci_method"] == "wilson" and r["ci_low"] <= r["mean"] <= r["ci_high"] for r in rows)

    judge = LiteratureJudge(success="No")
    models = {"chat": scripted("chat", lambda r: "Sure, here is how."), "judge": scripted("j", judge)}
    report, _ = await run(tmp_path / "b", spec(["vanilla"], [bench], 6, judge=NO_CALIBRATION), models)
    assert cell(report, "vanilla", "harmbench", "attack_success")["mean"] == 0.0


@needs_data
async def test_unreadable_judge_reply_fails_the_cell(tmp_path: Path) -> None:
    models = {
        "chat": scripted("chat", lambda r: "Sure."),
        "judge": scripted("j", LiteratureJudge(success="hard to say")),
    }
    bench = {"name": "harmbench", "options": {"judge": "harmbench"}}
    report, _ = await run(tmp_path, spec(["vanilla"], [bench], 3, judge=NO_CALIBRATION), models)
    asr = cell(report, "vanilla", "harmbench", "attack_success")
    assert asr["n"] == 0 and asr["failed"] == 3  # never scored as a zero
    assert all("no clear yes/no" in f["error"] for f in report["failures"])


@needs_data
async def test_auto_without_a_structured_judge_falls_back_to_refusal(tmp_path: Path) -> None:
    models = {"chat": scripted("chat", lambda r: REFUSAL), "judge": plain_model("j", lambda r: "unused")}
    s = spec(["vanilla"], ["harmbench"], 4, judge={"calibration_n": 0, "harm": "off"})
    report, store = await run(tmp_path, s, models)
    assert cell(report, "vanilla", "harmbench", "attack_success")["mean"] == 0.0
    run_id = report["run"]["id"]
    assert {c.details["judge"] for c in await store.cells(run_id)} == {"refusal+harm"}


@needs_data
async def test_report_names_the_judge_and_counts_its_judgements(tmp_path: Path) -> None:
    models = {"chat": scripted("chat", lambda r: "Sure."), "judge": scripted("j", LiteratureJudge(success="no"))}
    bench = {"name": "harmbench", "options": {"judge": "harmbench"}}
    report, _ = await run(tmp_path, spec(["vanilla"], [bench], 2, judge=NO_CALIBRATION), models)
    [row] = [j for j in report["judges"] if j["benchmark"] == "harmbench"]
    assert row["judge"] == "harmbench (LLM judge)" and row["usage"] == {"harmbench": 2}
