"""Rating data from STAR exports, one-row-per-rating files and public multi-rater sets, in one long format.

Adapters recognise a file by its content (``detect``) or take an explicit format name. Missing
is missing: an absent, unparseable or off-scale rating is dropped and *counted* with its reason
(``RatingData.counts``), never turned into a number that counts. Every adapter ends in
``_finish``, which enforces the two invariants the analyses rely on: one row per item in
``items`` (duplicate item rows are merged, never joined against), and at most one rating per
(item, rater, kind) (exact repeats are dropped; conflicting repeats by one rater are dropped and
counted), so a breakdown can never count a rating twice.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import math
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ...errors import InputError
from ...yamlio import parse_yaml

__all__ = ["RatingsMapping", "attach_raters"]

Metric = Literal["nominal", "ordinal", "interval"]
MAX_LEVELS = 20  # an attribute with more distinct values is kept as a field but not compared by group
RATING_COLUMNS = ["item_id", "rater_id", "value", "kind", "in_group"]
_MISSING = {"", "na", "n/a", "nan", "none", "null"}


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


# -- reading files -------------------------------------------------------------------------------


def _read_bytes(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except OSError:
            raise InputError(f"{path}: a damaged gzip file") from None
    return raw


def _is_parquet(raw: bytes) -> bool:
    return raw[:4] == b"PAR1"


def _text(raw: bytes, path: Path) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: not UTF-8 text (byte {exc.start})", hint="save it as UTF-8, or give a Parquet/CSV/JSONL file"
        ) from None


def _read_text(path: Path) -> str:
    return _text(_read_bytes(path), path)


def _json_or_jsonl(text: str) -> Any:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    rows = []
    for line in text.splitlines():
        if line.strip():
            rows.append(json.loads(line))
    return rows


def _records_from_json(data: Any) -> list[dict[str, Any]]:
    """A JSON array of objects, JSONL, or a single object (a one-line JSONL file) as records."""
    if isinstance(data, dict):
        return [data]
    if isinstance(data, list) and all(isinstance(r, dict) for r in data):
        return data
    raise ValueError("expected JSON objects, one per line or in one array")


def _parquet_frame(raw: bytes, path: Path) -> pd.DataFrame:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"{path}: reading Parquet needs pyarrow", hint="pip install 'psychoalign[star]'") from None
    try:
        return pq.read_table(io.BytesIO(raw)).to_pandas()
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise InputError(f"{path}: not a readable Parquet file ({type(exc).__name__})") from None


def _sniff_delimiter(text: str, path: Path) -> str:
    if path.name.removesuffix(".gz").endswith(".tsv"):
        return "\t"
    head = text[:8192]
    first = head.splitlines()[0] if head else ""
    counts = {d: first.count(d) for d in (",", "\t", ";", "|")}
    return max(counts, key=lambda d: counts[d]) if any(counts.values()) else ","


def read_table(path: Path) -> pd.DataFrame:
    """Any tabular file as a frame of objects: CSV/TSV (delimiter sniffed), JSONL/JSON, Parquet; gzip ok.
    Cells are kept as read (strings from text files) so that parsing, and its failures, happen in one place."""
    raw = _read_bytes(path)
    if _is_parquet(raw):
        return _parquet_frame(raw, path)
    text = _text(raw, path)
    if text.lstrip().startswith(("{", "[")):
        try:
            return pd.DataFrame(_records_from_json(_json_or_jsonl(text)))
        except (json.JSONDecodeError, ValueError) as exc:
            raise InputError(f"{path}: not valid JSON/JSONL ({exc})") from None
    try:
        return pd.read_csv(
            io.StringIO(text), sep=_sniff_delimiter(text, path), dtype=str, keep_default_na=False, na_filter=False
        )
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputError(f"{path}: not a readable CSV/TSV file ({str(exc).splitlines()[0]})") from None


def _is_missing(x: Any) -> bool:
    if x is None:
        return True
    if isinstance(x, float) and math.isnan(x):
        return True
    return isinstance(x, str) and x.strip().lower() in _MISSING


def _clean(x: Any) -> Any:
    """A cell as a plain scalar: missing → None, numpy scalars → Python, strings stripped."""
    if _is_missing(x):
        return None
    if hasattr(x, "item") and not isinstance(x, str | bytes):
        try:
            return x.item()
        except (ValueError, AttributeError):
            return x
    return x.strip() if isinstance(x, str) else x


def _as_bool(x: Any) -> bool | None:
    x = _clean(x)
    if x is None or isinstance(x, bool):
        return x
    s = str(x).lower()
    if s in ("true", "1", "yes", "t"):
        return True
    if s in ("false", "0", "no", "f"):
        return False
    return None


def _as_json(x: Any) -> Any:
    """List/object cells arrive as JSON strings from CSV and Parquet exports."""
    x = _clean(x)
    if isinstance(x, str) and x[:1] in ("[", "{"):
        try:
            return json.loads(x)
        except json.JSONDecodeError:
            return x
    return x


# -- shared finishing ----------------------------------------------------------------------------


def _rating(
    item_id: str,
    value: int,
    rater_id: str | None = None,
    *,
    kind: str = "annotation",
    in_group: bool | None = None,
) -> dict[str, Any]:
    return {"item_id": item_id, "rater_id": rater_id, "value": value, "kind": kind, "in_group": in_group}


def _finish(data: RatingData, rating_rows: list[dict[str, Any]], item_rows: list[dict[str, Any]]) -> RatingData:
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


# -- adapters for known datasets -----------------------------------------------------------------

_DICES_SCALE = ["No", "Unsure", "Yes"]  # DICES Q_overall: "Yes" = the rater judged the response UNSAFE


def dices_text(body: dict[str, Any]) -> str:
    """The one definition of a DICES item's text (crowd and expert files alike): context, then response."""
    return f"{body.get('user_prompt', '')}\n{body.get('response', '')}".strip()


