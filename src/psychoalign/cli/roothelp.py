"""``psychoalign --help`` drawn with the few rich modules a help screen needs.

Typer draws help with ``typer.rich_utils``, which imports rich's Markdown (markdown-it, Pygments)
and Traceback (rich.pretty, attrs) at load: a third of the start-up of ``psychoalign --help``,
for features the root help does not use. :func:`format_help` draws the same screen (usage, help
text, option panels, command panels, epilog; colours, widths and environment variables as typer
reads them) from Table, Panel, Padding, Align and Columns alone, following typer's
``rich_format_help`` for ``rich_markup_mode="rich"`` (typer is MIT-licensed; the styles below are
its defaults). tests/cli/test_roothelp.py checks that both draw the same characters, colours
included. A command that needs what this module does not draw (Markdown help) is drawn by typer.
"""

from __future__ import annotations

import inspect
import os
from collections import defaultdict
from collections.abc import Iterable
from typing import Any, ClassVar

from rich.align import Align
from rich.columns import Columns
from rich.console import Console, RenderableType, group
from rich.highlighter import RegexHighlighter
from rich.padding import Padding
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.theme import Theme
from typer.core import TyperArgument, TyperGroup, TyperOption

from .common import PipeConsole

__all__ = ["format_help"]

# typer.rich_utils' styles and strings
STYLE_OPTION = "bold cyan"
STYLE_SWITCH = "bold green"
STYLE_NEGATIVE_OPTION = "bold magenta"
STYLE_NEGATIVE_SWITCH = "bold red"
STYLE_TYPES = "bold yellow"
STYLE_TYPES_SEPARATOR = "dim"
STYLE_USAGE = "yellow"
STYLE_USAGE_COMMAND = "bold"
STYLE_DEPRECATED = "red"
STYLE_DEPRECATED_COMMAND = "dim"
STYLE_HELPTEXT = "dim"
STYLE_OPTION_DEFAULT = "dim"
STYLE_OPTION_ENVVAR = "dim yellow"
STYLE_REQUIRED_SHORT = "red"
STYLE_REQUIRED_LONG = "dim red"
STYLE_PANEL_BORDER = "dim"
STYLE_COMMANDS_TABLE_FIRST_COLUMN = "bold cyan"
DEPRECATED_STRING = "(deprecated) "
DEFAULT_STRING = "[default: {}]"
ENVVAR_STRING = "[env var: {}]"
REQUIRED_SHORT_STRING = "*"
REQUIRED_LONG_STRING = "[required]"
RANGE_STRING = " [{}]"
ARGUMENTS_PANEL_TITLE = "Arguments"
OPTIONS_PANEL_TITLE = "Options"
COMMANDS_PANEL_TITLE = "Commands"
ANSI_PREFIX = "\033["


class OptionHighlighter(RegexHighlighter):
    highlights: ClassVar[list[str]] = [
        r"(^|\W)(?P<switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
        r"(?P<types>\<[^\>]+\>)",
        r"(?P<usage>Usage: )",
    ]


class NegativeOptionHighlighter(RegexHighlighter):
    highlights: ClassVar[list[str]] = [
        r"(^|\W)(?P<negative_switch>\-\w+)(?![a-zA-Z0-9])",
        r"(^|\W)(?P<negative_option>\-\-[\w\-]+)(?![a-zA-Z0-9])",
    ]


class TypesHighlighter(RegexHighlighter):
    highlights: ClassVar[list[str]] = [
        r"^(?P<types_sep>(\[|<))",
        r"(?P<types_sep>\|)",
        r"(?P<types_sep>(\]|>))(\.\.\.)?$",
    ]


highlighter = OptionHighlighter()
negative_highlighter = NegativeOptionHighlighter()
types_highlighter = TypesHighlighter()


