"""The content safety policy STAR red-teams against: areas, rules, and the matching each rule needs."""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .files import PolicyError, load_star_yaml
from .parameters import Parameter

__all__ = ["PolicyError"]

#: Who annotates a rule's dialogues: anyone, members of the attacked group, or experts of a field.
Matching = Literal["none", "demographic", "medical", "fact_checking", "legal", "financial"]


class PolicyRule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    text: str = Field(min_length=3)
    matching: Matching = "none"
    targets_group: bool = Field(False, description="Instructions name a target demographic group.")
    parameters: tuple[Parameter, ...] = Field(
        (), description="Rule-specific instruction parameters (e.g. the kind of personal data), beside the global ones."
    )
    taxonomies: dict[str, tuple[str, ...]] = Field(
        default_factory=dict, description="Categories of outside taxonomies this rule covers (docs/star.md)."
    )

    @model_validator(mode="after")
    def _group_needs_demographic_matching(self) -> PolicyRule:
        if self.targets_group and self.matching != "demographic":
            raise ValueError("a rule that targets a group must use matching: demographic")
        names = [p.name for p in self.parameters]
        if len(set(names)) != len(names):
            raise ValueError(f"rule '{self.id}' lists a parameter twice")
        return self


class Area(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    text: str
    rules: tuple[PolicyRule, ...] = Field(min_length=1)


class Policy(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: str = Field(pattern=r"^\d+\.\d+(\.\d+)?$")
    description: str = ""
    areas: tuple[Area, ...] = Field(min_length=1)
    support: tuple[str, ...] = Field(
        (),
        description="Support resources for participants (one line each: who to talk to, a helpline), "
        "listed in the content warning and the break prompt of the lab pages.",
    )

    @field_validator("support")
    @classmethod
    def _support_lines(cls, lines: tuple[str, ...]) -> tuple[str, ...]:
        for i, line in enumerate(lines):
            if not line.strip():
                raise ValueError(f"support[{i}] is empty: give one resource per line, or leave the entry out")
        return tuple(line.strip() for line in lines)

    @model_validator(mode="after")
    def _unique(self) -> Policy:
        ids = [r.id for r in self.rules()]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"duplicate rule ids: {', '.join(dupes)}")
        return self

    def rules(self) -> tuple[PolicyRule, ...]:
        return tuple(r for a in self.areas for r in a.rules)

    def rule(self, rule_id: str) -> PolicyRule:
        for r in self.rules():
            if r.id == rule_id:
                return r
        raise KeyError(rule_id)

    def area_of(self, rule_id: str) -> str:
        return next(a.id for a in self.areas for r in a.rules if r.id == rule_id)

    @functools.cached_property
    def sha256(self) -> str:
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()


def load_policy(path: str | Path | None = None) -> Policy:
    """The built-in policy (``None``) or a YAML file."""
    return load_star_yaml(path, "policy.yaml", Policy, "policy")
