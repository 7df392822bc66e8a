"""The report: planted effects with separated intervals, cost ratios over paired items, every HTML
number in the JSON, and the weak-judge flag."""

from __future__ import annotations

import html as html_lib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from psychoalign.errors import EndpointError
from psychoalign.experiments import build_report
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.report import render_html
from psychoalign.experiments.harness.store import CellResult, RunRecord
from psychoalign.experiments.suites.benchmarks.advbench import AdvBench
from psychoalign.experiments.suites.benchmarks.hhh import HHH
from psychoalign.models import ChatRequest
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL, Judge, cell, cost, last_user, run, sample, scripted, spec


@pytest.mark.needs_data("hhh_alignment")
async def test_planted_effect_better_system_wins_with_separated_intervals(tmp_path: Path) -> None:
    answers = {HHH.prompt(i): HHH.layout(i)[2] for i in HHH().load(SHARED_DATA)}

    def good(request: ChatRequest) -> str:
        return answers[last_user(request)]

    s = spec(
        [
            {"name": "good", "kind": "vanilla", "options": {"role": "good"}},
            {"name": "bad", "kind": "vanilla", "options": {"role": "bad"}},
        ],
        ["hhh"],
        60,
        judge={"choice_model": False},  # the rules read the letter exactly: the column's judge is exact
    )
    models = {"good": scripted("good", good), "bad": scripted("bad", lambda r: "A"), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, s, models)
    g, b = cell(report, "good", "hhh", "accuracy"), cell(report, "bad", "hhh", "accuracy")
    assert g["mean"] == 1.0
    assert g["ci_low"] > b["ci_high"]
    assert report["best"]["hhh/accuracy"] == 1.0


@pytest.mark.needs_data("advbench")
async def test_cost_ratios_compare_the_items_both_systems_completed(tmp_path: Path) -> None:
    """A system that fails the costly two-turn items must not look cheaper than the baseline."""
    advbench_goals = {i.turns[0] for i in sample(AdvBench(), 3)}

    def flaky(request: ChatRequest) -> str:
        if last_user(request) not in advbench_goals:
            raise EndpointError("down for MT-Bench")
        return REFUSAL

    s = spec(
        ["vanilla", {"name": "flaky", "kind": "vanilla", "options": {"role": "flaky"}}],
        ["advbench", "mt-bench"],
        3,
        judge={"calibration_n": 0},
    )
    models = {
        "chat": scripted("chat", lambda r: REFUSAL),
        "flaky": scripted("flaky", flaky),
        "judge": scripted("j", Judge()),
    }
    report, _ = await run(tmp_path, s, models)
    base, other = cost(report, "vanilla"), cost(report, "flaky")
    assert (base["items"], other["items"]) == (6, 3)
    assert (base["calls"], other["calls"]) == (1.5, 1.0)  # per completed item: MT-Bench items take two calls
    assert other["ratio_items"] == 3 and other["calls_ratio"] == 1.0  # paired: the same three AdvBench items
    assert base["ratio_items"] == 6 and base["calls_ratio"] == 1.0


def _numbers(text: str) -> set[float]:
    return {float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)}


@pytest.mark.needs_data("hhh_alignment")
async def test_every_number_of_the_html_is_in_the_json(tmp_path: Path) -> None:
    def chat(request: ChatRequest) -> Any:
        if request.schema_name == "feedback":
            return {"feedback": "fine", "done": True}
        return "A" if "Which response" in last_user(request) else REFUSAL

    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, spec(["vanilla", "constitutional"], ["hhh", "advbench"], 5), models)
    html = render_html(report)
    body = re.sub(r"<(style|img)[^>]*>.*?(</style>|>)", "", html, flags=re.S)  # CSS and the PNG are not figures
    body = re.sub(r'<code class="hash">[0-9a-f]+</code>', "", body)  # hash prefixes (provenance) are names
    body = html_lib.unescape(re.sub(r"<[^>]+>", " ", body))
    in_json = _numbers(json.dumps({k: v for k, v in report.items() if k != "figure"}))
    missing = {x for x in _numbers(body) if x not in in_json and x not in (95.0, 2.0, 3.0, 5.0)}
    # 95 (the interval level), "Table 3/5" and "Figure 2" are labels, not figures
    assert not missing, missing
    assert "Content-Security-Policy" in html and "script-src" not in html and "<script" not in html
    assert report["figure"]["png_base64"].startswith("iVBOR")


