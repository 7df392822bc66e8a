"""`psychoalign experiment …`: run, resume and report the paper's experiments on any models."""

from __future__ import annotations

import asyncio
import inspect
import re
import sys
from importlib import import_module
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from ..config import Settings
from ..errors import NO_REPLY_ERRORS, ConfigError, InputError, redact_url
from ._experiment_tables import _print_tables
from .common import (
    ConfigOpt,
    JsonOpt,
    check_out_folder,
    emit_json,
    emit_yaml,
    err_console,
    no_reply_stop,
    open_out,
    out_console,
    out_folder,
    print_wide,
    reflow_help,
    safe,
    settings_from,
)

MAX_N = 100_000  # ExperimentSpec.n at most (harness.spec.MAX_N; not imported here to keep startup light)

# The harness (SQLAlchemy, numpy, the benchmarks) is imported inside the commands: `--help` never loads it.
if TYPE_CHECKING:
    from ..experiments.harness.registry import Registry
    from ..experiments.harness.runner import RunSummary
    from ..experiments.harness.spec import ExperimentSpec
    from ..experiments.harness.store import ResultStore

#: CLI modules whose named experiments ``experiment run NAME`` dispatches to (each has ``add_experiments``).
NAMED_EXPERIMENT_MODULES = ("boundary", "cross_turn", "defense_accuracy")

experiment_app = typer.Typer(
    help="Experiments: the paper's benchmarks, baselines and ablations on your models, with cost.",
    no_args_is_help=True,
)

StoreOpt = typer.Option(None, "--store", help="Result store URL (default: the SQLite file under home, or store_url).")


def experiment_registry() -> Registry:
    """What ``experiment run`` knows: the harness's registry (systems, benchmarks, plugins) plus the
    named experiments whose commands live in the CLI."""
    from ..experiments.harness.registry import default_registry

    registry = default_registry()
    for module in NAMED_EXPERIMENT_MODULES:
        import_module(f"{__package__}.{module}").add_experiments(registry)
    return registry