def _console() -> Console:
    """The console typer prints help on, with the environment variables it reads."""
    width = os.getenv("TERMINAL_WIDTH")
    forced = os.getenv("GITHUB_ACTIONS") or os.getenv("FORCE_COLOR") or os.getenv("PY_COLORS")
    force: bool | None = True if forced else None
    if os.getenv("_TYPER_FORCE_DISABLE_TERMINAL"):
        force = False
    theme = {
        "option": STYLE_OPTION,
        "switch": STYLE_SWITCH,
        "negative_option": STYLE_NEGATIVE_OPTION,
        "negative_switch": STYLE_NEGATIVE_SWITCH,
        "types": STYLE_TYPES,
        "types_sep": STYLE_TYPES_SEPARATOR,
        "usage": STYLE_USAGE,
    }
    return PipeConsole(
        theme=Theme(theme),
        highlighter=highlighter,
        color_system="auto",
        force_terminal=force,
        width=int(width) if width else None,
    )


def _rich_text(text: str, style: str = "") -> Text:
    text = inspect.cleandoc(text)
    if ANSI_PREFIX in text:
        return highlighter(Text.from_ansi(text, style=style))
    return highlighter(Text.from_markup(text, style=style))


@group()
def _help_text(obj: Any) -> Iterable[Text]:
    if obj.deprecated:
        yield Text(DEPRECATED_STRING, style=STYLE_DEPRECATED)
    help_text = inspect.cleandoc(obj.help or "").partition("\f")[0]
    first_line, *remaining = help_text.split("\n\n")
    if not first_line.startswith("\b"):
        first_line = first_line.replace("\n", " ")
    yield _rich_text(first_line.strip())
    if remaining:
        yield Text("")
        yield _rich_text("\n\n".join(remaining), style=STYLE_HELPTEXT)


def _parameter_help(param: Any, ctx: Any) -> Columns:
    items: list[Text] = []
    envvar = getattr(param, "envvar", None)
    if (
        envvar is None
        and getattr(param, "allow_from_autoenv", None)
        and getattr(ctx, "auto_envvar_prefix", None) is not None
        and param.name
    ):
        envvar = f"{ctx.auto_envvar_prefix}_{param.name.upper()}"
    var_str = "" if envvar is None else envvar if isinstance(envvar, str) else ", ".join(str(d) for d in envvar)
    help_value: str | None = getattr(param, "help", None)
    if help_value:
        paragraphs = [
            p.replace("\n", " ").strip() if not p.startswith("\b") else "{}\n".format(p.strip("\b\n"))
            for p in help_value.split("\n\n")
        ]
        items.append(_rich_text("\n".join(paragraphs).strip()))
    if envvar and getattr(param, "show_envvar", None):
        items.append(Text(ENVVAR_STRING.format(var_str), style=STYLE_OPTION_ENVVAR))
    if isinstance(param, TyperOption | TyperArgument):
        default_value = param._extract_default_help_str(ctx=ctx)
        show_default_is_str = isinstance(param.show_default, str)
        if show_default_is_str or (default_value is not None and (param.show_default or ctx.show_default)):
            default_str = param._get_default_string(
                ctx=ctx, show_default_is_str=show_default_is_str, default_value=default_value
            )
            if default_str:
                items.append(Text(DEFAULT_STRING.format(default_str), style=STYLE_OPTION_DEFAULT))
    if param.required:
        items.append(Text(REQUIRED_LONG_STRING, style=STYLE_REQUIRED_LONG))
    return Columns(items)


def _options_panel(name: str, params: list[Any], ctx: Any, console: Console) -> None:
    rows: list[list[RenderableType]] = []
    required_rows: list[str | Text] = []
    for param in params:
        long_strs, short_strs, secondary_long, secondary_short = [], [], [], []
        display_name: str | None = None
        if isinstance(param, TyperArgument):
            display_name = param.display_name_raw
            if param.metavar is None and param.nargs != 1:
                display_name += "..."
        for opt in param.opts:
            if "--" in opt:
                long_strs.append(opt)
            else:
                short_strs.append(display_name or opt)
        for opt in param.secondary_opts:
            if "--" in opt:
                secondary_long.append(opt)
            else:
                secondary_short.append(display_name or opt)
        types = Text(style=STYLE_TYPES, overflow="fold")
        type_str = param.display_type_rich(ctx=ctx)
        if type_str is not None:
            types.append(type_str)
        range_str = param._get_number_range_help_str()
        if range_str:
            types.append(RANGE_STRING.format(range_str))
        required_rows.append(Text(REQUIRED_SHORT_STRING, style=STYLE_REQUIRED_SHORT) if param.required else "")
        rows.append(
            [
                highlighter(",".join(long_strs)),
                highlighter(",".join(short_strs)),
                negative_highlighter(",".join(secondary_long)),
                negative_highlighter(",".join(secondary_short)),
                types_highlighter(types),
                _parameter_help(param, ctx),
            ]
        )
    if any(required_rows):
        rows = [[required, *row] for required, row in zip(required_rows, rows, strict=True)]
    if not rows:
        return
    table = _panel_table(highlight=True)
    for row in rows:
        table.add_row(*row)
    console.print(Panel(table, border_style=STYLE_PANEL_BORDER, title=name, title_align="left"))


