"""The long format every adapter produces (``RatingData``) and the finishing step all of them end in.

Missing is missing: an absent, unparseable or off-scale rating is dropped and *counted* with its
reason (``RatingData.counts``), never turned into a number that counts. ``finish`` enforces the
two invariants the analyses rely on: one row per item in ``items`` (duplicate item rows are
merged, never joined against), and at most one rating per (item, rater, kind) (exact repeats are
dropped; conflicting repeats by one rater are dropped and counted), so a breakdown can never
count a rating twice.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

Metric = Literal["nominal", "ordinal", "interval"]
MAX_LEVELS = 20  # an attribute with more distinct values is kept as a field but not compared by group
RATING_COLUMNS = ["item_id", "rater_id", "value", "kind", "in_group"]


@dataclass
class Counts:
    """What was read and what was kept; ``ratings_read == ratings_kept + sum(dropped.values())``."""

    ratings_read: int = 0
    dropped: Counter[str] = field(default_factory=Counter)
    items_read: int = 0
    items_merged: int = 0
    ratings_kept: int = 0
    items_kept: int = 0

    def drop(self, reason: str, n: int = 1) -> None:
        if n:
            self.dropped[reason] += n

    def as_dict(self) -> dict[str, Any]:
        return {
            "ratings": {
                "read": self.ratings_read,
                "kept": self.ratings_kept,
                "dropped": dict(sorted(self.dropped.items(), key=lambda kv: -kv[1])),
            },
            "items": {"read": self.items_read, "kept": self.items_kept, "duplicate_rows_merged": self.items_merged},
        }

    def line(self) -> str:
        dropped = sum(self.dropped.values())
        reasons = "; ".join(f"{n} {r}" for r, n in self.dropped.most_common())
        return (
            f"read {self.ratings_read} ratings on {self.items_read} item rows: kept {self.ratings_kept} "
            f"on {self.items_kept} items, dropped {dropped}" + (f" ({reasons})" if reasons else "")
        )


def file_source(path: Path) -> dict[str, Any]:
    """A file as a report names it: its name (not its folder), size and SHA-256."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return {"file": path.name, "sha256": digest.hexdigest(), "bytes": path.stat().st_size}


@dataclass
class RatingData:
    """``ratings``: one row per rating (item_id, rater_id, value, kind, in_group); ``value`` indexes
    ``scale``. ``items``: one row per item (item_id, text, item attributes). ``raters``: one row per
    rater id (index) with rater attributes (gender, country, expertise, …). ``positive`` are the
    indices that count as broken/unsafe/refused in the binarised view; ``excluded`` are indices left
    out of it (e.g. "Unsure"). ``values`` are the numeric scale points when the scale is numeric."""

    name: str
    format: str
    scale: list[str]
    ordinal: bool
    positive: set[int]
    positive_label: str
    ratings: pd.DataFrame
    items: pd.DataFrame
    excluded: set[int] = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    values: list[float] | None = None
    raters: pd.DataFrame = field(default_factory=pd.DataFrame)
    counts: Counts = field(default_factory=Counts)
    family: str = ""
    expert: tuple[str, str] | None = None
    level: Metric | None = None
    item_attributes: list[str] = field(default_factory=list)
    #: The files the data came from (:func:`file_source`), for the report's provenance; None when
    #: the data were built in memory (the lab's report reads its store).
    source: dict[str, Any] | None = None
    #: The user's explicit choices about targets (``--target``, ``--attach-legacy``), for the
    #: report (:mod:`.targets`): what was left out or relabelled, and on what basis.
    target_audit: list[dict[str, Any]] = field(default_factory=list)
    #: STAR exports: the persona models (attacker, annotator, refusal_judge) its campaigns recorded
    #: (one set: exports of campaigns on different models are refused), and the campaigns whose
    #: simulated work has no record.
    persona_models: dict[str, Any] = field(default_factory=dict)

    @property
    def annotations(self) -> pd.DataFrame:
        return self.ratings[self.ratings["kind"] == "annotation"]

    @property
    def levels(self) -> list[Metric]:
        """Levels of measurement alpha is reported at: nominal always; ordinal and interval on ordered
        scales with three or more points (interval on labelled scales assumes equal spacing)."""
        if self.ordinal and len(self.scale) > 2:
            return ["nominal", "ordinal", "interval"]
        return ["nominal"]

    @property
    def default_level(self) -> Metric:
        """The documented default: ordinal on ordered scales of 3+ points, nominal otherwise (binary
        scales give the same alpha at every level); ``level`` overrides it."""
        if self.level is not None:
            return self.level
        return "ordinal" if self.ordinal and len(self.scale) > 2 else "nominal"

    @property
    def scale_values(self) -> list[float]:
        # labelled scales: positions 1..K (interval alpha and disagreement do not depend on the shift)
        return self.values if self.values is not None else [float(i + 1) for i in range(len(self.scale))]

    @property
    def binary(self) -> bool:
        """Whether a binarised (positive vs not) view exists."""
        return bool(self.positive) and len(set(range(len(self.scale))) - self.positive - self.excluded) > 0

    def rater_attributes(self) -> list[str]:
        """Rater attribute columns with 2..MAX_LEVELS values (the ones groups are compared on)."""
        if self.raters.empty:
            return []
        return [c for c in self.raters.columns if 2 <= self.raters[c].dropna().nunique() <= MAX_LEVELS]


def rating_row(
    item_id: str,
    value: int,
    rater_id: str | None = None,
    *,
    kind: str = "annotation",
    in_group: bool | None = None,
) -> dict[str, Any]:
    return {"item_id": item_id, "rater_id": rater_id, "value": value, "kind": kind, "in_group": in_group}


def finish(data: RatingData, rating_rows: list[dict[str, Any]], item_rows: list[dict[str, Any]]) -> RatingData:
    """Enforce one row per item and one rating per (item, rater, kind); fill the counts."""
    counts = data.counts
    counts.items_read = counts.items_read or len(item_rows)
    items = pd.DataFrame(item_rows)
    if items.empty:
        items = pd.DataFrame(columns=["item_id", "text"])
    items["item_id"] = items["item_id"].astype(str)
    dup = items.duplicated("item_id", keep="first")
    if dup.any():
        counts.items_merged += int(dup.sum())
        data.notes.append(
            f"{int(dup.sum())} rows repeated an item id; they were merged into one item each "
            "(ratings pooled, first row's fields kept)."
        )
        items = items[~dup]
    data.items = items.reset_index(drop=True)
    ratings = pd.DataFrame(rating_rows, columns=RATING_COLUMNS)
    ratings["item_id"] = ratings["item_id"].astype(str)
    ratings["value"] = ratings["value"].astype(int)
    known = ratings[ratings["rater_id"].notna()]
    if not known.empty:
        key = ["item_id", "rater_id", "kind"]
        n_values = known.groupby(key)["value"].transform("nunique")
        conflicting = known.index[n_values > 1]
        repeated = known.index[(n_values == 1) & known.duplicated(key, keep="first")]
        counts.drop("conflicting ratings by one rater for one item (all of them dropped)", len(conflicting))
        counts.drop("repeated rating (same item, rater and value)", len(repeated))
        ratings = ratings.drop(index=conflicting.union(repeated))
    data.ratings = ratings.reset_index(drop=True)
    counts.ratings_kept = len(data.ratings)
    counts.items_kept = len(data.items)
    if not data.raters.empty:
        data.raters.index = data.raters.index.astype(str)
    return data