def test_a_stored_run_judged_by_the_embedded_model_is_flagged_weak_when_rebuilt() -> None:
    """Runs stored before the judge model was recorded: the records' model labels tell."""
    from psychoalign.judges.records import JudgeRecord

    s = spec(["vanilla"], ["mt-bench"], 1)
    run_record = RunRecord(id=s.run_id(), name="t", spec=s.model_dump(mode="json"))
    judged = [JudgeRecord(judge="mt-bench", model="local:smollm2-135m-instruct", verdict={"rating": 5.0})] * 2
    done = CellResult(
        run_id=run_record.id,
        key="vanilla|mt-bench|mt-bench/81",
        system="vanilla",
        benchmark="mt-bench",
        item_id="mt-bench/81",
        status="done",
        metrics={"score": 0.5, "turn1": 0.5, "turn2": 0.5},
        judges=judged,
    )
    report = build_report(run_record, [done], Registry())
    (entry,) = report["judges"]
    assert "local:smollm2-135m-instruct" in entry["weak"] and entry["models"] == ["local:smollm2-135m-instruct"]
    assert "Weak judge." in render_html(report)


@pytest.mark.needs_data("mt_bench")
async def test_one_item_gets_no_interval(tmp_path: Path) -> None:
    models = {"chat": scripted("chat", lambda r: "x"), "judge": scripted("j", Judge(rating=lambda r: 7.0))}
    report, _ = await run(tmp_path, spec(["vanilla"], ["mt-bench"], 1, judge={"calibration_n": 0}), models)
    got = cell(report, "vanilla", "mt-bench", "score")
    assert got["n"] == 1 and got["mean"] is not None
    assert (got["ci_low"], got["ci_high"], got["ci_method"]) == (None, None, None)
    assert "n=1" in render_html(report)


@pytest.mark.needs_data("advbench")
async def test_columns_compare_only_the_items_every_system_completed(tmp_path: Path) -> None:
    """A system that fails some items must not be compared on more items than the other."""
    goals = [i.turns[0] for i in sample(AdvBench(), 4)]

    def flaky(request: ChatRequest) -> str:
        if last_user(request) in goals[:2]:
            raise EndpointError("down")
        return REFUSAL

    s = spec(
        ["vanilla", {"name": "flaky", "kind": "vanilla", "options": {"role": "flaky"}}],
        ["advbench"],
        4,
        judge={"calibration_n": 0},
    )
    models = {
        "chat": scripted("chat", lambda r: REFUSAL),
        "flaky": scripted("flaky", flaky),
        "judge": scripted("j", Judge()),
    }
    report, _ = await run(tmp_path, s, models)
    base, other = cell(report, "vanilla", "advbench", "safe"), cell(report, "flaky", "advbench", "safe")
    assert (base["n"], base["dropped"], base["failed"]) == (2, 2, 0)  # paired: the two both completed
    assert (other["n"], other["dropped"], other["failed"]) == (2, 0, 2)
    assert "2 dropped" in render_html(report)


def test_a_column_a_judge_of_unknown_agreement_decides_is_labelled_so_and_never_best() -> None:
    """A judge with no labels to be measured on passed no check: its columns get no best mark,
    their results say ``judge_status: unknown`` (results.json, the CLI table) and the page says
    "judge agreement unknown" under each cell; a weak judge's label wins over it."""
    from psychoalign.cli._experiment_tables import _fmt
    from psychoalign.experiments.harness.report import _gate_columns

    judges = [
        {"benchmark": "realtoxicity", "judge": "toxicity", "status": "unknown"},
        {"benchmark": "hhh", "judge": "choice", "status": "measured"},
        {"benchmark": "mt-bench", "judge": "mt-bench", "status": "unknown", "weak": "the embedded model"},
    ]
    columns = [
        {"benchmark": "realtoxicity", "metric": "nontoxic"},
        {"benchmark": "hhh", "metric": "accuracy"},
        {"benchmark": "mt-bench", "metric": "score"},
    ]
    best: dict[str, float | None] = {"realtoxicity/nontoxic": 0.9, "hhh/accuracy": 0.8, "mt-bench/score": 0.5}
    results = [{"benchmark": c["benchmark"], "metric": c["metric"]} for c in columns]
    _gate_columns(judges, columns, best, results)
    assert best == {"realtoxicity/nontoxic": None, "hhh/accuracy": 0.8, "mt-bench/score": None}
    assert [r.get("judge_status") for r in results] == ["unknown", None, "weak"]
    assert columns[0]["unknown_judges"] == ["toxicity"] and "weak_judges" not in columns[0]
    assert columns[2]["weak_judges"] == ["mt-bench"] and "unknown_judges" not in columns[2]
    cell = {"mean": 0.9, "ci_low": 0.8, "ci_high": 0.95, "n": 20, "failed": 0, "judge_status": "unknown"}
    assert _fmt(cell) == "0.900 [0.800, 0.950] n=20 (judge agreement unknown)"


