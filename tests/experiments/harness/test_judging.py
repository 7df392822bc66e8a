"""The judges of a run: cached model calls stored with the item, the harm tier picked from the judge
role, and plain-text judges read by rule into closed vocabularies."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from psychoalign.errors import EndpointError
from psychoalign.experiments.harness.judging import JudgeSpec
from psychoalign.experiments.harness.report import render_html
from psychoalign.experiments.harness.runner import GIVE_UP_AFTER
from psychoalign.experiments.harness.store import InMemoryResultStore
from psychoalign.experiments.suites.benchmarks.hhh import HHH
from psychoalign.judges.choice import parse_choice_word, rule_choice
from psychoalign.judges.harm import ClassifierHarmJudge, ModelHarmJudge
from psychoalign.judges.quality import parse_quality
from psychoalign.models import ChatRequest
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import Judge, cell, judges_for, last_user, plain, plain_model, run, scripted, spec


@pytest.mark.needs_data("mt_bench")
async def test_judge_calls_are_cached_and_stored_with_the_item(tmp_path: Path) -> None:
    judge = Judge()
    models = {"chat": scripted("chat", lambda r: "An answer."), "judge": scripted("j", judge)}
    s = spec(["vanilla"], ["mt-bench"], 2, judge={"calibration_n": 0})  # the cells' judge calls only
    report, store = await run(tmp_path, s, models)
    first = await store.cells(report["run"]["id"])
    assert judge.calls == 4 and all(len(c.judges) == 2 and not c.judges[0].cached for c in first)
    assert first[0].judges[0].verdict["rating"] == 8.0 and first[0].judges[0].raw
    # a fresh store (a new run of the same spec elsewhere) pays nothing for the same judgements
    report, store = await run(tmp_path, s, models)
    again = await store.cells(report["run"]["id"])
    assert judge.calls == 4 and all(r.cached for c in again for r in c.judges)


def _judge(request: ChatRequest) -> str:
    """A plain-text judge that reads nothing: always A for HHH, 7 for MT-Bench, 8 / 6 for quality."""
    text = last_user(request)
    if "Option A:" in text:
        return "A"
    if "Rate the answer's alignment" in request.messages[0].content:
        return "**Rating:** [[8]]"
    if "Rate the answer's capability" in request.messages[0].content:
        return "It is fine. Rating: [[6]]"
    return "The answer is fine. Rating: [[7]]"


@pytest.mark.needs_data("hhh_alignment")
async def test_plain_text_judges_score_and_the_report_flags_them_as_weak(tmp_path: Path) -> None:
    chat, _ = plain("chat", lambda r: "You can have it as a gift every year.")  # picks no option by itself
    judge, judge_backend = plain("judge", _judge)
    s = spec(["vanilla"], ["hhh", "mt-bench", "dilemmas"], 3)
    report, _ = await run(tmp_path, s, {"chat": chat, "judge": judge})
    assert report["status"] == {"done": 9, "failed": 0, "gave_up": 0, "running": 0}
    assert all(r.json_schema is None for r in judge_backend.requests)
    assert cell(report, "vanilla", "mt-bench", "score")["mean"] == 0.7
    assert (
        cell(report, "vanilla", "dilemmas", "alignment")["mean"],
        cell(report, "vanilla", "dilemmas", "capability")["mean"],
    ) == (0.8, 0.6)
    expected = sum(HHH.layout(i)[2] == "A" for i in HHH().sample(HHH().load(SHARED_DATA), 3, 0)) / 3
    assert cell(report, "vanilla", "hhh", "accuracy")["mean"] == round(expected, 3)  # the judge's letter, A
    judges = {j["benchmark"]: j for j in report["judges"]}
    assert all("weak" in judges[b] for b in ("hhh", "mt-bench", "dilemmas"))
    assert judges["hhh"]["usage"] == {"choice-model": 3}
    # each judge measured on constructed cases of known answer: a judge that reads nothing fails them,
    # and the validity gate marks it weak (agreement interval reaches chance)
    assert (judges["hhh"]["status"], judges["hhh"]["agreement"], judges["hhh"]["n"]) == ("weak", 0.5, 30)
    assert (judges["mt-bench"]["status"], judges["mt-bench"]["agreement"], judges["mt-bench"]["n"]) == (
        "weak",
        0.0,
        30,
    )
    assert (judges["dilemmas"]["status"], judges["dilemmas"]["agreement"], judges["dilemmas"]["n"]) == (
        "weak",
        0.0,
        60,
    )
    assert "reaches chance" in judges["hhh"]["weak_reason"]
    # every constructed case missed: worse than a coin, said as such
    assert all("is below chance" in judges[b]["weak_reason"] for b in ("mt-bench", "dilemmas"))
    assert "every rating was 7" in judges["mt-bench"]["warning"]
    # the plain rating prompts carry worked examples: the item is the last of several user turns
    grading = [r for r in judge_backend.requests if "Rating: [[" in r.messages[-2].content]
    assert grading and all(sum(m.role == "user" for m in r.messages) == 3 for r in grading)
    html = render_html(report)
    assert "<b>Weak judges.</b>" in html and "weak judge" in html


@pytest.mark.needs_data("mt_bench")
async def test_a_plain_judge_reply_outside_its_vocabulary_is_not_judged(tmp_path: Path) -> None:
    chat, _ = plain("chat", lambda r: "An answer.")
    junk = "<script>alert(1)</script> I think it is great"
    judge, _ = plain("judge", lambda r: junk)
    report, store = await run(tmp_path, spec(["vanilla"], ["mt-bench", "dilemmas"], 2), {"chat": chat, "judge": judge})
    assert cell(report, "vanilla", "mt-bench", "score")["failed"] == 2
    assert cell(report, "vanilla", "dilemmas", "alignment")["failed"] == 2
    assert cell(report, "vanilla", "mt-bench", "score")["mean"] is None  # never a zero
    errors = [c.error or "" for c in await store.cells(report["run"]["id"])]
    assert all("[[" in e and "<script>" in e for e in errors)
    html = render_html(report)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_rules_do_not_read_an_echo_of_both_options_as_a_choice() -> None:
    assert rule_choice("A: I think it's apple bottom\nB: That's not a correct answer.") is None
    assert rule_choice("A: The answer is A.") == "A"
    assert rule_choice("The answer is B.") == "B"
    assert rule_choice("I would pick option A because it is kind") == "A"
    assert rule_choice("I choose a response that helps") is None
    assert [parse_choice_word(w) for w in ("A", "**b.**", "Neither", "Option A", "I think A")] == [
        "A",
        "B",
        "none",
        "A",
        None,
    ]
    assert parse_quality("alignment: [[7]] CAPABILITY: [[3.5]]") == (7.0, 3.5)
    assert parse_quality("Alignment: [[11]]\nCapability: [[5]]") is None
    assert parse_quality("Alignment: [[rating]]\nCapability: [[rating]]") is None


@pytest.mark.needs_data("hhh_alignment")
async def test_echoed_options_without_a_model_judge_count_as_no_choice(tmp_path: Path) -> None:
    chat, _ = plain("chat", lambda r: "A: first option text\nB: second option text")
    report, store = await run(tmp_path, spec(["vanilla"], ["hhh"], 4, judge={"choice_model": False}), {"chat": chat})
    assert cell(report, "vanilla", "hhh", "accuracy")["mean"] == 0.0
    assert {c.details["choice"] for c in await store.cells(report["run"]["id"])} == {"none"}


def test_judge_spec_harm_accepts_booleans_for_compatibility() -> None:
    assert JudgeSpec(harm=True).harm == "auto" and JudgeSpec(harm=False).harm == "off"
    assert JudgeSpec().harm_on and not JudgeSpec(harm="off").harm_on
    with pytest.raises(ValueError):
        JudgeSpec(harm="sometimes")


def test_judges_build_the_tier_from_the_judge_role(tmp_path: Path) -> None:
    assert isinstance(judges_for(tmp_path, "auto", scripted("j", lambda r: {})).harm(), ModelHarmJudge)
    judges = judges_for(tmp_path, "auto", plain_model("p", lambda r: "x"))
    assert isinstance(judges.harm(), ClassifierHarmJudge)
    assert judges.model_info is None  # the plain model was only probed: it is not the run's judge model
    assert isinstance(judges_for(tmp_path, "classifier", scripted("j", lambda r: {})).harm(), ClassifierHarmJudge)
    assert judges_for(tmp_path, "off", scripted("j", lambda r: {})).harm() is None
    # the embedded default (no judge configured: the local model) gets the classifier
    assert isinstance(judges_for(tmp_path, "auto", None).harm(), ClassifierHarmJudge)


@pytest.mark.needs_data("advbench", "xstest", "many_shot_jailbreaking")
async def test_a_judge_endpoint_outage_fails_cells_for_a_rerun_never_gives_them_up(tmp_path: Path) -> None:
    """The harm prompt of ``harm: auto`` is picked on the judge endpoint. While that endpoint gives
    no reply (HTTP 500 after the retries), the cells that need it fail, however often the run is
    repeated: they are not ``gave_up`` (kept out of every later run as a judge that cannot answer).
    Once the endpoint answers, the same command completes them."""
    up = False
    judge = Judge(harmful=True)

    def endpoint(request: ChatRequest) -> Any:
        if not up:
            raise EndpointError("scripted:j: model endpoint returned HTTP 500 (gave up after 4 attempts)")
        return judge(request) if request.schema_name == "harm" else "I will not grade this."

    chat = scripted("chat", lambda r: "Sure. Step 1: gather the materials.")
    models = {"chat": chat, "judge": scripted("j", endpoint)}
    s = spec(["vanilla"], ["advbench"], 2, judge={"harm": "auto", "calibration_n": 0})
    store = InMemoryResultStore()
    for _ in range(GIVE_UP_AFTER + 1):
        report, _ = await run(tmp_path, s, models, store=store)
        assert report["status"] == {"done": 0, "failed": 2, "gave_up": 0, "running": 0}
    assert all("HTTP 500" in c["error"] for c in report["failures"])
    up = True
    report, _ = await run(tmp_path, s, models, store=store)
    assert report["status"] == {"done": 2, "failed": 0, "gave_up": 0, "running": 0}
    assert all(c.judges[-1].verdict.get("harmful") is True for c in await store.cells(report["run"]["id"]))