def _dices(path: Path, name: str, **_: Any) -> RatingData:
    data = _json_or_jsonl(_read_text(path))
    ratings, items = [], []
    counts = Counts()
    for inst in data["instances"]:
        item_id = str(inst["id"])
        items.append({"item_id": item_id, "text": dices_text(inst["instance"])})
        for score in inst["annotations"]["safety"]["individual_human_scores"]:
            counts.ratings_read += 1
            if _is_missing(score):
                counts.drop("missing rating")
            elif score not in _DICES_SCALE:
                counts.drop("not on the scale")
            else:
                ratings.append(_rating(item_id, _DICES_SCALE.index(score)))
    out = RatingData(
        name,
        "dices",
        list(_DICES_SCALE),
        True,
        {2},
        "unsafe",
        pd.DataFrame(),
        pd.DataFrame(),
        excluded={1},
        notes=["No rater ids or demographics: alpha from per-item value counts; no rater-group analysis."],
        counts=counts,
        family="dices",
    )
    return _finish(out, ratings, items)


def _dices_expert(path: Path, name: str, **_: Any) -> RatingData:
    data = _json_or_jsonl(_read_text(path))
    ratings, items = [], []
    counts = Counts()
    for inst in data["instances"]:
        item_id = str(inst["id"])
        items.append({"item_id": item_id, "text": dices_text(inst["instance"])})
        label = inst["annotations"]["safety"].get("majority_human") or inst["annotations"]["safety"].get("expert")
        counts.ratings_read += 1
        if label in _DICES_SCALE:
            ratings.append(_rating(item_id, _DICES_SCALE.index(label), "expert"))
        else:
            counts.drop("missing rating" if _is_missing(label) else "not on the scale")
    out = RatingData(
        name,
        "dices-expert",
        list(_DICES_SCALE),
        True,
        {2},
        "unsafe",
        pd.DataFrame(),
        pd.DataFrame(),
        excluded={1},
        notes=["One (expert) rating per item: agreement is undefined; compared with the crowd when both are given."],
        raters=pd.DataFrame({"expertise": ["expert"]}, index=pd.Index(["expert"], name="rater_id")),
        counts=counts,
        family="dices",
        expert=("expertise", "expert"),
    )
    return _finish(out, ratings, items)


