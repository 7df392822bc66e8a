"""The ``psychoalign`` command. Each sub-command lives in its own module, loaded only when it runs
or its own help is asked: ``psychoalign --help`` and ``--version`` import none of them (nor the
libraries they need). To add a command, add a row to its panel in :data:`LISTING`."""

from __future__ import annotations

import errno
import os
import sys
from importlib import import_module
from typing import Any, NoReturn

import typer
from rich.text import Text
from typer.core import HAS_RICH, TyperCommand, TyperGroup
from typer.exceptions import TyperException

from ..errors import PsychoAlignError, redact_url
from .common import err_console, flag_help_option, reflow_help

__all__ = ["run"]

#: panel -> name -> ("module:attribute" under psychoalign.cli, the help line the command list shows),
#: in the order `psychoalign --help` lists them. The attribute is a command function or a typer.Typer
#: of sub-commands; the help line is the first paragraph of its own help (tests/cli/test_main.py
#: checks they agree).
LISTING: dict[str, dict[str, tuple[str, str]]] = {
    "Run": {
        "chat": (
            "chat:chat",
            "Send one prompt to one model and print the reply (a raw call: no negotiation, no gates).",
        ),
        "negotiate": (
            "negotiate:negotiate",
            "Negotiate a request between DRIVE, EVALUATOR and MEDIATOR; show how contested it was.",
        ),
    },
    "Serve": {
        "serve": (
            "serve:serve",
            "Serve everything: the OpenAI-compatible API (/v1), web pages (/), the A2A system agent.",
        ),
        "serve-key": (
            "serve:serve_key",
            "Make a new API key: prints the key (give it to the client) and its SHA-256 (put it in config).",
        ),
        "serve-a2a": ("a2a:serve_a2a", "Serve the whole negotiation (gates and all) as one A2A agent."),
        "up": ("a2a:up", "Start DRIVE, EVALUATOR, MEDIATOR and the system agent as separate processes on loopback."),
        "agent": ("a2a:agent_app", "Run one agent role as an A2A service."),
    },
    "Research": {
        "experiment": (
            "experiment:experiment_app",
            "Experiments: the paper's benchmarks, baselines and ablations on your models, with cost.",
        ),
        "star": (
            "star:star_app",
            "STAR red teaming: policy, instructions, coverage, participants, assignment, campaigns, export, analysis.",
        ),
        "judge": ("judge:judge_app", "Judges shared by STAR and the experiments (refusal detection)."),
        "data": (
            "data:data_app",
            "Evaluation data: which public datasets are used, where they are looked for, verify, fetch.",
        ),
    },
    "Lab": {
        "lab": ("lab:lab_app", "STAR lab accounts: the first lead, invites, who is registered."),
    },
    "Inspect": {
        "models": ("models:models_app", "Model backends: what is installed and usable here."),
        "config": ("config:config_app", "Inspect the effective configuration."),
        "frameworks": ("negotiate:frameworks_app", "Ethical frameworks: list, show, validate."),
        "traces": ("negotiate:traces_app", "Negotiation traces: list, show, export."),
    },
}

#: name -> ("module:attribute", help line), in the listing's order.
COMMANDS: dict[str, tuple[str, str]] = {name: row for rows in LISTING.values() for name, row in rows.items()}
#: The panel each command is listed under in `psychoalign --help`, in the order of COMMANDS.
PANELS: dict[str, str] = {name: panel for panel, rows in LISTING.items() for name in rows}


def load_command(name: str) -> TyperCommand | TyperGroup:
    """The click command ``COMMANDS[name]`` names, its module imported now."""
    target, _ = COMMANDS[name]
    module, attribute = target.split(":")
    obj = getattr(import_module(f"{__package__}.{module}"), attribute)
    # Built as app.add_typer(obj, name=name) / app.command(name)(obj) would build them under the
    # root (a group even with one sub-command; no completion options of their own).
    command: object
    if isinstance(obj, typer.Typer):
        command = typer.main.get_group(obj)
    else:
        single = typer.Typer(add_completion=False)
        single.command(name)(obj)
        command = typer.main.get_command(single)
    assert isinstance(command, TyperCommand | TyperGroup)
    command.name = name
    reflow_help(command)
    return command


class _LazyCommand(TyperCommand):
    """Stands in for a sub-command in the group's list: its name and help line only. Running it
    (or asking its own help) loads the real command, which then parses the arguments."""

    def __init__(self, name: str, help: str) -> None:
        super().__init__(name=name, help=help, rich_help_panel=PANELS[name])

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        assert self.name is not None
        return load_command(self.name).make_context(info_name, args, parent=parent, **extra)


