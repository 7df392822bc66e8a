"""`psychoalign data …`: the public evaluation data the suites and calibrations read."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from ..errors import InputError
from .common import ConfigOpt, DataOpt, JsonOpt, emit_json, err_console, out_console, safe, settings_from

if TYPE_CHECKING:
    from ..datasets import DataDir, Dataset, FileCheck

data_app = typer.Typer(
    help="Evaluation data: which public datasets are used, where they are looked for, verify, fetch.",
    no_args_is_help=True,
)


def _resolve(data: Path | None, config: Path | None) -> DataDir:
    from ..datasets import resolve_data_dir

    return resolve_data_dir(data, settings_from(config).experiments.data_dir)


def _selected(names: list[str] | None) -> list[Dataset]:
    from ..datasets import catalogue, dataset

    if not names or names == ["all"]:
        return list(catalogue())
    if "all" in names:
        raise InputError("'all' cannot be combined with dataset names", hint="name datasets, or 'all' alone")
    return [dataset(n) for n in dict.fromkeys(names)]


def _size(n: int) -> str:
    return f"{n / 1_000_000:.1f} MB" if n >= 100_000 else f"{n / 1000:.0f} kB"


def _where(found: DataDir) -> dict[str, Any]:
    return {
        "path": str(found.path),
        "origin": found.origin,
        "exists": found.exists,
        "looked": [{"origin": origin, "path": str(path) if path else None} for origin, path in found.looked],
    }


@data_app.command("list")
def data_list(data: Path | None = DataOpt, config: Path | None = ConfigOpt, json_out: bool = JsonOpt) -> None:
    """Each dataset: name, licence, source, size, whether it is in the data directory; and where
    the data directory was looked for."""
    from rich.table import Table

    from ..datasets import catalogue

    found = _resolve(data, config)
    rows = []
    for d in catalogue():
        present = sum((found.path / d.name / rel).is_file() for rel in d.files)
        rows.append((d, present))
    if json_out:
        emit_json(
            {
                "data_dir": _where(found),
                "datasets": [
                    {
                        "name": d.name,
                        "title": d.title,
                        "licence": d.licence,
                        "source": d.source,
                        "used_by": d.used_by,
                        "bytes": d.bytes,
                        "files": {rel: f.model_dump() for rel, f in d.files.items()},
                        "present": present,
                    }
                    for d, present in rows
                ],
            }
        )
        return
    table = Table(title="Evaluation datasets")
    for column in ("name", "licence", "source", "size", "files here", "used by"):
        table.add_column(column, overflow="fold")
    for d, present in rows:
        table.add_row(d.name, d.licence, d.source, _size(d.bytes), f"{present}/{len(d.files)}", d.used_by)
    out_console.print(table)
    total = sum(d.bytes for d, _ in rows)
    files = sum(len(d.files) for d, _ in rows)
    out_console.print(safe(f"{len(rows)} datasets, {files} files, {_size(total)}"))
    state = "exists" if found.exists else "missing"
    out_console.print(safe(f"data directory: {found.path} (from {found.origin}; {state})"), soft_wrap=True)
    looked = "; ".join(f"{origin}: {path if path else '(not set)'}" for origin, path in found.looked)
    out_console.print(safe(f"looked for, in order: {looked}"))


def _report(checks: list[FileCheck], json_out: bool, found: DataDir) -> None:
    bad = [c for c in checks if c.status != "ok"]
    if json_out:
        emit_json(
            {
                "data_dir": str(found.path),
                "ok": not bad,
                "files": [{"dataset": c.dataset, "file": c.file, "status": c.status} for c in checks],
            }
        )
    else:
        for c in bad:
            out_console.print(safe(f"{c.status}: {c.dataset}/{c.file}"))
        out_console.print(safe(f"{len(checks) - len(bad)}/{len(checks)} files ok in {found.path}"), soft_wrap=True)
    if bad:
        raise typer.Exit(1)


@data_app.command("path")
def data_path(data: Path | None = DataOpt, config: Path | None = ConfigOpt, json_out: bool = JsonOpt) -> None:
    """Print the data directory (for scripts: `--ratings "$(psychoalign data path)/dices_judgebench/dices_990.json"`);
    exit 2 when it does not exist."""
    found = _resolve(data, config)
    path = found.require()
    if json_out:
        emit_json({"data_dir": str(path)})
    else:
        sys.stdout.write(f"{path}\n")


@data_app.command("verify")
def data_verify(
    names: list[str] | None = typer.Argument(None, metavar="DATASET", help="Datasets to check (default: all)."),
    data: Path | None = DataOpt,
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Check every file against the sha256 manifest shipped in the package; exit 1 when one is
    missing or changed."""
    from ..datasets import verify

    found = _resolve(data, config)
    _report(verify(found.require(), _selected(names)), json_out, found)


@data_app.command("fetch")
def data_fetch(
    names: list[str] = typer.Argument(..., metavar="DATASET", help="Datasets to fetch, or 'all'."),
    source: str = typer.Option(
        ..., "--from", help="Base URL of a mirror serving <dataset>/<file> (e.g. a copy of the data directory)."
    ),
    data: Path | None = DataOpt,
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Download datasets into the data directory, each file checked against the shipped sha256
    manifest (files already intact are kept); exit 1 when a file does not match."""
    from ..datasets import fetch

    found = _resolve(data, config)

    def progress(dataset: str, file: str) -> None:
        err_console.print(safe(f"fetching {dataset}/{file}"), style="dim")

    checks = asyncio.run(fetch(_selected(names), found.path, source, progress=None if json_out else progress))
    _report(checks, json_out, found)
