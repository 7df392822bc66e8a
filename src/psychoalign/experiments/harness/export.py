"""Per-cell export of a run (``psychoalign experiment cells RUN --format csv|jsonl|parquet``): one record
per (system, benchmark, item) cell with what was asked, what the system said, every judge call
(verdict and raw reply), the scores, cost and timing, and the error of a failed cell.

What was asked is read back from the data folder (cells store answers, not the benchmark's text,
which is never copied): ``item_turns`` are the item's turns as the benchmark loads them (an attack
benchmark sends them inside its template; Best-of-N stores each augmented prompt in
``details.attempts``). When the data folder or a benchmark cannot be read, ``item_turns`` is empty
and ``item_note`` says why: the export never fails for it.

JSON Lines keeps the nesting; CSV flattens ``metrics.<key>`` and ``cost.<key>`` into columns and
writes the nested fields (``item_turns``, ``responses``, ``judges``, ``details``, ``trace_ids``)
as JSON text in their cell; a top-level text starting with = + - @ gets a leading apostrophe so a
spreadsheet does not run it as a formula. Parquet has CSV's columns with types: numbers as
float64, times as UTC timestamps, the lists of text (``item_turns``, ``responses``,
``trace_ids``) as lists of strings, and ``judges`` and ``details`` (whose shape varies by
benchmark) as JSON text.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from ...errors import ConfigError, InputError, PsychoAlignError
from ...textio import spreadsheet_safe
from .cells import category_of
from .registry import Registry, build_benchmark
from .spec import ExperimentSpec
from .store import CellResult, RunRecord

__all__ = ["cell_records", "cells_parquet", "check_format", "item_turns", "write_cells"]

ExportFormat = Literal["csv", "jsonl"]
FORMATS = ("csv", "jsonl", "parquet")
NESTED = ("item_turns", "responses", "judges", "details", "trace_ids")
FIXED = (
    "run_id",
    "system",
    "benchmark",
    "item_id",
    "status",
    "attempts",
    "category",
    "wall_s",
    "error",
    "item_note",
    "judge_status",
)


def item_turns(
    run: RunRecord, registry: Registry, data_dir: Path | None
) -> tuple[dict[tuple[str, str], tuple[str, ...]], dict[str, str]]:
    """(benchmark, item id) -> turns for the run's benchmarks, and per benchmark why it could not be read."""
    spec = ExperimentSpec.model_validate(run.spec)
    turns: dict[tuple[str, str], tuple[str, ...]] = {}
    notes: dict[str, str] = {}
    for b in spec.benchmarks:
        if data_dir is None:
            notes[b.name] = "no data folder: the item text is not shown"
            continue
        try:
            items = build_benchmark(b.name, b.options, registry.benchmarks).load(data_dir)
        except PsychoAlignError as exc:
            notes[b.name] = f"item text not read: {exc.message}"
            continue
        for item in items:
            turns[(b.name, item.id)] = item.turns
    return turns, notes


def _lookup(turns: dict[tuple[str, str], tuple[str, ...]], benchmark: str, item_id: str) -> tuple[str, ...] | None:
    # attack benchmarks prefix the objective's id with their own name (attack-direct/advbench/3)
    found = turns.get((benchmark, item_id))
    if found is None and item_id.startswith(f"{benchmark}/"):
        rest = item_id.removeprefix(f"{benchmark}/")
        found = next((t for (_, i), t in turns.items() if i == rest), None)
    return found


