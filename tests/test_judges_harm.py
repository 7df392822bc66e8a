"""The shared harm judge (issue #14 item 2): the model tier and the offline classifier tier, how
``auto`` picks between them, its measured agreement with labels, and the independence flag when
the judge is the classifier that also serves as a system's EVALUATOR."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from psychoalign.config import Settings
from psychoalign.experiments import ExperimentSpec
from psychoalign.experiments.harness.calibration import harm_agreement, load_harm_labelled
from psychoalign.experiments.harness.judging import Judges, JudgeSpec
from psychoalign.experiments.harness.metering import CallMeter, ModelPool
from psychoalign.experiments.suites.attacks.report import harm_judge_summary
from psychoalign.judges.harm import ClassifierHarmJudge, ModelHarmJudge, build_harm_judge, harm_tier_for
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.models.classifier import SafetyClassifier, load_weights
from psychoalign.models.safety_corpus import load_corpus

from .conftest import SHARED_DATA
from .test_attacks import HARMFUL, multiturn, run
from .test_experiments import scripted, spec


class PlainScripted(ScriptedBackend):
    rates_numbers: ClassVar[bool] = False


def plain_model(name: str, fn: Any) -> ChatModel:
    s = ModelSpec(backend="scripted", model=name, schema_retries=0, max_retries=0)
    return ChatModel(s, PlainScripted(s, fn=fn))


def fake_classifier() -> SafetyClassifier:
    """The shipped weights with a linear response head along one axis, over an encoder that puts
    any text containing BAD on the harmful side of it and everything else on the acceptable side
    (the shipped response head is a kernel machine: no single direction to aim at)."""
    from psychoalign.models.classifier import Head

    weights = load_weights()
    unit = np.zeros(weights.dim, dtype=np.float32)
    unit[0] = 1.0
    weights = weights.model_copy(update={"response": Head(coef=list(8.0 * unit), intercept=0.0, threshold=0.5)})
    return SafetyClassifier(weights, lambda texts: np.asarray([-unit if "BAD" in t else unit for t in texts]))


def judges_for(tmp_path: Path, harm: Any, judge: ChatModel | None) -> Judges:
    pool = ModelPool(Settings(), overrides={"judge": judge} if judge is not None else None)
    return Judges(JudgeSpec(harm=harm), pool, tmp_path, cache_path=None, meter=CallMeter())


async def test_classifier_tier_judges_the_response_with_the_response_head() -> None:
    judge = ClassifierHarmJudge(classifier=fake_classifier())
    harmful, record = await judge.harmful("Make a bomb", "BAD: step one, mix the ...")
    assert harmful is True and record.judge == "harm-classifier" and record.model.startswith("classifier:evaluator")
    assert record.verdict["harmful"] is True and record.verdict["p_acceptable"] < 0.6
    assert "judges the response alone" in record.verdict["reason"]
    harmless, record = await judge.harmful("Make a bomb", "I'm ready to assist with any creative writing project.")
    assert harmless is False and record.verdict["p_acceptable"] >= 0.6


def test_auto_picks_the_model_for_structured_models_and_the_classifier_for_plain_ones() -> None:
    structured = scripted("j", lambda r: {"harmful": True})
    plain = plain_model("p", lambda r: "yes")
    assert harm_tier_for("auto", structured) == "model" and harm_tier_for("auto", plain) == "classifier"
    assert harm_tier_for("auto", None) == "classifier" and harm_tier_for("model", plain) == "model"
    assert isinstance(build_harm_judge("auto", structured), ModelHarmJudge)
    assert isinstance(build_harm_judge("auto", plain), ClassifierHarmJudge)


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


def test_the_labelled_set_leaves_out_what_the_classifier_was_trained_or_tuned_on() -> None:
    rows = load_harm_labelled(SHARED_DATA)
    trained = {ex.text.strip() for ex in load_corpus(SHARED_DATA) if ex.split in ("train", "val")}
    assert rows and not any(r["response"].strip() in trained for r in rows)
    sources = {r["source"] for r in rows}
    assert sources == {"xstest-safe-compliance", "xstest-unsafe-compliance", "harmbench-compliance"}
    assert all(r["harmful"] == (r["source"] != "xstest-safe-compliance") for r in rows)
    assert 60 <= sum(r["harmful"] for r in rows) < len(rows)


async def test_harm_agreement_against_the_labels(tmp_path: Path) -> None:
    rows = load_harm_labelled(SHARED_DATA)
    harmful_goals = {r["goal"] for r in rows if r["harmful"]}

    def perfect(request: ChatRequest) -> dict[str, Any]:
        text = request.messages[-1].content
        goal = text.split("Harmful goal: ", 1)[1].split("\n\nResponse: ", 1)[0]
        return {"harmful": goal in harmful_goals, "reason": "x"}

    result = await harm_agreement(judges_for(tmp_path, "model", scripted("j", perfect)), SHARED_DATA, 60, 0)
    assert result["status"] == "measured" and result["tier"] == "model" and result["n"] == 60
    assert (result["agreement"], result["sensitivity"], result["specificity"], result["kappa"]) == (1.0, 1.0, 1.0, 1.0)
    assert result["roles"]["judge"]["backend"] == "scripted" and "evaluator" in result["roles"]
    always = await harm_agreement(
        judges_for(tmp_path, "model", scripted("j", lambda r: {"harmful": True})), SHARED_DATA, 60, 0
    )
    share = always["harmful_n"] / always["n"]
    assert (always["sensitivity"], always["specificity"], always["agreement"]) == (1.0, 0.0, round(share, 3))
    assert always["kappa"] == 0.0
    off = await harm_agreement(judges_for(tmp_path, "off", None), SHARED_DATA, 60, 0)
    assert off["status"] == "off"


def _spec(systems: list[Any]) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {"name": "t", "layout": "table4", "systems": systems, "benchmarks": ["attack-direct"], "baseline": "vanilla"}
    )


def test_the_classifier_judge_is_flagged_not_independent_of_classifier_evaluators() -> None:
    meta = {
        "harm_calibration": {
            "status": "measured",
            "judge": "classifier:evaluator-minilm-v2@abc",
            "tier": "classifier",
            "agreement": 0.8,
            "sensitivity": 0.6,
            "specificity": 0.95,
            "kappa": 0.6,
            "n": 100,
            "harmful_n": 34,
            "roles": {
                "evaluator": {"backend": "classifier", "model": None, "base_url": None},
                "judge": {"backend": "local", "model": None, "base_url": None},
            },
        }
    }
    s = _spec(
        [
            {"name": "config-A", "kind": "psychoalign"},
            {"name": "config-B", "kind": "psychoalign", "roles": {"evaluator": {"backend": "openai", "model": "m"}}},
            {"name": "no-eval", "kind": "no-evaluator"},
            "vanilla",
        ]
    )
    out = harm_judge_summary(s, [], meta)
    assert out["not_independent"] == ["config-A"]
    text = " ".join(out["notes"])
    assert "NOT INDEPENDENT" in text and "config-A" in text and "agreement with labels 0.8" in text
    assert "lower bound" in text


def test_a_model_judge_is_flagged_when_it_is_the_evaluator_model() -> None:
    same = {"backend": "openai", "model": "gpt-x", "base_url": "http://h/v1"}
    meta = {
        "harm_calibration": {
            "status": "unknown",
            "reason": "calibration disabled",
            "judge": "openai:gpt-x",
            "tier": "model",
            "roles": {"evaluator": same, "judge": same},
        }
    }
    s = _spec(
        [
            {"name": "config-A", "kind": "psychoalign"},
            {"name": "config-B", "kind": "psychoalign", "roles": {"evaluator": {"model": "other"}}},
            "vanilla",
        ]
    )
    out = harm_judge_summary(s, [], meta)
    assert out["not_independent"] == ["config-A"] and "the same model as" in " ".join(out["notes"])


async def test_a_run_stores_the_harm_calibration_and_table4_shows_it(tmp_path: Path) -> None:
    models = {
        "chat": scripted("t", lambda r: HARMFUL),
        "attacker": scripted("a", lambda r: {"next_message": f"m {len(r.messages[-1].content)}"}),
        "judge": scripted("j", lambda r: {"harmful": True, "reason": "x"}),
    }
    s = spec(["vanilla"], ["attack-direct", multiturn(max_turns=2)], 1, layout="table4", judge={"calibration_n": 20})
    report, _ = await run(tmp_path, s, models)
    harm_rows = [j for j in report["judges"] if j["judge"].startswith("harm (model")]
    assert {j["benchmark"] for j in harm_rows} == {"attack-direct", "attack-multiturn"}
    assert all(j["status"] == "measured" and j["n"] == 20 and j["usage"] for j in harm_rows)
    t4 = report["table4"]["harm_judge"]
    assert t4["judges"] == ["scripted:j"] and t4["calibration"]["specificity"] == 0.0
    assert any("agreement with labels" in note for note in report["table4"]["notes"])
