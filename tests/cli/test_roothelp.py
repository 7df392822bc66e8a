"""The root help drawn by psychoalign.cli.roothelp is, character for character and colour for
colour, the help typer draws (typer.rich_utils), on the root group, on real sub-commands and on
a command that uses every part of a help screen."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from enum import StrEnum
from typing import Annotated, Any

import pytest
import typer
from typer import rich_utils
from typer.core import TyperGroup

from psychoalign.cli import roothelp
from psychoalign.cli.main import app, load_command


class Colour(StrEnum):
    red = "red"
    blue = "blue"


def _everything() -> Any:
    """A group whose help has arguments, options in panels, defaults, ranges, an environment
    variable, a required option, markup, ANSI text, a deprecated command and an epilog."""
    demo = typer.Typer(
        help="Demo [bold]group[/bold].\n\nSecond paragraph\nwith a line break.",
        epilog="Epilog [i]text[/i].",
        add_completion=False,
    )

    @demo.command(rich_help_panel="Main")
    def run(
        path: Annotated[str, typer.Argument(help="Where to look.")],
        count: Annotated[int, typer.Option(min=1, max=9, help="How many.", envvar="DEMO_COUNT", show_envvar=True)] = 3,
        colour: Annotated[Colour, typer.Option(help="Which \x1b[31mcolour\x1b[0m.")] = Colour.red,
        name: Annotated[str, typer.Option(help="Required name.", rich_help_panel="Naming")] = ...,  # type: ignore[assignment]
        force: Annotated[bool, typer.Option("--force/--no-force", "-f/-F", help="Force it.")] = False,
    ) -> None:
        """Run something.\n\nLonger text that only the command's own help shows."""

    @demo.command(deprecated=True)
    def old() -> None:
        """An old command."""

    @demo.command(hidden=True)
    def secret() -> None:
        """Not listed."""

    return typer.main.get_group(demo)


def _draw(draw: Any, command: Any, name: str) -> str:
    ctx = command.make_context(name, [], resilient_parsing=True)
    out = io.StringIO()
    with redirect_stdout(out):
        draw(command, ctx)
    return out.getvalue()


def _typer(command: Any, ctx: Any) -> None:
    rich_utils.rich_format_help(obj=command, ctx=ctx, markup_mode="rich")


@pytest.mark.parametrize("width", [None, "60", "132"])
@pytest.mark.parametrize("colour", [False, True])
def test_roothelp_draws_what_typer_draws(width: str | None, colour: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("TERMINAL_WIDTH", "FORCE_COLOR", "GITHUB_ACTIONS", "PY_COLORS", "_TYPER_FORCE_DISABLE_TERMINAL"):
        monkeypatch.delenv(var, raising=False)
    if width:
        monkeypatch.setenv("TERMINAL_WIDTH", width)
    if colour:
        monkeypatch.setenv("FORCE_COLOR", "1")
    # typer reads these variables once, at import: set its copies as it would have
    monkeypatch.setattr(rich_utils, "MAX_WIDTH", int(width) if width else None)
    monkeypatch.setattr(rich_utils, "FORCE_TERMINAL", True if colour else None)
    root = typer.main.get_command(app)
    demo = _everything()
    commands = {
        "psychoalign": root,
        "demo": demo,
        "demo run": demo.commands["run"],
        "chat": load_command("chat"),
        "star": load_command("star"),
    }
    for name, command in commands.items():
        ours = _draw(roothelp.format_help, command, name)
        assert ours == _draw(_typer, command, name), name
        assert ("\x1b[" in ours) == colour, name
    assert "PsychoAlign: negotiated alignment" in _draw(roothelp.format_help, root, "psychoalign")


def test_the_root_group_draws_its_help_with_roothelp(monkeypatch: pytest.MonkeyPatch) -> None:
    """`psychoalign --help` goes through roothelp, and through typer when the markup mode is not rich."""
    drawn: list[str] = []
    monkeypatch.setattr(roothelp, "format_help", lambda obj, ctx: drawn.append(obj.name))
    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    root.get_help(root.make_context("psychoalign", [], resilient_parsing=True))
    assert drawn == ["psychoalign"]
    monkeypatch.setattr(root, "rich_markup_mode", "markdown")
    out = io.StringIO()
    with redirect_stdout(out):
        root.get_help(root.make_context("psychoalign", [], resilient_parsing=True))
    assert drawn == ["psychoalign"]
    assert "Usage:" in out.getvalue()