def cell_records(
    cells: Iterable[CellResult],
    turns: dict[tuple[str, str], tuple[str, ...]] | None = None,
    notes: dict[str, str] | None = None,
    judge_status: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """One plain-JSON record per cell, in the order given. ``judge_status``: per benchmark, which of
    its metrics a judge decides that passed no check (:func:`judge_flags`); "" for none."""
    out = []
    for c in cells:
        found = _lookup(turns or {}, c.benchmark, c.item_id)
        note = (notes or {}).get(c.benchmark, "" if found is not None else "item not in the data folder's current file")
        out.append(
            {
                "run_id": c.run_id,
                "system": c.system,
                "benchmark": c.benchmark,
                "item_id": c.item_id,
                "status": c.status,
                "attempts": c.attempts,
                "category": category_of(c),
                "item_turns": list(found or ()),
                "item_note": note,
                "judge_status": (judge_status or {}).get(c.benchmark, ""),
                "responses": c.responses,
                "metrics": c.metrics,
                "judges": [r.model_dump(mode="json") for r in c.judges],
                "cost": c.cost,
                "wall_s": c.wall_s,
                "error": c.error,
                "trace_ids": c.trace_ids,
                "details": c.details,
                "started_at": c.started_at.isoformat(),
                "finished_at": c.finished_at.isoformat() if c.finished_at else None,
            }
        )
    return out


def judge_flags(report: dict[str, Any]) -> dict[str, str]:
    """Per benchmark, the metrics of the run's report whose judge is weak or of unknown agreement,
    e.g. ``"weak: attack_success"`` or ``"unknown: nontoxic"``: an exported score is never shown as
    measured when the report does not call it so. Benchmarks whose judges passed are absent."""
    flagged: dict[str, dict[str, list[str]]] = {}
    for r in report.get("results", []):
        if (status := r.get("judge_status")) in ("weak", "unknown"):
            metrics = flagged.setdefault(r["benchmark"], {}).setdefault(status, [])
            if r["metric"] not in metrics:
                metrics.append(r["metric"])
    return {
        bench: "; ".join(f"{status}: {', '.join(metrics)}" for status, metrics in sorted(by.items(), reverse=True))
        for bench, by in flagged.items()
    }


def _csv_text(records: Sequence[dict[str, Any]]) -> str:
    metric_keys = sorted({k for r in records for k in r["metrics"]})
    cost_keys = sorted({k for r in records for k in r["cost"]})
    header = [
        *FIXED,
        "started_at",
        "finished_at",
        *(f"metrics.{k}" for k in metric_keys),
        *(f"cost.{k}" for k in cost_keys),
        *NESTED,
    ]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for r in records:
        row: dict[str, Any] = {k: r[k] for k in (*FIXED, "started_at", "finished_at")}
        row.update({f"metrics.{k}": r["metrics"].get(k, "") for k in metric_keys})
        row.update({f"cost.{k}": r["cost"].get(k, "") for k in cost_keys})
        row.update({k: json.dumps(r[k], ensure_ascii=False) for k in NESTED})
        writer.writerow({k: "" if v is None else spreadsheet_safe(v) for k, v in row.items()})
    return buf.getvalue()


def check_format(fmt: str) -> None:
    """An unknown format, or parquet without pyarrow, is a one-line error (before any cell is read)."""
    if fmt not in FORMATS:
        raise InputError(f"unknown --format {fmt!r}", hint="use --format csv, jsonl or parquet")
    if fmt == "parquet":
        _pyarrow()


def _pyarrow() -> tuple[Any, Any]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise ConfigError(
            "--format parquet needs pyarrow, which is not installed", hint="pip install 'psychoalign[parquet]'"
        ) from None
    return pa, pq


def cells_parquet(records: Sequence[dict[str, Any]]) -> bytes:
    """The records as a Parquet file (needs pyarrow: the ``parquet`` extra)."""
    pa, pq = _pyarrow()
    metric_keys = sorted({k for r in records for k in r["metrics"]})
    cost_keys = sorted({k for r in records for k in r["cost"]})
    text, texts, when, number = pa.string(), pa.list_(pa.string()), pa.timestamp("us", tz="UTC"), pa.float64()
    fields = [
        *((k, text) for k in ("run_id", "system", "benchmark", "item_id", "status")),
        ("attempts", pa.int64()),
        ("category", text),
        ("wall_s", number),
        ("error", text),
        ("item_note", text),
        ("judge_status", text),
        ("started_at", when),
        ("finished_at", when),
        *((f"metrics.{k}", number) for k in metric_keys),
        *((f"cost.{k}", number) for k in cost_keys),
        *((k, texts) for k in ("item_turns", "responses", "trace_ids")),
        ("judges", text),
        ("details", text),
    ]
    columns: dict[str, list[Any]] = {name: [] for name, _ in fields}
    for r in records:
        for name in (*FIXED, "item_turns", "responses", "trace_ids"):
            columns[name].append(r[name])
        for name in ("started_at", "finished_at"):
            columns[name].append(datetime.fromisoformat(r[name]) if r[name] else None)
        for k in metric_keys:
            columns[f"metrics.{k}"].append(r["metrics"].get(k))
        for k in cost_keys:
            columns[f"cost.{k}"].append(r["cost"].get(k))
        for name in ("judges", "details"):
            columns[name].append(json.dumps(r[name], ensure_ascii=False))
    schema = pa.schema([pa.field(name, kind) for name, kind in fields])
    table = pa.table({name: pa.array(columns[name], type=kind) for name, kind in fields}, schema=schema)
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return bytes(sink.getvalue().to_pybytes())


def write_cells(records: Sequence[dict[str, Any]], fmt: ExportFormat) -> str:
    """The records as CSV or JSON Lines text."""
    if fmt == "csv":
        return _csv_text(records)
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
