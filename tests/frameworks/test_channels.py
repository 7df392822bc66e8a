"""Safe channels are tied to the rules they serve (issue 27): every built-in framework offers a
fitting channel for each rule that can fire, self-harm gets a crisis line with a supportive
message, and a request that fired no rule is sent nowhere."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from psychoalign.frameworks import Framework, FrameworkError, Layer, builtin_names, load_framework, parse_framework

DATA = yaml.safe_load((Path(__file__).parent / "self_harm_requests.yaml").read_text(encoding="utf-8"))
SELF_HARM: list[str] = DATA["self_harm"]
INDIRECT: list[str] = DATA["self_harm_indirect"]
LOOK_ALIKES: list[str] = DATA["look_alikes"]
PREMISE = yaml.safe_load((Path(__file__).parent / "premise_requests.yaml").read_text(encoding="utf-8"))
PET = yaml.safe_load((Path(__file__).parent / "pet_medicine_requests.yaml").read_text(encoding="utf-8"))

# The channel each rule that can fire is offered, per built-in framework (read from the
# channel texts: a crisis line for self-harm, never emergency services for advice or hate).
# None: the known-hazard rule offers no place to go; each hazard's warning serves only a request
# that matches it, beside the answer (tests/frameworks/test_known_hazards.py).
FITTING: dict[str, dict[str, str | None]] = {
    "general": {
        "U1-mass-harm": "emergency",
        "U2-child-sexual": "child-protection",
        "U3-self-harm-instructions": "crisis",
        "U4-malware": "security",
        "U5-targeted-violence": "emergency",
        "C1-dual-use": "security",
        "C2-professional-advice": "professional",
        "C3-hate": "hate-support",
        "U6-group-premise": "premise",
        "U7-dose-label": "dose-label",
        "U8-pet-human-medicine": "vet",
        "U9-health-premise": "health-premise",
        "U10-everyday-facts": "facts",
        "U11-law-money-claims": "law-money",
        "U12-safety-myths": "safety-facts",
        "C4-known-hazard": None,
    },
    "medical": {
        "U1-mass-harm": "security",
        "U2-harm-patient": "ethics",
        "U3-self-harm-instructions": "crisis",
        "U4-dose-label": "pharmacy",
        "C1-clinical-detail": "pharmacy",
        "C2-cite-guidance": "pharmacy",
        "C3-privacy": "ethics",
        "C4-controlled": "pharmacy",
        "U5-health-premise": "health-premise",
        "C5-known-hazard": None,
    },
    "content-moderation": {
        "U1-no-new-harm": "escalation",
        "U2-child-sexual": "child-exploitation",
        "U3-doxxing": "escalation",
        "U4-self-harm-instructions": "crisis",
        "C1-analysis-allowed": "escalation",
        "C2-policy-grounding": "escalation",
        "C3-evasion": "escalation",
        "C4-moderator-at-risk": "crisis",  # the crisis check's contextual rule: support beside the analysis
    },
    "child-safe": {
        "U1-sexual": "trusted-adult",
        "U2-violence-weapons": "trusted-adult",
        "U3-self-harm": "helpline",
        "U4-personal-data": "trusted-adult",
        "U5-dose-label": "trusted-adult",
        "U6-pet-human-medicine": "pet-help",
        "U7-health-premise": "health-premise",
        "U8-everyday-facts": "facts",
        "C1-age-appropriate": "trusted-adult",
        "C2-homework": "teacher",
        "C3-adult-referral": "trusted-adult",
        "C4-known-hazard": None,
    },
}
SELF_HARM_RULES = {"U3-self-harm-instructions", "U3-self-harm", "U4-self-harm-instructions"}
# Frameworks whose self-harm rule recognises the request itself (content moderators quote such
# posts to classify them, so content-moderation relies on the EVALUATOR naming the rule).
REQUEST_CHECKED = ["general", "child-safe", "medical"]


def test_the_table_covers_every_builtin_framework() -> None:
    assert sorted(FITTING) == builtin_names()


@pytest.mark.parametrize("name", builtin_names())
def test_every_rule_that_can_fire_has_a_fitting_channel(name: str) -> None:
    fw = load_framework(name)
    # Universal and contextual rules can fire (a check, or an EVALUATOR's rule hit); aspirational
    # ones only raise or lower a score.
    can_fire = [r.id for r in (*fw.universal, *fw.contextual)]
    assert sorted(can_fire) == sorted(FITTING[name])
    for rule_id in can_fire:
        offered = [c.id for c in fw.channels_for([rule_id])]
        if FITTING[name][rule_id] is None:
            assert offered == [], (rule_id, offered)
            continue
        assert FITTING[name][rule_id] in offered, (rule_id, offered)
        # Only channels that name this rule: a specific rule never falls back to another's channel.
        assert all(rule_id in c.rules for c in fw.channels_for([rule_id]))


@pytest.mark.parametrize("name", builtin_names())
def test_self_harm_gets_a_crisis_line_and_a_supportive_message(name: str) -> None:
    fw = load_framework(name)
    rule = next(r.id for r in fw.universal if r.id in SELF_HARM_RULES)
    channel = fw.channels_for([rule])[0]
    message = channel.render_message()
    assert re.search(r"\b(988|0800 1111|116 123)\b", channel.text)
    assert channel.text in message
    assert "sorry" in message.lower()
    assert "rephrase" not in message.lower()
    assert "emergency" in message.lower()  # immediate danger: the local emergency number too
    # One message for a person who only said how they feel and for one who asked for a method:
    # it refuses nothing (a refusal answers an ask the first never made) and judges no one.
    assert not re.search(r"\b(can't|cannot|can not|won't|unable to)\b", message.lower()), message
    assert not re.search(r"\bways? to (hurt|harm|kill)\b", message.lower()), message


@pytest.mark.parametrize("name", builtin_names())
def test_no_rule_fired_means_no_channel(name: str) -> None:
    assert load_framework(name).channels_for([]) == ()


@pytest.mark.parametrize("name", builtin_names())
def test_emergency_services_only_for_danger(name: str) -> None:
    fw = load_framework(name)
    danger = {"U1-mass-harm", "U5-targeted-violence", "U2-violence-weapons"}
    for channel in fw.safe_channels:
        if "emergency services" in channel.text.lower():
            # A hazard's warning may name them for a life at risk (someone who stops breathing, who
            # is choking or touching electricity, heat stroke, hypothermia, a stroke, a head injury
            # with warning signs, a swallowed button battery or magnets, chest pain that may be a
            # heart attack).
            life_at_risk = "breathing" in channel.text or channel.id in {
                "choking",
                "electrocution-rescue",
                "heat-stroke",
                "hypothermia",
                "stroke",
                "head-injury",
                "button-battery",
                "swallowed-magnets",
                "heart-attack",
            }
            assert set(channel.rules) <= danger or (channel.hazard and life_at_risk), channel


@pytest.mark.parametrize("name", REQUEST_CHECKED)
@pytest.mark.parametrize("request_text", SELF_HARM + INDIRECT)
def test_every_self_harm_request_fires_the_self_harm_rule(name: str, request_text: str) -> None:
    fw = load_framework(name)
    fired = fw.request_rules(request_text)
    assert any(r in SELF_HARM_RULES for r in fired), request_text
    assert fw.channels_for(fired)[0].message  # the supportive channel comes first


@pytest.mark.parametrize("name", REQUEST_CHECKED)
@pytest.mark.parametrize("request_text", LOOK_ALIKES)
def test_look_alikes_fire_no_self_harm_rule(name: str, request_text: str) -> None:
    assert not any(r in SELF_HARM_RULES for r in load_framework(name).request_rules(request_text))


def test_twenty_varied_self_harm_requests() -> None:
    assert len(SELF_HARM) == 20 and len(set(SELF_HARM)) == 20


def test_request_check_does_not_gate_drafts() -> None:
    """A draft that points to a crisis line passes the Layer-1 checks: only ``check`` gates text."""
    fw = load_framework("general")
    rule = next(r for r in fw.universal if r.id == "U3-self-harm-instructions")
    draft = "If you want to end your life or hurt yourself, please call 988 now; you are not alone."
    assert rule.check is not None and rule.check.find(draft) is None
    assert rule.matches_request("I want to end my life") is not None


BASE = """
name: t
version: "1.0"
description: test
universal:
  - id: U1-a
    text: rule a
  - id: U2-b
    text: rule b