@pytest.mark.needs_data("xstest")
async def test_a_judge_left_unmeasured_says_why_not_that_the_data_has_no_labels(tmp_path: Path) -> None:
    """With calibration_n: 0 the refusal judge's row read "no human labels for this judge in the
    data folder" though JailbreakBench's labels were there: the run had turned its checks off."""
    models = {"chat": scripted("chat", lambda r: REFUSAL), "judge": scripted("j", Judge())}
    s = spec(["vanilla"], ["xstest"], 2, judge={"refusal": "rules", "harm": False, "calibration_n": 0})
    report, _ = await run(tmp_path, s, models)
    row = next(j for j in report["judges"] if j["benchmark"] == "xstest")
    assert row["status"] == "unknown"
    assert row["reason"].startswith("not measured in this run: calibration disabled (judge.calibration_n = 0)")
    assert "set judge.calibration_n" in row["reason"] and "no human labels" not in row["reason"]


def test_cells_computed_under_two_code_revisions_are_marked(capsys: pytest.CaptureFixture[str]) -> None:
    """A resume under another commit is not refused (the identity leaves code out), so its table
    could mix two versions' results with nothing but a list of hashes in a folded section to say
    so: the report, the page and the CLI now mark it; one revision, however often recorded, is not."""
    from psychoalign.cli._experiment_tables import _print_tables

    s = spec(["vanilla"], ["xstest"], 2)
    cells = [
        CellResult(
            run_id="r",
            key=f"vanilla|xstest|{i}",
            system="vanilla",
            benchmark="xstest",
            item_id=str(i),
            status="done",
            metrics={"over_refusal": float(i)},
        )
        for i in range(2)
    ]
    one = {"git": "a" * 40, "dirty": False}
    same = RunRecord(id="r", name="t", spec=s.model_dump(mode="json"), meta={"revisions": [one, dict(one)]})
    assert build_report(same, cells, Registry())["run"]["mixed_revisions"] is None
    two = [one, {"git": "b" * 40, "dirty": True}]
    mixed = RunRecord(id="r", name="t", spec=s.model_dump(mode="json"), meta={"revisions": two})
    report = build_report(mixed, cells, Registry())
    why = report["run"]["mixed_revisions"]
    assert why.startswith("cells computed under 2 code revisions (aaaaaaaaaaaa, bbbbbbbbbbbb (modified))")
    assert "Mixed code." in render_html(report) and "--new-run" in render_html(report)
    _print_tables(report)
    assert "Mixed code: cells computed under 2 code revisions" in capsys.readouterr().err


@pytest.mark.needs_data("strongreject")
async def test_a_weak_judges_scores_by_category_are_set_apart(tmp_path: Path) -> None:
    """The main table set a weak judge's columns apart, but its per-category rows (with intervals)
    showed the same figures as measured ones. An unmeasured StrongREJECT judge (calibration off)
    now marks them too."""
    from tests.experiments.suites.benchmarks.literature import LiteratureJudge

    models = {"chat": scripted("chat", lambda r: "Sure."), "judge": scripted("j", LiteratureJudge(rubric=(0, 4, 5)))}
    bench = {"name": "strongreject", "options": {"judge": "strongreject", "set": "small"}}
    report, _ = await run(tmp_path, spec(["vanilla"], [bench], 6, judge={"calibration_n": 0}), models)
    assert cell(report, "vanilla", "strongreject", "score")["judge_status"] == "weak"
    rows = [r for r in report["categories"] if r["benchmark"] == "strongreject"]
    assert rows and all(r["judge_status"] == "weak" for r in rows)
    page = render_html(report)
    by_category = page.split("Scores by category", 1)[1].split("</table>", 1)[0]
    assert by_category.count("weak judge") == len(rows)


def test_the_bar_chart_names_a_weak_or_unmeasured_judges_columns() -> None:
    """The figure drew a weak judge's bars like any other; its axis labels now say so."""
    from psychoalign.experiments.harness.report import _figure

    columns = [
        {"benchmark": "hhh", "metric": "accuracy", "title": "HHH", "higher_is_better": True, "weak_judges": ["x"]},
        {"benchmark": "mt-bench", "metric": "score", "title": "MT", "higher_is_better": True, "unknown_judges": ["y"]},
        {"benchmark": "xstest", "metric": "safe", "title": "XS", "higher_is_better": True},
    ]
    cells = [
        {"benchmark": c["benchmark"], "metric": c["metric"], "mean": 0.5, "ci_low": 0.4, "ci_high": 0.6}
        for c in columns
    ]
    figure = _figure({"columns": columns, "table": [{"system": "vanilla", "cells": cells}]})
    assert figure["columns"] == ["HHH (weak judge)", "MT (judge unknown)", "XS"]
