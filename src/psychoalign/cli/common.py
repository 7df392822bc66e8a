"""Shared CLI plumbing: settings from flags, consoles, JSON output, safe printing of model text."""

from __future__ import annotations

import errno
import inspect
import json
import os
import secrets
import stat
import sys
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Protocol, TypeVar

import typer
from rich.console import Console
from rich.text import Text

from ..errors import InputError, ModelError
from ..textio import terminal_text

if TYPE_CHECKING:
    from ..config import Settings

#: Columns of output that is not a terminal (a file, a pipe): wide enough that no table folds.
PIPE_WIDTH = 4096


class PipeConsole(Console):
    """A rich console whose write to a closed pipe raises BrokenPipeError (rich itself exits 1):
    the entry point (:func:`.main.run`) tells a reader that stopped early (``| head``), which
    ends the command with status 0, from a real failure."""

    def on_broken_pipe(self) -> None:
        self.quiet = True  # nothing more to write to it
        raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))


def _console(stderr: bool = False) -> Console:
    """A console that wraps only on a terminal: written to a file or a pipe, text keeps its lines
    (YAML and paths parse back) and tables are as wide as their content."""
    console = PipeConsole(stderr=stderr, highlight=False)
    if not console.is_terminal:
        console.soft_wrap = True
        console.width = PIPE_WIDTH
    return console


out_console = _console()
err_console = _console(stderr=True)

ConfigOpt = typer.Option(
    None, "--config", "-c", help="Config file (TOML or YAML). Default: $PSYCHOALIGN_CONFIG or ./psychoalign.toml."
)
JsonOpt = typer.Option(False, "--json", help="Print machine-readable JSON instead of tables.")
DataOpt = typer.Option(
    None,
    "--data",
    help="The evaluation data directory. Default: $PSYCHOALIGN_DATA_DIR, experiments.data_dir, "
    "../shared/data beside the checkout, the user data dir (psychoalign data list).",
)


def data_dir_from(flag: Path | None, settings: Settings) -> Path:
    """The data directory (flag > env > config > beside the checkout > user dir); an error naming
    it and how to get the data when it is missing."""
    from ..datasets import resolve_data_dir

    return resolve_data_dir(flag, settings.experiments.data_dir).require()


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


#: Told how far a long job is: ``(done, total)``.
ProgressFn = Callable[[int, int], None]