class _ProgressBar:
    """A run's progress on the terminal (the runner's ``progress``)."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("failed {task.fields[failed]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=console,
            transient=False,
        )
        self._task = self._bar.add_task("", total=None, failed=0, start=False)

    def note(self, message: str) -> None:
        self.console.print(safe(message))

    def start(self, name: str, total: int) -> None:
        self._bar.update(self._task, description=name, total=total)
        self._bar.start_task(self._task)
        self._bar.start()

    def advance(self, failed: int) -> None:
        self._bar.update(self._task, advance=1, failed=failed)

    def stop(self) -> None:
        self._bar.stop()


class _ProgressLines:
    """A run's progress when stderr is not a terminal (piped, logged, CI): plain lines, at most about
    twenty per run, so a long run is not silent and a log file stays readable."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self._name = ""
        self._total = 0
        self._done = 0

    def note(self, message: str) -> None:
        self.console.print(safe(message), soft_wrap=True)

    def start(self, name: str, total: int) -> None:
        self._name, self._total, self._done = name, total, 0
        self.console.print(safe(f"{name}: {total} cell{'s' if total != 1 else ''} to run"), soft_wrap=True)

    def advance(self, failed: int) -> None:
        self._done += 1
        step = max(1, self._total // 20)
        if self._done % step == 0 or self._done == self._total:
            line = f"{self._name}: {self._done} of {self._total} cells done, {failed} failed"
            self.console.print(safe(line), soft_wrap=True)

    def stop(self) -> None:
        return None


def _progress(console: Console, *, off: bool) -> _ProgressBar | _ProgressLines | None:
    """A bar on a terminal, plain lines elsewhere (a piped run used to print nothing until it ended)."""
    if off:
        return None
    return _ProgressBar(console) if console.is_terminal else _ProgressLines(console)


def _store(settings: Settings, url: str | None, *, existing: bool = False) -> ResultStore:
    """The result store; ``existing`` for commands that only read runs: a SQLite file that is not
    there is an error (opening it would create an empty store and report that nothing ran)."""
    from ..experiments.harness.store import open_result_store
    from ..storage import sqlite_file

    url = url or settings.effective_store_url()
    path = sqlite_file(url) if existing else None
    if path is not None and not path.exists():
        raise InputError(
            f"no result store at {redact_url(str(path))}: no experiment has run with it",
            hint="pass --store with the store a run wrote to (see store_url in `psychoalign config show`), "
            "or start one with `psychoalign experiment run SPEC`",
        )
    return open_result_store(url)


def _parse_shard(shard: str | None) -> tuple[int, int]:
    if shard is None:
        return (0, 1)
    m = re.fullmatch(r"(\d+)/(\d+)", shard.strip())
    if not m or not int(m.group(1)) < int(m.group(2)):
        raise InputError(f"invalid --shard {shard!r}", hint="use i/n with 0 <= i < n, e.g. --shard 0/4")
    return int(m.group(1)), int(m.group(2))


def _csv(value: str | None) -> list[str] | None:
    return [v.strip() for v in value.split(",") if v.strip()] if value else None


def _run_named(registry: Registry, name: str, ctx: typer.Context) -> None:
    """Dispatch to a plugin experiment (boundary, h1, …) with its own options. The outer command
    has already parsed the flags it shares with spec runs: each one given is handed on, under the
    same parameter name, when the experiment takes it and refused otherwise, never dropped (a
    dropped --shard ran every cell)."""
    entry = registry.commands[name]
    params = inspect.signature(entry.command).parameters
    args: list[str] = []
    for option in ctx.command.params:
        key = option.name
        value = ctx.params.get(key) if key is not None else None
        if option.param_type_name != "option" or key == "show_help" or value is None or value is False:
            continue
        flag = next(o for o in option.opts if o.startswith("--"))
        if key not in params:
            raise InputError(
                f"{flag} does not apply to `experiment run {name}`",
                hint=f"leave it out; `psychoalign experiment run {name} --help` lists its options",
            )
        args += [flag] if value is True else [flag, str(value)]
    sub = typer.Typer(
        add_completion=False, pretty_exceptions_enable=False, context_settings={"help_option_names": ["-h", "--help"]}
    )
    sub.command(name=name, help=entry.help)(entry.command)
    command = typer.main.get_command(sub)
    reflow_help(command)  # as every other command's help: flags without "<bool>"
    command.main(args=[*args, *ctx.args], prog_name=f"psychoalign experiment run {name}", standalone_mode=False)


@experiment_app.command(
    "run",
    # --help is handled below, so `experiment run boundary --help` shows the named experiment's help
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []},
)
def run(
    ctx: typer.Context,
    spec_name: str | None = typer.Argument(
        None, metavar="SPEC", help="A preset name (see `experiment list`), a named experiment, or a spec file."
    ),
    n: int | None = typer.Option(None, "--n", min=1, max=MAX_N, help="Items per benchmark (overrides the spec)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Report folder (default: experiments/<run id>)."),
    systems: str | None = typer.Option(None, "--systems", help="Comma-separated subset of the spec's systems."),
    benchmarks: str | None = typer.Option(None, "--benchmarks", help="Comma-separated subset of its benchmarks."),
    shard: str | None = typer.Option(None, "--shard", help="Run only shard i of n (i/n), sharing one store."),
    concurrency: int | None = typer.Option(None, "--concurrency", min=1, max=512, help="Cells in flight at most."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Print calls, tokens and cost estimates; run nothing."),
    reclaim: bool = typer.Option(False, "--reclaim", help="Also take over cells another host left running."),
    follow: bool = typer.Option(
        False, "--follow", help="Then wait for cells other runners hold; finish those whose lease lapses."
    ),
    new_run: bool = typer.Option(
        False,
        "--new-run",
        help="Start (or resume) a run beside the spec's first one, keyed by the models, judges and data it uses.",
    ),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", min=1, help="Stop once the run's model calls used this many tokens (spec: limits)."
    ),
    max_cost: float | None = typer.Option(None, "--max-cost", min=0.0, help="Stop once the run spent this many USD."),
    max_time: float | None = typer.Option(None, "--max-time", min=0.0, help="Stop once the run ran this many seconds."),
    max_errors: float | None = typer.Option(
        None, "--max-errors", min=0.0, help="Stop at this many failed cells (>= 1) or this share of the cells (< 1)."
    ),
    sample_tokens: int | None = typer.Option(
        None, "--sample-tokens", min=1, help="Fail a cell whose model calls use more tokens than this (limit: …)."
    ),
    sample_time: float | None = typer.Option(
        None, "--sample-time", min=0.0, help="Cut off and fail a cell that runs longer than this many seconds."
    ),
    store_url: str | None = StoreOpt,
    no_progress: bool = typer.Option(False, "--no-progress", help="No progress bar."),
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
    show_help: bool = typer.Option(False, "--help", "-h", help="Show this message and exit."),
) -> None:
    """Run (or resume) an experiment and write DIR/report.html and DIR/results.json.

    Rerunning the same spec resumes it: finished cells are skipped, failed ones retried. A run
    resumes only under the models, judges and data it started with; --new-run starts another.
    """
    registry = experiment_registry()
    if spec_name is not None and spec_name in registry.commands:
        ctx.args.extend(["--help"] if show_help else [])
        _run_named(registry, spec_name, ctx)
        return
    if show_help or spec_name is None:
        out_console.print(ctx.get_help())
        if not show_help:
            raise InputError("no spec given", hint="psychoalign experiment run paper-table3 (see `experiment list`)")
        return
    if ctx.args:
        raise InputError(f"unknown option(s) for a spec run: {' '.join(ctx.args)}", hint="see --help")
    from ..experiments.harness.report import build_report
    from ..experiments.harness.runner import run_experiment
    from ..experiments.harness.spec import load_spec
    from ..traces import open_store

    settings = settings_from(config)
    spec = load_spec(spec_name, registry=registry, settings=settings).with_overrides(
        n=n, systems=_csv(systems), benchmarks=_csv(benchmarks)
    )
    if concurrency is not None:
        spec = spec.model_copy(update={"concurrency": concurrency})
    spec = _with_limits(
        spec,
        max_tokens=max_tokens,
        max_cost=max_cost,
        max_time=max_time,
        max_errors=max_errors,
        sample_tokens=sample_tokens,
        sample_time=sample_time,
    )
    shard_t = _parse_shard(shard)
    if dry_run:
        _dry_run(spec, settings, registry, shard_t, json_out)
        return
    if out is not None:  # before the run, not after it
        check_out_folder(out)

    resume = _resume_command(
        spec_name,
        n=n,
        systems=systems,
        benchmarks=benchmarks,
        shard=shard,
        new_run=new_run,
        store_url=store_url,
        config=config,
    )

    async def go() -> tuple[Any, dict[str, Any]]:
        _cancel_on_sigterm()
        store = _store(settings, store_url)
        traces = open_store(store_url or settings.effective_store_url())
        try:
            summary = await run_experiment(
                spec,
                settings,
                store=store,
                trace_store=traces,
                registry=registry,
                shard=shard_t,
                reclaim=reclaim,
                follow=follow,
                new_run=new_run,
                progress=_progress(err_console, off=no_progress or json_out),
                resume_command=resume,
            )
            run_record = await store.get_run(summary.run_id)
            assert run_record is not None
            report = build_report(run_record, await store.cells(summary.run_id), registry)
            return summary, report
        finally:
            await store.close()
            await traces.close()

    try:
        summary, report = asyncio.run(go())
    except (KeyboardInterrupt, asyncio.CancelledError) as stop:  # Ctrl-C, or SIGTERM (the run's task cancelled)
        _interrupted(stop, resume)
    except NO_REPLY_ERRORS as exc:  # a call the run cannot do without (a judge check) got no reply
        raise no_reply_stop(exc, f"the cells that finished are stored: resume the run with: {resume}") from exc
    folder = out or Path(settings.experiments.out_dir) / summary.run_id
    json_path, html_path = _write_report(report, folder)
    if json_out:
        emit_json({"summary": summary.__dict__, "report": str(html_path), "results": str(json_path)})
        if summary.stopped or summary.failed:
            if summary.failed:
                _failed_line(summary)
            raise typer.Exit(1)
        return
    if _nothing_left(summary):
        # A resume with nothing to run: say so in one line, not as a run that ran 0 cells. The
        # stored cells resumed only under the identity they were computed with (models, judges,
        # data; a change was refused above), so the report rebuilt from them is the run's own.
        gave_up = report["status"].get("gave_up", 0)
        given = f" ({gave_up} of them given up)" if gave_up else ""
        err_console.print(
            safe(
                f"run {summary.run_id}: all {summary.total} cells already done{given}, nothing to run; "
                f"results: {json_path}; report them: {_report_command(summary.run_id, store_url, config)}"
            ),
            highlight=False,
            soft_wrap=True,
        )
        return
    _print_tables(report)
    err_console.print(
        safe(
            f"run {summary.run_id}: {summary.ran} cells ran ({summary.done} done, {summary.failed} failed"
            + (f", {summary.gave_up} of them given up" if summary.gave_up else "")
            + "), "
            f"{summary.skipped_done} already done, {summary.busy_elsewhere} running elsewhere; "
            f"{summary.wall_s:.1f}s"
        )
    )
    for line in summary.errors[:5]:
        err_console.print(safe(f"  failed: {line}"), style="red")
    err_console.print(safe(f"report: {html_path}\nresults: {json_path}"), soft_wrap=True)
    if summary.stopped:
        err_console.print(safe(f"run {summary.run_id} stopped: {summary.stopped}"), style="yellow")
    if summary.failed:
        _failed_line(summary)
    if summary.stopped or summary.failed:
        raise typer.Exit(1)


