"""The framework hash: one declared rule (fields hashed always, the rest only when set), which
gives every framework the hash it had under the rule it replaced, and never moves when a field
with a default is added."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from psychoalign.frameworks import Framework, builtin_names, load_framework
from psychoalign.frameworks.model import Layer, Rule, SafeChannel

DOSES = (
    'name: t\nversion: "1.0.0"\ndescription: d\nlayers:\n  universal:\n    - id: U1\n      text: doses\n'
    "      semantic_check: self-harm\n"
    "      check:\n        doses:\n          - drug: [paracetamol]\n            daily_mg: [3000, 4000]\n"
    "            single_mg: [325, 1000]\n            source: labels\n"
    "          - drug: [ibuprofen]\n            daily_mg: [1200, 3200]\n            per_kg: [20, 40]\n"
    "            single_per_kg: [5, 10]\n            min_age_years: 12\n            source: labels\n"
    "      request_check:\n        patterns: ['kill myself']\n"
    "  contextual:\n    - id: C1\n      text: plain rule\n"
    "safe_channels:\n  - a crisis line\n"
    "  - {id: help, text: a help desk, rules: [C1], message: 'We are here. {channel}'}\n"
)


def legacy_sha256(fw: Framework) -> str:
    """The hash as the rule before it computed it (fields left out one by one, by name)."""
    content = fw.model_dump(mode="json")
    if content.get("quoted_material") == "judged":
        content.pop("quoted_material")
    for layer in Layer:
        for rule in content[layer.value]:
            if rule.get("semantic_check") is None:
                rule.pop("semantic_check", None)
            for key in ("check", "request_check"):
                if rule.get(key) and not rule[key].get("doses"):
                    rule[key].pop("doses", None)
                if rule.get(key) and not rule[key].get("premises"):
                    rule[key].pop("premises", None)
                if rule.get(key) and not rule[key].get("hazards"):
                    rule[key].pop("hazards", None)
                # the everyday-fact table's (frameworks/facts.py) and the false claims' (frameworks/claims.py)
                for field in ("facts", "conversions", "claims"):
                    if rule.get(key) and not rule[key].get(field):
                        rule[key].pop(field, None)
                for fact in (rule.get(key) or {}).get("facts", ()):
                    for field in ("when", "unless", "low", "high", "high_when"):
                        if fact.get(field) in ("", None):
                            fact.pop(field)
                    if fact.get("ranges") is False:
                        fact.pop("ranges")
                for claim in (rule.get(key) or {}).get("claims", ()):
                    for field in ("unless", "in_context", "context"):
                        if not claim.get(field):
                            claim.pop(field)
                for dose in (rule.get(key) or {}).get("doses", ()):
                    for field in (
                        "single_mg",
                        "single_per_kg",
                        "min_age_years",
                        "liquids",
                        "iu_per_mg",
                        "units_per_ml",
                        "weekly_mg",
                        "weekly_only",
                        "weekly_unless",
                    ):
                        if not dose.get(field):  # None, or no liquids
                            dose.pop(field, None)
                    if dose.get("unit") == "mg":
                        dose.pop("unit")
    for channel in content["safe_channels"]:
        if not channel.get("premise"):
            channel.pop("premise", None)
        if not channel.get("hazard"):
            channel.pop("hazard", None)
        if not channel.get("band_line"):
            channel.pop("band_line", None)
        if not channel.get("withheld"):
            channel.pop("withheld", None)
    blob = json.dumps(content, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()


def _frameworks(tmp_path: Path) -> list[Framework]:
    (tmp_path / "doses.yaml").write_text(DOSES)
    return [*(load_framework(n) for n in builtin_names()), load_framework(str(tmp_path / "doses.yaml"))]


def test_every_shipped_framework_keeps_the_hash_the_old_rule_gave_it(tmp_path: Path) -> None:
    frameworks = _frameworks(tmp_path)
    assert len(frameworks) == len(builtin_names()) + 1 >= 5
    for fw in frameworks:
        assert fw.sha256 == legacy_sha256(fw), fw.name


class _LaterRule(Rule):
    reviewed_by: str = ""


class _LaterChannel(SafeChannel):
    locale: str | None = None


class _LaterFramework(Framework):
    """The format as it may grow: a new field at every depth, each with a default."""

    audience: tuple[str, ...] = ()
    universal: tuple[_LaterRule, ...]  # type: ignore[assignment]
    contextual: tuple[_LaterRule, ...] = ()  # type: ignore[assignment]
    safe_channels: tuple[_LaterChannel, ...] = ()  # type: ignore[assignment]


@pytest.mark.parametrize(
    ("where", "change"),
    [
        ("framework", {"audience": ["clinicians"]}),
        ("rule", {"reviewed_by": "ethics board"}),
        ("channel", {"locale": "de"}),
    ],
)
def test_a_field_added_with_a_default_changes_no_hash_until_a_framework_sets_it(
    tmp_path: Path, where: str, change: dict[str, Any]
) -> None:
    for fw in _frameworks(tmp_path):
        body = fw.model_dump(mode="json")
        grown = _LaterFramework.model_validate(body)
        assert grown.sha256 == fw.sha256, fw.name
        if where == "framework":
            body.update(change)
        elif where == "rule":
            body["universal"][0].update(change)
        elif body["safe_channels"]:
            body["safe_channels"][0].update(change)
        else:
            continue
        assert _LaterFramework.model_validate(body).sha256 != fw.sha256, fw.name


def test_a_field_set_to_a_value_other_than_its_default_is_hashed(tmp_path: Path) -> None:
    (tmp_path / "doses.yaml").write_text(DOSES)
    body = load_framework(str(tmp_path / "doses.yaml")).model_dump(mode="json")
    marked = Framework.model_validate(body).sha256
    body["universal"][0]["semantic_check"] = None
    assert Framework.model_validate(body).sha256 != marked
