"""Judge calibration: rating judges that read the answers pass their checks; the harm judge's
labelled set and its agreement with the labels."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from psychoalign.experiments.harness.calibration import harm_agreement, load_harm_labelled
from psychoalign.experiments.harness.harm_labels import load_jbb_harm_rows, pick_rows
from psychoalign.experiments.suites.benchmarks.mtbench import MTBench
from psychoalign.models import ChatRequest
from psychoalign.models.safety_corpus import load_corpus
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import judges_for, last_user, plain, run, scripted, spec


@pytest.mark.needs_data("hhh_alignment", "mt_bench")
async def test_rating_judges_that_read_the_answers_pass_their_checks(tmp_path: Path) -> None:
    """The constructed pairs are ordered the way a judge that reads them would order them."""
    from psychoalign.experiments.harness.calibration import CONSIDERED

    def judge(request: ChatRequest) -> str:
        text = last_user(request)
        if "Option A:" in text:
            reply = text.split("Reply:", 1)[1]
            a = text.split("Option A:", 1)[1].split("Option B:", 1)[0].strip()
            return "A" if a[:40] in reply else "B"
        if "Rate the answer's" in request.messages[0].content:
            return "Rating: [[9]]" if CONSIDERED[:30] in text else "Rating: [[2]]"
        refs = {i.turns[0]: i.data["refs"][0] for i in MTBench().load(SHARED_DATA) if i.data.get("refs")}
        question = text.split("[Question]", 1)[1].split("[The Start", 1)[0].strip()
        return "Rating: [[9]]" if refs.get(question, "\0")[:50] in text else "Rating: [[3]]"

    chat, _ = plain("chat", lambda r: "An answer.")
    model, _ = plain("judge", judge)
    s = spec(["vanilla"], ["hhh", "mt-bench", "dilemmas"], 1)
    report, _ = await run(tmp_path, s, {"chat": chat, "judge": model})
    judges = {j["benchmark"]: j for j in report["judges"]}
    assert [judges[b]["agreement"] for b in ("hhh", "mt-bench", "dilemmas")] == [1.0, 1.0, 1.0]


@pytest.mark.needs_data
def test_the_labelled_set_leaves_out_what_the_classifier_was_trained_or_tuned_on() -> None:
    rows = load_harm_labelled(SHARED_DATA)
    trained = {ex.text.strip() for ex in load_corpus(SHARED_DATA) if ex.split in ("train", "val")}
    assert rows and not any(r["response"].strip() in trained for r in rows)
    sources = {r["source"] for r in rows}
    assert sources == {"xstest-safe-compliance", "xstest-unsafe-compliance", "harmbench-compliance"}
    assert all(r["harmful"] == (r["source"] != "xstest-safe-compliance") for r in rows)
    assert 60 <= sum(r["harmful"] for r in rows) < len(rows)


@pytest.mark.needs_data("jailbreakbench", "xstest", "many_shot_jailbreaking")
async def test_harm_agreement_against_held_out_human_labels(tmp_path: Path) -> None:
    rows = load_jbb_harm_rows(SHARED_DATA)
    assert rows is not None and 40 <= len(rows) < 100  # the responses the rules do not call refused
    harmful = {r["response"].strip()[:200] for r in rows if r["harmful"]}

    def perfect(request: ChatRequest) -> dict[str, Any]:
        response = request.messages[-1].content.split("\n\nResponse: ", 1)[1]
        return {"harmful": response.strip()[:200] in harmful, "reason": "x"}

    result = await harm_agreement(judges_for(tmp_path, "model", scripted("j", perfect)), SHARED_DATA, 40, 0)
    assert result["status"] == "measured" and result["tier"] == "model" and result["n"] == 40
    assert result["held_out"] and result["reference"].startswith("JailbreakBench")
    assert (result["agreement"], result["sensitivity"], result["specificity"], result["kappa"]) == (1.0, 1.0, 1.0, 1.0)
    assert result["roles"]["judge"]["backend"] == "scripted" and "evaluator" in result["roles"]
    always = await harm_agreement(
        judges_for(tmp_path, "model", scripted("j", lambda r: {"harmful": True})), SHARED_DATA, 40, 0
    )
    share = always["harmful_n"] / always["n"]
    assert (always["sensitivity"], always["specificity"], always["agreement"]) == (1.0, 0.0, round(share, 3))
    assert always["kappa"] == 0.0
    off = await harm_agreement(judges_for(tmp_path, "off", None), SHARED_DATA, 40, 0)
    assert off["status"] == "off"


@pytest.mark.needs_data("jailbreakbench", "xstest", "many_shot_jailbreaking")
async def test_auto_on_an_endpoint_picks_a_prompt_and_reports_it_on_other_labels(tmp_path: Path) -> None:
    """harm: auto on a judge that gives structured judgements: the pick is made on the built-in
    labelled non-refusals, the agreement measured on JailbreakBench's human labels."""
    picked = {r.response.strip()[:200] for r in pick_rows(SHARED_DATA, 0) if r.harmful}

    def judge(request: ChatRequest) -> Any:
        text = request.messages[-1].content
        if "[GENERATION]" in text:  # the HarmBench prompt reads the pick rows right
            generation = text.split("[GENERATION]", 1)[1].split("[END GENERATION]", 1)[0].strip()
            return "Yes" if generation[:200] in picked else "No"
        if "[RESPONSE]" in text:
            return "unreadable"
        return {"harmful": True, "reason": "x"}

    from psychoalign.config import Settings
    from psychoalign.experiments.harness.judging import Judges, JudgeSpec
    from psychoalign.experiments.harness.metering import CallMeter, ModelPool

    pool = ModelPool(Settings(), overrides={"judge": scripted("j", judge)})
    judges = Judges(JudgeSpec(harm="auto"), pool, SHARED_DATA, cache_path=None, meter=CallMeter())
    result = await harm_agreement(judges, SHARED_DATA, 30, 0)
    assert result["tier"] == "auto" and result["picked"]["chosen"] == "harmbench"
    assert result["picked"]["candidates"]["harmbench"]["kappa"] == 1.0
    assert result["picked"]["candidates"]["model"]["kappa"] == 0.0
    assert "error" in result["picked"]["candidates"]["strongreject"]
    assert result["held_out"] and result["n"] == 30 and result["judge"] == "scripted:j"


async def test_a_judge_endpoint_outage_stops_the_check_instead_of_scoring_as_misses(tmp_path: Path) -> None:
    """A run stores its judge checks once: a judge reply outside the vocabulary is a miss, but an
    endpoint that gives no reply must not be, or an outage would be kept as the judge's agreement.
    The check fails (the run stops; the next one measures again)."""
    from psychoalign.errors import EndpointError
    from psychoalign.experiments.harness.calibration import quality_discrimination

    def down(request: ChatRequest) -> str:
        raise EndpointError("plain:judge: model endpoint returned HTTP 500 (gave up after 4 attempts)")

    model, _ = plain("judge", down)
    with pytest.raises(EndpointError, match="HTTP 500"):
        await quality_discrimination(judges_for(tmp_path, "off", model), 2)
    unreadable, _ = plain("judge", lambda r: "No rating from me.")
    got = await quality_discrimination(judges_for(tmp_path, "off", unreadable), 2)
    assert (got["n"], got["not_judged"], got["agreement"]) == (4, 4, 0.0)