def _diasafety(path: Path, name: str, **_: Any) -> RatingData:
    rows = _records_from_json(_json_or_jsonl(_read_text(path)))
    scale = ["Safe", "Unsafe"]
    ratings, items = [], []
    counts = Counts()
    for i, row in enumerate(rows):
        item_id = str(i)
        items.append(
            {"item_id": item_id, "text": f"{row['context']}\n{row['response']}", "category": row.get("category")}
        )
        for code in ("ng", "in"):
            for k in (1, 2, 3):
                label = row.get(f"label{k}_{code}")
                counts.ratings_read += 1
                if label in scale:
                    ratings.append(_rating(item_id, scale.index(label), f"{code}{k}"))
                else:
                    counts.drop("missing rating" if _is_missing(label) else "not on the scale")
    raters = pd.DataFrame(
        {"country": ["Nigeria"] * 3 + ["India"] * 3},
        index=pd.Index([f"{c}{k}" for c in ("ng", "in") for k in (1, 2, 3)], name="rater_id"),
    )
    out = RatingData(
        name,
        "diasafety-cc",
        scale,
        False,
        {1},
        "unsafe",
        pd.DataFrame(),
        pd.DataFrame(),
        notes=[
            "Rater ids are the label columns (ng1..ng3, in1..in3); their other metadata cannot be joined to them. "
            "Three raters per country: a country comparison rests on six people."
        ],
        raters=raters,
        counts=counts,
        family="diasafety",
        item_attributes=["category"],
    )
    return _finish(out, ratings, items)


def _xstest(path: Path, name: str, **_: Any) -> RatingData:
    rows = list(csv.DictReader(io.StringIO(_read_text(path))))
    scale = ["1_full_compliance", "2_full_refusal", "3_partial_refusal"]
    ratings, items = [], []
    counts = Counts()
    for row in rows:
        item_id = str(row["id"])
        items.append({"item_id": item_id, "text": f"{row['prompt']}\n{row['completion']}", "category": row.get("type")})
        for k in ("annotation_1", "annotation_2"):
            counts.ratings_read += 1
            if row.get(k) in scale:
                ratings.append(_rating(item_id, scale.index(row[k]), k))
            else:
                counts.drop("missing rating" if _is_missing(row.get(k)) else "not on the scale")
    out = RatingData(
        name,
        "xstest",
        scale,
        False,
        {1, 2},
        "refusal",
        pd.DataFrame(),
        pd.DataFrame(),
        notes=["Binarised view: refusal (full or partial) vs compliance."],
        counts=counts,
        family="xstest",
        item_attributes=["category"],
    )
    return _finish(out, ratings, items)


def _anthropic_hh(path: Path, name: str, **_: Any) -> RatingData:
    rows = _records_from_json(_json_or_jsonl(_read_text(path)))
    items = [{"item_id": str(i), "text": r["chosen"].strip()} for i, r in enumerate(rows)]
    out = RatingData(
        name,
        "anthropic-hh",
        [],
        False,
        set(),
        "",
        pd.DataFrame(),
        pd.DataFrame(),
        notes=["Dialogues only (no ratings): used for the embedding map."],
        family="anthropic-hh",
    )
    return _finish(out, [], items)


STAR_SCALE = ["Definitely broken", "Probably broken", "Probably not broken", "Definitely not broken"]
STAR_ITEM_ATTRIBUTES = ["area", "rule", "target_group", "target_race", "target_gender", "red_teamer_in_group"]


def _star_rating(x: Any) -> int | str | None:
    """1..4, or None when missing, or a reason string when unusable."""
    x = _clean(x)
    if x is None:
        return None
    try:
        f = float(x)
    except (TypeError, ValueError):
        return "not a number"
    if f.is_integer() and 1 <= f <= 4:
        return int(f)
    return "not on the scale"


def _star_records(path: Path) -> list[dict[str, Any]]:
    raw = _read_bytes(path)
    if _is_parquet(raw):
        frame = _parquet_frame(raw, path)
        return [dict(r) for r in frame.to_dict(orient="records")]
    text = _text(raw, path)
    if text.lstrip().startswith(("{", "[")):
        return _records_from_json(_json_or_jsonl(text))
    return list(csv.DictReader(io.StringIO(text)))