def _interrupted(stop: BaseException, resume: str) -> NoReturn:
    """The line an interrupted run prints (every kind of run: spec runs, boundary, h1) and its
    exit status: 130 after Ctrl-C, 143 after SIGTERM (the run's task cancelled)."""
    err_console.print(
        safe(f"interrupted: the cells that finished are stored; resume the run with: {resume}"),
        style="yellow",
        soft_wrap=True,
    )
    raise typer.Exit(130 if isinstance(stop, KeyboardInterrupt) else 143) from None


def _cancel_on_sigterm() -> None:
    """Make SIGTERM stop the running command as Ctrl-C does: cancel its task, so the run gives back
    its cells and marks itself interrupted instead of dying mid-way (the default for SIGTERM)."""
    import contextlib
    import signal

    task = asyncio.current_task()
    # no signal handlers on Windows' loop, nor outside the main thread
    with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
        if task is not None:
            asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)


def _resume_command(
    spec_name: str,
    *,
    n: int | None,
    systems: str | None,
    benchmarks: str | None,
    shard: str | None,
    new_run: bool,
    store_url: str | None,
    config: Path | None,
) -> str:
    """The `experiment run` command that resumes this run: the options that choose the run (its
    spec, N, subsets, shard, --new-run) and where it is stored; a spec file by its absolute path,
    so the command works from any folder. A store URL never shows its password."""
    import shlex

    spec_path = Path(spec_name)
    spec_word = (
        str(spec_path.resolve()) if spec_path.suffix in (".yaml", ".yml", ".toml") and spec_path.exists() else spec_name
    )
    words = ["psychoalign", "experiment", "run", spec_word]
    words += ["--n", str(n)] if n is not None else []
    words += ["--systems", systems] if systems else []
    words += ["--benchmarks", benchmarks] if benchmarks else []
    words += ["--shard", shard] if shard else []
    words += ["--new-run"] if new_run else []
    words += ["--store", redact_url(store_url)] if store_url else []
    words += ["-c", str(config.resolve())] if config else []
    return shlex.join(words)