@contextmanager
def progress_bar(label: str, *, show: bool = True) -> Iterator[ProgressFn | None]:
    """A rich bar on stderr while the block runs, fed ``(done, total)``; gone when it ends.
    None (nothing drawn) unless ``show`` and stderr is a terminal: piped or redirected output,
    and ``--json`` runs, stay free of bar text."""
    if not (show and err_console.is_terminal):
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err_console,
        transient=True,
    )
    task = bar.add_task(label, total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    with bar:
        yield update


class _Closes(Protocol):
    async def close(self) -> None: ...


_S = TypeVar("_S", bound=_Closes)
_T = TypeVar("_T")


def run_closing(open_store: Callable[[], _S], work: Callable[[_S], Awaitable[_T]]) -> _T:
    """Open a store, run ``work`` on it in one event loop and close it whatever happens."""
    import asyncio  # not at import: `psychoalign --help` runs no event loop

    async def go() -> _T:
        store = open_store()
        try:
            return await work(store)
        finally:
            await store.close()

    return asyncio.run(go())


def _cannot_write(out: Path, why: str) -> InputError:
    return InputError(f"--out {out}: cannot write there: {why}", hint="pick a writable path")


@contextmanager
def open_out(out: Path, *, binary: bool = False, newline: str | None = None) -> Iterator[IO[Any]]:
    """``--out FILE`` for writing, all or nothing. The block writes a temporary file beside FILE,
    which replaces FILE (``os.replace``, atomic) only when the block ends without an error; on an
    error (a store that fails mid-read, Ctrl-C) FILE keeps its old bytes and the temporary file is
    removed. A path that cannot be written (a directory, no permission, a missing folder) is one
    line naming the flag, the path and why, before the block runs. Through a symbolic link the
    file it names is replaced and the link stays; an existing FILE keeps its permission bits."""
    target = Path(os.path.realpath(out))
    if target.is_dir():
        raise _cannot_write(out, os.strerror(errno.EISDIR))
    if target.exists() and not os.access(target, os.W_OK):
        raise _cannot_write(out, os.strerror(errno.EACCES))
    partial = target.with_name(f".{target.name}.{secrets.token_hex(6)}.part")
    try:  # 0o666 less the umask, as a plain open would create FILE
        fd = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
    except OSError as exc:
        raise _cannot_write(out, exc.strerror or type(exc).__name__) from None
    sink: IO[Any] = os.fdopen(fd, "wb") if binary else os.fdopen(fd, "w", encoding="utf-8", newline=newline)
    try:
        yield sink
    except BaseException:  # the block's own error, as it was
        _discard(sink, partial)
        raise
    try:
        if not sink.closed:  # a writer may close what it was given
            sink.flush()
            os.fsync(sink.fileno())
            sink.close()
        if target.exists():
            os.chmod(partial, stat.S_IMODE(target.stat().st_mode))
        os.replace(partial, target)
    except OSError as exc:  # the disk filled, FILE became a directory meanwhile, ...
        _discard(sink, partial)
        raise _cannot_write(out, exc.strerror or type(exc).__name__) from None


def _discard(sink: IO[Any], partial: Path) -> None:
    with suppress(OSError):
        sink.close()
    with suppress(OSError):
        partial.unlink()


def check_out_folder(out: Path) -> None:
    """Fail before any work when ``--out DIR`` cannot be a folder: a file is there, or DIR (or
    the nearest folder above it that exists) cannot be written."""
    target = Path(os.path.realpath(out))
    if target.exists() and not target.is_dir():
        raise _cannot_write(out, os.strerror(errno.ENOTDIR))
    existing = target
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise _cannot_write(out, os.strerror(errno.ENOTDIR))
    if not os.access(existing, os.W_OK | os.X_OK):
        raise _cannot_write(out, os.strerror(errno.EACCES))


@contextmanager
def out_folder(out: Path) -> Iterator[Path]:
    """``--out DIR`` for writing several files, all or nothing. The block writes into a new
    temporary folder beside DIR. When it ends without an error, a DIR that did not exist is that
    folder renamed (atomic); an existing DIR keeps every file the block did not write and gets
    the block's files each replaced whole (``os.replace``), its old ones put back if a move fails.
    On an error DIR is as it was (absent, or with its old files) and the temporary folder is
    removed, with any folder above DIR that this call created."""
    import shutil

    check_out_folder(out)
    target = Path(os.path.realpath(out))
    made: list[Path] = []  # folders above DIR created here, innermost first
    parent = target.parent
    while not parent.exists():
        made.insert(0, parent)
        parent = parent.parent
    made.reverse()
    partial = target.with_name(f".{target.name}.{secrets.token_hex(6)}.part")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        partial.mkdir()
    except OSError as exc:
        _remove_empty(made)
        raise _cannot_write(out, exc.strerror or type(exc).__name__) from None
    try:
        yield partial
        if target.is_dir():
            _merge_into(partial, target)
        else:
            os.replace(partial, target)
    except OSError as exc:
        shutil.rmtree(partial, ignore_errors=True)
        _remove_empty(made)
        raise _cannot_write(out, exc.strerror or type(exc).__name__) from None
    except BaseException:  # the block's own error, as it was
        shutil.rmtree(partial, ignore_errors=True)
        _remove_empty(made)
        raise
    shutil.rmtree(partial, ignore_errors=True)  # what a merge left: the old files it replaced


def _merge_into(partial: Path, target: Path) -> None:
    """Each file of ``partial`` into ``target`` (one level: report folders are flat); a file it
    replaces is kept in ``partial`` until every move has succeeded, and put back if one fails."""
    old = partial / f".old-{secrets.token_hex(4)}"
    old.mkdir()
    done: list[tuple[str, bool]] = []  # (name, had an old file)
    try:
        for new in sorted(p for p in partial.iterdir() if p != old):
            dest = target / new.name
            had = dest.exists()
            if had:
                os.replace(dest, old / new.name)
            done.append((new.name, had))
            os.replace(new, dest)
    except OSError:
        for name, had in reversed(done):
            with suppress(OSError):
                if had:
                    os.replace(old / name, target / name)
                elif (target / name).exists():
                    (target / name).unlink()
        raise


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:  # innermost first
        with suppress(OSError):
            folder.rmdir()


@contextmanager
def out_or_stdout(out: Path | None, *, newline: str | None = None) -> Iterator[IO[Any]]:
    """Text output to ``--out FILE`` (all or nothing, :func:`open_out`) or, without it, stdout."""
    if out is None:
        yield sys.stdout
        return
    with open_out(out, newline=newline) as sink:
        yield sink


def emit_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n")


def emit_yaml(data: Any) -> None:
    """YAML written as it is, past rich: rich folded its long lines at the terminal's width, so
    YAML copied from a terminal did not parse back (a terminal wraps a long line for the eye only).
    ``yaml.safe_dump`` escapes control and non-ASCII characters itself."""
    import yaml

    sys.stdout.write(yaml.safe_dump(data, sort_keys=False))


def print_wide(renderable: Any, min_width: int = 140) -> None:
    """Print a wide table; piped output otherwise defaults to 80 columns and folds every cell."""
    PipeConsole(width=max(out_console.width, min_width), highlight=False, force_terminal=out_console.is_terminal).print(
        renderable
    )


def print_pairs(title: str, columns: tuple[str, str], pairs: Mapping[str, str]) -> None:
    """A two-column table of ``pairs`` (e.g. role -> model)."""
    from rich.table import Table

    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for key, value in pairs.items():
        table.add_row(safe(key), safe(value))
    out_console.print(table)


@contextmanager
def deferred_interrupt() -> Iterator[None]:
    """Keep a Ctrl-C (SIGINT) that arrives inside the block and raise it as KeyboardInterrupt at
    the block's end. For start-up work that imports while other threads import (the model
    preload): an interrupt raised inside importlib's lock bookkeeping is swallowed and leaves the
    import lock held, and the process then hangs. Only in the main thread (where signals land)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if caught:
        raise KeyboardInterrupt


def no_reply_stop(exc: ModelError, resume: str) -> ModelError:
    """The one-line error for a run a model call stopped with no reply (an outage, a refused key):
    ``exc``'s message, its hint, then ``resume``, what was kept and how to go on."""
    hint = f"{exc.hint}; " if exc.hint else ""
    return ModelError(exc.message, hint=f"{hint}{resume}", detail=exc.detail)


def safe(text: object, style: str = "") -> Text:
    """Untrusted text (requests, model output, names and texts from files or the stores) for the
    terminal: never read as rich markup (``[red]`` stays literal), and every bidi control, hidden
    character and control character other than tab and newline (ESC sequences included) shown as
    its ``⟨U+XXXX⟩`` marker, as on the web pages. Every table cell and line of human output that
    holds such text goes through here; ``--json`` and YAML output keep the exact text."""
    return Text(terminal_text("" if text is None else str(text)), style=style)


def reflow_help(command: Any) -> None:
    """Help as rich should lay it out: the lines of each help paragraph joined (rich keeps a
    docstring's line breaks, which then cut sentences wherever the terminal is wider), and no
    value type shown for a flag."""
    if command.help:
        paragraphs = inspect.cleandoc(command.help).split("\n\n")
        command.help = "\n\n".join(" ".join(p.split()) for p in paragraphs)
    for param in command.params:
        if getattr(param, "is_flag", False) and param.metavar is None:
            param.metavar = ""  # a flag takes no value: show no "<bool>" beside it
    flag_help_option(command)
    for sub in getattr(command, "commands", {}).values():
        reflow_help(sub)


def flag_help_option(command: Any) -> None:
    """``--help`` is a flag too, but it is not in ``params``: the framework makes it on first use
    (from the context's option names), so it gets no value type only then."""
    make = command.get_help_option

    def get_help_option(ctx: Any) -> Any:
        option = make(ctx)
        if option is not None:
            option.metavar = ""
        return option

    command.get_help_option = get_help_option
