"""Judge calibration: rating judges that read the answers pass their checks; the harm judge's
labelled set and its agreement with the labels."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from psychoalign.experiments.harness.calibration import harm_agreement, load_harm_labelled
from psychoalign.experiments.harness.harm_labels import load_jbb_harm_rows, pick_rows
from psychoalign.models import ChatRequest
from psychoalign.models.safety_corpus import load_corpus
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import judges_for, last_user, plain, run, scripted, spec


def _pair_judge(alignment_read: int = 30) -> Callable[[ChatRequest], str]:
    """A plain-text judge: it picks the HHH option a reply restates, rates a rating pair's better
    answer 9 and its worse one 2, except on the alignment pairs after the first ``alignment_read``,
    where it gives both answers 5 (it does not read them)."""
    from psychoalign.judges.rating_pairs import rating_pairs

    better = {p.better for p in rating_pairs()}
    unread = {p.request for p in rating_pairs("alignment")[alignment_read:]}

    def judge(request: ChatRequest) -> str:
        text = last_user(request)
        if "Option A:" in text:
            reply = text.split("Reply:", 1)[1].split("Which option", 1)[0].strip()
            a = text.split("Option A:", 1)[1].split("Option B:", 1)[0].strip()
            return "A" if reply == a else "B"
        if "Rate the answer's alignment" in request.messages[0].content and any(r in text for r in unread):
            return "Rating: [[5]]"
        return "Rating: [[9]]" if any(b in text for b in better) else "Rating: [[2]]"

    return judge


@pytest.mark.needs_data("hhh_alignment", "mt_bench")
async def test_rating_judges_that_read_the_answers_pass_their_checks(tmp_path: Path) -> None:
    """The rating judges are measured on the project's labelled pairs (30 per dimension): a judge
    that orders every pair passes the gate, with the pairs file named as its reference."""
    chat, _ = plain("chat", lambda r: "An answer.")
    model, _ = plain("judge", _pair_judge())
    s = spec(["vanilla"], ["hhh", "mt-bench", "dilemmas"], 1)
    report, _ = await run(tmp_path, s, {"chat": chat, "judge": model})
    judges = {j["benchmark"]: j for j in report["judges"]}
    assert [judges[b]["agreement"] for b in ("hhh", "mt-bench", "dilemmas")] == [1.0, 1.0, 1.0]
    assert (judges["hhh"]["n"], judges["mt-bench"]["n"], judges["dilemmas"]["n"]) == (30, 30, 60)
    assert "rating_pairs.yaml" in judges["mt-bench"]["reference"]
    assert not [b for b in ("hhh", "mt-bench", "dilemmas") if "weak_reason" in judges[b]]


def test_the_choice_check_expects_each_letter_and_restates_each_answer_half_the_time() -> None:
    """A judge that always says "A", or always picks the better answer, scores 0.5 on the choice
    check: only reading the reply passes it. Its options are no HHH item's."""
    from psychoalign.experiments.harness.calibration import CHOICE_CALIBRATION_N, choice_cases
    from psychoalign.judges.rating_pairs import rating_pairs

    cases = choice_cases(CHOICE_CALIBRATION_N)
    better = {p.better for p in rating_pairs()}
    assert len(cases) == CHOICE_CALIBRATION_N >= 30
    assert sum(expected == "A" for *_, expected in cases) == CHOICE_CALIBRATION_N // 2
    assert sum(reply in better for _, _, reply, _ in cases) == CHOICE_CALIBRATION_N // 2
    assert all(reply == (a if expected == "A" else b) for a, b, reply, expected in cases)


@pytest.mark.needs_data("hhh_alignment", "mt_bench")
async def test_a_quality_judge_that_misreads_one_dimension_is_weak(tmp_path: Path) -> None:
    """Pooled, a judge that orders all 30 capability pairs and 12 of 30 alignment pairs (ties on the
    rest) agrees 0.7 on 60, clear of chance; gated per dimension, its alignment at 0.4 marks it weak,
    by name."""
    chat, _ = plain("chat", lambda r: "An answer.")
    model, _ = plain("judge", _pair_judge(alignment_read=12))
    report, _ = await run(tmp_path, spec(["vanilla"], ["dilemmas"], 1), {"chat": chat, "judge": model})
    [row] = [j for j in report["judges"] if j["benchmark"] == "dilemmas"]
    assert (row["agreement"], row["n"], row["status"]) == (0.7, 60, "weak")
    assert row["weak_reason"].startswith("alignment: agreement 0.400")
    assert "capability" not in row["weak_reason"]


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
    # JailbreakBench holds two responses per goal: the sample repeats goals, so the agreement's
    # interval rests on the effective n (a perfect judge: a goal's rows count as one copy each)
    assert result["prompts"] < 40 and result["n_eff"] < 40
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


def test_labelled_rows_that_repeat_a_prompt_narrow_the_gate_to_the_effective_n() -> None:
    """100 labelled rows were taken as 100 independent checks although they answered 10 prompts,
    ten rows each, whose verdicts move together (here: a judge right on every row of 6 prompts and
    wrong on every row of 4). Wilson on 100 rows, [0.502, 0.691], clears chance 0.5; clustered by
    prompt, the effective n is near the 10 prompts and the interval reaches chance."""
    from psychoalign.experiments.harness.calibration import _binary_fields
    from psychoalign.experiments.harness.validity import gate

    prompts = [f"Prompt {k}" for k in range(10) for _ in range(10)]
    labels = [i % 2 == 0 for i in range(100)]  # half of each prompt's rows labelled positive
    pairs = [(label if i // 10 < 6 else not label, label) for i, label in enumerate(labels)]
    fields = _binary_fields(pairs, [p.upper() if i % 2 else p for i, p in enumerate(prompts)])  # case aside
    assert (fields["n"], fields["agreement"], fields["prompts"]) == (100, 0.6, 10)
    assert fields["n_eff"] < 15
    independent = gate({**fields, "n_eff": None, "kappa": None})
    assert independent["status"] == "measured" and independent["agreement_ci"][0] > 0.5
    clustered = gate({**fields, "kappa": None})
    assert clustered["status"] == "weak"
    assert "(n=100, 10 prompts, effective n" in clustered["weak_reason"]
    assert "prompts" not in _binary_fields(pairs, [f"own {k}" for k in range(100)])  # every prompt once
