"""The parameter space of STAR instructions. Parameters are data (YAML), not code."""

from __future__ import annotations

import itertools
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .files import load_star_yaml

#: rule and topic always count towards max_parameters (the paper's five: rule, adversariality,
#: use case, topic, target group).
ALWAYS_COUNTED = 1


class Parameter(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    values: tuple[str, ...] = Field(min_length=1)
    cell: bool = Field(True, description="Balanced across (part of the coverage cell) or just sampled.")
    free_choice_share: float = Field(0.0, ge=0.0, le=1.0, description="Share left to the red teamer's choice.")

    @model_validator(mode="after")
    def _distinct(self) -> Parameter:
        if len(set(self.values)) != len(self.values):
            raise ValueError(f"parameter '{self.name}' lists a value twice")
        return self


class Intersection(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    of: tuple[str, ...] = Field(min_length=2, max_length=2, description="Two dimensions to cross.")
    only: dict[str, tuple[str, ...]] = Field(default_factory=dict, description="Restrict a dimension's labels.")


class TargetGroups(BaseModel):
    """Target groups for rules that attack a group: each label alone, plus two-way intersections."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    dimensions: dict[str, tuple[str, ...]] = Field(min_length=1)
    intersections: tuple[Intersection, ...] = ()

    @model_validator(mode="after")
    def _known(self) -> TargetGroups:
        for inter in self.intersections:
            for dim in (*inter.of, *inter.only):
                if dim not in self.dimensions:
                    raise ValueError(f"intersection names unknown dimension '{dim}'")
            for dim, labels in inter.only.items():
                unknown = set(labels) - set(self.dimensions[dim])
                if unknown:
                    raise ValueError(f"intersection restricts '{dim}' to unknown labels {sorted(unknown)}")
        return self

    def groups(self) -> list[dict[str, str]]:
        """Every target group as {dimension: label}; single labels first, then intersections."""
        out = [{dim: label} for dim, labels in self.dimensions.items() for label in labels]
        for inter in self.intersections:
            a, b = inter.of
            la = inter.only.get(a, self.dimensions[a])
            lb = inter.only.get(b, self.dimensions[b])
            out.extend({a: x, b: y} for x, y in itertools.product(la, lb))
        return out


class ParameterSpace(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str = "1.0.0"
    max_parameters: int = Field(5, ge=1, le=20)
    parameters: tuple[Parameter, ...] = ()
    target_group: TargetGroups | None = None

    @model_validator(mode="after")
    def _limits(self) -> ParameterSpace:
        names = [p.name for p in self.parameters]
        if len(set(names)) != len(names):
            raise ValueError("parameter names must be unique")
        if {"rule", "target_group"} & set(names):
            raise ValueError("'rule' and 'target_group' are built in; do not list them as parameters")
        count = ALWAYS_COUNTED + len(self.parameters) + (1 if self.target_group else 0)
        if count > self.max_parameters:
            raise ValueError(
                f"{count} parameters (rule + {len(self.parameters)} listed"
                f"{' + target_group' if self.target_group else ''}) exceed max_parameters={self.max_parameters}"
            )
        return self

    def cell_parameters(self) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if p.cell)

    def sampled_parameters(self) -> tuple[Parameter, ...]:
        return tuple(p for p in self.parameters if not p.cell)


def load_parameters(path: str | Path | None = None) -> ParameterSpace:
    """The built-in parameter space (``None``) or a YAML file."""
    return load_star_yaml(path, "parameters.yaml", ParameterSpace, "parameter")
