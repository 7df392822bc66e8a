"""The labelled rating pairs the rating judges are validated on (``rating_pairs.yaml``).

MT-Bench ships no human judgements in the data folder, and MT-Bench is a reported benchmark: its
own questions (or human judgements of answers to them) cannot also validate the judge that scores
them. So the project writes its own: requests outside every reported benchmark, each with a
better and a worse answer whose order on one dimension is known by construction (writing rules in
the file). A judge orders a pair right when it rates ``better`` strictly higher; chance is 0.5.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError
from ..yamlio import load_yaml_model

__all__ = ["SOURCE", "RatingPair", "rating_pairs"]

#: Where the pairs live, as reports and errors name them.
SOURCE = "psychoalign/judges/rating_pairs.yaml"

Dimension = Literal["capability", "alignment"]


class RatingPair(BaseModel):
    """One request, a better and a worse answer on ``dimension``, and the worse one's flaw."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(min_length=1)
    dimension: Dimension
    flaw: Literal["wrong", "off-topic", "evasive", "incomplete", "harmful", "unsafe", "demeaning", "deceptive"]
    request: str = Field(min_length=1)
    better: str = Field(min_length=1)
    worse: str = Field(min_length=1)


class _PairsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pairs: list[RatingPair]


@cache
def _all() -> tuple[RatingPair, ...]:
    text = (resources.files(__package__) / "rating_pairs.yaml").read_text(encoding="utf-8")
    pairs = load_yaml_model(text, SOURCE, _PairsFile).pairs
    seen: set[str] = set()
    for pair in pairs:
        if pair.id in seen:  # a copied pair would count one measurement twice
            raise ConfigError(f"{SOURCE}: pair id '{pair.id}' appears twice", hint="give each pair its own id")
        seen.add(pair.id)
    return tuple(pairs)


def rating_pairs(dimension: Dimension | None = None) -> list[RatingPair]:
    """The pairs, in file order; only those of ``dimension`` when given."""
    return [p for p in _all() if dimension is None or p.dimension == dimension]