class LazyGroup(TyperGroup):
    """The root group: every sub-command of :data:`COMMANDS`, loaded on use."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        for name, (_, help_line) in COMMANDS.items():
            self.add_command(_LazyCommand(name, help_line))
        flag_help_option(self)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """The help typer draws, without the rich modules it loads for Markdown and tracebacks
        (:mod:`.roothelp`)."""
        if HAS_RICH and self.rich_markup_mode == "rich":
            from . import roothelp  # tables and panels: not needed by --version or a command

            roothelp.format_help(self, ctx)
        else:
            super().format_help(ctx, formatter)


app = typer.Typer(
    name="psychoalign",
    cls=LazyGroup,
    help=(
        "PsychoAlign: negotiated alignment (DRIVE / EVALUATOR / MEDIATOR) and STAR red teaming.\n\n"
        "Start with `psychoalign models list` to see which model backends work here, then "
        '`psychoalign chat "hello"` for a raw call to the embedded model.'
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
    # Inherited by every sub-command's context: `-h` is `--help` everywhere.
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        number = version("psychoalign")
    except PackageNotFoundError:
        raise PsychoAlignError(
            "psychoalign has no installed version (it runs from a source tree)", hint="install it: pip install -e ."
        ) from None
    sys.stdout.write(f"psychoalign {number}\n")
    raise typer.Exit()


@app.callback()
def _root(
    # metavar "": flags take no value, so no "<bool>" beside them in the help
    debug: bool = typer.Option(
        False, "--debug", metavar="", help="Show full tracebacks on errors (or PSYCHOALIGN_DEBUG=1)."
    ),
    version: bool = typer.Option(
        False,
        "--version",
        "-V",
        metavar="",
        callback=_print_version,
        is_eager=True,
        help="Print the version and exit.",
    ),
) -> None:
    """Global options; ``--debug`` is read by :func:`run` before the command starts."""


def run() -> None:
    """Console-script entry point: one clean error line unless --debug; output piped into a
    reader that stops early (``| head``) ends the command quietly with status 0."""
    try:
        _run()
    except SystemExit as exc:
        # typer answers EPIPE itself (exit 1, no word): from standard output, the reader had all it
        # wanted; from anything else (a socket), it is an error and says so
        cause = exc.__context__
        if exc.code == 1 and isinstance(cause, OSError) and cause.errno == errno.EPIPE:
            if _stdout_closed():
                _leave_quietly()
            _error_line("broken pipe: a connection the command wrote to was closed by its other end — retry")
        raise


def _stdout_closed() -> bool:
    """Whether standard output is a pipe whose reader has gone (POLLERR on its write end)."""
    import select

    try:
        fd = sys.__stdout__.fileno() if sys.__stdout__ is not None else 1
    except (OSError, ValueError):
        return False
    if not hasattr(select, "poll"):  # Windows: no poll; EPIPE there comes from the pipe
        return True
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def _leave_quietly() -> NoReturn:
    """Exit 0 on a closed output pipe, as Python's docs advise for SIGPIPE: what is still buffered
    goes to devnull, so the flush at interpreter exit raises no second BrokenPipeError."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.__stdout__.fileno() if sys.__stdout__ is not None else 1)
    os.close(devnull)
    sys.exit(0)


def _run() -> None:
    debug = "--debug" in sys.argv or os.environ.get("PSYCHOALIGN_DEBUG") == "1"
    try:
        # not standalone: click's usage errors come here instead of a boxed panel wrapped at 80
        # columns (a pipe got "…unable to parse\n string as a number" across box lines)
        code = app(standalone_mode=False)
        sys.stdout.flush()  # output still buffered meets a closed pipe here, not at interpreter exit
    except TyperException as exc:  # typer's own (vendored click) usage and parameter errors
        usage = getattr(exc, "ctx", None)
        if type(exc).__name__ == "NoArgsIsHelpError" and usage is not None:  # a bare group: its help
            typer.echo(usage.get_help())
            sys.exit(exc.exit_code)
        hint = f" — see `{usage.command_path} -h`" if usage is not None else ""
        _error_line(exc.format_message() + hint)
        sys.exit(exc.exit_code)
    except typer.Abort:  # Ctrl-C or end of input at a prompt
        err_console.print("[yellow]interrupted[/]")
        sys.exit(130)
    except PsychoAlignError as exc:
        if debug:
            if exc.detail:  # internal (redacted): what the endpoint or peer said
                from ..textio import normalise_text, terminal_text

                detail = terminal_text(normalise_text(exc.detail))
                err_console.print(Text.assemble(("detail: ", "bold"), detail), soft_wrap=True)
            raise
        hint = f" — {exc.hint}" if exc.hint else ""
        _error_line(exc.message + hint)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]")
        sys.exit(130)
    except OSError as exc:  # a file or socket the command needed: name it, no traceback
        if exc.errno == errno.EPIPE and _stdout_closed():
            _leave_quietly()
        if debug:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        _error_line(f"{exc.strerror or type(exc).__name__}:{where} — check the path or address and its permissions")
        sys.exit(1)
    except Exception as exc:  # a bug: one line naming its class; the message and traceback with --debug
        if debug:
            raise
        # Not the message: an unexpected exception's text can hold anything, model output included
        # (a pydantic error quotes the input it rejected). docs/negotiation.md, "Failure reasons".
        _error_line(
            f"internal error ({type(exc).__name__}) — run with --debug for its message and the traceback, and report it"
        )
        sys.exit(1)
    if code == 130:  # typer turns a Ctrl-C inside a command into Exit(130), returned here
        err_console.print("[yellow]interrupted[/]")
    if isinstance(code, int) and code:  # typer.Exit(n), returned rather than raised when not standalone
        sys.exit(code)


def _error_line(message: str) -> None:
    """One error line; text that came from input (argv, files) may hold lone surrogates, which
    cannot be printed as UTF-8."""
    from ..textio import normalise_text, terminal_text  # not at import: `psychoalign --help` prints no error

    # A store or endpoint URL in the message (argv echoed back) never shows its password; a name
    # quoted from a file shows its bidi and control characters as markers, never raw.
    line = terminal_text(redact_url(normalise_text(message)))
    err_console.print(Text.assemble(("error: ", "bold red"), line), soft_wrap=True)
