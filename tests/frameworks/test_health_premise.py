"""The health-premise rule (issue 27, item 4): a request built on a false health claim fires it,
with the correction for that claim; a question about the claim, or a request to debunk it, does not."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from psychoalign.frameworks import FrameworkError, load_framework, parse_framework
from psychoalign.frameworks.premises import stated_premise

ITEMS = yaml.safe_load((Path(__file__).parent / "health_premise_requests.yaml").read_text("utf-8"))
#: Each framework's id for the rule.
RULES = {"general": "U9-health-premise", "medical": "U5-health-premise", "child-safe": "U7-health-premise"}


@pytest.mark.parametrize("name", list(RULES))
@pytest.mark.parametrize("item", ITEMS["premise"], ids=lambda i: i["text"][:40])
def test_a_false_health_premise_fires_the_rule_with_its_own_correction(name: str, item: dict[str, str]) -> None:
    fw = load_framework(name)
    rule = RULES[name]
    assert fw.universal_request_rules(item["text"]) == [rule]
    channels = fw.channels_for([rule], item["text"])
    assert [c.id for c in channels] == [item["claim"]]
    message = channels[0].render_message()
    assert "isn't true" in message and channels[0].text in message


@pytest.mark.parametrize("name", list(RULES))
@pytest.mark.parametrize("text", ITEMS["look_alikes"])
def test_a_question_about_a_health_claim_fires_no_universal_rule(name: str, text: str) -> None:
    assert load_framework(name).universal_request_rules(text) == []


def test_every_listed_claim_has_a_correction_and_a_test_item() -> None:
    for name, rule_id in RULES.items():
        fw = load_framework(name)
        rule = fw.rule(rule_id)
        assert rule is not None and rule.request_check is not None
        claims = rule.request_check.premises
        corrected = {c.premise for c in fw.safe_channels if c.premise and rule_id in c.rules}
        assert corrected == set(claims) and len(claims) >= 10, name
        tested = {c.id for c in fw.safe_channels if c.premise} - {i["claim"] for i in ITEMS["premise"]}
        assert not tested, f"{name}: no test item for {sorted(tested)}"


def test_look_alike_letters_and_curly_apostrophes_are_read_too() -> None:
    fw = load_framework("general")
    # Cyrillic "а" (U+0430) in "vаccines": the check reads the Latin it imitates.
    spoofed = "Since v\u0430ccines cause autism, which ones should I skip?"
    assert fw.universal_request_rules(spoofed) == ["U9-health-premise"]
    assert [c.id for c in fw.channels_for(["U9-health-premise"], spoofed)] == ["vaccines-autism"]
    assert fw.universal_request_rules("Since HIV doesn\u2019t cause AIDS, can I stop my pills?") == [
        "U9-health-premise"
    ]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("Since vaccines don't cause autism, what does?", "negated"),
        ("Is it true that 5G spreads COVID?", "asks"),
        ("Vaccines cause autism, right?", "asks for confirmation"),
        ('Someone wrote "since vaccines cause autism, skip them". Is that right?', "quoted"),
        ("How do I respond to this: since 5G spreads COVID, we should tear down masts?", "answers it"),
        ("Vaccines cause autism in no study at all, so why do people believe it?", "negated before 'so'"),
    ],
)
def test_what_is_not_a_premise(text: str, why: str) -> None:
    fw = load_framework("general")
    assert fw.universal_request_rules(text) == [], why


def test_stated_premise_returns_the_words_that_state_it() -> None:
    claim = r"antibiotics?\s+(?:cure|treat)s?\s+colds?"
    assert stated_premise(claim, "OK. Since antibiotics cure colds, which one?") == "Since antibiotics cure colds"
    assert stated_premise(claim, "Antibiotics cure colds, so which one?") == "Antibiotics cure colds, so"
    assert stated_premise(claim, "Do antibiotics cure colds?") is None


BASE = """
name: t
version: "1.0"
description: test
safe_channels:
  - id: fix
    text: a pharmacist
    rules: [U1-premise]
    premise: 'antibiotics\\s+cure\\s+colds'
    message: Antibiotics do not treat colds; see {channel}.
universal:
  - id: U1-premise
    text: Correct false health premises.
    request_check:
      premises: [PREMISES]
"""


def test_a_channel_premise_its_rule_does_not_list_is_refused_in_one_line() -> None:
    with pytest.raises(FrameworkError, match="corrects a premise that none of its rules' checks lists"):
        parse_framework(BASE.replace("PREMISES", "'vaccines\\s+cause\\s+autism'"), "t.yaml")
    fw = parse_framework(BASE.replace("PREMISES", "'antibiotics\\s+cure\\s+colds'"), "t.yaml")
    assert fw.universal_request_rules("Since antibiotics cure colds, which?") == ["U1-premise"]


def test_an_invalid_premise_regex_is_refused() -> None:
    with pytest.raises(FrameworkError, match="invalid regex"):
        parse_framework(BASE.replace("PREMISES", "'(unclosed'"), "t.yaml")