def _report_command(run_id: str, store_url: str | None, config: Path | None) -> str:
    """The `experiment report` command for ``run_id`` on the store and configuration this run used."""
    import shlex

    words = ["psychoalign", "experiment", "report", run_id]
    words += ["--store", redact_url(store_url)] if store_url else []
    words += ["-c", str(config)] if config else []
    return shlex.join(words)


def _nothing_left(summary: RunSummary) -> bool:
    """Every cell of the run (of this shard) was already done or given up before this invocation:
    it ran nothing, waits on nothing, and no limit stopped it."""
    return (
        summary.total > 0
        and summary.ran == 0
        and summary.skipped_done == summary.total
        and summary.busy_elsewhere == 0
        and not summary.stopped
    )


def _failed_line(summary: RunSummary) -> None:
    """The one line that says why a run whose cells failed exits with status 1: its tables lack
    those cells (never scored as 0), so a script or CI must not read them as complete."""
    given_up = f" ({summary.gave_up} given up: not retried)" if summary.gave_up else ""
    retried = " (rerunning the same command retries them)" if summary.failed > summary.gave_up else ""
    err_console.print(
        safe(
            f"{summary.failed} of {summary.ran} cells failed{given_up}; "
            f"see `psychoalign experiment report {summary.run_id}`{retried}"
        ),
        style="red",
        highlight=False,
    )


