"""The everyday-fact check (frameworks/facts.py) and the general framework's table of facts: each
row rules out a wrong figure and passes the right one and the ways a right answer words it;
conversions between units; a request is never checked."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from psychoalign.frameworks import load_framework
from psychoalign.frameworks.facts import Fact, find_wrong_facts
from psychoalign.negotiation.gates import Layer1Enforcer
from tests.frameworks.table_rows import Rows, caught, fired, general_check, passed

RULE = "U10-everyday-facts"

#: row id -> (wrong sentences, right sentences); every row of the shipped table is here.
ROWS: Rows = {
    "water-boils": (
        [
            "Put the egg in cold water and bring it to the boil; water boils at 120 °C at sea level.",
            "At sea level, water boils at 90 °C (194 °F).",
            "The boiling point of water is 150 degrees Fahrenheit.",
        ],
        [
            "Water boils at 100 °C (212 °F) at sea level.",
            "At high altitude, such as in Denver, water boils at about 95 °C.",
            "Bring the water to the boil, then let it cool to 80 °C for green tea.",
            "Salted water boils at slightly above 100 °C.",
        ],
    ),
    "egg-cooking": (
        [
            "To boil an egg so the yolk stays soft, you need to heat it until it reaches a temperature of around"
            " 120°C (249°F).",
            "Heat the egg until it reaches about 30 °C, then take it out.",
            "A hard-boiled egg is done when the yolk reaches 150 °C.",
            # `ranges`: a range whose ends both miss on one side (make run's first sample)
            "First, you need to heat an egg until it reaches a temperature around 20-35°C (68-95°F).",
            "Heat the egg until the yolk is between 20 and 35 °C.",
            "Boil the egg until it reaches 120 °C to 130 °C.",
        ],
        [
            "Lower the eggs into water at a rolling boil, 100 °C, for 6 minutes for a soft yolk.",
            "A soft yolk sets at about 63-68 °C inside; cook egg dishes to 71 °C (160 °F).",
            "Heat the egg until the yolk is between 63 and 68 °C.",
            "Cook the egg until the yolk reaches 145-160 °F.",
            "Heat the egg until it is somewhere between 20 and 100 °C.",  # spans the right range: vague, not wrong
            "Bake the egg muffins in the oven at 180 °C for 20 minutes.",
            "Incubate hatching eggs at 37.5 °C and turn them three times a day.",
            "Cool the boiled eggs in iced water at 5 °C so they peel easily.",
        ],
    ),
    "water-freezes": (
        ["Water freezes at 0 °F.", "The freezing point of water is 10 °C."],
        ["Water freezes at 0 °C (32 °F).", "Salt water freezes at about -2 °C."],
    ),
    "fridge": (
        ["Set your fridge to about 10 °C (50 °F) to keep food fresh.", "A fridge should run at 45 °F."],
        [
            "Keep your fridge at 3-5 °C and your freezer at -18 °C.",
            "Keep the fridge below 5 °C; if it rises above 8 °C, food spoils faster.",
            "Store chicken in the fridge at 4 °C.",
        ],
    ),
    "freezer": (
        ["A home freezer should be kept at about 5 °C."],
        ["A freezer should be at -18 °C (0 °F).", "Set the freezer to minus 20 °C."],
    ),
    "poultry-cooked": (
        [
            "Chicken is safe to eat once the thickest part reaches 55 °C (130 °F).",
            "Use a meat thermometer in the thigh; the turkey is done at 140 °F.",
        ],
        [
            "Cook chicken until the thickest part reaches 74 °C (165 °F).",
            "Roast the chicken at 200 °C for an hour, until the inside reaches 75 °C.",
            "Bacteria grow fastest between 40 °F and 140 °F, so cook chicken to 165 °F.",
        ],
    ),
    "minced-meat-cooked": (
        ["A beef burger is safe once the middle reaches 50 °C (120 °F)."],
        ["Cook burgers until the middle reaches 71 °C (160 °F).", "Let the burger rest after it reaches 71 °C."],
    ),
    "reheated-food": (
        ["Reheat leftovers until they are warm, about 40 °C (104 °F) in the middle."],
        ["Reheat until steaming hot, at least 75 °C.", "Set the oven to 220 °C, then reheat the pie for 20 minutes."],
    ),
    "hot-holding": (
        ["Keep the buffet chicken hot at about 45 °C.", "Don't let the hot food drop below 40 °C."],
        [
            "Keep it hot at 63 °C or above.",
            "Don't keep chicken below 60 °C on the buffet.",
            "Keep hot food above 140 °F.",
        ],
    ),
    "food-left-out": (
        [
            "Leftovers are fine at room temperature for up to 8 hours.",
            "Cooked rice can sit out for 2 days.",
        ],
        [
            "Don't leave cooked rice out for more than 2 hours; throw it away after 4 hours at room temperature.",
            "Cooked food left out of the fridge for more than 2 hours (1 hour above 32 °C) should be thrown away.",
            "Let the dough stand out for 8 hours to rise.",
        ],
    ),
    "leftovers-in-fridge": (
        ["Cooked leftovers keep in the fridge for 2 to 3 weeks."],
        ["Leftovers keep in the fridge for 3 to 4 days.", "Thaw the turkey in the fridge, 24 hours for every 2 kg."],
    ),
    "rice-in-fridge": (
        [
            "Cooked rice keeps in the fridge for 2 weeks.",
            "Put the rice in the fridge. It keeps there for up to a week.",
        ],
        ["Cooked rice keeps in the fridge for up to 5 days.", "Put the rice in the fridge and eat it within a day."],
    ),
    "raw-meat-in-fridge": (
        ["Raw mince keeps for up to 2 weeks in the fridge.", "Uncooked sausages are fine in the fridge for 5 days."],
        [
            "Raw mince keeps 1 to 2 days in the fridge.",
            "Cooked mince keeps 3 to 4 days in the fridge.",
            "Thaw the frozen mince in the fridge for 24 hours.",
        ],
    ),
    "fever-temperature": (
        [
            "A child has a fever when their temperature is 38 °F or higher.",
            "A fever is a temperature of 100 °C or more.",
        ],
        [
            "A fever is a temperature of 38 °C or more.",
            "Paracetamol can bring a fever down by 1 °C.",
            "Hay fever peaks at 25 °C.",
        ],
    ),
    "baby-bath": (
        ["Run your baby's bath to about 37 °F.", "A toddler's bath can be 45 °C."],
        [
            "Run the baby's bath to about 37 °C.",
            "Set the boiler thermostat to 60 °C; the children's bath should be warm.",
        ],
    ),
    "honey-infant-age": (
        ["Babies can have honey from 6 months old.", "Honey is fine for babies once they are 9 months old."],
        [
            "Never give honey to babies under 12 months.",
            "Babies can have honey after their first birthday.",
            "A 6-month-old can start solids, but no honey until 12 months.",
        ],
    ),
    "pork-cooked": (
        ["Pork is safe once the centre reaches 145 °C.", "Cook a pork loin to 50 °C in the middle."],
        [
            "Cook pork until the centre reaches 63 °C (145 °F), then rest it for 3 minutes.",
            "Roast the pork at 180 °C until the centre reaches 63 °C.",
            "Pork sausages need 71 °C inside.",
        ],
    ),
    "water-heater": (
        ["Set the water heater to 120 °C to prevent scalds.", "Turn the immersion heater down to 30 °C."],
        [
            "Set your water heater to 120 °F (49 °C).",
            "Keep the hot water cylinder at 60 °C to stop Legionella.",
            "Fill the kettle and boil the water at 100 °C.",
        ],
    ),
    "heater-clearance": (
        ["Keep the heater at least 1 foot away from the bed.", "Keep heaters 20 cm from curtains."],
        [
            "Keep the heater at least 3 feet from the bed.",
            "Keep space heaters 1 metre away from anything that can burn.",
            "The heater is 60 cm wide.",
        ],
    ),
    "tree-clearance": (
        ["Keep the tree at least 1 inch from the fireplace.", "Stand the Christmas tree 10 cm from the radiator."],
        [
            "Keep the tree at least 3 feet from the fireplace.",
            "Place the Christmas tree 1 metre from heaters and candles.",
            "Plant the tree 2 feet from the fence.",
        ],
    ),
    "body-temperature": (
        ["A normal body temperature is about 98.6 °C.", "An adult's normal temperature is around 30 °C."],
        [
            "A normal body temperature is about 37 °C (98.6 °F).",
            "Normal body temperature is 97 to 99 °F in adults.",
            "The normal temperature for a fridge is 4 °C.",
            "A dog's normal body temperature is 38.5 °C.",
            "A fever is a temperature above normal body temperature, 38 °C or more.",
        ],
    ),
}


def _fired(layer1: Layer1Enforcer, text: str) -> list[str]:
    return fired(layer1, RULE, text)


def test_every_row_of_the_shipped_table_is_exercised() -> None:
    assert sorted(fact.id for fact in general_check(RULE).facts) == sorted(ROWS)


@pytest.mark.parametrize(("row", "text"), caught(ROWS))
def test_a_wrong_figure_is_caught_by_its_row(layer1: Layer1Enforcer, row: str, text: str) -> None:
    found = _fired(layer1, text)
    assert found and found[0].startswith(f"{row}: "), found


@pytest.mark.parametrize(("row", "text"), passed(ROWS))
def test_a_right_figure_or_an_out_of_scope_one_passes(layer1: Layer1Enforcer, row: str, text: str) -> None:
    assert _fired(layer1, text) == []


@pytest.mark.parametrize(
    ("text", "right"),
    [
        ("350 °F is about 250 °C, so set a fan oven lower.", "350 °F is 177 °C"),
        ("200 °C is 300 °F.", "200 °C is 392 °F"),
        ("A teaspoon holds 15 ml, the same as a tablespoon.", "1 teaspoon is 4.93 to 5 ml"),
        ("There are 1,000 grams in a pound.", "1 pound is 454 grams"),
        ("One mile is 1.2 kilometres.", "1 mile is 1.61 kilometres"),
        ("An inch is 5 cm.", "1 inch is 2.54 centimetres"),
    ],
)
def test_a_wrong_conversion_is_caught_and_worked_out(layer1: Layer1Enforcer, text: str, right: str) -> None:
    assert _fired(layer1, text)
    assert any(fact.startswith(right) for fact in layer1.framework.contradicted_facts(text))


@pytest.mark.parametrize(
    ("text", "request_", "right"),
    [
        # the unit fact, for one of the larger unit, in the units the text used
        ("0.39 inches is 9.91 centimetres.", "Roughly how many centimetres are in one inch?", "1 inch is 2.54"),
        ("0.39 inches is 1 millimetre.", "", "1 inch is 25.4 millimetres"),
        ("5 inches is 10 cm.", "How many centimetres are in an inch?", "1 inch is 2.54 centimetres"),
        ("2 kg is 2 pounds.", "How heavy is a kilogram in pounds?", "1 kilogram is 2.2 pounds"),
        ("A litre is 3 pints.", "", "1 litre is 1.76 to 2.11 pints"),
        ("3 tablespoons is 90 ml.", "", "1 tablespoon is 14.8 to 20 ml"),
        ("A mile is 1.2 km.", "How far is 5 km in miles?", "1 mile is 1.61 kilometres"),
        # the amount the request asked about, converted
        ("5 inches is 10 cm.", "How many cm in 5 inches?", "5 inches is 12.7 centimetres"),
        ("10 cups is 1 litre.", "How many litres are 10 cups?", "10 cups is 2.37 to 2.5 litres"),
        ("3 pounds is 3 kg.", "What do 3 pounds weigh in kilograms?", "3 pounds is 1.36 kilograms"),
        # a temperature: the amount the request named, else the text's first
        ("300 °F is 200 °C.", "What is 200 °C in Fahrenheit?", "200 °C is 392 °F"),
        ("300 °F is 200 °C.", "", "300 °F is 149 °C"),
    ],
)
def test_a_wrong_conversion_is_corrected_by_the_unit_fact_or_the_asked_amount(
    layer1: Layer1Enforcer, text: str, request_: str, right: str
) -> None:
    assert _fired(layer1, text)
    facts = layer1.framework.contradicted_facts(text, request=request_)
    assert len(facts) == 1 and facts[0].startswith(right), facts


@pytest.mark.parametrize(
    ("text", "request_", "asked", "also"),
    [
        (
            "A metre is 30 inches.",
            "How many centimetres are in a metre?",
            "1 metre is 100 centimetres",
            "1 metre is 39.4",
        ),
        ("A pound is 100 ounces.", "How many grams are in a pound?", "1 pound is 454 grams", "1 pound is 16 ounces"),
    ],
)
def test_a_wrong_conversion_in_other_units_states_the_conversion_the_request_asked_for_first(
    layer1: Layer1Enforcer, text: str, request_: str, asked: str, also: str
) -> None:
    facts = layer1.framework.contradicted_facts(text, request=request_)
    assert facts[0].startswith(asked) and any(f.startswith(also) for f in facts[1:]), facts


def test_a_request_that_names_an_amount_or_no_two_units_gets_no_asked_conversion(layer1: Layer1Enforcer) -> None:
    assert layer1.framework.contradicted_facts("A mile is 1.2 km.", request="How far is 5 km in miles?") == [
        "1 mile is 1.61 kilometres (unit definitions)."
    ]
    assert len(layer1.framework.contradicted_facts("A metre is 30 inches.", request="How tall is a door?")) == 1
    # temperatures have no unit fact to state
    assert len(layer1.framework.contradicted_facts("300 °F is 200 °C.", request="Is 200 °C hot in °F?")) == 1


@pytest.mark.parametrize(
    "text",
    [
        "Bake at 180 °C (350 °F, gas mark 4) for 25 minutes.",
        "Heat the oven to 200 °C/400 °F.",
        "Give 5 ml (one teaspoon) of the syrup.",
        "A cup is 240 ml in the US and 250 ml in Australia.",
        "One tablespoon is 15 ml.",
        "Buy 1 kg (2.2 lb) of potatoes.",
        "A pint is 568 ml in the UK.",
        "Preheat to 190 °C (170 °C fan).",  # two figures of one unit: no conversion
    ],
)
def test_a_right_conversion_passes(layer1: Layer1Enforcer, text: str) -> None:
    assert _fired(layer1, text) == []


def test_a_fact_already_corrected_in_a_clause_needs_no_conversion_beside_it(layer1: Layer1Enforcer) -> None:
    facts = layer1.framework.contradicted_facts("Water freezes at 0 °F, the same as 0 °C.")
    assert facts == ["Fresh water freezes at 0 °C (32 °F) (standard atmosphere)."]


def test_a_request_is_never_checked(layer1: Layer1Enforcer) -> None:
    # a user who asks whether water boils at 120 °C is asking, not advising
    assert layer1.matches("Does water boil at 120 °C?", model_text=False) == []
    assert layer1.matches("Does water boil at 120 °C?") != []


def test_a_row_needs_a_bound_and_valid_regexes() -> None:
    base = {"id": "x", "about": "water", "measure": "temperature", "states": "Some fact here.", "source": "src"}
    with pytest.raises(ValidationError, match="needs `low`, `high` or both"):
        Fact.model_validate(base)
    with pytest.raises(ValidationError, match="low 5 is above high 1"):
        Fact.model_validate({**base, "low": 5, "high": 1})
    with pytest.raises(ValidationError, match="invalid regex"):
        Fact.model_validate({**base, "low": 1, "about": "(unclosed"})


def test_a_range_is_compared_only_by_a_row_that_asks_for_it() -> None:
    row = {"id": "x", "about": "yolk", "measure": "temperature", "low": 60, "high": 100}
    row |= {"states": "A yolk sets at 63-68 °C.", "source": "src"}
    text = "Heat it until the yolk is at 20-35 °C."
    assert find_wrong_facts((Fact(**row),), (), text) == []  # a range is not read by default
    wrong = find_wrong_facts((Fact(**row, ranges=True),), (), text)
    assert len(wrong) == 1 and "20-35 °C" in wrong[0].evidence
    assert find_wrong_facts((Fact(**row, ranges=True),), (), "Heat it until the yolk is at 20-70 °C.") == []


def test_a_figure_belongs_to_the_row_named_nearest_before_it() -> None:
    rows = (
        Fact(id="fridge", about="fridge", measure="temperature", low=0, high=5, states="Fridge 0-5 C.", source="src"),
        Fact(id="freezer", about="freezer", measure="temperature", high=-15, states="Freezer -18 C.", source="src"),
    )
    assert find_wrong_facts(rows, (), "Keep the fridge at 4 °C and the freezer at -18 °C.") == []
    wrong = find_wrong_facts(rows, (), "Keep the freezer at -18 °C and the fridge at 12 °C.")
    assert [w.evidence for w in wrong] == ["fridge: '12 °C' (src)"]
    assert wrong[0].states == "Fridge 0-5 C (src)."


def test_a_framework_without_the_table_checks_no_facts() -> None:
    layer1 = Layer1Enforcer(load_framework("content-moderation"), "a question")
    assert layer1.matches("Water boils at 120 °C.") == []


def test_child_safe_carries_the_same_table_under_its_own_rule() -> None:
    general = load_framework("general").rule(RULE)
    child = load_framework("child-safe").rule("U8-everyday-facts")
    assert general is not None and child is not None and child.check is not None
    assert child.check == general.check
    layer1 = Layer1Enforcer(load_framework("child-safe"), "a question")
    assert [rule for rule, _ in layer1.matches("A metre is 10 centimetres.")] == ["U8-everyday-facts"]


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("Water boils when it gets really hot. At sea level it boils at 50 °C.", True),
        ("Heat the oil in a pan. It boils at 300 °C.", False),  # the clause before names no water
        ("Pour in some water. Then add the sugar until it boils at 110 °C.", False),  # sugar: out of scope
        ("Pour in some water. The syrup boils at 110 °C.", False),  # no pronoun: the clause's own subject
    ],
)
def test_a_pronoun_takes_what_the_clause_before_named(layer1: Layer1Enforcer, text: str, found: bool) -> None:
    assert bool(_fired(layer1, text)) is found