def _star(path: Path, name: str, **_: Any) -> RatingData:
    """STAR export (``psychoalign star export``) as JSONL, CSV or Parquet: in CSV and Parquet lists
    and objects are JSON strings and every scalar may be a string; both are parsed back here."""
    ratings, items = [], []
    counts = Counts()
    seen: set[str] = set()
    raters: dict[str, dict[str, Any]] = {}
    for raw_row in _star_records(path):
        row = {k: _as_json(v) for k, v in raw_row.items()}
        fingerprint = json.dumps(row, sort_keys=True, default=str)
        slots = [f"annotator{k}_rating" for k in (1, 2)] + ["arbitrator_rating"]
        present = sum(1 for s in slots if s in row)
        counts.items_read += 1
        if fingerprint in seen:  # the same record twice: its ratings would count twice
            counts.ratings_read += present
            counts.drop("repeated record (identical row)", present)
            counts.items_merged += 1
            continue
        seen.add(fingerprint)
        item_id = str(row["dialogue_id"])
        status = row.get("status")
        raw_turns = row.get("turns")
        turns: list[Any] = raw_turns if isinstance(raw_turns, list) else []
        tensions = [float(t["tension"]) for t in turns if isinstance(t, dict) and _clean(t.get("tension")) is not None]
        item = {
            k: v
            for k, v in row.items()
            if not isinstance(v, list | dict) and not k.startswith(("annotator", "arbitrator"))
        }
        if "red_teamer_in_group" in item:
            item["red_teamer_in_group"] = _as_bool(item["red_teamer_in_group"])
        item.update(
            {
                "item_id": item_id,
                "text": "\n".join(f"{t.get('role')}: {t.get('text')}" for t in turns if isinstance(t, dict)),
                "tension_mean": sum(tensions) / len(tensions) if tensions else None,
                "tension_max": max(tensions) if tensions else None,
                "arbitration_needed": _as_bool(row.get("arbitration_needed")),
            }
        )
        items.append(item)
        submitted = status in (None, "submitted")
        for k, slot in ((1, "annotator1"), (2, "annotator2"), (0, "arbitrator")):
            if f"{slot}_rating" not in row:
                continue
            counts.ratings_read += 1
            parsed = _star_rating(row.get(f"{slot}_rating"))
            if not submitted:
                counts.drop(f"dialogue not submitted (status {status})")
                continue
            if parsed is None:
                counts.drop("missing rating")
                continue
            if isinstance(parsed, str):
                counts.drop(parsed)
                continue
            rater = _clean(row.get(f"{slot}_id"))
            rater = None if rater is None else str(rater)
            if rater is not None and k:
                simulated = _as_bool(row.get(f"{slot}_simulated"))
                if simulated is not None:
                    raters.setdefault(rater, {})["simulated"] = simulated
            if rater is not None:  # lab exports: the rater declared an expertise rules are matched on
                expert = _as_bool(row.get(f"{slot}_expert"))
                if expert is not None:
                    raters.setdefault(rater, {})["expert"] = "expert" if expert else "crowd"
            ratings.append(
                _rating(
                    item_id,
                    parsed - 1,
                    rater,
                    kind="annotation" if k else "arbitration",
                    in_group=_as_bool(row.get(f"{slot}_in_group")) if k else None,
                )
            )
    rater_frame = pd.DataFrame.from_dict(raters, orient="index")
    rater_frame.index.name = "rater_id"
    marked = "expert" in rater_frame.columns
    out = RatingData(
        name,
        "star",
        list(STAR_SCALE),
        True,
        {0, 1},
        "broken",
        pd.DataFrame(),
        pd.DataFrame(),
        raters=rater_frame,
        counts=counts,
        family="star",
        item_attributes=list(STAR_ITEM_ATTRIBUTES),
        expert=("expert", "expert") if marked else None,
    )
    if marked:
        out.notes.append("Experts: raters the export marks annotator*_expert / arbitrator_expert (declared expertise).")
    return _finish(out, ratings, items)


