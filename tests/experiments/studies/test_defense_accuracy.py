"""Defense-mechanism accuracy (issue #14 item 4): the labelled set, the rule table on given
classifications, scoring, and the negotiated run with scripted models."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from psychoalign.config import Settings
from psychoalign.errors import InputError
from psychoalign.experiments.studies.defense_accuracy import (
    FAILED,
    LABELS,
    NONE,
    DefenseItem,
    load_items,
    negotiate_items,
    rule_table_label,
    score,
)
from psychoalign.frameworks import load_framework
from psychoalign.negotiation import NegotiationParams, Negotiator
from tests.conftest import ROOT
from tests.experiments.studies.helpers import ITEMS, defense_models

GENERAL = load_framework("general")


def test_item_set_meets_the_issue_minimums() -> None:
    counts = Counter(it.expected for it in ITEMS)
    assert len(ITEMS) >= 60
    assert set(counts) == set(LABELS)
    assert all(counts[m] >= 10 for m in LABELS if m != NONE)
    assert counts[NONE] >= 10
    assert len({it.request for it in ITEMS}) == len(ITEMS)


@pytest.mark.parametrize("item", ITEMS, ids=[it.id for it in ITEMS])
def test_rule_table_selects_the_labelled_mechanism_from_the_given_classification(item: DefenseItem) -> None:
    assert rule_table_label(item, GENERAL) == item.expected


def test_oracle_accuracy_is_100_percent() -> None:
    report = score(ITEMS, [rule_table_label(it, GENERAL) for it in ITEMS])
    assert report["accuracy"] == 1.0 and report["failed"] == 0
    assert all(report["confusion"][e][p] == 0 for e in LABELS for p in report["columns"] if p != e)


def test_a_classification_that_contradicts_its_conflict_type_is_rejected(tmp_path: Path) -> None:
    import yaml

    raw = yaml.safe_load((ROOT / "src/psychoalign/experiments/studies/corpora/defense_accuracy.yaml").read_text())
    bad = next(it for it in raw["items"] if it["conflict_type"] == "adversarial")
    bad["classification"]["conflict"]["adversarial_intent"] = False
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"items": [bad]}))
    with pytest.raises(InputError, match=r"item 1 \(reaction-01\).*adversarial_intent=True"):
        load_items(path)
    wrong_label = next(it for it in raw["items"] if it["conflict_type"] == "benign")
    wrong_label["expected"] = "repression"
    path.write_text(yaml.safe_dump({"items": [wrong_label]}))
    with pytest.raises(InputError, match="implies 'none'"):
        load_items(path)
    with pytest.raises(InputError, match="cannot read item set"):
        load_items(tmp_path / "missing.yaml")


def test_score_counts_confusion_accuracy_and_activation() -> None:
    items = [
        next(it for it in ITEMS if it.expected == "repression"),
        next(it for it in ITEMS if it.expected == "projection"),
        next(it for it in ITEMS if it.expected == NONE),
        next(it for it in ITEMS if it.expected == NONE and it.conflict_type.value == "benign_with_caveat"),
    ]
    report = score(items, ["repression", "sublimation", "rationalization", FAILED])
    assert report["correct"] == 1 and report["accuracy"] == 0.25
    assert report["confusion"]["projection"]["sublimation"] == 1
    assert report["confusion"][NONE][FAILED] == 1 and report["failed"] == 1
    assert report["activation_rate"] == 0.75  # three defenses fired, one failure is not an activation
    assert report["activation_when_expected"] == 1.0 and report["activation_when_none_expected"] == 0.5
    assert report["recall"]["repression"] == 1.0 and report["recall"]["projection"] == 0.0


@pytest.mark.parametrize("gives", [True, False], ids=["scripted-classification", "approves-everything"])
async def test_negotiated_run_scores_what_the_engine_selected(gives: bool) -> None:
    items = list(ITEMS)
    # The paper's protocol, as the CLI study runs it: no request is decided before drafting, and
    # no crisis screen beside the EVALUATOR's labelled classification.
    params = NegotiationParams(decide_on_request=False, crisis_screen=False)
    negotiator = Negotiator(Settings(), params=params, models=defense_models(items, gives))
    predicted, trace_ids = await negotiate_items(items, negotiator, framework=GENERAL, concurrency=4)
    await negotiator.aclose()
    assert len(set(trace_ids)) == len(items)
    report = score(items, predicted)
    if gives:
        # The whole engine, fed the labelled classification, selects the labelled mechanism.
        assert report["accuracy"] == 1.0, [r for r in report["items"] if r["expected"] != r["predicted"]]
    else:
        # An evaluator that approves everything never activates a defense: only "none" items are right.
        assert report["activation_rate"] == 0.0
        assert report["correct"] == sum(1 for it in items if it.expected == NONE)


def test_report_files_carry_the_accuracy_interval_the_console_prints() -> None:
    """The console printed accuracy with its Wilson interval; report.json and report.html had the
    bare share (0.250 on four items, where the interval is [0.046, 0.699])."""
    from statsmodels.stats.proportion import proportion_confint

    from psychoalign.experiments.studies.defense_accuracy import render_html

    items = [
        next(it for it in ITEMS if it.expected == "repression"),
        next(it for it in ITEMS if it.expected == "projection"),
        next(it for it in ITEMS if it.expected == NONE),
        next(it for it in ITEMS if it.expected == NONE and it.conflict_type.value == "benign_with_caveat"),
    ]
    report = score(items, ["repression", "sublimation", "rationalization", FAILED])
    lo, hi = proportion_confint(1, 4, alpha=0.05, method="wilson")
    assert report["accuracy_ci"] == [pytest.approx(lo), pytest.approx(hi)]
    assert report["accuracy_ci_method"] == "wilson"
    report["mode"] = "oracle"
    page = render_html(report)
    assert f"0.250 [{lo:.3f}, {hi:.3f}]" in page and "1/4" in page
