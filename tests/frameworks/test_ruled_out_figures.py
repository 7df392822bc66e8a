"""A wrong figure a sentence names only to rule it out ("Water boils at 100 °C, not 120 °C") is
not compared with the everyday-facts table; a wrong figure stated as a value or a limit still is,
negated or not ("don't leave food out for more than 6 hours" states 6 hours as the most).
Sentences written for the tests, not taken from any benchmark."""

from __future__ import annotations

import pytest

from psychoalign.negotiation.gates import Layer1Enforcer
from tests.frameworks.table_rows import fired

RULE = "U10-everyday-facts"

#: Correct sentences that name a wrong figure to rule it out, each phrasing of the rule once or more.
RULED_OUT = [
    # X, not Y / not Y but X
    "Chicken is safe at 74 °C, not 60 °C.",
    "Cooked food can stand out for 2 hours, not 8 hours.",
    "Water boils not at 120 °C but at 100 °C.",
    "A fridge should run at 4 °C, not at 12 °C.",
    # rather than / instead of
    "Cook chicken to 74 °C rather than 60 °C.",
    "Reheat soup until it is steaming, 74 °C, instead of just 40 °C.",
    "Put leftovers in the fridge within 2 hours rather than leaving them out for 6 hours.",
    # isn't / is not / never / doesn't / won't
    "A normal body temperature is not 39.5 °C.",
    "Water doesn’t freeze at 5 °C.",
    "Fresh water won't freeze at 3 °C.",
    "Honey is never safe for a baby at 6 months.",
    "You should not serve a burger that is 50 °C in the middle.",
    "Never keep cooked leftovers in the fridge for two weeks.",
    # a myth / people think ... but
    "It's a myth that water boils at 90 °C at sea level.",
    "A common misconception is that chicken is done at 60 °C.",
    "Many people think water boils at 110 °C, but it boils at 100 °C.",
    "Some people believe a fridge at 10 °C is fine; in fact it should be below 5 °C.",
    # a verdict after the figure
    "A freezer at -8 °C is too warm.",
    "Chicken at 60 °C in the middle is not safe to eat.",
    "A fridge at 9 °C is not cold enough.",
]

#: Wrong figures stated as a value or a limit: still compared, negation or none.
STATED = [
    ("Don't leave food out for more than 6 hours.", "food-left-out"),
    ("Cooked food shouldn't be left out for longer than 8 hours.", "food-left-out"),
    ("Leave cooked rice out for no more than 6 hours.", "food-left-out"),
    ("Don't leave cooked food out for 6 hours or more.", "food-left-out"),
    ("Never let your fridge get warmer than 10 °C.", "fridge"),
    ("Never serve chicken cooked to less than 60 °C.", "poultry-cooked"),
    ("Don't eat chicken until it reaches 60 °C.", "poultry-cooked"),
    ("Water boils at 120 °C, not 100 °C.", "water-boils"),
    ("Chicken is done at 60 °C, not 74 °C.", "poultry-cooked"),
    ("Cooked food is fine at room temperature for 8 hours, not 2 hours.", "food-left-out"),
    ("Many people think water boils at 120 °C.", "water-boils"),
    ("Don't worry, water boils at 50 °C.", "water-boils"),
    ("Don't forget that water boils at 50 °C.", "water-boils"),
    ("You don't need a thermometer because chicken is done at 60 °C.", "poultry-cooked"),
    ("You don't need to cook chicken above 60 °C.", "poultry-cooked"),
    ("Cooked chicken is never unsafe at 60 °C.", "poultry-cooked"),
    ("Don't panic: leftovers keep in the fridge for 10 days.", "leftovers-in-fridge"),
]

#: Correct, and passed: a verdict negated is true past a limit; a right limit is right.
PASSED = [
    "It's not safe to leave food out for more than 2 hours.",
    "Water doesn't boil at 90 °C.",
    "Leftovers in the fridge aren't safe after a week.",
    "Don't keep leftovers in the fridge for more than 4 days.",
]


@pytest.mark.parametrize("text", RULED_OUT)
def test_a_figure_named_to_be_ruled_out_is_not_withheld(layer1: Layer1Enforcer, text: str) -> None:
    assert fired(layer1, RULE, text) == []


@pytest.mark.parametrize(("text", "row"), STATED)
def test_a_wrong_figure_stated_as_a_value_or_a_limit_is_still_caught(
    layer1: Layer1Enforcer, text: str, row: str
) -> None:
    assert [evidence.split(":")[0] for evidence in fired(layer1, RULE, text)] == [row]


@pytest.mark.parametrize("text", PASSED)
def test_a_right_limit_or_a_negated_verdict_passes(layer1: Layer1Enforcer, text: str) -> None:
    assert fired(layer1, RULE, text) == []


def test_only_the_ruled_out_figure_is_skipped(layer1: Layer1Enforcer) -> None:
    """One sentence, two figures: the one ruled out passes, the one stated is compared."""
    text = "Water doesn't boil at 90 °C; at sea level it boils at 120 °C."
    assert [e.split(":")[0] for e in fired(layer1, RULE, text)] == ["water-boils"]
    assert "120" in fired(layer1, RULE, text)[0]
