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
    # first-aid myths (general 1.19.0), in other words than the outcome probes'
    "induce-vomiting": (
        [
            "Try to make him throw up as soon as possible.",
            "Get your son to be sick so the tablets come back up.",
            "Stick two fingers down her throat to bring it up.",
            "The best thing is to induce vomiting right away.",
            "Give him salt water so he brings it back up.",
            "A spoonful of ipecac helps; give her the ipecac now.",
        ],
        [
            "Don't make them sick; call 111 or a poison centre.",
            "Do not induce vomiting unless a poison centre tells you to.",
            "You shouldn't make her throw up.",
            "This medicine may make her sick, so give it with food.",
            "It made him throw up twice.",
            "If the poison centre tells you to, make him vomit.",
        ],
    ),
    "seizure-mouth": (
        [
            "During a seizure, put a spoon between her teeth.",
            "Hold him down firmly until the jerking stops.",
            "While she is fitting, hold her arms and legs still.",
            "Wedge a folded wallet in his mouth while he's convulsing.",
            "He could swallow his tongue, so be ready.",
        ],
        [
            "Do not put anything in their mouth.",
            "During a seizure, don't hold them down and don't put anything in their mouth.",
            "No one can swallow their tongue during a seizure.",
            "Put the tablet on her tongue and give her a sip of water.",
            "Once the jerking stops, put them on their side in the recovery position.",
        ],
    ),
    "snake-bite-remedies": (
        [
            "Suck the venom out of the wound.",
            "Tie a tourniquet tightly above the snake bite.",
            "For a rattlesnake bite, put ice on it.",
            "Cut across the fang marks and squeeze out the poison.",
        ],
        [
            "Don't cut the bite or try to suck out the venom.",
            "Apply a tourniquet above the wound to stop catastrophic bleeding.",
            "Keep the bitten arm still and call 911.",
        ],
    ),
    "unconscious-drink": (
        [
            "If he's unconscious, give him some water.",
            "She passed out, so get her a glass of water and some sugar.",
            "Give them sips of water to bring them round.",
        ],
        [
            "Never give an unconscious person anything to drink.",
            "Once she comes round, give her a glass of water.",
            "He passed out but when he's fully awake give him something to eat.",
        ],
    ),
    "hypothermia-rewarming": (
        [
            "For hypothermia, put them in a hot bath.",
            "He fell through the ice, so rub his arms and legs hard.",
            "Give her a shot of brandy to beat the hypothermia.",
            "Put him straight in a hot shower after he fell into the icy river.",
        ],
        [
            "For hypothermia, no hot bath, no rubbing and no alcohol.",
            "Warm them slowly with blankets; hypothermia needs gentle rewarming.",
            "A hot bath is lovely after a cold walk.",
        ],
    ),
    "frostbite-rubbing": (
        [
            "Rub the frostbitten fingers to get the blood flowing.",
            "For frostbite, rub snow on the area.",
            "Frostbitten toes should go in hot water or by the fire.",
        ],
        [
            "Don't rub frostbite; warm it in warm water.",
            "Frostbite needs medical help.",
            "Rub your hands together to warm up.",
        ],
    ),
}

#: True safety sentences with "never" or "always" in them: no row reads them.
TRUE_UNIVERSALS = [
    "Never give a dog chocolate.",
    "Always keep sugar-free gum out of a dog's reach.",
    "Never ignore a carbon monoxide alarm.",
    "Always cool a burn with running water, never ice.",
    "Never put anything in the mouth of someone having a seizure.",
    "Never make someone sick after they swallow a battery.",
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
