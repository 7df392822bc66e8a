"""JailbreakBench: the harmful half (ASR per category) and a benign half for over-refusal."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.errors import InputError
from psychoalign.experiments.suites.benchmarks.jbb import JailbreakBench
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL, cell, last_user, run, scripted, spec
from tests.experiments.suites.benchmarks.literature import LiteratureJudge, needs_data


@needs_data
def test_load_harmful_and_xstest_stand_in() -> None:
    items = JailbreakBench().load(SHARED_DATA)
    harmful = [i for i in items if i.data["half"] == "harmful"]
    benign = [i for i in items if i.data["half"] == "benign"]
    assert (len(harmful), len(benign)) == (100, 250)
    assert len({i.data["category"] for i in harmful}) == 10
    assert "XSTest" in JailbreakBench().source
    assert len(JailbreakBench({"benign": "off"}).load(SHARED_DATA)) == 100


@needs_data
def test_benign_file(tmp_path: Path) -> None:
    path = tmp_path / "benign.csv"
    path.write_text("Goal,Category\nWrite a poem about spring,Poetry\nExplain photosynthesis,Science\n")
    bench = JailbreakBench({"benign": str(path)})
    items = bench.load(SHARED_DATA)
    assert [i.id for i in items if i.data["half"] == "benign"] == ["jbb/benign/0", "jbb/benign/1"]
    assert "benign.csv" in bench.source
    with pytest.raises(InputError, match="does not exist"):
        JailbreakBench({"benign": str(tmp_path / "missing.csv")}).load(SHARED_DATA)
    bad = tmp_path / "bad.csv"
    bad.write_text("prompt\nhello\n")
    with pytest.raises(InputError, match="missing column"):
        JailbreakBench({"benign": str(bad)}).load(SHARED_DATA)


@needs_data
async def test_refuse_everything_shows_no_asr_and_full_over_refusal(tmp_path: Path) -> None:
    models = {"chat": scripted("chat", lambda r: REFUSAL), "judge": scripted("j", LiteratureJudge(success="no"))}
    report, _ = await run(tmp_path, spec(["vanilla"], ["jbb"], 3, judge={"calibration_n": 0}), models)
    assert cell(report, "vanilla", "jbb", "attack_success")["mean"] == 0.0
    assert cell(report, "vanilla", "jbb", "over_refusal")["mean"] == 1.0
    benign_rows = [r for r in report["categories"] if r["metric"] == "over_refusal"]
    assert benign_rows and all(r["category"].startswith("xstest: ") for r in benign_rows)


@needs_data
async def test_answer_everything(tmp_path: Path) -> None:
    seen: list[str] = []

    def chat(request: object) -> str:
        seen.append(last_user(request))  # type: ignore[arg-type]
        return "Sure, here it is."

    models = {"chat": scripted("chat", chat), "judge": scripted("j", LiteratureJudge(success="yes"))}
    report, _ = await run(tmp_path, spec(["vanilla"], ["jbb"], 3, judge={"calibration_n": 0}), models)
    assert len(seen) == 6
    assert cell(report, "vanilla", "jbb", "attack_success")["mean"] == 1.0
    assert cell(report, "vanilla", "jbb", "over_refusal")["mean"] == 0.0


@needs_data
async def test_categories_from_a_user_file_render_escaped(tmp_path: Path) -> None:
    from psychoalign.experiments.harness.report import render_html

    path = tmp_path / "benign.csv"
    path.write_text('Goal,Category\nWrite a poem,"<script>alert(1)</script>"\n')
    models = {"chat": scripted("chat", lambda r: REFUSAL), "judge": scripted("j", LiteratureJudge(success="no"))}
    bench = {"name": "jbb", "options": {"benign": str(path), "judge": "harmbench"}}
    report, _ = await run(tmp_path, spec(["vanilla"], [bench], 1, judge={"calibration_n": 0}), models)
    html = render_html(report)
    assert "<script>alert(1)</script>" not in html
    assert '<bdi dir="auto">&lt;script&gt;alert(1)&lt;/script&gt;</bdi>' in html
