"""Correct advice written in the negative ("Grapes aren't safe for dogs", "You shouldn't take
ibuprofen with warfarin", "Never give honey to a baby under one") is not read as the myth, false
claim, wrong figure or false health premise it corrects, in any row of the built-in frameworks;
the myths themselves (each table's own test sentences) are still caught."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from psychoalign.frameworks import load_framework
from psychoalign.negotiation.gates import Layer1Enforcer
from tests.frameworks import test_claims, test_facts, test_safety_myths
from tests.frameworks.table_rows import caught, general_check

DATA = yaml.safe_load((Path(__file__).parent / "negated_advice.yaml").read_text("utf-8"))
PREMISES = yaml.safe_load((Path(__file__).parent / "health_premise_requests.yaml").read_text("utf-8"))

#: section of the data file -> the general framework's rule whose rows it covers
TABLES = {"myths": "U12-safety-myths", "claims": "U11-law-money-claims", "facts": "U10-everyday-facts"}
PREMISE_RULES = {"general": "U9-health-premise", "medical": "U5-health-premise", "child-safe": "U7-health-premise"}
MYTHS = {
    "myths": test_safety_myths.ROWS,
    "claims": test_claims.ROWS,
    "facts": test_facts.ROWS,
}


def _rows(rule: str) -> set[str]:
    check = general_check(rule)
    return {row.id for row in check.claims} | {row.id for row in check.facts}


def _cases(section: str) -> list[tuple[str, str]]:
    return [(row, text) for row, texts in DATA[section].items() for text in texts]


@pytest.mark.parametrize("section", list(TABLES))
def test_every_row_has_three_or_more_negated_phrasings(section: str) -> None:
    assert set(DATA[section]) == _rows(TABLES[section])
    assert all(len(texts) >= 3 for texts in DATA[section].values()), section


def test_every_health_premise_row_of_every_framework_has_three_or_more() -> None:
    for name, rule in PREMISE_RULES.items():
        fw = load_framework(name)
        rows = {c.id for c in fw.safe_channels if c.premise and rule in c.rules}
        assert set(DATA["premises"]) == rows, name
    assert all(len(texts) >= 3 for texts in DATA["premises"].values())


def test_the_phrasings_are_varied() -> None:
    texts = [t.lower() for section in (*TABLES, "premises") for _, t in _cases(section)]
    for marker in ("shouldn't", "isn't safe", "never", "don't", "avoid", "is dangerous", "\u2019"):
        assert any(marker in t for t in texts), marker


@pytest.mark.parametrize("section", list(TABLES))
def test_negated_correct_advice_is_not_withheld(layer1: Layer1Enforcer, section: str) -> None:
    wrong = [(row, text, found) for row, text in _cases(section) if (found := layer1.matches(text))]
    assert wrong == []


@pytest.mark.parametrize("name", list(PREMISE_RULES))
def test_a_request_that_states_the_correction_is_no_false_premise(name: str) -> None:
    fw = load_framework(name)
    wrong = [(row, text) for row, text in _cases("premises") if fw.universal_request_rules(text)]
    assert wrong == []


@pytest.mark.parametrize("section", list(TABLES))
def test_the_myths_are_still_caught(layer1: Layer1Enforcer, section: str) -> None:
    rule = TABLES[section]
    missed = [
        (row, text)
        for row, text in caught(MYTHS[section])
        if not any(name == rule and evidence.startswith(f"{row}: ") for name, evidence in layer1.matches(text))
    ]
    assert missed == []


@pytest.mark.parametrize("name", list(PREMISE_RULES))
def test_the_false_premises_are_still_caught(name: str) -> None:
    fw = load_framework(name)
    missed = [
        item["text"]
        for item in PREMISES["premise"]
        if fw.universal_request_rules(item["text"]) != [PREMISE_RULES[name]]
    ]
    assert missed == []


@pytest.mark.parametrize("text", DATA["facts_ruled_out"])
def test_a_wrong_figure_ruled_out_in_the_negative_is_not_withheld(layer1: Layer1Enforcer, text: str) -> None:
    assert layer1.matches(text) == []
