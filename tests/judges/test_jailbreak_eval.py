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
    LabelledJailbreak,
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


def _rows(labels: list[bool]) -> list[LabelledJailbreak]:
    return [
        LabelledJailbreak(
            index=i, goal="g", prompt="p", response="r", human=h, published=dict.fromkeys(PUBLISHED_JUDGES, h)
        )
        for i, h in enumerate(labels)
    ]


def test_no_interval_for_kappa_on_few_items_or_of_zero_width() -> None:
    few = agreement("perfect on 3", _rows([True, False, False]), [True, False, False])
    assert few.kappa == 1.0 and few.kappa_ci is None  # statsmodels gives [1.000, 1.000] here
    assert few.ci_reasons["kappa"].startswith("n too small: 3 < 10")
    assert few.figure_n == {"agreement": 3, "sensitivity": 1, "specificity": 2, "kappa": 3}
    assert few.agreement_ci == (0.439, 1.0) and few.sensitivity_ci is not None  # Wilson: kept, and wide
    perfect = agreement("perfect on 20", _rows([True] * 8 + [False] * 12), [True] * 8 + [False] * 12)
    assert perfect.kappa == 1.0 and perfect.kappa_ci is None and "zero width" in perfect.ci_reasons["kappa"]


def test_kappa_interval_unchanged_where_n_is_adequate() -> None:
    from statsmodels.stats.inter_rater import cohens_kappa

    truth = [True] * 12 + [False] * 18
    predicted = [True] * 10 + [False] * 2 + [True] * 3 + [False] * 15  # tp 10, fn 2, fp 3, tn 15
    result = agreement("judge", _rows(truth), predicted)
    ref = cohens_kappa([[10, 2], [3, 15]])
    assert result.kappa_ci == (round(float(ref.kappa_low), 3), round(float(ref.kappa_upp), 3))
    assert result.ci_reasons == {} and result.figure_n["sensitivity"] == 12


def test_cli_eval_jailbreak_on_three_items_prints_no_degenerate_interval(tmp_path: Path) -> None:
    import csv

    from typer.testing import CliRunner

    from psychoalign.cli.main import app

    folder = tmp_path / "jailbreakbench"
    folder.mkdir()
    fields = ["", "goal", "prompt", "target_response", "human_majority", *PUBLISHED_JUDGES]
    with (folder / "classifier_comparison.csv").open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(fields)
        out.writerow([0, "g", "p", "Sure, here is how: step one, step two.", 1, *[1] * 6])
        for i in (1, 2):
            out.writerow([i, "g", "p", "I'm sorry, but I can't help with that request.", 0, *[0] * 6])
    args = ["judge", "eval-jailbreak", "--data", str(tmp_path), "--tier", "refusal", "--refusal", "rules"]
    text = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert text.exit_code == 0, text.output
    assert "κ 1.000 [interval n/a: n too small] (n 3)" in text.stdout and "[1.000, 1.000]" not in text.stdout
    assert "sensitivity 1.000 [0.207, 1.000] (n 1)" in text.stdout
    warnings = text.stderr.strip().splitlines()
    assert len(warnings) == 1 and warnings[0].startswith("warning: fewer than 10 responses behind agreement (3)")
    res = CliRunner().invoke(app, [*args, "--json"])
    out_json = json.loads(res.stdout)
    assert out_json["kappa"] == 1.0 and out_json["kappa_ci"] is None
    assert "n too small" in out_json["ci_reasons"]["kappa"]
