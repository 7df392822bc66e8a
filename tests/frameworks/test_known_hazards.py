"""The known-hazard rule: a request that involves a well-established hazard (carbon monoxide
indoors, bleach with ammonia, a dangerous medicine or alcohol combination) brings that hazard's
one-sentence warning; a request that names the same things without the hazard brings none."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from psychoalign.frameworks import FrameworkError, load_framework, parse_framework

ITEMS = yaml.safe_load((Path(__file__).parent / "known_hazard_requests.yaml").read_text("utf-8"))
#: Each framework's id for the rule.
RULES = {"general": "C4-known-hazard", "medical": "C5-known-hazard", "child-safe": "C4-known-hazard"}


@pytest.mark.parametrize("name", list(RULES))
@pytest.mark.parametrize("item", ITEMS["hazards"], ids=lambda i: i["request"][:40])
def test_a_hazard_request_brings_its_own_warning(name: str, item: dict[str, str]) -> None:
    fw = load_framework(name)
    assert RULES[name] in fw.request_rules(item["request"])
    warnings = fw.hazard_channels(item["request"])
    assert [c.id for c in warnings] == [item["hazard"]]  # its own warning and no other
    assert all(c.text.startswith("Safety warning: ") for c in warnings)


@pytest.mark.parametrize("name", list(RULES))
@pytest.mark.parametrize("text", ITEMS["look_alikes"])
def test_a_look_alike_brings_no_warning(name: str, text: str) -> None:
    fw = load_framework(name)
    assert RULES[name] not in fw.request_rules(text)
    assert fw.hazard_channels(text) == ()


@pytest.mark.parametrize("name", list(RULES))
def test_the_rule_never_blocks_and_offers_no_place_to_go(name: str) -> None:
    fw = load_framework(name)
    rule = fw.rule(RULES[name])
    assert rule is not None and rule.check is None  # drafts and answers are never gated by it
    assert rule.id not in {r.id for r in fw.universal}
    assert fw.universal_request_rules(ITEMS["hazards"][0]["request"]) == []
    assert fw.channels_for([rule.id]) == ()  # no request, no warning: it is not a redirect
    assert fw.hazard_rule_ids == {rule.id}


def test_every_listed_hazard_has_a_warning_and_test_items() -> None:
    tested = {i["hazard"] for i in ITEMS["hazards"]}
    for name, rule_id in RULES.items():
        fw = load_framework(name)
        rule = fw.rule(rule_id)
        assert rule is not None and rule.request_check is not None
        warned = {c.hazard for c in fw.safe_channels if c.hazard and rule_id in c.rules}
        assert warned == set(rule.request_check.hazards) and len(warned) == 60, name
        assert {c.id for c in fw.safe_channels if c.hazard} == tested, name
    assert len(ITEMS["hazards"]) >= 30 and len(ITEMS["look_alikes"]) >= 25


def test_a_request_with_two_hazards_gets_both_warnings_in_file_order() -> None:
    fw = load_framework("general")
    text = "Can I drink a few beers on tramadol, and is tramadol ok with my sertraline?"
    assert [c.id for c in fw.hazard_channels(text)] == ["serotonin-syndrome", "alcohol-sedatives"]


def test_child_safe_warnings_point_to_a_grown_up_or_help() -> None:
    fw = load_framework("child-safe")
    for channel in fw.safe_channels:
        if channel.hazard:
            assert any(w in channel.text for w in ("grown-up", "parent", "emergency services")), channel.id


def test_look_alike_letters_and_curly_apostrophes_are_read_too() -> None:
    fw = load_framework("general")
    # Cyrillic "а" (U+0430) in "wаrfarin": the check reads the Latin it imitates.
    assert [c.id for c in fw.hazard_channels("Can I take aspirin with w\u0430rfarin?")] == ["anticoagulant-nsaid"]
    assert [c.id for c in fw.hazard_channels("Is St John\u2019s wort OK with my Prozac?")] == ["serotonin-syndrome"]


HAZARD = "'bleach\\b.*\\bammonia'"
BASE = """
name: t
version: "1.0"
description: test
universal:
  - id: U1-a
    text: rule a
contextual:
  - id: C1-hazard
    text: warn of known hazards
    request_check:
      hazards: [{hazard}]
"""


def test_a_channel_warning_of_an_unlisted_hazard_is_refused() -> None:
    text = BASE + "safe_channels:\n  - id: x\n    text: a warning\n    rules: [C1-hazard]\n    hazard: 'grill'\n"
    with pytest.raises(FrameworkError, match="warns of a hazard that none of its rules"):
        parse_framework(text.format(hazard=HAZARD))


def test_an_invalid_hazard_regex_is_refused() -> None:
    with pytest.raises(FrameworkError, match="invalid regex"):
        parse_framework(BASE.format(hazard="'bleach(('"))


def test_a_framework_without_hazards_has_no_warnings() -> None:
    fw = parse_framework(
        BASE.format(hazard=HAZARD).replace("    request_check:\n      hazards: [" + HAZARD + "]\n", "")
    )
    assert fw.hazard_rule_ids == frozenset() and fw.hazard_channels("mix bleach and ammonia") == ()
    # a hazard rule without its warning is refused (tests/frameworks/test_channel_twins.py); with it, it warns
    channel = f"safe_channels:\n  - id: w\n    text: a warning\n    rules: [C1-hazard]\n    hazard: {HAZARD}\n"
    warned = parse_framework(BASE.format(hazard=HAZARD) + channel)
    assert warned.hazard_rule_ids == {"C1-hazard"} and "C1-hazard" in warned.request_rules("mix bleach and ammonia")
    assert [c.id for c in warned.hazard_channels("mix bleach and ammonia")] == ["w"]


def test_the_documented_word_based_limits_hold() -> None:
    """docs/frameworks.md, "Limits": words, not meaning, so a request naming both parts while ruling
    the hazard out still gets the warning; low-dose aspirin for pre-eclampsia is not a painkiller."""
    fw = load_framework("general")
    assert [c.id for c in fw.hazard_channels("I stopped drinking before starting metronidazole")] == [
        "alcohol-metronidazole"
    ]
    assert [c.id for c in fw.hazard_channels("My wife is pregnant and I have a headache: can I take ibuprofen?")] == [
        "nsaid-pregnancy"
    ]
    assert fw.hazard_channels("I'm 20 weeks pregnant and take 150mg aspirin for pre-eclampsia") == ()
    assert [c.id for c in fw.hazard_channels("I'm 20 weeks pregnant, can I take aspirin for a headache?")] == [
        "nsaid-pregnancy"
    ]
