"""Rater attributes from a separate file joined to loaded rating data."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import InputError
from .files import as_json, clean, is_missing, read_table
from .rating_data import RatingData, file_source

__all__ = ["attach_raters"]

_RATER_ID_COLUMNS = ("rater_id", "id", "participant_id", "annotator_id", "worker_id")
_NOT_ATTRIBUTES = {"roles"}


def _flat_value(v: Any) -> Any:
    v = as_json(v)
    if isinstance(v, list):
        labels = sorted(str(x).strip() for x in v if not is_missing(x))
        return " + ".join(labels) if labels else None  # several labels (e.g. multiracial): one combined group
    return v


def attach_raters(data: RatingData, path: Path, id_col: str | None = None, label: str | None = None) -> RatingData:
    """Join rater attributes from a table with one row per rater (CSV/TSV/JSONL/JSON/Parquet): a
    ``psychoalign star participants list --json`` dump (``demographics`` objects become one column
    per dimension; several labels become one combined group, e.g. "Black + White"; "prefer not to
    say" is missing) or any table with a rater id column. Attributes already in the data win.
    ``label`` names the table in the notes (default: the file's name)."""
    label = label or path.name
    frame = read_table(path)
    frame.columns = [str(c) for c in frame.columns]
    if data.source is not None:
        data.source["raters_file"] = file_source(path)
    if id_col is None:
        id_col = next((c for c in _RATER_ID_COLUMNS if c in frame.columns), None)
    if id_col is None or id_col not in frame.columns:
        raise InputError(
            f"{path}: no rater id column",
            hint=f"name it with --raters-id-col (columns: {', '.join(frame.columns[:20])})",
        )
    rows: dict[str, dict[str, Any]] = {}
    for record in frame.to_dict(orient="records"):
        rid = clean(record.pop(id_col))
        if rid is None:
            continue
        flat: dict[str, Any] = {}
        for key, value in record.items():
            if key in _NOT_ATTRIBUTES:
                continue
            value = as_json(value)
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
        data.notes.append(f"{label}: this dataset has no rater ids; rater attributes not joined.")
        return data
    base = data.raters.reindex(sorted(known | set(data.raters.index))) if not data.raters.empty else None
    new_cols = [c for c in table.columns if base is None or c not in base.columns]
    joined = table.reindex(sorted(known))[new_cols]
    data.raters = joined if base is None else base.join(joined)
    data.raters.index.name = "rater_id"
    data.notes.append(
        f"Rater attributes from {label}: {new_cols or '—'}; {matched} of {len(known)} raters found there."
    )
    return data
