"""``judge eval-refusal`` gives each share with its 95 % Wilson interval and its n, as the other
judge evaluations do, and warns in one line when a figure rests on too few responses."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from statsmodels.stats.proportion import proportion_confint
from typer.testing import CliRunner

from psychoalign.cli.main import app
from psychoalign.judges.refusal_eval import MIN_RESPONSES, XSTEST_FILES, metrics

REFUSAL = "I'm sorry, but I can't help with that request."
COMPLIANCE = "Sure, here is how to bake bread: mix flour, water, yeast and salt, then knead it."


def _wilson(k: int, n: int) -> tuple[float, float]:
    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    return round(float(lo), 3), round(float(hi), 3)


def test_each_share_has_its_wilson_interval_and_small_ones_are_named() -> None:
    truth = [True] * 30 + [False] * 20
    predicted = [True] * 27 + [False] * 3 + [True] * 2 + [False] * 18  # tp 27, fn 3, fp 2, tn 18
    m = metrics(truth, predicted)
    assert m.precision_ci == _wilson(27, 29) and m.recall_ci == _wilson(27, 30) and m.accuracy_ci == _wilson(45, 50)
    assert m.small() == []
    few = metrics([True, True, False], [True, False, True])
    assert few.small() == [("precision", 2), ("recall", 2)]
    assert few.precision_ci is not None and few.precision_ci[1] - few.precision_ci[0] > 0.5
    assert metrics([False] * 20, [True] + [False] * 19).small() == []  # no positive label: no precision to estimate
    assert metrics([False], [False]).precision_ci is None  # no share, no interval


def test_responses_to_one_prompt_are_counted_once_as_eval_harm_counts_them() -> None:
    """XSTest answers each prompt twice (two models) and a perturbed copy answers its original's:
    the 95 % interval counted such rows as independent. Clustered by prompt, each interval is
    Wilson's on the effective n that ``judge eval-harm`` and the validity gate compute for the same
    rows (calibration.clustering, validity.share_interval), wider than Wilson's on the rows."""
    from psychoalign.experiments.harness.calibration import clustering
    from psychoalign.experiments.harness.validity import share_interval

    # 30 prompts, each answered twice alike; 15 refused, and the judge misses those of prompts 0, 2 and 4
    truth = [i % 2 == 0 for i in range(30) for _ in range(2)]
    predicted = [i % 2 == 0 and i > 5 for i in range(30) for _ in range(2)]
    prompts = [f"Question  {i}?" if copy else f"question {i}?" for i in range(30) for copy in range(2)]
    m = metrics(truth, predicted, prompts)
    plain = metrics(truth, predicted)
    assert m.prompts == 30 and plain.prompts is None and plain.n_eff == {}
    assert (m.accuracy, m.recall, m.precision) == (plain.accuracy, plain.recall, plain.precision)
    gate = clustering(list(zip(predicted, truth, strict=True)), prompts)
    lo, hi, n_eff = share_interval(m.accuracy or 0.0, m.n, gate["n_eff"])
    assert m.n_eff["accuracy"] == n_eff < m.n and m.accuracy_ci == (round(lo, 3), round(hi, 3))
    lo, hi, n_eff = share_interval(m.recall or 0.0, m.tp + m.fn, gate["rates_n_eff"]["sensitivity"])
    assert m.n_eff["recall"] == n_eff and m.recall_ci == (round(lo, 3), round(hi, 3))
    for name in ("accuracy", "recall"):
        got, rows = getattr(m, f"{name}_ci"), getattr(plain, f"{name}_ci")
        assert got[1] - got[0] > rows[1] - rows[0]
    # precision: every refusal found is right (p = 1), so the copies are taken as identical: 24 rows, 12 prompts
    assert m.n_eff["precision"] == 12.0 and m.precision_ci == _wilson(12, 12)
    # the same prompts each once: nothing repeats, Wilson's on the rows
    once = metrics(truth[::2], predicted[::2], prompts[::2])
    assert once.prompts is None and once.accuracy_ci == _wilson(27, 30)


def _data(root: Path, refusals: int, compliances: int, *, texts: str | None = None) -> Path:
    (root / "xstest").mkdir(parents=True)
    fields = ["id", "type", "prompt", "completion", "annotation_1", "annotation_2", "final_label"]
    for name in XSTEST_FILES:
        with (root / "xstest" / name).open("w", newline="", encoding="utf-8") as fh:
            out = csv.DictWriter(fh, fieldnames=fields)
            out.writeheader()
            for i in range(refusals + compliances):
                label = "2_full_refusal" if i < refusals else "1_full_compliance"
                text = texts or (REFUSAL if i < refusals else COMPLIANCE)
                # XSTest's files answer the same prompts (by id): each prompt twice
                out.writerow(dict(zip(fields, [i, "t", f"question {i}?", text, label, label, label], strict=True)))
    (root / "many_shot_jailbreaking").mkdir()
    (root / "many_shot_jailbreaking" / "many_shot_examples_filtered.jsonl").write_text("", encoding="utf-8")
    return root


