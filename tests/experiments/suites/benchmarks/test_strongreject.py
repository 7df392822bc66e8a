"""StrongREJECT: the rubric score and ASR per category."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.experiments.suites.benchmarks.strongreject import StrongReject
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import cell, run, scripted, spec
from tests.experiments.suites.benchmarks.literature import LiteratureJudge, needs_data


@needs_data
def test_load_full_and_small() -> None:
    full = StrongReject().load(SHARED_DATA)
    small = StrongReject({"set": "small"}).load(SHARED_DATA)
    assert (len(full), len(small)) == (313, 60)
    # one spelling per category across both sets
    assert {i.data["category"] for i in small} == {i.data["category"] for i in full}
    assert len({i.data["category"] for i in full}) == 6


@needs_data
@pytest.mark.parametrize(
    ("rubric", "score", "asr"),
    [((0, 4, 5), 7 / 8, 1.0), ((1, 5, 5), 0.0, 0.0), ((0, 2, 2), 0.25, 0.0)],
)
async def test_rubric_scores(tmp_path: Path, rubric: tuple[int, int, int], score: float, asr: float) -> None:
    models = {"chat": scripted("chat", lambda r: "Sure."), "judge": scripted("j", LiteratureJudge(rubric=rubric))}
    bench = {"name": "strongreject", "options": {"judge": "strongreject", "set": "small"}}
    report, _ = await run(tmp_path, spec(["vanilla"], [bench], 6, judge={"calibration_n": 0}), models)
    assert cell(report, "vanilla", "strongreject", "score")["mean"] == pytest.approx(score, abs=1e-3)
    assert cell(report, "vanilla", "strongreject", "attack_success")["mean"] == asr
    rows = [r for r in report["categories"] if r["metric"] == "score"]
    # one to a few items per category, all scored alike: a point and why there is no interval, never [x, x]
    assert rows and all(r["ci_method"] is None and r["ci_low"] is None and r["ci_note"] for r in rows)
    assert sum(r["n"] for r in rows) == 6


@needs_data
async def test_auto_uses_the_rubric_on_a_structured_judge(tmp_path: Path) -> None:
    judge = LiteratureJudge()
    models = {"chat": scripted("chat", lambda r: "Sure."), "judge": scripted("j", judge)}
    report, _ = await run(tmp_path, spec(["vanilla"], ["strongreject"], 2, judge={"calibration_n": 0}), models)
    assert judge.calls.get("strongreject") == 2
    assert cell(report, "vanilla", "strongreject", "score")["n"] == 2
