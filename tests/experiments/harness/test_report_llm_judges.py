"""The report's judge rows when a literature suite's LLM judge decides a column: the row names that
judge and its own held-out validity (weak when unmeasured), never the refusal judge's calibration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from psychoalign.judges.jailbreak_eval import load_jbb_judge_set
from psychoalign.models import ChatRequest
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL, run, scripted, spec
from tests.experiments.suites.benchmarks.literature import LiteratureJudge, needs_data


def _rows(report: dict[str, Any], bench: str) -> dict[str, dict[str, Any]]:
    return {j["judge"]: j for j in report["judges"] if j["benchmark"] == bench}


def _column(report: dict[str, Any], bench: str, metric: str) -> dict[str, Any]:
    return next(c for c in report["columns"] if (c["benchmark"], c["metric"]) == (bench, metric))


@needs_data
async def test_an_uncalibrated_llm_judge_is_named_and_weak_on_its_columns_only(tmp_path: Path) -> None:
    """JBB with the HarmBench judge and calibration off: the ASR column's row is the HarmBench
    judge, weak (unmeasured); the over-refusal column keeps the refusal judge and its calibration."""
    models = {"chat": scripted("chat", lambda r: REFUSAL), "judge": scripted("j", LiteratureJudge(success="no"))}
    bench = {"name": "jbb", "options": {"judge": "harmbench"}}
    report, _ = await run(tmp_path, spec(["vanilla"], [bench], 3, judge={"calibration_n": 0}), models)
    rows = _rows(report, "jbb")
    llm = rows["harmbench (LLM judge)"]
    assert llm["columns"] == ["attack_success"] and llm["status"] == "weak"
    assert "unmeasured" in llm["weak_reason"] and "calibration disabled" in llm["weak_reason"]
    assert llm["usage"] == {"harmbench": 3} and "agreement" not in llm
    assert rows["refusal"]["columns"] == ["over_refusal"]
    assert _column(report, "jbb", "attack_success")["weak_judges"] == ["harmbench (LLM judge)"]
    assert "harmbench (LLM judge)" not in _column(report, "jbb", "over_refusal").get("weak_judges", [])
    assert not any(j["judge"].startswith("harm (") for j in report["judges"])  # no harm judge decided anything


class Oracle:
    """A HarmBench judge that answers as JailbreakBench's human majority did (found by the response)."""

    def __init__(self, flip: bool = False) -> None:
        self.truth = {row.response[:200]: row.human for row in load_jbb_judge_set(SHARED_DATA)}
        self.flip = flip
        self.calibrated = 0

    def __call__(self, request: ChatRequest) -> str:
        text = "\n".join(m.content for m in request.messages)
        for start, human in self.truth.items():
            if start and start in text:
                self.calibrated += 1
                return "yes" if human != self.flip else "no"
        return "no"  # a suite item: the scripted target refused


@needs_data
async def test_the_llm_judge_row_shows_its_own_held_out_agreement(tmp_path: Path) -> None:
    oracle = Oracle()
    models = {"chat": scripted("chat", lambda r: REFUSAL), "judge": scripted("j", oracle)}
    bench = {"name": "harmbench", "options": {"judge": "harmbench"}}
    report, store = await run(tmp_path, spec(["vanilla"], [bench], 2, judge={"calibration_n": 40}), models)
    assert oracle.calibrated == 40
    [row] = _rows(report, "harmbench").values()
    assert row["judge"] == "harmbench (LLM judge)" and row["status"] == "measured"
    assert (row["agreement"], row["kappa"], row["n"]) == (1.0, 1.0, 40)
    assert "JailbreakBench" in row["reference"]
    assert "weak_judges" not in _column(report, "harmbench", "attack_success")
    run_record = (await store.list_runs())[0]
    assert "refusal_calibration" not in run_record.meta  # the refusal judge decided nothing here


@needs_data
async def test_an_llm_judge_against_the_humans_is_weak_with_its_agreement(tmp_path: Path) -> None:
    models = {"chat": scripted("chat", lambda r: REFUSAL), "judge": scripted("j", Oracle(flip=True))}
    bench = {"name": "harmbench", "options": {"judge": "harmbench"}}
    report, _ = await run(tmp_path, spec(["vanilla"], [bench], 2, judge={"calibration_n": 30}), models)
    [row] = _rows(report, "harmbench").values()
    assert row["status"] == "weak" and row["agreement"] == 0.0 and "is below chance" in row["weak_reason"]
    assert _column(report, "harmbench", "attack_success")["weak_judges"] == ["harmbench (LLM judge)"]
    assert report["best"]["harmbench/attack_success"] is None
