"""Agreement with JailbreakBench's human labels, beside the published judges."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from psychoalign.errors import InputError
from psychoalign.judges import RuleRefusalJudge
from psychoalign.judges.harmbench import HarmBenchJudge
from psychoalign.judges.jailbreak_eval import (
    PUBLISHED_JUDGES,
    agreement,
    evaluate_jailbreak_judge,
    literature_judge_fn,
    load_jbb_judge_set,
)
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
from tests.conftest import SHARED_DATA

needs_data = pytest.mark.needs_data("jailbreakbench")


@needs_data
def test_load_and_agreement_bounds() -> None:
    items = load_jbb_judge_set(SHARED_DATA)
    assert len(items) == 100 and sum(i.human for i in items) == 43
    perfect = agreement("humans", items, [i.human for i in items])
    assert (perfect.agreement, perfect.kappa, perfect.sensitivity, perfect.specificity) == (1.0, 1.0, 1.0, 1.0)
    inverted = agreement("contrary", items, [not i.human for i in items])
    assert inverted.agreement == 0.0 and inverted.kappa is not None and inverted.kappa < 0
    gpt4 = agreement("gpt-4 column", items, [i.published["gpt_4"] for i in items])
    assert gpt4.agreement == perfect.published["gpt_4"] and set(perfect.published) == set(PUBLISHED_JUDGES)


def test_missing_file_is_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"classifier_comparison\.csv is missing"):
        load_jbb_judge_set(tmp_path)


@needs_data
async def test_harmbench_tier_through_a_scripted_model() -> None:
    items = load_jbb_judge_set(SHARED_DATA)[:20]
    spec = ModelSpec(backend="scripted", model="j", schema_retries=0, max_retries=0)
    model = ChatModel(spec, ScriptedBackend(spec, fn=lambda r: "Yes"))
    fn = literature_judge_fn("harmbench", refusal=RuleRefusalJudge(), harmbench=HarmBenchJudge(model))
    result = await evaluate_jailbreak_judge("always yes", fn, items)
    assert result.sensitivity == 1.0 and result.specificity == 0.0
    assert result.agreement == round(sum(i.human for i in items) / 20, 3)


@needs_data
def test_cli_eval_jailbreak_rules() -> None:
    from typer.testing import CliRunner

    from psychoalign.cli.main import app

    args = ["judge", "eval-jailbreak", "--data", str(SHARED_DATA), "--tier", "refusal", "--refusal", "rules"]
    res = CliRunner().invoke(app, [*args, "--limit", "30", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["n"] == 30 and out["judge"] == "refusal [refusal-rules]" and 0.0 <= out["agreement"] <= 1.0
    low, high = out["agreement_ci"]
    assert low < out["agreement"] < high and sum(out["confusion"].values()) == 30
    text = CliRunner().invoke(app, [*args, "--limit", "30"])
    assert text.exit_code == 0 and "agreement" in text.output and "κ" in text.output and "[" in text.output
    wrong = CliRunner().invoke(app, [*args[:-1], "regex"])
    assert isinstance(wrong.exception, InputError) and "unknown refusal tier 'regex'" in wrong.exception.message
    bad = CliRunner().invoke(app, ["judge", "eval-jailbreak", "--tier", "gpt"])
    assert isinstance(bad.exception, InputError) and "unknown tier 'gpt'" in bad.exception.message
