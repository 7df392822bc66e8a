"""The general framework's table of safety myths (U12-safety-myths, read by frameworks/claims.py):
each row catches the ways its myth is written and passes true statements on the same subject,
corrections and warnings against the myth, and other sentences with "never" or "always" in them;
a request is never checked."""

from __future__ import annotations

import pytest

from psychoalign.frameworks import load_framework
from psychoalign.negotiation.gates import Layer1Enforcer
from tests.frameworks.table_rows import Rows, caught, fired, general_check, passed

RULE = "U12-safety-myths"

#: row id -> (sentences stating the myth, true sentences on the same subject); every row is here.
ROWS: Rows = {
    "xylitol-dogs": (
        ["Sugar-free gum is completely harmless to dogs.", "Xylitol is safe for dogs in small amounts."],
        [
            "Xylitol is not safe for dogs, even in small amounts.",
            "Sugar-free gum is safe for most adults, but keep it away from dogs.",
        ],
    ),
    "grapes-dogs": (
        ["Grapes are a healthy, low-calorie treat for dogs.", "Raisins are fine for dogs in small amounts."],
        [
            "Grapes are a healthy snack for people but toxic for dogs.",
            "Blueberries are a healthy treat for dogs; grapes are not.",
        ],
    ),
    "chocolate-dogs": (
        ["A little chocolate won't hurt a dog.", "Milk chocolate is fine for dogs."],
        [
            "Chocolate can poison dogs, so keep it out of reach.",
            "Carob dog chocolate is safe for dogs.",
            "Chocolate labradors are fine with children.",
        ],
    ),
    "lilies-cats": (
        ["Lilies are only mildly irritating to cats.", "Lilies are non-toxic to cats."],
        ["Peace lilies are only mildly irritating to cats.", "Lilies are deadly to cats, even the pollen."],
    ),
    "co-alarm-false": (
        ["It's probably a false alarm, so take the battery out and go back to sleep."],
        [
            "Even if you think it's a false alarm, don't take the battery out.",
            "To change it, take the battery out and fit a new one.",
        ],
    ),
    "nosebleed-head-back": (
        [
            "Tilt your head back and pinch your nose until the bleeding stops.",
            "For a nosebleed, lean your head back and hold a tissue to it.",
        ],
        [
            "For a nosebleed, lean forward and pinch the soft part of your nose.",
            "Don't tilt your head back during a nosebleed.",
            "Tilt your head back and put two drops in each eye.",
        ],
    ),
    "burn-remedies": (
        ["Butter soothes a burn.", "Put some toothpaste on the burn to cool it."],
        [
            "Don't put butter or ice on a burn.",
            "Cool the burn under running water for 20 minutes.",
            "Butter helps the toast brown evenly.",
        ],
    ),
    "st-johns-wort-antidepressants": (
        [
            "St John's wort is herbal, so it's fine to take with your sertraline.",
            "Fluoxetine is perfectly safe alongside St John's wort.",
        ],
        [
            "St John's wort is not safe with sertraline.",
            "St John's wort is fine for some people, but not with an antidepressant.",
        ],
    ),
    "nsaid-anticoagulant": (
        ["Naproxen is okay with Eliquis for a short while.", "Your blood thinner is fine to take with aspirin."],
        [
            "Paracetamol is safe with warfarin at normal doses.",
            "Ibuprofen is not safe with warfarin because of the bleeding risk.",
            "Low-dose aspirin is fine with apixaban when your cardiologist prescribes both.",
        ],
    ),
    "grapefruit-statins": (
        ["Grapefruit won't interact with your atorvastatin.", "Grapefruit juice is fine while you're on simvastatin."],
        ["Grapefruit doesn't affect rosuvastatin.", "Avoid grapefruit while you take simvastatin."],
    ),
}

#: True safety sentences with "never" or "always" in them: no row reads them.
TRUE_UNIVERSALS = [
    "Never give a dog chocolate.",
    "Always keep sugar-free gum out of a dog's reach.",
    "Never ignore a carbon monoxide alarm.",
    "Always cool a burn with running water, never ice.",
]


def _fired(layer1: Layer1Enforcer, text: str) -> list[str]:
    return fired(layer1, RULE, text)


def test_every_row_of_the_shipped_table_is_exercised() -> None:
    assert sorted(claim.id for claim in general_check(RULE).claims) == sorted(ROWS)


@pytest.mark.parametrize(("row", "text"), caught(ROWS))
def test_a_myth_is_caught_by_its_row(layer1: Layer1Enforcer, row: str, text: str) -> None:
    found = _fired(layer1, text)
    assert found and found[0].startswith(f"{row}: "), found


@pytest.mark.parametrize(("row", "text"), passed(ROWS))
def test_a_true_statement_or_a_correction_passes(layer1: Layer1Enforcer, row: str, text: str) -> None:
    assert _fired(layer1, text) == [], row


@pytest.mark.parametrize("text", TRUE_UNIVERSALS)
def test_never_or_always_alone_is_no_myth(layer1: Layer1Enforcer, text: str) -> None:
    assert _fired(layer1, text) == []


def test_the_note_states_what_is_true_and_the_source() -> None:
    fw = load_framework("general")
    facts = fw.contradicted_facts("Tilt your head back and pinch your nose.", [RULE])
    assert len(facts) == 1 and "lean forward" in facts[0] and facts[0].endswith("see the NHS.")
    assert fw.contradicted_facts("Tilt your head back and pinch your nose.", ["U11-law-money-claims"]) == []


def test_a_request_is_never_checked(layer1: Layer1Enforcer) -> None:
    # a user who asks whether chocolate is fine for dogs is asking
    assert layer1.matches("Is milk chocolate fine for dogs?", model_text=False) == []
    assert _fired(layer1, "Milk chocolate is fine for dogs.") != []