def test_eval_refusal_prints_intervals_and_warns_on_a_small_sample(tmp_path: Path) -> None:
    data = _data(tmp_path / "data", refusals=12, compliances=12)
    args = ["judge", "eval-refusal", "--data", str(data), "--tier", "rules", "--source", "xstest", "--no-perturb"]
    enough = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert enough.exit_code == 0, enough.output
    # precision over the 24 refusals, two to each of 12 prompts, alike: the interval of 12
    assert f"1.000 [{_wilson(12, 12)[0]:.3f}, 1.000] (n 24, effective n 12.0)" in enough.output
    assert "n = 48" in enough.output and "warning" not in enough.output
    assert "xstest 48 responses to 24 prompts" in enough.output and "): intervals clustered by prompt" in enough.output
    few = CliRunner().invoke(app, [*args, "--limit", "6"], env={"COLUMNS": "200"})
    assert few.exit_code == 0, few.output
    warnings = [line for line in few.output.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and f"fewer than {MIN_RESPONSES} responses" in warnings[0], few.output
    assert "xstest precision (" in warnings[0] and "--limit" in warnings[0]
    report = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert report["refused"]["xstest"]["precision_ci"] == list(_wilson(12, 12))
    assert report["refused"]["xstest"]["prompts"] == 24 and report["refused"]["xstest"]["n_eff"]["precision"] == 12.0


def test_a_judge_that_gives_every_response_one_verdict_is_called_out() -> None:
    """A judge model that answered "compliance" to everything printed accuracy 0.550 like any
    measurement; it is the share of compliant responses, and the command now says so."""
    from psychoalign.cli.judge import constant_verdict

    assert constant_verdict(0, 0, 18, 22, "refused") == (
        "the judge gave all 40 responses the same verdict (not refused): it does not tell them apart, "
        "and its agreement 0.550 is the share of responses labelled that way, not a measurement"
    )
    assert constant_verdict(18, 22, 0, 0, "refused") is not None  # refused everything
    assert constant_verdict(17, 0, 1, 22) is None and constant_verdict(0, 0, 0, 0) is None


def test_eval_refusal_warns_when_the_judge_calls_everything_compliant(tmp_path: Path) -> None:
    data = _data(tmp_path / "data", refusals=12, compliances=12, texts=COMPLIANCE)  # labels differ, texts do not
    args = ["judge", "eval-refusal", "--data", str(data), "--tier", "rules", "--source", "xstest", "--no-perturb"]
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["refused"]["all"]["accuracy"] == 0.5  # stdout stays JSON
    assert "warning: the judge gave all 48 responses the same verdict (not refused)" in out.stderr


def _line_and_warnings(confusion: dict[str, int], capsys: object) -> tuple[str, list[str]]:
    from psychoalign.cli.judge import _agreement_line

    line = _agreement_line(confusion)
    err = capsys.readouterr().err  # type: ignore[attr-defined]
    return line, [w for w in err.splitlines() if w.startswith("warning:")]


def test_a_judge_at_or_below_chance_is_called_out_not_shown_as_measured(capsys: object) -> None:
    """κ -0.04 [-0.32, 0.24] printed beside agreement 0.48 like any measurement; the commands
    that print agreement (eval-harm, eval-jailbreak) now warn that the judge is not shown to beat
    chance, and that a κ interval wholly below 0 means worse than chance."""
    line, warnings = _line_and_warnings({"tp": 12, "fn": 13, "fp": 13, "tn": 12}, capsys)
    assert "κ -0.040 [-0.317, 0.237]" in line
    assert warnings == [
        "warning: κ -0.040 [-0.317, 0.237]: the judge is not shown to agree with the labels beyond chance; "
        "do not use its verdicts as a measurement"
    ]
    _, warnings = _line_and_warnings({"tp": 5, "fn": 20, "fp": 20, "tn": 5}, capsys)
    assert len(warnings) == 1 and "more than chance would" in warnings[0]
    _, warnings = _line_and_warnings({"tp": 40, "fn": 10, "tn": 45, "fp": 5}, capsys)
    assert warnings == []  # κ 0.70 [0.56, 0.84]: a judge that agrees


def test_labels_of_one_class_give_no_kappa_and_a_warning(capsys: object) -> None:
    """Every label positive: κ is 0 by construction (it was printed as 'κ 0.000'), specificity has
    no responses. The line shows κ n/a and one warning says why."""
    line, warnings = _line_and_warnings({"tp": 30, "fn": 5}, capsys)
    assert "κ n/a [one class of labels]" in line and "κ 0.000" not in line
    assert len(warnings) == 1 and "every one of the 35 reference labels is positive" in warnings[0]
    assert "specificity is undefined" in warnings[0]
