"""What the tests of the general framework's tables of rows (everyday facts, false claims about law
and money) share: the shipped check of a rule, what that rule fires on a text, and a table's
sentences as test cases."""

from __future__ import annotations

from psychoalign.frameworks import load_framework
from psychoalign.frameworks.model import Check
from psychoalign.negotiation.gates import Layer1Enforcer

#: row id -> (sentences the row catches, sentences on the same subject it passes).
Rows = dict[str, tuple[list[str], list[str]]]


def general_check(rule: str) -> Check:
    """The check of the general framework's rule ``rule``."""
    found = load_framework("general").rule(rule)
    assert found is not None and found.check is not None, rule
    return found.check


def fired(layer1: Layer1Enforcer, rule: str, text: str) -> list[str]:
    """The evidence of each match of ``rule`` in ``text`` read as model text."""
    return [evidence for name, evidence in layer1.matches(text) if name == rule]


def caught(rows: Rows) -> list[tuple[str, str]]:
    """(row, sentence) for every sentence a row of ``rows`` catches."""
    return [(row, text) for row, (wrong, _) in rows.items() for text in wrong]


def passed(rows: Rows) -> list[tuple[str, str]]:
    """(row, sentence) for every sentence a row of ``rows`` passes."""
    return [(row, text) for row, (_, right) in rows.items() for text in right]
