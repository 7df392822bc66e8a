"""Rating data from STAR exports, one-row-per-rating files and public multi-rater sets, in one long format.

Adapters recognise a file by its content (``detect``) or take an explicit format name: the known
datasets in ``corpora``, any other table through a ``RatingsMapping`` (``mapping``). Every adapter
ends in ``rating_data.finish``, which enforces the invariants the analyses rely on.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ...errors import InputError
from .corpora import read_anthropic_hh, read_diasafety, read_dices, read_dices_expert, read_star, read_xstest
from .files import decode_text, is_parquet, json_or_jsonl, parquet_frame, read_bytes, records_from_json, sniff_delimiter
from .mapping import RatingsMapping as RatingsMapping
from .mapping import load_mapping as load_mapping
from .mapping import mapping_from as mapping_from
from .mapping import read_ratings
from .raters import attach_raters as attach_raters
from .rating_data import MAX_LEVELS as MAX_LEVELS
from .rating_data import Metric as Metric
from .rating_data import RatingData as RatingData
from .rating_data import file_source

FORMATS = {
    "star": read_star,
    "ratings": read_ratings,
    "dices": read_dices,
    "dices-expert": read_dices_expert,
    "diasafety-cc": read_diasafety,
    "xstest": read_xstest,
    "anthropic-hh": read_anthropic_hh,
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
    raw = read_bytes(path)
    if is_parquet(raw):
        return _detect_columns(set(parquet_frame(raw, path).columns)) or "ratings"
    text = decode_text(raw, path)
    if not text.strip():
        raise InputError(f"{path}: the file is empty", hint="export the ratings first (psychoalign star export)")
    if text.lstrip().startswith(("{", "[")):
        try:
            data = json_or_jsonl(text)
        except json.JSONDecodeError:
            raise InputError(f"{path}: not valid JSON or JSONL", hint="check the file, or pass --format NAME") from None
        if isinstance(data, dict) and "instances" in data:
            first = data["instances"][0] if data["instances"] else {}
            scores = first.get("annotations", {}).get("safety", {}).get("individual_human_scores")
            return "dices" if isinstance(scores, list) and len(scores) > 1 else "dices-expert"
        try:
            records = records_from_json(data)
        except ValueError:
            records = []
        if records:
            fmt = _detect_columns(set(records[0]))
            if fmt:
                return fmt
            if all(isinstance(v, str | int | float | bool) or v is None for v in records[0].values()):
                return "ratings"
        raise InputError(f"{path}: no adapter recognises this file", hint=f"pass --format one of {', '.join(FORMATS)}")
    header = next(csv.reader(io.StringIO(text.splitlines()[0]), delimiter=sniff_delimiter(text, path)), [])
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
        data = FORMATS[fmt](p, name or stem, mapping=mapping)
    except (KeyError, TypeError, ValueError, AttributeError, json.JSONDecodeError) as exc:
        raise InputError(f"{p}: does not match the '{fmt}' format ({type(exc).__name__}: {exc})") from None
    data.source = file_source(p)
    return data
