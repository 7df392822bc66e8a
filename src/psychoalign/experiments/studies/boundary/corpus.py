"""Boundary corpora: requests labelled with a domain and a category, from YAML, JSON, JSONL or CSV.

A corpus file is either a mapping ``{name, description, source, licence, items: [...]}`` or a bare
list of items; CSV/JSONL files hold one item per row. Each item has ``request``, ``domain`` and
``category`` and optionally ``id`` (default: ``<domain>-<n>``) and ``context``. Bad input is
reported with the file, the item's position and the fix. The built-in corpus is package data
(``psychoalign/experiments/studies/corpora/boundary.yaml``); its writing rules are in docs/boundary.md.
"""

from __future__ import annotations

import csv
import io
import json
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ....errors import InputError
from ....yamlio import parse_yaml

__all__ = ["load_corpus"]

BUILTIN_CORPORA = ("boundary",)


class CorpusItem(BaseModel):
    """One request to negotiate."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1, max_length=200)
    domain: str = Field(min_length=1, max_length=100)
    category: str = Field(min_length=1, max_length=100)
    request: str = Field(min_length=1)
    context: str = ""
    note: str = Field("", description="Why the item is in the corpus (not sent to any model).")

    @field_validator("request")
    @classmethod
    def _not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("is blank")
        return v


class Corpus(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    description: str = ""
    source: str = ""
    licence: str = ""
    items: list[CorpusItem]

    def domains(self) -> list[str]:
        return sorted({i.domain for i in self.items})

    def categories(self) -> list[str]:
        return sorted({i.category for i in self.items})

    def subset(self, n_per_domain: int | None) -> Corpus:
        """The first ``n_per_domain`` items of each domain (the corpus order), or all."""
        if n_per_domain is None:
            return self
        seen: dict[str, int] = {}
        keep = []
        for item in self.items:
            seen[item.domain] = seen.get(item.domain, 0) + 1
            if seen[item.domain] <= n_per_domain:
                keep.append(item)
        return self.model_copy(update={"items": keep})


def _rows(path: Path, text: str) -> tuple[dict[str, Any], list[Any]]:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return {}, list(csv.DictReader(io.StringIO(text)))
    if suffix == ".jsonl":
        rows = []
        for n, line in enumerate(text.splitlines(), start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise InputError(f"{path}:{n}: not JSON ({exc.msg})", hint="one JSON object per line") from None
        return {}, rows
    data = parse_yaml(text, str(path), error=InputError)  # YAML is a superset of JSON
    if isinstance(data, list):
        return {}, data
    if isinstance(data, dict) and isinstance(data.get("items"), list):
        return {k: v for k, v in data.items() if k != "items"}, data["items"]
    raise InputError(f"{path}: a corpus is a list of items or a mapping with an 'items' list")


def _parse(path: Path, text: str, default_name: str) -> Corpus:
    meta, rows = _rows(path, text)
    if not rows:
        raise InputError(f"{path}: the corpus has no items", hint="add items with request, domain and category")
    items: list[CorpusItem] = []
    counters: dict[str, int] = {}
    for n, row in enumerate(rows, start=1):
        if not isinstance(row, dict):
            raise InputError(f"{path}: item {n} is not a mapping", hint="give request, domain and category")
        row = {k: v for k, v in row.items() if v not in (None, "") or k == "request"}
        domain = str(row.get("domain", ""))
        counters[domain] = counters.get(domain, 0) + 1
        row.setdefault("id", f"{domain}-{counters[domain]:03d}")
        row["id"] = str(row["id"])
        try:
            items.append(CorpusItem.model_validate(row))
        except ValidationError as exc:
            first = exc.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "item"
            raise InputError(
                f"{path}: item {n} (id {row.get('id')!r}): {field} {first['msg'].lower()}",
                hint="every item needs a non-empty request, domain and category; unknown keys are not allowed",
            ) from None
    seen: set[str] = set()
    for n, item in enumerate(items, start=1):
        if item.id in seen:
            raise InputError(f"{path}: item {n}: duplicate id {item.id!r}", hint="give every item a unique id")
        seen.add(item.id)
    fields = {k: str(meta[k]) for k in ("description", "source", "licence") if meta.get(k)}
    return Corpus(name=str(meta.get("name") or default_name), items=items, **fields)


def load_corpus(source: str | Path) -> Corpus:
    """A corpus from a file, or a built-in one by name (``boundary``)."""
    if str(source) in BUILTIN_CORPORA:
        ref = resources.files("psychoalign.experiments.studies") / "corpora" / f"{source}.yaml"
        return _parse(Path(f"<builtin>/{source}.yaml"), ref.read_text(encoding="utf-8"), str(source))
    path = Path(source)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InputError(
            f"corpus file {path} does not exist", hint=f"pass a file or a built-in name: {', '.join(BUILTIN_CORPORA)}"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read corpus {path}: {exc}", hint="a UTF-8 YAML, JSON, JSONL or CSV file") from None
    return _parse(path, text, path.stem)
