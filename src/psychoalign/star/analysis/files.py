"""Reading rating files (CSV/TSV, JSON/JSONL, Parquet; gzip ok) and parsing their cells, in one place."""

from __future__ import annotations

import gzip
import io
import json
import math
from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import InputError

_MISSING = {"", "na", "n/a", "nan", "none", "null"}


def read_bytes(path: Path) -> bytes:
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}", hint="check the path") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except OSError:
            raise InputError(f"{path}: a damaged gzip file") from None
    return raw


def is_parquet(raw: bytes) -> bool:
    return raw[:4] == b"PAR1"


def decode_text(raw: bytes, path: Path) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: not UTF-8 text (byte {exc.start})", hint="save it as UTF-8, or give a Parquet/CSV/JSONL file"
        ) from None


def read_text(path: Path) -> str:
    return decode_text(read_bytes(path), path)


def json_or_jsonl(text: str) -> Any:
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


def records_from_json(data: Any) -> list[dict[str, Any]]:
    """A JSON array of objects, JSONL, or a single object (a one-line JSONL file) as records."""
    if isinstance(data, dict):
        return [data]
    if isinstance(data, list) and all(isinstance(r, dict) for r in data):
        return data
    raise ValueError("expected JSON objects, one per line or in one array")


def parquet_frame(raw: bytes, path: Path) -> pd.DataFrame:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise InputError(f"{path}: reading Parquet needs pyarrow", hint="pip install 'psychoalign[star]'") from None
    try:
        return pq.read_table(io.BytesIO(raw)).to_pandas()
    except Exception as exc:  # pyarrow raises several types for damaged files
        raise InputError(f"{path}: not a readable Parquet file ({type(exc).__name__})") from None


def sniff_delimiter(text: str, path: Path) -> str:
    if path.name.removesuffix(".gz").endswith(".tsv"):
        return "\t"
    head = text[:8192]
    first = head.splitlines()[0] if head else ""
    counts = {d: first.count(d) for d in (",", "\t", ";", "|")}
    return max(counts, key=lambda d: counts[d]) if any(counts.values()) else ","


def read_table(path: Path) -> pd.DataFrame:
    """Any tabular file as a frame of objects: CSV/TSV (delimiter sniffed), JSONL/JSON, Parquet; gzip ok.
    Cells are kept as read (strings from text files) so that parsing, and its failures, happen in one place."""
    raw = read_bytes(path)
    if is_parquet(raw):
        return parquet_frame(raw, path)
    text = decode_text(raw, path)
    if text.lstrip().startswith(("{", "[")):
        try:
            return pd.DataFrame(records_from_json(json_or_jsonl(text)))
        except (json.JSONDecodeError, ValueError) as exc:
            raise InputError(f"{path}: not valid JSON/JSONL ({exc})") from None
    try:
        return pd.read_csv(
            io.StringIO(text), sep=sniff_delimiter(text, path), dtype=str, keep_default_na=False, na_filter=False
        )
    except (pd.errors.ParserError, ValueError) as exc:
        raise InputError(f"{path}: not a readable CSV/TSV file ({str(exc).splitlines()[0]})") from None


def is_missing(x: Any) -> bool:
    if x is None:
        return True
    if isinstance(x, float) and math.isnan(x):
        return True
    return isinstance(x, str) and x.strip().lower() in _MISSING


def clean(x: Any) -> Any:
    """A cell as a plain scalar: missing → None, numpy scalars → Python, strings stripped."""
    if is_missing(x):
        return None
    if hasattr(x, "item") and not isinstance(x, str | bytes):
        try:
            return x.item()
        except (ValueError, AttributeError):
            return x
    return x.strip() if isinstance(x, str) else x


def as_bool(x: Any) -> bool | None:
    x = clean(x)
    if x is None or isinstance(x, bool):
        return x
    s = str(x).lower()
    if s in ("true", "1", "yes", "t"):
        return True
    if s in ("false", "0", "no", "f"):
        return False
    return None


def as_json(x: Any) -> Any:
    """List/object cells arrive as JSON strings from CSV and Parquet exports."""
    x = clean(x)
    if isinstance(x, str) and x[:1] in ("[", "{"):
        try:
            return json.loads(x)
        except json.JSONDecodeError:
            return x
    return x