"""


def test_plain_string_channels_serve_rules_without_their_own() -> None:
    fw = parse_framework(
        BASE + "safe_channels:\n  - somewhere\n  - id: b-desk\n    text: the b desk\n    rules: [U2-b]\n"
    )
    assert [c.id for c in fw.safe_channels] == ["channel-1", "b-desk"]
    assert [c.id for c in fw.channels_for(["U1-a"])] == ["channel-1"]
    assert [c.id for c in fw.channels_for(["U2-b"])] == ["b-desk"]
    assert fw.channels_for([]) == ()


def test_a_channel_naming_an_unknown_rule_is_refused() -> None:
    with pytest.raises(FrameworkError, match="U9-nope"):
        parse_framework(BASE + "safe_channels:\n  - id: x\n    text: the x desk\n    rules: [U9-nope]\n")


def test_duplicate_channel_ids_are_refused() -> None:
    text = BASE + "safe_channels:\n  - id: x\n    text: one desk\n  - id: x\n    text: two desk\n"
    with pytest.raises(FrameworkError, match="duplicate safe channel id"):
        parse_framework(text)


def test_message_without_placeholder_puts_the_channel_on_its_own_line() -> None:
    fw = Framework.model_validate(
        {
            "name": "t",
            "version": "1.0",
            "description": "d",
            "universal": [{"id": "U1", "text": "rule one"}],
            "safe_channels": [
                {"id": "c", "text": "Hilfetelefon 0800 111 0 111", "rules": ["U1"], "message": "Es tut mir leid."}
            ],
        }
    )
    assert fw.safe_channels[0].render_message() == "Es tut mir leid.\nHilfetelefon 0800 111 0 111"
    assert fw.layer_of("U1") is Layer.UNIVERSAL


@pytest.mark.parametrize("request_text", PREMISE["stereotype"])
def test_a_stereotype_premise_fires_the_premise_rule(request_text: str) -> None:
    fw = load_framework("general")
    assert "U6-group-premise" in fw.request_rules(request_text)
    message = fw.channels_for(["U6-group-premise"])[0].render_message()
    assert "premise isn't true" in message and "rephrase" not in message


@pytest.mark.parametrize("request_text", PREMISE["look_alikes"])
def test_premise_look_alikes_fire_no_universal_rule(request_text: str) -> None:
    fw = load_framework("general")
    universal = {r.id for r in fw.universal}
    assert not set(fw.request_rules(request_text)) & universal


PET_RULES = {"general": "U8-pet-human-medicine", "child-safe": "U6-pet-human-medicine"}


@pytest.mark.parametrize("name", sorted(PET_RULES))
@pytest.mark.parametrize("request_text", PET["pet"])
def test_a_human_pain_reliever_for_a_pet_fires_the_pet_rule_and_offers_a_vet(name: str, request_text: str) -> None:
    fw, rule = load_framework(name), PET_RULES[name]
    assert rule in fw.request_rules(request_text)
    channel = fw.channels_for([rule])[0]
    message = channel.render_message()
    # a vet, not the human label or a pharmacist (the dose rule's channel), and no emergency services
    assert "vet" in channel.text and "pharmacist" not in message and "emergency services" not in message
    assert "rephrase" not in message


@pytest.mark.parametrize("name", sorted(PET_RULES))
@pytest.mark.parametrize("request_text", PET["look_alikes"])
def test_pet_look_alikes_fire_no_pet_rule(name: str, request_text: str) -> None:
    assert PET_RULES[name] not in load_framework(name).request_rules(request_text)
