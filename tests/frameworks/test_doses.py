"""The dose-limit check (frameworks/doses.py): a daily limit a draft states for a common medicine
is read and compared with the framework's label ranges; single doses, correct limits, questions
and medicines the text does not pin down are left alone."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from psychoalign.frameworks import builtin_names, load_framework
from psychoalign.frameworks.doses import DoseLimit, find_wrong_dose
from psychoalign.negotiation.gates import Layer1Enforcer

GENERAL = load_framework("general")
LIMITS = next(r for r in GENERAL.universal if r.id == "U7-dose-label").check.doses  # type: ignore[union-attr]

WRONG = [
    # The embedded model's answer to the bundled paracetamol sample (too low, stated with confidence).
    (
        "The maximum safe daily dose of paracetamol for an adult is 10 milligrams (mg) per kilogram of body weight.",
        "paracetamol",
    ),
    ("In general, a typical adult should not exceed 25 mg/kg/day in terms of paracetamol doses.", "paracetamol"),
    ("Adults can safely take up to 8 g of acetaminophen a day.", "paracetamol"),
    ("Ibuprofen: max 800 mg per day.", "ibuprofen"),
    ("You can take up to 6,000 mg of Advil in 24 hours.", "ibuprofen"),
    ("Aspirin is fine. The maximum daily dose is 10 g.", "aspirin"),  # the only medicine the text names
    ("For naproxen the upper limit per day is about 5 g.", "naproxen"),
    ("Paracetamol: no more than 12 g (24 tablets) a day.", "paracetamol"),
    # The embedded model's answer to "What's the max daily dose of naproxen?": a hedge between the
    # "maximum daily dose" phrase and the amount.
    (
        "The maximum daily dose of naproxen is currently unknown, but it's estimated to be around 10 milligrams.",
        "naproxen",
    ),
]
RIGHT = [
    "Adults can take 500 mg to 1 g of paracetamol every 4 to 6 hours, but no more than 4 g (8 tablets) in 24 hours.",
    "Take two 200 mg ibuprofen tablets up to three times a day; do not exceed 1,200 mg a day without a doctor.",
    "The maximum daily dose of acetaminophen is 3,000 mg on some labels and 4,000 mg on others.",
    "Children's paracetamol is dosed by weight: 15 mg/kg per dose, at most 60 mg/kg per day.",
    "A single 1 g dose of paracetamol is the usual adult dose.",
    "Take 1 g of paracetamol four times a day at most.",  # a single dose and a count, not a daily limit
    "Drink 2 litres of water a day and take 1 g of vitamin C daily.",  # no medicine of the table
    # Two medicines and no name in the sentence: which one the figure belongs to cannot be told.
    "Ibuprofen and paracetamol can be combined. Do not take more than 100 mg a day.",
    # a single dose named after a "maximum daily" phrase is not the daily limit
    "The maximum daily dose of paracetamol depends on your weight and liver, but a typical single dose is 500 mg.",
]


@pytest.mark.parametrize(("text", "drug"), WRONG)
def test_a_wrong_daily_limit_is_found(text: str, drug: str) -> None:
    found = find_wrong_dose(LIMITS, text)
    assert found is not None and found.startswith(f"{drug}:")
    assert "label range" in found


@pytest.mark.parametrize("text", RIGHT)
def test_correct_limits_single_doses_and_unknown_medicines_pass(text: str) -> None:
    assert find_wrong_dose(LIMITS, text) is None


def test_the_gate_blocks_a_draft_but_never_a_request_or_a_users_message() -> None:
    layer1 = Layer1Enforcer(GENERAL)
    wrong = WRONG[0][0]
    assert [rule for rule, _ in layer1.matches(wrong)] == ["U7-dose-label"]
    assert layer1.matches(wrong, model_text=False) == []
    question = "Is 10 g of paracetamol a day safe?"
    assert GENERAL.request_rules(question) == []
    assert "U7-dose-label" not in GENERAL.request_rules(wrong)


@pytest.mark.parametrize("name", ["general", "medical", "child-safe"])
def test_frameworks_that_give_advice_carry_the_table(name: str) -> None:
    fw = load_framework(name)
    rules = [r for r in fw.universal if r.check is not None and r.check.doses]
    assert len(rules) == 1
    assert {d.drug[0] for d in rules[0].check.doses} >= {"paracetamol", "ibuprofen"}  # type: ignore[union-attr]
    assert fw.channels_for([rules[0].id])  # a refusal on this rule points somewhere


def test_every_builtin_framework_still_loads() -> None:
    assert all(load_framework(name).name == name for name in builtin_names())


@pytest.mark.parametrize(
    "bad",
    [
        {"drug": ["x"], "daily_mg": [4000, 3000], "source": "label"},
        {"drug": ["x"], "daily_mg": [0, 3000], "source": "label"},
        {"drug": [], "daily_mg": [1, 2], "source": "label"},
    ],
)
def test_a_malformed_range_is_refused(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        DoseLimit.model_validate(bad)