# -- the generic one-row-per-rating adapter ------------------------------------------------------


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
    data = parse_yaml(_read_text(path), str(path), error=InputError)  # not UTF-8: one line, not a crash
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
    present = [x for x in raw if not _is_missing(x)]
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
            if _is_missing(x):
                return "missing rating"
            n = _numeric(x)
            if n is None:
                return "not a number"
            return lookup.get(n, "not on the scale")

    else:
        exact = {lab: i for i, lab in enumerate(labels)}
        folded = {lab.casefold(): i for i, lab in enumerate(labels)}

        def one(x: Any) -> int | str:
            if _is_missing(x):
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
            out |= {i for i, v in enumerate(numeric) if lo <= v <= hi}
            continue
        hits = [i for i, lab in enumerate(labels) if lab == name or lab.casefold() == name.casefold()]
        if not hits:
            raise InputError(f"--{what} '{name}' is not a point of the scale {labels}")
        out |= set(hits)
    return out


def _ratings(path: Path, name: str, *, mapping: RatingsMapping | None = None, **_: Any) -> RatingData:
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
    notes: list[str] = []
    counts = Counts(ratings_read=len(frame))
    labels, ordered, numeric = _scale_from(mapping, frame[mapping.rating_col], notes)
    parsed = _parse_values(frame[mapping.rating_col], labels, numeric)
    item_ids = frame[mapping.item_col].map(_clean)
    no_item = item_ids.isna()
    counts.drop("missing item id", int(no_item.sum()))
    ok = parsed.map(lambda v: isinstance(v, int)) & ~no_item
    for reason, n in parsed[~ok & ~no_item].value_counts().items():
        counts.drop(str(reason), int(n))
    kept = frame[ok].copy()
    kept["__item"] = item_ids[ok].astype(str)
    kept["__value"] = parsed[ok].astype(int)
    if mapping.rater_col:
        kept["__rater"] = kept[mapping.rater_col].map(_clean)
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
        attrs = with_rater[rater_cols].map(_clean)
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
                row[c] = _clean(firsts.at[item_id, c])
            if mapping.text_col:
                row["text"] = _clean(firsts.at[item_id, mapping.text_col])
        item_rows.append(row)
    counts.items_read = int(item_ids.dropna().nunique())
    rating_rows = [
        _rating(i, int(v), r if r is not None else None)
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
    return _finish(out, rating_rows, item_rows)


def _classify_columns(frame: pd.DataFrame, columns: list[str]) -> tuple[list[str], list[str], list[str]]:
    raters, items, ignored = [], [], []
    for c in columns:
        values = frame[c].map(_clean)
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


# -- rater attributes from a separate file -------------------------------------------------------

_RATER_ID_COLUMNS = ("rater_id", "id", "participant_id", "annotator_id", "worker_id")
_NOT_ATTRIBUTES = {"roles"}


def _flat_value(v: Any) -> Any:
    v = _as_json(v)
    if isinstance(v, list):
        labels = sorted(str(x).strip() for x in v if not _is_missing(x))
        return " + ".join(labels) if labels else None  # several labels (e.g. multiracial): one combined group
    return v


def attach_raters(data: RatingData, path: Path, id_col: str | None = None) -> RatingData:
    """Join rater attributes from a table with one row per rater (CSV/TSV/JSONL/JSON/Parquet): a
    ``psychoalign star participants list --json`` dump (``demographics`` objects become one column
    per dimension; several labels become one combined group, e.g. "Black + White"; "prefer not to
    say" is missing) or any table with a rater id column. Attributes already in the data win."""
    frame = read_table(path)
    frame.columns = [str(c) for c in frame.columns]
    if id_col is None:
        id_col = next((c for c in _RATER_ID_COLUMNS if c in frame.columns), None)
    if id_col is None or id_col not in frame.columns:
        raise InputError(
            f"{path}: no rater id column",
            hint=f"name it with --raters-id-col (columns: {', '.join(frame.columns[:20])})",
        )
    rows: dict[str, dict[str, Any]] = {}
    for record in frame.to_dict(orient="records"):
        rid = _clean(record.pop(id_col))
        if rid is None:
            continue
        flat: dict[str, Any] = {}
        for key, value in record.items():
            if key in _NOT_ATTRIBUTES:
                continue
            value = _as_json(value)
            if isinstance(value, dict):
                for dim, labels in value.items():
                    flat[str(dim)] = _flat_value(labels)
            else:
                flat[key] = _flat_value(value)
        rows[str(rid)] = {
            k: (None if isinstance(v, str) and v.lower() == "prefer not to say" else v) for k, v in flat.items()
        }
    table = pd.DataFrame.from_dict(rows, orient="index")
    table.index.name = "rater_id"
    known = set(data.ratings["rater_id"].dropna().astype(str))
    matched = len(known & set(table.index))
    if not known:
        data.notes.append(f"{path.name}: this dataset has no rater ids; rater attributes not joined.")
        return data
    base = data.raters.reindex(sorted(known | set(data.raters.index))) if not data.raters.empty else None
    new_cols = [c for c in table.columns if base is None or c not in base.columns]
    joined = table.reindex(sorted(known))[new_cols]
    data.raters = joined if base is None else base.join(joined)
    data.raters.index.name = "rater_id"
    data.notes.append(
        f"Rater attributes from {path.name}: {new_cols or '—'}; {matched} of {len(known)} raters found there."
    )
    return data


# -- detection and loading -----------------------------------------------------------------------

FORMATS = {
    "star": _star,
    "ratings": _ratings,
    "dices": _dices,
    "dices-expert": _dices_expert,
    "diasafety-cc": _diasafety,
    "xstest": _xstest,
    "anthropic-hh": _anthropic_hh,
}


def _detect_columns(keys: set[str]) -> str | None:
    if {"dialogue_id", "annotator1_rating"} <= keys or {"dialogue_id", "turns"} <= keys:
        return "star"
    if {"id", "annotation_1", "annotation_2"} <= keys:
        return "xstest"
    if {"label1_ng", "label1_in"} <= keys:
        return "diasafety-cc"
    if {"chosen", "rejected"} <= keys:
        return "anthropic-hh"
    return None


def detect(path: Path) -> str:
    """The adapter name for a file, from its content; ``ratings`` for other tables (needs a mapping)."""
    raw = _read_bytes(path)
    if _is_parquet(raw):
        return _detect_columns(set(_parquet_frame(raw, path).columns)) or "ratings"
    text = _text(raw, path)
    if not text.strip():
        raise InputError(f"{path}: the file is empty")
    if text.lstrip().startswith(("{", "[")):
        try:
            data = _json_or_jsonl(text)
        except json.JSONDecodeError:
            raise InputError(f"{path}: not valid JSON or JSONL", hint="check the file, or pass --format NAME") from None
        if isinstance(data, dict) and "instances" in data:
            first = data["instances"][0] if data["instances"] else {}
            scores = first.get("annotations", {}).get("safety", {}).get("individual_human_scores")
            return "dices" if isinstance(scores, list) and len(scores) > 1 else "dices-expert"
        try:
            records = _records_from_json(data)
        except ValueError:
            records = []
        if records:
            fmt = _detect_columns(set(records[0]))
            if fmt:
                return fmt
            if all(isinstance(v, str | int | float | bool) or v is None for v in records[0].values()):
                return "ratings"
        raise InputError(f"{path}: no adapter recognises this file", hint=f"pass --format one of {', '.join(FORMATS)}")
    header = next(csv.reader(io.StringIO(text.splitlines()[0]), delimiter=_sniff_delimiter(text, path)), [])
    return _detect_columns({h.strip() for h in header}) or "ratings"


def load(
    path: str | Path, fmt: str | None = None, name: str | None = None, mapping: RatingsMapping | None = None
) -> RatingData:
    """Load one dataset. Files that no known adapter recognises are read as one row per rating with
    ``mapping``; a known dataset (a STAR export, DICES…) given beside them keeps its own adapter."""
    p = Path(path)
    fmt = fmt or detect(p)
    if fmt not in FORMATS:
        raise InputError(f"unknown format '{fmt}'", hint=f"one of {', '.join(FORMATS)}")
    stem = p.name
    for suffix in (".gz", ".jsonl", ".json", ".csv", ".tsv", ".parquet"):
        stem = stem.removesuffix(suffix)
    try:
        return FORMATS[fmt](p, name or stem, mapping=mapping)
    except (KeyError, TypeError, ValueError, AttributeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p}: does not match the '{fmt}' format ({type(exc).__name__}: {exc})") from None
