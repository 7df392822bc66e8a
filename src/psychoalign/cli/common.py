"""Shared CLI plumbing: settings from flags, consoles, JSON output, safe printing of model text."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.text import Text

if TYPE_CHECKING:
    from ..config import Settings

out_console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

ConfigOpt = typer.Option(
    None, "--config", "-c", help="Config file (TOML or YAML). Default: $PSYCHOALIGN_CONFIG or ./psychoalign.toml."
)
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables.")

# The options of every study command that negotiates a batch of requests (boundary, H1, defense accuracy).
FrameworkOpt = typer.Option("general", "--framework", "-f", help="Framework name or file.")
RoundsOpt = typer.Option(None, "--rounds", min=1, max=20, help="Negotiation rounds k.")
ProposalsOpt = typer.Option(None, "--proposals", min=1, max=8, help="DRIVE proposals per round.")
ConcurrencyOpt = typer.Option(4, "--concurrency", min=1, max=256, help="Negotiations in flight at most.")
TraceStoreOpt = typer.Option(None, "--store", help="Trace store URL (default: SQLite under home).")
NoStoreOpt = typer.Option(False, "--no-store", help="Do not store traces.")


def settings_from(config: Path | None, overrides: dict[str, Any] | None = None) -> Settings:
    from ..config import load_settings  # not at import: `psychoalign --help` never reads settings

    return load_settings(config, overrides=overrides or {})


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def print_wide(renderable: Any, min_width: int = 140) -> None:
    """Print a wide table; piped output otherwise defaults to 80 columns and folds every cell."""
    Console(width=max(out_console.width, min_width), highlight=False, force_terminal=out_console.is_terminal).print(
        renderable
    )


def print_pairs(title: str, columns: tuple[str, str], pairs: Mapping[str, str]) -> None:
    """A two-column table of ``pairs`` (e.g. role -> model)."""
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for key, value in pairs.items():
        table.add_row(key, value)
    out_console.print(table)


def safe(text: str) -> Text:
    """Model output is untrusted: render it literally, never as rich markup."""
    return Text(text)