def _with_limits(spec: ExperimentSpec, **flags: float | None) -> ExperimentSpec:
    """The spec's limits with the --max-* flags given (a flag wins); a bad value is one line."""
    from pydantic import ValidationError

    from ..experiments.harness.limits import merge_limits

    names = {
        "max_tokens": "tokens",
        "max_cost": "cost_usd",
        "max_time": "time_s",
        "max_errors": "errors",
        "sample_tokens": "sample_tokens",
        "sample_time": "sample_time_s",
    }
    try:
        limits = merge_limits(spec.limits, {names[k]: v for k, v in flags.items()})
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        flag = next((f"--{k.replace('_', '-')}" for k, v in names.items() if (v,) == loc), "a --max flag")
        raise InputError(f"{flag}: {first['msg']}", hint="see psychoalign experiment run --help") from None
    return spec.model_copy(update={"limits": limits})


def _dry_run(
    spec: ExperimentSpec, settings: Settings, registry: Registry, shard: tuple[int, int], json_out: bool
) -> None:
    from ..datasets import resolve_data_dir
    from ..experiments.harness.estimate import estimate
    from ..experiments.harness.runner import plan_cells
    from ..experiments.harness.systems import SystemInfo

    cells, _ = plan_cells(spec, resolve_data_dir(configured=settings.experiments.data_dir).path, registry, shard)
    infos: dict[str, SystemInfo] = {}
    for s in spec.systems:
        cls = registry.systems.get(s.effective_kind)
        if cls is None:
            raise ConfigError(
                f"unknown system '{s.effective_kind}'", hint=f"known: {', '.join(sorted(registry.systems))}"
            )
        infos[s.name] = cls.info
    est = estimate(spec, cells, settings, infos)
    # The calls, tokens and USD depend on the models the configuration gives each system's roles
    # (USD on their prices): name them, as a run does under its tables.
    from ..experiments.harness.metering import ModelPool
    from ..models import resolved_label

    pool = ModelPool(settings)
    models = {
        s.name: {
            role: resolved_label(pool.spec(role, dict(s.roles.get(role) or {}) or None)) for role in infos[s.name].roles
        }
        for s in spec.systems
    }
    if json_out:
        emit_json({"run_id": spec.run_id(), "cells": len(cells), **est, "models": models})
        return
    table = Table(title=safe(f"Dry run of {spec.name} ({len(cells)} cells; estimates)"))
    cols = ("system", "cells", "calls", "calls max", "tokens", "tokens max", "USD", "USD max", "judge calls")
    for c in cols:
        table.add_column(c, justify="left" if c == "system" else "right")
    for r in [*est["systems"], {"system": "total", **est["total"]}]:
        table.add_row(
            safe(r["system"]),
            f"{r['cells']:.0f}",
            f"{r['calls_typical']:.0f}",
            f"{r['calls_max']:.0f}",
            f"{r['tokens_typical']:.0f}",
            f"{r['tokens_max']:.0f}",
            f"{r['usd_typical']:.4f}",
            f"{r['usd_max']:.4f}",
            f"{r['judge_calls']:.0f}",
        )
    print_wide(table)
    for name, roles in models.items():
        labels = ", ".join(f"{role}={label}" for role, label in roles.items())
        err_console.print(safe(f"models of {name}: {labels or 'none'}"), highlight=False, soft_wrap=True)
    err_console.print(
        f"Plus {est['judge_check_calls']} judge calls once per run for the judges' checks on constructed cases."
    )
    err_console.print("USD uses input/output_cost_per_mtok of each role's model spec (0 when not configured).")


