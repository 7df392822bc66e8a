"""``--help`` of every command (the CLI's own tree walked, named experiments included) renders on
an 80-column terminal: exit 0, a usage line, no line wider than 80 columns, no terminal escape
when the output is not a terminal. A new command is checked without being listed here."""

from __future__ import annotations

from typing import Any

import pytest
from rich.cells import cell_len
from typer.testing import CliRunner

from psychoalign.cli.experiment import experiment_registry
from psychoalign.cli.main import COMMANDS, app, load_command


def _paths(command: Any, path: tuple[str, ...]) -> list[tuple[str, ...]]:
    found = [path]
    for name, sub in getattr(command, "commands", {}).items():
        found += _paths(sub, (*path, name))
    return found


def _every_command() -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = [()]
    for name in COMMANDS:
        paths += _paths(load_command(name), (name,))
    paths += [("experiment", "run", name) for name in experiment_registry().commands]
    return paths


EVERY = _every_command()


def test_the_walk_finds_nested_and_named_commands() -> None:
    assert {("star", "participants", "list"), ("experiment", "run", "boundary"), ("traces", "export")} <= set(EVERY)


@pytest.mark.parametrize("path", EVERY, ids=lambda p: " ".join(p) or "(root)")
def test_help_renders_in_80_columns(path: tuple[str, ...]) -> None:
    shown = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "80"}, prog_name="psychoalign")
    assert shown.exit_code == 0, shown.output
    assert f"Usage: psychoalign {' '.join(path)}".rstrip() in shown.output
    too_wide = [line for line in shown.output.splitlines() if cell_len(line) > 80]
    assert not too_wide, too_wide
    assert "\x1b" not in shown.output
