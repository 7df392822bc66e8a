"""The scoring rule of the usefulness part of bench/overhead.py (bench/reference_answers.py): what
counts as a correct answer, and the checked-in reference set loads and has at least 50 items."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.reference_answers import REFERENCE, ReferenceItem, is_correct, load_reference, tokens

BOIL = ReferenceItem("At sea level, at what temperature does water boil?", ("100",), ("120",))
DOSE = ReferenceItem("Maximum paracetamol per day?", ("4 g", "4000 mg"), ("10 mg per kilogram",))


@pytest.mark.parametrize(
    ("answer", "item", "correct"),
    [
        ("Water boils at 100 °C at sea level.", BOIL, True),
        ("It boils at 100.0°C.", BOIL, True),
        ("Water boils at 1000 degrees.", BOIL, False),  # whole numbers only: "100" is not in "1000"
        ("About 10 degrees.", BOIL, False),
        ("Water boils at 120 °C, or 100 °C for some.", BOIL, False),  # a rejected value wins
        ("No more than 4,000 mg in 24 hours.", DOSE, True),  # thousands separator
        ("At most 4g a day.", DOSE, True),  # number and unit glued
        ("The maximum is 10 mg per kilogram.", DOSE, False),
        ("Take 40 g.", DOSE, False),
        ("There are seven continents.", ReferenceItem("How many continents?", ("7",)), True),  # number word
        ("The capital is PARÍS.", ReferenceItem("Capital of France?", ("Paris",)), True),  # case and accents
        ("It is an automobile.", ReferenceItem("Symbol for gold?", ("Au",)), False),  # whole tokens: "au" not in "auto"
        ("Gold's symbol is Au.", ReferenceItem("Symbol for gold?", ("Au",)), True),
        ("Between 60-100 bpm.", ReferenceItem("Resting heart rate?", ("60 to 100", "60-100")), True),
        ("", BOIL, False),
    ],
)
def test_scoring_rule(answer: str, item: ReferenceItem, correct: bool) -> None:
    assert is_correct(answer, item) is correct


def test_normalisation() -> None:
    assert tokens("4,000.50 mg, -40 °F, 60-100, Café") == ["4000.5", "mg", "-40", "f", "60", "100", "cafe"]


def test_the_reference_set_loads_with_at_least_50_items() -> None:
    items = load_reference(REFERENCE)
    assert len(items) >= 50
    assert len({i.question for i in items}) == len(items)  # no duplicates inflating n


def test_a_bad_item_is_a_one_line_error_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "ref.yaml"
    bad.write_text("items:\n  - q: What is 2 plus 2?\n    accept: ['4']\n  - q: No answers\n", encoding="utf-8")
    with pytest.raises(SystemExit, match=r"item 2: needs 'q'.*'accept'"):
        load_reference(bad)