@experiment_app.command("list")
def list_(config: Path | None = ConfigOpt, json_out: bool = JsonOpt) -> None:
    """Presets, named experiments, system kinds and benchmarks that `experiment run` knows."""
    from ..experiments.harness.spec import load_spec, preset_names

    settings_from(config)  # a --config given is read: a broken file is an error here too, not ignored
    registry = experiment_registry()
    data = {
        "presets": {name: load_spec(name).description for name in preset_names()},
        # a docstring's first paragraph, not its first line: a summary wrapped over two lines stays whole
        "experiments": {name: " ".join(e.help.split("\n\n")[0].split()) for name, e in registry.commands.items()},
        "systems": {kind: cls.info.source for kind, cls in sorted(registry.systems.items())},
        "benchmarks": {name: cls.source for name, cls in sorted(registry.benchmarks.items())},
    }
    if json_out:
        emit_json(data)
        return
    for section, rows in data.items():
        table = Table(title=section.capitalize())
        table.add_column("name")
        table.add_column("description")
        for name, text in rows.items():
            table.add_row(safe(name), safe(text))
        print_wide(table)


@experiment_app.command("show")
def show(
    spec_name: str = typer.Argument(..., metavar="SPEC"),
    n: int | None = typer.Option(None, "--n", min=1, max=MAX_N, help="Items per benchmark (overrides the spec)."),
    json_out: bool = JsonOpt,
) -> None:
    """Print a spec (preset or file) as YAML, with its run id (checked: unknown systems,
    benchmarks or options are errors naming the file and line). The YAML written to a file runs
    as a spec: `psychoalign experiment show paper-table4 > t.yaml`."""
    from ..experiments.harness.spec import load_spec

    registry = experiment_registry()
    if spec_name in registry.commands and not Path(spec_name).is_file():
        raise InputError(
            f"'{spec_name}' is a named experiment: it takes its own options, not a spec, so there is none to show",
            hint=f"see them with `psychoalign experiment run {spec_name} -h`",
        )
    spec = load_spec(spec_name, registry=registry).with_overrides(n=n)
    if json_out:
        emit_json({"run_id": spec.run_id(), "spec": spec.model_dump(mode="json")})
        return
    emit_yaml(spec.model_dump(mode="json"))
    err_console.print(safe(f"run id: {spec.run_id()}"))