def _panel_table(*, highlight: bool) -> Table:
    """The borderless table inside an options or commands panel (typer's layout)."""
    return Table(
        highlight=highlight,
        show_header=False,
        expand=True,
        box=None,
        show_lines=False,
        leading=0,
        border_style=None,
        row_styles=None,
        pad_edge=False,
        padding=(0, 1),
    )


def _command_help(help_text: str) -> Text:
    paragraphs = inspect.cleandoc(help_text).split("\n\n")
    if paragraphs[0].startswith("\b"):
        paragraphs[0] = paragraphs[0].replace("\b\n", "")
    return _rich_text(paragraphs[0].strip())


def _commands_panel(name: str, commands: list[Any], console: Console, cmd_len: int) -> None:
    table = _panel_table(highlight=False)
    table.add_column(style=STYLE_COMMANDS_TABLE_FIRST_COLUMN, no_wrap=True, width=cmd_len)
    table.add_column("Description", justify="left", no_wrap=False, ratio=10)
    rows: list[list[RenderableType | None]] = []
    deprecated: list[RenderableType | None] = []
    for command in commands:
        help_text = command.short_help or command.help or ""
        if command.deprecated:
            name_text = Text(command.name or "", style=STYLE_DEPRECATED_COMMAND)
            deprecated.append(Text(DEPRECATED_STRING, style=STYLE_DEPRECATED))
        else:
            name_text = Text(command.name or "")
            deprecated.append(None)
        rows.append([name_text, _command_help(help_text)])
    if any(deprecated):
        rows = [[*row, text] for row, text in zip(rows, deprecated, strict=True)]
    for row in rows:
        table.add_row(*row)
    if table.row_count:
        console.print(Panel(table, border_style=STYLE_PANEL_BORDER, title=name, title_align="left"))


def _panels(items: Iterable[Any], default: str) -> dict[str, list[Any]]:
    """Items by their ``rich_help_panel``, in the order typer prints them: the default panel first."""
    by_panel: defaultdict[str, list[Any]] = defaultdict(list)
    for item in items:
        by_panel[getattr(item, "rich_help_panel", None) or default].append(item)
    return {default: by_panel.get(default, []), **{k: v for k, v in by_panel.items() if k != default}}


def format_help(obj: Any, ctx: Any) -> None:
    """Print the help of the group or command ``obj`` (``rich_markup_mode="rich"``) as typer does."""
    console = _console()
    console.print(Padding(highlighter(obj.get_usage(ctx)), 1), style=STYLE_USAGE_COMMAND)
    if obj.help:
        console.print(Padding(Align(_help_text(obj), pad=False), (0, 1, 1, 1)))
    params = [p for p in obj.get_params(ctx) if not getattr(p, "hidden", False)]
    for name, arguments in _panels((p for p in params if isinstance(p, TyperArgument)), ARGUMENTS_PANEL_TITLE).items():
        _options_panel(name, arguments, ctx, console)
    for name, options in _panels((p for p in params if isinstance(p, TyperOption)), OPTIONS_PANEL_TITLE).items():
        _options_panel(name, options, ctx, console)
    if isinstance(obj, TyperGroup):
        commands = [obj.get_command(ctx, name) for name in obj.list_commands(ctx)]
        shown = [c for c in commands if c and not c.hidden]
        cmd_len = max((len(c.name or "") for c in shown), default=0)
        for name, listed in _panels(shown, COMMANDS_PANEL_TITLE).items():
            _commands_panel(name, listed, console, cmd_len)
    if obj.epilog:
        epilogue = _rich_text("\n\n".join(obj.epilog.split("\n\n")))
        console.print(Padding(Align(epilogue, pad=False), 1))
