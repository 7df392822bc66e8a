"""The generic one-row-per-rating adapter: a mapping names the columns, the rest is read from the data."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ...errors import InputError
from ...yamlio import parse_yaml
from .files import clean, is_missing, read_table, read_text
from .rating_data import Counts, Metric, RatingData, finish, rating_row

__all__ = ["RatingsMapping"]


class RatingsMapping(BaseModel):
    """How the columns of a one-row-per-rating file map to items, raters and ratings (CLI flags or a
    YAML file with these keys). Columns not named are classified from the data: constant within
    each rater → rater attribute; constant within each item → item attribute; else ignored."""

    model_config = ConfigDict(extra="forbid")

    item_col: str
    rating_col: str
    rater_col: str | None = None
    scale: str | list[str] | None = Field(
        None, description="'LO..HI' (integers), or category labels (unordered unless `order` is given)"
    )
    order: list[str] | None = Field(None, description="ordered category labels, lowest first")
    level: Metric | None = None
    text_col: str | None = None
    item_cols: list[str] = Field(default_factory=list)
    rater_cols: list[str] = Field(default_factory=list)
    positive: list[str] | None = Field(None, description="scale points counting as positive (binarised view)")
    neutral: list[str] = Field(default_factory=list, description="scale points left out of the binarised view")
    positive_label: str = "positive"
    expert_col: str | None = None
    expert_value: str = "expert"
    auto_attributes: bool = True

    @field_validator("order", "item_cols", "rater_cols", "positive", "neutral", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return _split_list(v)

    @field_validator("scale", mode="before")
    @classmethod
    def _split_scale(cls, v: Any) -> Any:
        if isinstance(v, str) and ".." not in v:
            return _split_list(v)
        return v


def _split_list(v: Any) -> Any:
    if isinstance(v, str):
        return [p.strip() for p in v.split(",") if p.strip()]
    if isinstance(v, list):
        out: list[str] = []
        for p in v:
            out.extend(_split_list(p) if isinstance(p, str) else [str(p)])
        return out
    return v


def load_mapping(path: Path) -> dict[str, Any]:
    """A YAML mapping file as a dict (validated when combined with the flags)."""
    data = parse_yaml(read_text(path), str(path), error=InputError)  # not UTF-8: one line, not a crash
    if not isinstance(data, dict):
        raise InputError(f"{path}: expected a mapping like 'item_col: id'", hint="see docs/star-analysis.md")
    return data


def mapping_from(values: dict[str, Any]) -> RatingsMapping:
    try:
        return RatingsMapping.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first["loc"])
        raise InputError(f"ratings mapping: {loc}: {first['msg']}", hint="see docs/star-analysis.md") from None


_RANGE = re.compile(r"^\s*(-?\d+)\s*\.\.\s*(-?\d+)\s*$")


def _numeric(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, int | float):
        return float(x)
    try:
        return float(str(x))
    except ValueError:
        return None


def _scale_from(
    mapping: RatingsMapping, raw: pd.Series, notes: list[str]
) -> tuple[list[str], bool, list[float] | None]:
    """(labels, ordered, numeric values) from the mapping, or inferred from the data (with a note)."""
    if mapping.order:
        return list(mapping.order), True, None
    scale = mapping.scale
    if isinstance(scale, str):
        m = _RANGE.match(scale)
        if not m or int(m.group(1)) >= int(m.group(2)):
            raise InputError(f"--scale '{scale}' is not LO..HI or a list of labels", hint="e.g. --scale 1..5")
        lo, hi = int(m.group(1)), int(m.group(2))
        return [str(v) for v in range(lo, hi + 1)], True, [float(v) for v in range(lo, hi + 1)]
    if scale:
        return list(scale), False, None
    present = [x for x in raw if not is_missing(x)]
    nums = [_numeric(x) for x in present]
    if present and all(n is not None and float(n).is_integer() for n in nums):
        lo, hi = int(min(n for n in nums if n is not None)), int(max(n for n in nums if n is not None))
        if hi > lo and hi - lo <= 100:
            notes.append(f"Scale inferred from the data as {lo}..{hi} (ordered); pass --scale to set it.")
            return [str(v) for v in range(lo, hi + 1)], True, [float(v) for v in range(lo, hi + 1)]
    labels = sorted({str(x).strip() for x in present})
    notes.append(f"Scale inferred from the data as unordered categories {labels[:10]}; pass --scale/--order to set it.")
    return labels, False, None


def _parse_values(raw: pd.Series, labels: list[str], numeric: list[float] | None) -> pd.Series:
    """Scale index per rating, or a reason string (missing / not a number / not on the scale)."""
    if numeric is not None:
        lookup = {v: i for i, v in enumerate(numeric)}

        def one(x: Any) -> int | str:
            if is_missing(x):
                return "missing rating"
            n = _numeric(x)
            if n is None:
                return "not a number"
            return lookup.get(n, "not on the scale")

    else:
        exact = {lab: i for i, lab in enumerate(labels)}
        folded = {lab.casefold(): i for i, lab in enumerate(labels)}

        def one(x: Any) -> int | str:
            if is_missing(x):
                return "missing rating"
            s = str(x).strip()
            if s in exact:
                return exact[s]
            n = _numeric(s)
            if n is not None and n.is_integer() and str(int(n)) in exact:  # 3.0 in a "1,2,3" scale
                return exact[str(int(n))]
            return folded.get(s.casefold(), "not on the scale")

    return raw.map(one)


def _points(names: list[str] | None, labels: list[str], numeric: list[float] | None, what: str) -> set[int]:
    out: set[int] = set()
    for name in names or []:
        m = _RANGE.match(name)
        if m and numeric is not None:
            lo, hi = float(m.group(1)), float(m.group(2))
            in_range = {i for i, v in enumerate(numeric) if lo <= v <= hi}
            if not in_range:
                raise InputError(f"--{what} '{name}' names no point of the scale {labels}")
            out |= in_range
            continue
        hits = [i for i, lab in enumerate(labels) if lab == name or lab.casefold() == name.casefold()]
        if not hits:
            raise InputError(f"--{what} '{name}' is not a point of the scale {labels}")
        out |= set(hits)
    return out


def read_ratings(path: Path, name: str, *, mapping: RatingsMapping | None = None, **_: Any) -> RatingData:
    if mapping is None:
        raise InputError(
            f"{path}: a one-row-per-rating file needs its columns named",
            hint="pass --item-col, --rater-col and --rating-col (or --mapping FILE.yaml)",
        )
    frame = read_table(path)
    frame.columns = [str(c) for c in frame.columns]
    named = [mapping.item_col, mapping.rating_col, mapping.rater_col, mapping.text_col, mapping.expert_col]
    missing = [c for c in [*named, *mapping.item_cols, *mapping.rater_cols] if c and c not in frame.columns]
    if missing:
        raise InputError(
            f"{path}: no column {', '.join(repr(c) for c in missing)}",
            hint=f"columns are: {', '.join(frame.columns[:30])}",
        )
    if frame.empty:  # pandas gives the empty columns no dtype: the value parsing below failed on a TypeError
        raise InputError(
            f"{path}: no ratings: a header and no rows",
            hint="add one row per rating (psychoalign star export writes a campaign's)",
        )
    notes: list[str] = []
    counts = Counts(ratings_read=len(frame))
    labels, ordered, numeric = _scale_from(mapping, frame[mapping.rating_col], notes)
    parsed = _parse_values(frame[mapping.rating_col], labels, numeric)
    item_ids = frame[mapping.item_col].map(clean)
    no_item = item_ids.isna()
    counts.drop("missing item id", int(no_item.sum()))
    ok = parsed.map(lambda v: isinstance(v, int)) & ~no_item
    for reason, n in parsed[~ok & ~no_item].value_counts().items():
        counts.drop(str(reason), int(n))
    kept = frame[ok].copy()
    kept["__item"] = item_ids[ok].astype(str)
    kept["__value"] = parsed[ok].astype(int)
    if mapping.rater_col:
        kept["__rater"] = kept[mapping.rater_col].map(clean)
        kept.loc[kept["__rater"].notna(), "__rater"] = kept["__rater"].dropna().astype(str)
        if kept["__rater"].isna().any():
            notes.append(f"{int(kept['__rater'].isna().sum())} ratings have no rater id (kept, not clustered).")
    else:
        kept["__rater"] = None
        notes.append("No rater column: alpha from per-item value counts; no rater-clustered comparisons.")
    rater_cols, item_cols = list(mapping.rater_cols), list(mapping.item_cols)
    if mapping.expert_col and mapping.expert_col not in rater_cols:
        rater_cols.append(mapping.expert_col)
    taken = {c for c in named if c} | set(rater_cols) | set(item_cols)
    if mapping.auto_attributes:
        auto_r, auto_i, ignored = _classify_columns(kept, [c for c in frame.columns if c not in taken])
        rater_cols += auto_r
        item_cols += auto_i
        if auto_r or auto_i:
            notes.append(
                "Columns classified from the data: rater attributes "
                f"{auto_r or '—'}; item attributes {auto_i or '—'}"
                + (f"; per-rating columns ignored {ignored}" if ignored else "")
                + "."
            )
    raters = pd.DataFrame()
    if mapping.rater_col and rater_cols:
        with_rater = kept[kept["__rater"].notna()]
        attrs = with_rater[rater_cols].map(clean)
        attrs["__rater"] = with_rater["__rater"]
        varying = [c for c in rater_cols if (attrs.groupby("__rater")[c].nunique() > 1).any()]
        if varying:
            notes.append(f"Rater attributes that vary within a rater (first value kept): {varying}.")
        raters = attrs.groupby("__rater")[rater_cols].first()
        raters.index.name = "rater_id"
    item_fields = ([mapping.text_col] if mapping.text_col else []) + item_cols
    firsts = kept.groupby("__item", sort=False)[item_fields].first() if item_fields else None
    item_rows = []
    for item_id in kept["__item"].drop_duplicates():
        row: dict[str, Any] = {"item_id": item_id}
        if firsts is not None:
            for c in item_cols:
                row[c] = clean(firsts.at[item_id, c])
            if mapping.text_col:
                row["text"] = clean(firsts.at[item_id, mapping.text_col])
        item_rows.append(row)
    counts.items_read = int(item_ids.dropna().nunique())
    rating_rows = [
        rating_row(i, int(v), r if r is not None else None)
        for i, v, r in zip(kept["__item"], kept["__value"], kept["__rater"], strict=True)
    ]
    positive = _points(mapping.positive, labels, numeric, "positive")
    neutral = _points(mapping.neutral, labels, numeric, "neutral")
    if not positive and len(labels) == 2:
        positive = {1}
        notes.append(f"Binarised view: '{labels[1]}' counts as {mapping.positive_label} (pass --positive to change).")
    expert = None
    if mapping.expert_col:
        expert = (mapping.expert_col, mapping.expert_value)
    else:
        for c in rater_cols:
            values = {str(v).casefold() for v in raters[c].dropna()} if c in raters else set()
            if "expert" in values and len(values) >= 2:
                expert = (c, next(str(v) for v in raters[c].dropna() if str(v).casefold() == "expert"))
                notes.append(
                    f"Raters with {c} = '{expert[1]}' are treated as experts (pass --expert COL=VALUE to change)."
                )
                break
    out = RatingData(
        name,
        "ratings",
        labels,
        ordered,
        positive,
        mapping.positive_label,
        pd.DataFrame(),
        pd.DataFrame(),
        excluded=neutral,
        notes=notes,
        values=numeric,
        raters=raters,
        counts=counts,
        family=name,
        expert=expert,
        level=mapping.level,
        item_attributes=item_cols,
    )
    return finish(out, rating_rows, item_rows)


def _classify_columns(frame: pd.DataFrame, columns: list[str]) -> tuple[list[str], list[str], list[str]]:
    raters, items, ignored = [], [], []
    for c in columns:
        values = frame[c].map(clean)
        if values.dropna().nunique() < 2:
            continue
        per_rater = values.groupby(frame["__rater"]).nunique().max() if frame["__rater"].notna().any() else 2
        per_item = values.groupby(frame["__item"]).nunique().max()
        if per_rater <= 1:
            raters.append(c)
        elif per_item <= 1:
            items.append(c)
        else:
            ignored.append(c)
    return raters, items, ignored
