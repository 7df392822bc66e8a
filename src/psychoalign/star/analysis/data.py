"""Rating data from STAR exports and public multi-rater sets, in one long format.

Adapters recognise a file by its content (``detect``) or take an explicit format name. Missing
is missing: an absent or "Unsure"-style rating is never turned into a number that counts.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import InputError

__all__ = ["FORMATS", "RatingData", "detect", "load"]


@dataclass
class RatingData:
    """``ratings``: one row per rating (item_id, rater_id, rater_group, value, kind, in_group).
    ``value`` indexes ``scale``; ``positive`` are the indices that count as broken/unsafe/refused
    in the binarised view; ``excluded`` are indices left out of it (e.g. "Unsure")."""

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

    @property
    def annotations(self) -> pd.DataFrame:
        return self.ratings[self.ratings["kind"] == "annotation"]


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    if path.suffix == ".gz":
        raw = gzip.decompress(raw)
    return raw.decode("utf-8")


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


def detect(path: Path) -> str:
    """The adapter name for a file, from its content."""
    text = _read_text(path)
    head = text[:4096]
    if head.lstrip().startswith("id,") and "annotation_1" in head.splitlines()[0]:
        return "xstest"
    try:
        data = _json_or_jsonl(text)
    except json.JSONDecodeError:
        raise InputError(f"{path}: not JSON, JSONL or a known CSV", hint="pass --format NAME") from None
    if isinstance(data, dict) and "instances" in data:
        first = data["instances"][0] if data["instances"] else {}
        scores = first.get("annotations", {}).get("safety", {}).get("individual_human_scores")
        return "dices" if isinstance(scores, list) and len(scores) > 1 else "dices-expert"
    if isinstance(data, list) and data and isinstance(data[0], dict):
        keys = set(data[0])
        if {"label1_ng", "label1_in"} <= keys:
            return "diasafety-cc"
        if "dialogue_id" in keys and "turns" in keys:
            return "star"
        if {"chosen", "rejected"} <= keys:
            return "anthropic-hh"
    raise InputError(f"{path}: no adapter recognises this file", hint=f"pass --format one of {', '.join(FORMATS)}")


def _frame(rows: list[dict[str, Any]], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=columns)


RATING_COLUMNS = ["item_id", "rater_id", "rater_group", "value", "kind", "in_group"]


def _rating(
    item_id: str,
    value: int,
    rater_id: str | None = None,
    group: str | None = None,
    *,
    kind: str = "annotation",
    in_group: bool | None = None,
) -> dict[str, Any]:
    return {
        "item_id": item_id,
        "rater_id": rater_id,
        "rater_group": group,
        "value": value,
        "kind": kind,
        "in_group": in_group,
    }


def _dices(path: Path, name: str) -> RatingData:
    data = _json_or_jsonl(_read_text(path))
    scale = ["No", "Unsure", "Yes"]  # DICES Q_overall: "Yes" = the rater judged the response UNSAFE
    ratings, items = [], []
    unknown = 0
    for inst in data["instances"]:
        item_id = str(inst["id"])
        body = inst["instance"]
        items.append({"item_id": item_id, "text": f"{body.get('user_prompt', '')}\n{body.get('response', '')}".strip()})
        for score in inst["annotations"]["safety"]["individual_human_scores"]:
            if score not in scale:
                unknown += 1
                continue
            ratings.append(_rating(item_id, scale.index(score)))
    notes = ["No rater ids or demographics: alpha from per-item value counts; no in-/out-group analysis."]
    if unknown:
        notes.append(f"{unknown} ratings with unknown values were left out (missing, not zero).")
    return RatingData(
        name,
        "dices",
        scale,
        True,
        {2},
        "unsafe",
        _frame(ratings, RATING_COLUMNS),
        pd.DataFrame(items),
        excluded={1},
        notes=notes,
    )


def _dices_expert(path: Path, name: str) -> RatingData:
    data = _json_or_jsonl(_read_text(path))
    ratings, items = [], []
    scale = ["No", "Unsure", "Yes"]
    for inst in data["instances"]:
        item_id = str(inst["id"])
        items.append({"item_id": item_id, "text": inst["instance"].get("response", "")})
        label = inst["annotations"]["safety"].get("majority_human") or inst["annotations"]["safety"].get("expert")
        if label in scale:
            ratings.append(_rating(item_id, scale.index(label), "expert"))
    return RatingData(
        name,
        "dices-expert",
        scale,
        True,
        {2},
        "unsafe",
        _frame(ratings, RATING_COLUMNS),
        pd.DataFrame(items),
        excluded={1},
        notes=["One rating per item: agreement is undefined."],
    )


def _diasafety(path: Path, name: str) -> RatingData:
    rows = _json_or_jsonl(_read_text(path))
    scale = ["Safe", "Unsafe"]
    ratings, items = [], []
    missing = 0
    for i, row in enumerate(rows):
        item_id = str(i)
        items.append(
            {"item_id": item_id, "text": f"{row['context']}\n{row['response']}", "category": row.get("category")}
        )
        for country, code in (("Nigeria", "ng"), ("India", "in")):
            for k in (1, 2, 3):
                label = row.get(f"label{k}_{code}")
                if label not in scale:
                    missing += 1
                    continue
                ratings.append(_rating(item_id, scale.index(label), f"{code}{k}", country))
    notes = ["Rater ids are the label columns (ng1..ng3, in1..in3); rater metadata cannot be joined to them."]
    if missing:
        notes.append(f"{missing} missing labels left out.")
    return RatingData(
        name,
        "diasafety-cc",
        scale,
        False,
        {1},
        "unsafe",
        _frame(ratings, RATING_COLUMNS),
        pd.DataFrame(items),
        notes=notes,
    )


def _xstest(path: Path, name: str) -> RatingData:
    rows = list(csv.DictReader(io.StringIO(_read_text(path))))
    scale = ["1_full_compliance", "2_full_refusal", "3_partial_refusal"]
    ratings, items = [], []
    for row in rows:
        item_id = str(row["id"])
        items.append({"item_id": item_id, "text": f"{row['prompt']}\n{row['completion']}", "category": row.get("type")})
        for k in ("annotation_1", "annotation_2"):
            if row.get(k) in scale:
                ratings.append(_rating(item_id, scale.index(row[k]), k))
    return RatingData(
        name,
        "xstest",
        scale,
        False,
        {1, 2},
        "refusal",
        _frame(ratings, RATING_COLUMNS),
        pd.DataFrame(items),
        notes=["Binarised view: refusal (full or partial) vs compliance."],
    )


def _anthropic_hh(path: Path, name: str) -> RatingData:
    rows = _json_or_jsonl(_read_text(path))
    items = [{"item_id": str(i), "text": r["chosen"].strip()} for i, r in enumerate(rows)]
    return RatingData(
        name,
        "anthropic-hh",
        [],
        False,
        set(),
        "",
        _frame([], RATING_COLUMNS),
        pd.DataFrame(items),
        notes=["Dialogues only (no ratings): used for the embedding map."],
    )


def _star(path: Path, name: str) -> RatingData:
    rows = _json_or_jsonl(_read_text(path))
    scale = ["Definitely broken", "Probably broken", "Probably not broken", "Definitely not broken"]
    ratings, items = [], []
    for row in rows:
        if row.get("status") not in (None, "submitted"):
            continue
        item_id = str(row["dialogue_id"])
        tensions = [t["tension"] for t in row.get("turns", []) if t.get("tension") is not None]
        item = {
            k: v
            for k, v in row.items()
            if not isinstance(v, list | dict) and not k.startswith(("annotator", "arbitrator"))
        }
        item.update(
            {
                "item_id": item_id,
                "text": "\n".join(f"{t['role']}: {t['text']}" for t in row.get("turns", [])),
                "tension_mean": sum(tensions) / len(tensions) if tensions else None,
                "tension_max": max(tensions) if tensions else None,
            }
        )
        items.append(item)
        for k in (1, 2):
            rating = row.get(f"annotator{k}_rating")
            if rating in (1, 2, 3, 4):
                ratings.append(
                    _rating(
                        item_id,
                        int(rating) - 1,
                        row.get(f"annotator{k}_id"),
                        in_group=row.get(f"annotator{k}_in_group"),
                    )
                )
        if row.get("arbitrator_rating") in (1, 2, 3, 4):
            ratings.append(
                _rating(item_id, int(row["arbitrator_rating"]) - 1, row.get("arbitrator_id"), kind="arbitration")
            )
    return RatingData(name, "star", scale, True, {0, 1}, "broken", _frame(ratings, RATING_COLUMNS), pd.DataFrame(items))


FORMATS = {
    "star": _star,
    "dices": _dices,
    "dices-expert": _dices_expert,
    "diasafety-cc": _diasafety,
    "xstest": _xstest,
    "anthropic-hh": _anthropic_hh,
}


def load(path: str | Path, fmt: str | None = None, name: str | None = None) -> RatingData:
    p = Path(path)
    fmt = fmt or detect(p)
    if fmt not in FORMATS:
        raise InputError(f"unknown format '{fmt}'", hint=f"one of {', '.join(FORMATS)}")
    try:
        return FORMATS[fmt](p, name or p.stem.removesuffix(".jsonl"))
    except (KeyError, TypeError, ValueError, json.JSONDecodeError) as exc:
        raise InputError(f"{p}: does not match the '{fmt}' format ({type(exc).__name__}: {exc})") from None
