"""The scripted cross-turn experiment as a command: ``psychoalign experiment run cross-turn-scripted``
(added to the registry by :func:`add_experiments`). The experiment is
:func:`psychoalign.experiments.studies.cross_turn.run.simulate`; this module holds the options and the tables."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from .common import check_out_folder, out_console, out_folder

if TYPE_CHECKING:
    from ..experiments.harness.registry import Registry


def _cell(row: dict[str, Any]) -> str:
    """``k/n = rate [low, high]``; rows that repeat dialogues add their number (the interval counts
    each dialogue's rows together); '(no interval)' where there is none (too few dialogues)."""
    if not row["n"]:
        return "no data"
    text = f"{row['k']}/{row['n']} = {row['rate']:.3f}"
    lo, hi = row["ci95"]
    text += " (no interval)" if lo is None or hi is None else f" [{lo:.3f}, {hi:.3f}]"
    dialogues = row.get("dialogues")
    return text if dialogues is None or dialogues == row["n"] else f"{text}, {dialogues} dialogues"


def _print(result: dict[str, Any]) -> None:
    for title, key in (
        ("Attack success (objective answered)", "asr"),
        ("Benign follow-up turns refused", "benign_followup_refusal"),
        ("Turns with tau tightened", "turns_tightened"),
    ):
        table = Table(title=f"{title}: scripted world, n = {result['n_per_family']} per family, seed {result['seed']}")
        table.add_column("family")
        names = list(result["systems"])
        for name in names:
            table.add_column(name)
        notes: dict[str, None] = {}
        for family in result["systems"][names[0]][key]:
            rows = [result["systems"][s][key][family] for s in names]
            table.add_row(family, *(_cell(row) for row in rows))
            notes.update((f"{family}: no interval, {row['ci_note']}", None) for row in rows if row.get("ci_note"))
        if any(row["n"] != row.get("dialogues", row["n"]) for s in names for row in result["systems"][s][key].values()):
            table.caption = (
                "Wilson 95 % intervals; where a family has several rows per dialogue, on the effective number "
                "of rows (cluster-robust variance, the dialogue as the cluster)"
            )
        out_console.print(table)
        for note in notes:
            out_console.print(note)


def cross_turn_scripted(
    n: Annotated[int, typer.Option("--n", min=1, max=2000, help="Conversations per family.")] = 40,
    seed: Annotated[int, typer.Option(help="Seed of the scripted world.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Write results.json here.")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
) -> None:
    """Cross-turn tension on a scripted world with known escalation: psychoalign with and without
    the track (no model involved; docs/experiments.md, "Cross-turn tension")."""
    from ..experiments.studies.cross_turn.run import simulate

    if out is not None:  # before the run, not after it
        check_out_folder(out)
    result = asyncio.run(simulate(n, seed))
    if out is not None:
        with out_folder(out) as partial:
            (partial / "results.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    if json_out:
        typer.echo(json.dumps(result, indent=2))
    else:
        _print(result)


def add_experiments(registry: Registry) -> None:
    """The named experiment of this module (``psychoalign experiment run cross-turn-scripted``)."""
    registry.add_command("cross-turn-scripted", cross_turn_scripted)