@experiment_app.command("status")
def status(
    run_id: str | None = typer.Argument(None, help="A run id or prefix; all runs when omitted."),
    store_url: str | None = StoreOpt,
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Progress of runs in the store: cells done / failed / running, per system."""
    settings = settings_from(config)

    async def go() -> list[dict[str, Any]]:
        store = _store(settings, store_url, existing=True)
        try:
            runs = await store.list_runs()
            if run_id is not None:
                one = await store.get_run(run_id)
                if one is None:
                    raise InputError(f"no run '{run_id}' in the store", hint="see `psychoalign experiment status`")
                runs = [one]
            out = []
            for r in runs:
                cells = await store.cells(r.id)
                states = ("done", "failed", "gave_up", "running")
                counts = {s: sum(1 for c in cells if c.status == s) for s in states}
                per: dict[str, dict[str, int]] = {}
                for c in cells:
                    per.setdefault(c.system, dict.fromkeys(states, 0))[c.status] += 1
                interrupted = r.meta.get("interrupted")
                out.append(
                    {
                        "id": r.id,
                        "name": r.name,
                        "created_at": r.created_at.isoformat(),
                        **counts,
                        "cells": len(cells),
                        "state": _run_state(len(cells), interrupted),
                        "resume": _resume_hint(interrupted),
                        "systems": per,
                    }
                )
            return out
        finally:
            await store.close()

    rows = asyncio.run(go())
    if json_out:
        emit_json(rows)
        return
    table = Table(title="Experiment runs")
    for c in ("run", "created", "done", "failed", "gave up", "running", "state"):
        table.add_column(c)
    for r in rows:
        cols = (r["done"], r["failed"], r["gave_up"], r["running"])
        table.add_row(safe(r["id"]), safe(r["created_at"][:19]), *(str(v) for v in cols), safe(r["state"]))
    print_wide(table)
    for r in rows:
        if r["state"] != "":
            err_console.print(safe(f"run {r['id']}: {r['state']}; {r['resume']}"), soft_wrap=True, highlight=False)
    if run_id is not None and rows:
        per = Table(title="Per system")
        for c in ("system", "done", "failed", "running"):
            per.add_column(c)
        for name, counts in rows[0]["systems"].items():
            per.add_row(safe(name), str(counts["done"]), str(counts["failed"]), str(counts["running"]))
        print_wide(per)


def _run_state(cells: int, interrupted: dict[str, Any] | None) -> str:
    """What `status` says of a run beyond its counts: interrupted (Ctrl-C, SIGTERM), or stored with
    no cell yet (killed before its first cell, or starting right now); "" for any other run."""
    if interrupted:
        return f"interrupted, {cells} cells" if cells == 0 else f"interrupted after {cells} cells"
    return "no cells yet (killed before its first cell, or starting)" if cells == 0 else ""


def _resume_hint(interrupted: dict[str, Any] | None) -> str:
    command = (interrupted or {}).get("command")
    if command:
        return f"resume it with: {command}"
    return "resume it by rerunning the `psychoalign experiment run` command that started it"


def _write_report(report: dict[str, Any], folder: Path) -> tuple[Path, Path]:
    """FOLDER/results.json and FOLDER/report.html, both or neither (:func:`.common.out_folder`)."""
    from ..experiments.harness.report import write_report

    with out_folder(folder) as partial:
        json_path, html_path = write_report(report, partial)
    return folder / json_path.name, folder / html_path.name


@experiment_app.command("report")
def report(
    run_id: str = typer.Argument(..., help="A run id or unique prefix (see `experiment status`)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Report folder (default: experiments/<run id>)."),
    store_url: str | None = StoreOpt,
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Rebuild DIR/report.html and DIR/results.json of a run from the store (no model calls)."""
    from ..experiments.harness.report import build_report

    settings = settings_from(config)

    async def go() -> dict[str, Any]:
        store = _store(settings, store_url, existing=True)
        try:
            run_record = await store.get_run(run_id)
            if run_record is None:
                raise InputError(f"no run '{run_id}' in the store", hint="see `psychoalign experiment status`")
            return build_report(run_record, await store.cells(run_record.id))
        finally:
            await store.close()

    data = asyncio.run(go())
    folder = out or Path(settings.experiments.out_dir) / data["run"]["id"]
    json_path, html_path = _write_report(data, folder)
    if json_out:
        emit_json({"report": str(html_path), "results": str(json_path)})
        return
    _print_tables(data)
    err_console.print(f"report: {html_path}\nresults: {json_path}", soft_wrap=True)


@experiment_app.command("cells")
def cells(
    run_id: str = typer.Argument(..., help="A run id or unique prefix (see `experiment status`)."),
    fmt: str = typer.Option("jsonl", "--format", "-f", help="csv, jsonl or parquet (needs the parquet extra)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="File to write (default: standard output)."),
    system: str | None = typer.Option(None, "--system", help="Only these systems (comma-separated)."),
    benchmark: str | None = typer.Option(None, "--benchmark", help="Only these benchmarks (comma-separated)."),
    status_: str | None = typer.Option(None, "--status", help="Only cells in this status: done, failed, running."),
    store_url: str | None = StoreOpt,
    config: Path | None = ConfigOpt,
) -> None:
    """Export a run's cells: the item asked, the responses, every judge call, scores, cost, timing."""
    from ..experiments.harness.benchmark import find_data_dir
    from ..experiments.harness.cells import CellQuery, read_cells
    from ..experiments.harness.export import (
        cell_records,
        cells_parquet,
        check_format,
        item_turns,
        judge_flags,
        write_cells,
    )
    from ..experiments.harness.report import build_report

    check_format(fmt)
    if status_ is not None and status_ not in ("done", "failed", "running"):
        raise InputError(f"unknown --status {status_!r}", hint="use done, failed or running")
    if fmt == "parquet" and out is None and sys.stdout.isatty():
        raise InputError("--format parquet writes binary data, not for a terminal", hint="add --out FILE.parquet")
    settings = settings_from(config)
    query = CellQuery(systems=_csv(system), benchmarks=_csv(benchmark), statuses=[status_] if status_ else None)

    async def go() -> list[dict[str, Any]]:
        store = _store(settings, store_url, existing=True)
        try:
            run_record, chosen = await read_cells(store, run_id, query)
            try:
                data_dir = find_data_dir(settings.experiments.data_dir)
            except ConfigError:
                data_dir = None
            turns, notes = item_turns(run_record, experiment_registry(), data_dir)
            # the report's judge gate, so a weak or unmeasured judge's scores say so in the export too
            report = build_report(run_record, await store.cells(run_record.id), experiment_registry())
            return cell_records(chosen, turns, notes, judge_flags(report))
        finally:
            await store.close()

    records = asyncio.run(go())
    if fmt == "parquet":
        data = cells_parquet(records)
        if out is None:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        else:
            with open_out(out, binary=True) as sink:
                sink.write(data)
            err_console.print(safe(f"cells: {out}"), soft_wrap=True)
        return
    text = write_cells(records, fmt)  # type: ignore[arg-type]
    if out is None:
        typer.echo(text, nl=False)
    else:
        with open_out(out) as sink:
            sink.write(text)
        err_console.print(safe(f"cells: {out}"), soft_wrap=True)


@experiment_app.command("view")
def view(
    run_id: str | None = typer.Argument(
        None, metavar="RUN", help="A run id or unique prefix (default: the list of runs)."
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Loopback address to listen on."),
    port: int = typer.Option(8765, "--port", "-p", min=0, max=65535, help="Port (0 = any free one)."),
    store_url: str | None = StoreOpt,
    config: Path | None = ConfigOpt,
) -> None:
    """Browse a run's cells in a browser: filter by system, benchmark, category, status or score,
    and open one cell (its conversation, each judge's prompt and reply, scores, cost, timing and
    negotiation traces). Read-only, on loopback, until Ctrl-C; `psychoalign serve` shows the same
    pages to the lab's leads at /experiments."""
    import uvicorn

    from ..traces import open_store
    from ..web.apikeys import is_loopback
    from ..web.experiments import ExperimentSource, create_viewer_app
    from .serve import _bind

    if not is_loopback(host):
        raise InputError(
            f"experiment view serves loopback only, not {host}",
            hint="use --host 127.0.0.1, or `psychoalign serve` (leads log in) to share the pages",
        )
    settings = settings_from(config)
    url = store_url or settings.effective_store_url()

    async def find() -> str | None:
        store = _store(settings, url, existing=True)
        try:
            if run_id is None:
                return None
            found = await store.get_run(run_id)
            if found is None:
                raise InputError(f"no run '{run_id}' in the store", hint="see `psychoalign experiment status`")
            return found.id
        finally:
            await store.close()

    chosen = asyncio.run(find())
    sock = _bind(host, port)
    bound = int(sock.getsockname()[1])
    serve = settings.serve.model_copy(update={"host": host, "port": bound, "cors_origins": [], "public_url": None})
    source = ExperimentSource(
        _store(settings, url, existing=True), open_store(url), experiment_registry(), settings.experiments.data_dir
    )
    app = create_viewer_app(source, serve, run_id=chosen)
    shown = f"[{host}]" if ":" in host else host
    path = f"/experiments/{chosen}" if chosen else "/experiments"
    err_console.print(
        f"experiment viewer on http://{shown}:{bound}{path}  (Ctrl-C stops it)", highlight=False, soft_wrap=True
    )
    try:
        uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False)).run(sockets=[sock])
    finally:
        sock.close()
