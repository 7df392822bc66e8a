"""The per-item table: every per-item field the analysis knows, one row per item.

``item_table`` is importable on its own (the H1 experiment joins negotiation tension to it);
``write_item_csv`` writes it with the csv module (quoting commas, quotes and newlines) and
neutralises cells a spreadsheet would run as a formula.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...textio import spreadsheet_safe
from .agreement import item_disagreement
from .data import RatingData
from .stats import counts_matrix


def _plurality(row: np.ndarray) -> int | None:
    if row.sum() == 0:
        return None
    top = np.flatnonzero(row == row.max())
    return int(top[0]) if len(top) == 1 else None


def item_table(data: RatingData) -> pd.DataFrame:
    """One row per item of ``data``: dataset, item_id, number of ratings and raters, the count of
    each scale point, plurality label (empty on ties), mean scale position, share positive
    (binarised view), per-item disagreement at the default level and on the binarised view,
    arbitration (STAR), the experts' label (when experts are marked), and every item field the
    adapter read (text, rule, area, target group, category, tension_mean, tension_max, …)."""
    ann = data.annotations
    items = data.items.copy()
    out = pd.DataFrame({"dataset": data.name, "item_id": items["item_id"].astype(str)})
    if data.scale and not ann.empty:
        experts: set[str] = set()
        if data.expert is not None and data.expert[0] in data.raters.columns:
            attr, value = data.expert
            experts = set(data.raters.index[data.raters[attr].astype(str).str.casefold() == value.casefold()])
        crowd = ann[~ann["rater_id"].isin(experts)] if experts else ann
        counts, ids = counts_matrix(crowd, len(data.scale))
        frame = pd.DataFrame(counts, index=ids, columns=[f"n[{s}]" for s in data.scale])
        frame["n_ratings"] = counts.sum(axis=1).astype(int)
        frame["n_raters"] = crowd.groupby("item_id")["rater_id"].nunique().reindex(ids).to_numpy()
        values = np.asarray(data.scale_values)
        with np.errstate(invalid="ignore", divide="ignore"):
            frame["mean_value"] = (counts * values).sum(axis=1) / counts.sum(axis=1)
        frame["plurality"] = [None if (k := _plurality(r)) is None else data.scale[k] for r in counts]
        frame[f"disagreement_{data.default_level}"] = item_disagreement(counts, data.default_level, data.scale_values)
        if data.binary:
            binary, bids = counts_matrix(crowd, len(data.scale), data.positive, data.excluded)
            b = pd.DataFrame(index=bids)
            with np.errstate(invalid="ignore", divide="ignore"):
                b[f"share_{data.positive_label}"] = binary[:, 1] / binary.sum(axis=1)
            b[f"disagreement_{data.positive_label}"] = item_disagreement(binary, "nominal")
            frame = frame.join(b)
        for col in [c for c in frame.columns if c.startswith("n[")] + ["n_ratings"]:
            frame[col] = frame[col].astype(int)
        if experts:
            expert_counts, eids = counts_matrix(ann[ann["rater_id"].isin(experts)], len(data.scale))
            frame = frame.join(
                pd.Series(
                    [None if (k := _plurality(r)) is None else data.scale[k] for r in expert_counts],
                    index=eids,
                    name="expert_label",
                )
            )
        arb = data.ratings[data.ratings["kind"] == "arbitration"]
        if not arb.empty:
            frame = frame.join(
                arb.groupby("item_id")["value"].first().map(lambda v: data.scale[int(v)]).rename("arbitrator_rating")
            )
        out = out.merge(frame, left_on="item_id", right_index=True, how="left")
    fields = items.drop(columns=[c for c in ("item_id",) if c in items.columns])
    fields = fields[[c for c in fields.columns if c not in out.columns]]
    fields.index = items["item_id"].astype(str)
    out = out.merge(fields, left_on="item_id", right_index=True, how="left")
    return out.reset_index(drop=True)


def neutralise(value: Any) -> str:
    """A cell as text for CSV: missing → empty; text a spreadsheet would run as a formula gets a
    leading apostrophe (:func:`psychoalign.textio.spreadsheet_safe`: OWASP CSV injection). Numbers
    are written as numbers (a negative number is not text and stays as it is)."""
    if value is None:
        return ""
    if isinstance(value, bool | np.bool_):
        return "true" if value else "false"
    if isinstance(value, int | np.integer):
        return str(int(value))
    if isinstance(value, float | np.floating):
        return "" if math.isnan(float(value)) else repr(float(value))
    if isinstance(value, str) and not value:
        return ""
    if pd.isna(value) if not isinstance(value, list | dict | tuple) else False:
        return ""
    return str(spreadsheet_safe(str(value)))


def write_item_csv(tables: Iterable[pd.DataFrame], path: Path) -> Path:
    """Write the per-item tables of several datasets into one CSV (union of columns, in order)."""
    frames = list(tables)
    columns: list[str] = []
    for frame in frames:
        columns.extend(c for c in frame.columns if c not in columns)
    with path.open("w", encoding="utf-8", newline="") as sink:
        writer = csv.writer(sink)
        writer.writerow([neutralise(c) for c in columns])
        for frame in frames:
            present = [c if c in frame.columns else None for c in columns]
            for row in frame.itertuples(index=False, name=None):
                cells = dict(zip(frame.columns, row, strict=True))
                writer.writerow([neutralise(cells[c]) if c is not None else "" for c in present])
    return path
