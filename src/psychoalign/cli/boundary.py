"""The ``boundary`` and ``h1`` experiments as commands: ``psychoalign experiment run boundary …`` and
``psychoalign experiment run h1 --ratings FILE …`` (added to the registry by :func:`add_experiments`).

Each command runs the study as cells of the experiment result store (one ``psychoalign`` system
per repeat, models from the configuration: file + env + flags, the usual precedence), so a rerun
resumes and ``--shard`` splits the work; it stores every trace (``--no-store`` to skip), prints a
summary and writes ``OUT/report.html`` and ``OUT/results.json``. The experiments themselves (negotiating, statistics,
the report files) are imported inside the commands: this module holds the options and the output.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from ..config import Settings
from ..errors import InputError, redact_url
from ..negotiation import PAPER_PROTOCOL, NegotiationParams

# The option defaults name the tension definitions; this module is loaded by `experiment run`, never by --help.
from ..traces.tension import DEFAULT_DEFINITION, TensionDefinition
from .common import (
    ConcurrencyOpt,
    FrameworkOpt,
    NoStoreOpt,
    ProposalsOpt,
    RoundsOpt,
    check_out_folder,
    err_console,
    out_console,
    out_folder,
    print_wide,
    safe,
    settings_from,
)

if TYPE_CHECKING:
    from ..experiments.harness.registry import Registry
    from ..experiments.harness.runner import RunSummary
    from ..experiments.harness.spec import ExperimentSpec
    from ..experiments.harness.store import CellResult
    from ..models import ChatModel
    from ..traces import TraceStore

StudyStoreOpt = typer.Option(
    None, "--store", help="Database of the study's cells and traces (default: the configured store)."
)
ShardOpt = typer.Option(None, "--shard", help="Run only shard i of n (i/n), sharing one store.")
NewRunOpt = typer.Option(
    False, "--new-run", help="Start (or resume) a run beside the first one, keyed by the models and data it uses."
)
#: Sampling temperature for retest runs when the configuration samples greedily (temperature 0).
RETEST_TEMPERATURE = 0.7
TensionOpt = typer.Option(DEFAULT_DEFINITION.value, "--tension", help="Request-level tension definition.")


def add_experiments(registry: Registry) -> None:
    """The named experiments of this module (``psychoalign experiment run NAME``)."""
    registry.add_command("boundary", boundary_command, "Tension by domain and category, KW test, retest ICC.")
    registry.add_command("h1", h1_command, "H1: tension vs human inter-annotator disagreement on a ratings file.")


def _overrides(rounds: int | None, proposals: int | None) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if rounds is not None:
        overrides["k"] = rounds
    if proposals is not None:
        overrides["n_proposals"] = proposals
    return overrides


def _params(settings: Settings, rounds: int | None, proposals: int | None) -> NegotiationParams:
    # The studies measure the tension of the paper's protocol: the DRIVE always proposes, so a
    # request that alone would decide still gets a tension, and only the EVALUATOR's
    # classification selects the defense: the negotiation's own crisis screen (a check beside an
    # LLM EVALUATOR, outside the paper) is off (docs/negotiation.md).
    overrides = _overrides(rounds, proposals)
    return NegotiationParams.model_validate({**settings.negotiation, **overrides, **PAPER_PROTOCOL})


def _role_models(settings: Settings) -> dict[str, ChatModel] | None:
    """Ready DRIVE / EVALUATOR / MEDIATOR models for the study's systems, or None: built from the
    configuration (per repeat, with its seed). Tests put scripted agents here."""
    return None


class _Bar:
    """The harness run's progress as a transient bar on a terminal (nothing when piped)."""

    def __init__(self) -> None:
        self._progress: Progress | None = None
        self._tick: Callable[[], None] = lambda: None

    def note(self, message: str) -> None:
        err_console.print(safe(message))

    def start(self, name: str, total: int) -> None:
        self._progress, self._tick = _progress(total, "negotiating")
        self._progress.start()

    def advance(self, failed: int) -> None:
        self._tick()

    def stop(self) -> None:
        if self._progress is not None:
            self._progress.stop()


async def _run_study(
    spec: ExperimentSpec,
    settings: Settings,
    store_url: str | None,
    no_store: bool,
    shard: str | None,
    new_run: bool = False,
    resume: str | None = None,
) -> tuple[RunSummary, list[CellResult]]:
    """Run (or resume) the study's cells in the result store at ``store_url`` (default: the
    configured store), traces beside them unless ``no_store``; the run's cells afterwards. SIGTERM
    stops it as Ctrl-C does; an interrupted run records ``resume``, the command that resumes it."""
    from ..experiments.harness.runner import run_experiment
    from ..experiments.harness.store import open_result_store
    from ..traces import open_store
    from .experiment import _cancel_on_sigterm, _parse_shard

    _cancel_on_sigterm()

    url = store_url or settings.effective_store_url()
    results = open_result_store(url)
    traces = None if no_store else open_store(url)
    try:
        summary = await run_experiment(
            spec,
            settings,
            store=results,
            trace_store=traces,
            models=_role_models(settings),
            shard=_parse_shard(shard),
            new_run=new_run,
            progress=_Bar(),
            resume_command=resume,
        )
        return summary, await results.cells(summary.run_id)
    finally:
        await results.close()
        if traces is not None:
            await traces.close()


def _study(
    spec: ExperimentSpec,
    settings: Settings,
    store_url: str | None,
    no_store: bool,
    shard: str | None,
    new_run: bool,
    resume: str,
) -> tuple[RunSummary, list[CellResult]]:
    """:func:`_run_study`; interrupted (Ctrl-C, SIGTERM), the line every interrupted run prints,
    with ``resume``, and exit status 130 or 143."""
    from .experiment import _interrupted

    try:
        return asyncio.run(_run_study(spec, settings, store_url, no_store, shard, new_run, resume))
    except (KeyboardInterrupt, asyncio.CancelledError) as stop:
        _interrupted(stop, resume)


def _resume_command(name: str, flags: Sequence[tuple[str, Any, Any]]) -> str:
    """The `experiment run NAME` command that resumes this run: each of ``flags`` (flag, value,
    default) whose value is not its default, files by their absolute path so the command works
    from any folder, a store URL without its password."""
    import shlex

    words = ["psychoalign", "experiment", "run", name]
    for flag, value, default in flags:
        if value is None or value is False or value == default:
            continue
        if value is True:
            words.append(flag)
            continue
        if isinstance(value, Path) or (flag in ("--corpus", "--framework") and Path(value).is_file()):
            value = Path(value).resolve()
        words += [flag, redact_url(str(value)) if flag == "--store" else str(value)]
    return shlex.join(words)


def _study_flags(
    tension: Any,
    framework: Any,
    rounds: Any,
    proposals: Any,
    concurrency: Any,
    store_url: Any,
    no_store: bool,
    shard: Any,
    new_run: bool,
    n_boot: int,
) -> list[tuple[str, Any, Any]]:
    """The resume flags the boundary and H1 studies share (:func:`_resume_command`): the
    negotiation, the store and the bootstrap."""
    return [
        ("--tension", tension, DEFAULT_DEFINITION.value),
        ("--framework", framework, FrameworkOpt.default),
        ("--rounds", rounds, None),
        ("--proposals", proposals, None),
        ("--concurrency", concurrency, ConcurrencyOpt.default),
        ("--store", store_url, None),
        ("--no-store", no_store, False),
        ("--shard", shard, None),
        ("--new-run", new_run, False),
        ("--boot", n_boot, 2000),
    ]


def _labels(settings: Settings) -> dict[str, str]:
    """Each role's model as a trace names it (``local:smollm2-135m-instruct``, not ``local:default``)."""
    from ..models import resolved_label

    given = _role_models(settings) or {}
    return {
        role: given[role].label if role in given else resolved_label(settings.model_spec(role))
        for role in ("drive", "evaluator", "mediator")
    }


def _ran(summary: RunSummary) -> None:
    """What this invocation did: a rerun of a finished study negotiates nothing."""
    err_console.print(
        f"run {summary.run_id}: {summary.ran} negotiations ran ({summary.failed} failed), "
        f"{summary.skipped_done} already done, {summary.busy_elsewhere} held by other runners",
        soft_wrap=True,
    )


def _out(out: Path | None, name: str) -> Path:
    return out or Path("experiments") / f"{name}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


def write_report_folder(out: Path, report: dict[str, Any], html_text: str) -> tuple[Path, Path]:
    """``out/results.json`` and ``out/report.html``, both or neither (:func:`.common.out_folder`)."""
    from ..experiments.studies.boundary.report import write_report

    with out_folder(out) as partial:
        json_path, html_path = write_report(partial, report, html_text)
    return out / json_path.name, out / html_path.name


def _progress(total: int, label: str) -> tuple[Progress, Callable[[], None]]:
    """A transient bar on a terminal (nothing when piped) and the call that advances it."""
    progress = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
        disable=not err_console.is_terminal,
    )
    task = progress.add_task(label, total=total)
    return progress, lambda: progress.advance(task)


def _definition(value: str) -> TensionDefinition:
    try:
        return TensionDefinition(value)
    except ValueError:
        choices = ", ".join(d.value for d in TensionDefinition)
        raise InputError(f"unknown tension definition '{value}'", hint=f"one of {choices}") from None


async def _with_store(
    settings: Settings, store_url: str | None, no_store: bool, body: Callable[[TraceStore | None], Any]
) -> Any:
    """Run ``body`` with the trace store (None with ``no_store``), closed afterwards."""
    from ..traces import open_store

    store = None if no_store else open_store(store_url or settings.effective_store_url())
    try:
        return await body(store)
    finally:
        if store is not None:
            await store.close()


def boundary_command(
    corpus: str = typer.Option("boundary", "--corpus", help="Corpus file (YAML/JSON/JSONL/CSV) or built-in name."),
    n: int | None = typer.Option(None, "--n", min=1, help="Requests per domain (default: all)."),
    repeats: int = typer.Option(2, "--repeats", min=1, max=20, help="Runs of the corpus; 2+ adds test–retest ICC."),
    temperature: float | None = typer.Option(
        None,
        "--temperature",
        min=0.0,
        max=2.0,
        help=f"Sampling temperature of retest runs (default {RETEST_TEMPERATURE}).",
    ),
    seed: int = typer.Option(1, "--seed", help="Seed of the first run; run r uses seed + r."),
    tension: str = TensionOpt,
    framework: str = FrameworkOpt,
    rounds: int | None = RoundsOpt,
    proposals: int | None = ProposalsOpt,
    concurrency: int = ConcurrencyOpt,
    store_url: str | None = StudyStoreOpt,
    no_store: bool = typer.Option(
        False, "--no-store", help="Do not store traces (the report then has no trace to show)."
    ),
    shard: str | None = ShardOpt,
    new_run: bool = NewRunOpt,
    n_boot: int = typer.Option(2000, "--boot", min=100, help="Bootstrap resamples for CIs."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Report folder (default: experiments/boundary-<time>)."),
    config: Path | None = typer.Option(None, "--config", "-c", help="Config file (TOML or YAML)."),
) -> None:
    """Profile alignment boundaries: negotiate a labelled corpus, report T by domain and category,
    the Kruskal–Wallis test across domains and, with --repeats 2+, test–retest ICC. Each
    negotiation is a cell of the result store: rerun the command to resume, --shard i/n to share
    the work between runners."""
    from ..experiments.studies.boundary.cells import outcomes_from_cells, study_spec
    from ..experiments.studies.boundary.corpus import load_corpus
    from ..experiments.studies.boundary.report import render_boundary_html
    from ..experiments.studies.boundary.retest import SAMPLED_ROLES, sampled_settings
    from ..experiments.studies.boundary.run import boundary_report

    settings = settings_from(config)
    if out is not None:  # before the run, not after it
        check_out_folder(out)
    definition = _definition(tension)
    data = load_corpus(corpus).subset(n)
    params = _params(settings, rounds, proposals)
    repeat_roles: list[dict[str, dict[str, Any]]] = [{}]
    if repeats >= 2:
        configured = max(settings.model_spec(role).temperature for role in SAMPLED_ROLES)
        temp = temperature if temperature is not None else (None if configured > 0 else RETEST_TEMPERATURE)
        runs = sampled_settings(settings, repeats=repeats, temperature=temp, base_seed=seed)  # checks the sampling
        used = max(runs[0].model_spec(role).temperature for role in SAMPLED_ROLES)
        err_console.print(f"retest: {repeats} runs at temperature {used:g}, seeds {seed}..{seed + repeats - 1}")
        sampled = {"temperature": temp} if temp is not None else {}
        repeat_roles = [
            {role: {"seed": seed + r, **sampled} for role in ("drive", "evaluator", "mediator")} for r in range(repeats)
        ]
    spec = study_spec(
        "boundary",
        {"name": "boundary", "options": {"corpus": corpus, "per_domain": n}},
        repeats=repeat_roles,
        negotiation=_overrides(rounds, proposals),
        framework=framework,
        concurrency=concurrency,
    )
    resume = _resume_command(
        "boundary",
        [
            ("--corpus", corpus, "boundary"),
            ("--n", n, None),
            ("--repeats", repeats, 2),
            ("--temperature", temperature, None),
            ("--seed", seed, 1),
            *_study_flags(
                tension, framework, rounds, proposals, concurrency, store_url, no_store, shard, new_run, n_boot
            ),
            ("--out", out, None),
            ("--config", config, None),
        ],
    )
    summary, cells = _study(spec, settings, store_url, no_store, shard, new_run, resume)
    _ran(summary)
    report = boundary_report(data, outcomes_from_cells(spec, data.items, cells), definition=definition, n_boot=n_boot)
    report["run_id"] = summary.run_id
    report["models"] = _labels(settings)
    report["params"] = params.model_dump(mode="json")
    json_path, html_path = write_report_folder(_out(out, "boundary"), report, render_boundary_html(report))
    _print_boundary(report)
    out_console.print(safe(f"report: {html_path}\nresults: {json_path}"), soft_wrap=True)


def _fmt(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def _print_boundary(report: dict[str, Any]) -> None:
    from ..star.analysis.h1 import MIN_MEAN_CI
    from ..star.analysis.pvalues import p_text

    table = Table(title=f"Mean tension by domain ({report['definition']})")
    for col in ("domain", "mean T", "95% CI", "n", "failed"):
        table.add_column(col, justify="left" if col == "domain" else "right")
    for dom in report["domain_order"]:
        d = report["per_domain"][dom]
        if d["ci_low"] is None and d.get("sd") == 0:
            shown = "all equal"
        elif d["ci_low"] is None and d.get("note"):
            shown = f"none (n < {MIN_MEAN_CI})"
        else:
            shown = f"[{_fmt(d['ci_low'])}, {_fmt(d['ci_high'])}]"
        table.add_row(dom, _fmt(d["mean"]), shown, str(d["n"]), str(d["failed"]))
    print_wide(table, min_width=80)
    kw = report["kruskal_domains"]
    if kw.get("computable"):
        out_console.print(
            f"Kruskal–Wallis across domains: H = {kw['h']:.3f}, df = {kw['df']}, {p_text(kw['p'])}, "
            f"ε² = {kw['epsilon2']:.3f} (≈ {kw['epsilon2_null']:.3f} with no effect)"
            + (f"; p by {kw['p_method']}" if str(kw.get("p_method", "")).startswith("permutation") else ""),
            highlight=False,
        )
    else:
        out_console.print(safe(f"Kruskal–Wallis across domains: not computable: {kw.get('reason')}"), highlight=False)
    retest = report.get("retest")
    if retest is not None:
        overall = retest["definitions"][report["definition"]]["overall"]
        if overall.get("computable"):
            ci = overall["icc2_ci"] or [None, None]
            out_console.print(f"Test–retest ICC(2,1) = {_fmt(overall['icc2'])} [{_fmt(ci[0])}, {_fmt(ci[1])}]")
        if retest.get("warning"):
            err_console.print(Text.assemble(("warning:", "yellow"), " ", safe(retest["warning"])))
    counts = report["counts"]
    out_console.print(f"{counts['completed']} of {counts['items']} requests negotiated, {counts['failed']} failed")
    _print_models(report)


def _rho_reason(spearman: dict[str, Any]) -> str:
    if spearman.get("n", 0) < 3:
        return f"{spearman.get('n', 0)} items with a tension and a disagreement; at least 3 are needed"
    return "T or the disagreement is the same for every item"


def _print_models(report: dict[str, Any]) -> None:
    """The models every figure above came from: a table of tensions says nothing without them."""
    models = ", ".join(f"{role}={label}" for role, label in report.get("models", {}).items())
    out_console.print(safe(f"models: {models}"), highlight=False, soft_wrap=True)


def h1_command(
    ratings: Path = typer.Option(..., "--ratings", help="A multi-rater file the STAR analysis reads (DICES, …)."),
    fmt: str | None = typer.Option(None, "--format", help="Adapter name (default: detected from the content)."),
    mapping: Path | None = typer.Option(
        None, "--mapping", help="YAML column mapping for a one-row-per-rating file (as `star analyze --mapping`)."
    ),
    n: int | None = typer.Option(None, "--n", min=3, help="A seeded random sample of N items (default: all)."),
    seed: int = typer.Option(0, "--seed", help="Seed of the item sample and the resampling."),
    tension: str = TensionOpt,
    framework: str = FrameworkOpt,
    rounds: int | None = RoundsOpt,
    proposals: int | None = ProposalsOpt,
    concurrency: int = ConcurrencyOpt,
    store_url: str | None = StudyStoreOpt,
    no_store: bool = NoStoreOpt,
    shard: str | None = ShardOpt,
    new_run: bool = NewRunOpt,
    n_boot: int = typer.Option(2000, "--boot", min=100, help="Bootstrap resamples."),
    n_perm: int = typer.Option(5000, "--permutations", min=100, help="Permutations for the p-value."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Report folder (default: experiments/h1-<time>)."),
    config: Path | None = typer.Option(None, "--config", "-c", help="Config file (TOML or YAML)."),
) -> None:
    """Test H1: negotiate each rated item and correlate its tension with human disagreement. Each
    negotiation is a cell of the result store: rerun the command to resume, --shard i/n to share
    the work between runners."""
    from ..experiments.studies.boundary.cells import outcomes_from_cells, study_spec
    from ..experiments.studies.boundary.h1 import h1_corpus, h1_report, load_h1_dataset
    from ..experiments.studies.boundary.report import render_h1_html

    settings = settings_from(config)
    if out is not None:  # before the run, not after it
        check_out_folder(out)
    definition = _definition(tension)
    columns = None
    if mapping is not None:
        from ..star.analysis.data import load_mapping, mapping_from

        columns = mapping_from(load_mapping(mapping))
    try:
        dataset = load_h1_dataset(ratings, fmt, limit=n, seed=seed, mapping=columns)
    except InputError as exc:
        if columns is None and exc.message.endswith("needs its columns named"):
            # the shared reader's hint names star analyze's column flags, which h1 does not take
            raise InputError(
                exc.message,
                hint="pass --mapping FILE.yaml with item_col, rater_col, rating_col and text_col "
                "(the item text to negotiate); docs/star-analysis.md describes the keys",
            ) from None
        raise
    _params(settings, rounds, proposals)  # checked before anything runs
    options = {
        "ratings": str(ratings),
        "format": fmt,
        "mapping": str(mapping) if mapping else None,
        "n": n,
        "seed": seed,
    }
    spec = study_spec(
        "h1",
        {"name": "h1", "options": options},
        repeats=[{}],
        negotiation=_overrides(rounds, proposals),
        framework=framework,
        concurrency=concurrency,
    )
    resume = _resume_command(
        "h1",
        [
            ("--ratings", ratings, None),
            ("--format", fmt, None),
            ("--mapping", mapping, None),
            ("--n", n, None),
            ("--seed", seed, 0),
            *_study_flags(
                tension, framework, rounds, proposals, concurrency, store_url, no_store, shard, new_run, n_boot
            ),
            ("--permutations", n_perm, 5000),
            ("--out", out, None),
            ("--config", config, None),
        ],
    )
    summary, cells = _study(spec, settings, store_url, no_store, shard, new_run, resume)
    _ran(summary)
    [outcomes] = outcomes_from_cells(spec, h1_corpus(dataset), cells)
    report = h1_report(dataset, outcomes, definition=definition, n_boot=n_boot, n_perm=n_perm, seed=seed)
    report["run_id"] = summary.run_id
    report["models"] = _labels(settings)
    json_path, html_path = write_report_folder(_out(out, "h1"), report, render_h1_html(report))
    from ..star.analysis.pvalues import p_text

    s = report["spearman"]
    out_console.print(
        f"H1 on {report['dataset']['name']}: rho(T, 1 - alpha_item) = {_fmt(s['rho'])} "
        f"[{_fmt(s['ci_low'])}, {_fmt(s['ci_high'])}], {p_text(s['p_permutation'], 'permutation p', '–')}, n = {s['n']}"
    )
    if s["rho"] is None:  # say why, as the page does, instead of a bare dash
        out_console.print(safe(f"  rho not computable: {_rho_reason(s)}"), highlight=False)
    auc = report["reverse_check"]["auc_t_for_majority_unsafe"]
    if auc.get("computable"):
        out_console.print(f"Reverse check: AUC of T for the majority-unsafe label = {_fmt(auc['auc'])}")
    else:
        out_console.print(safe(f"Reverse check: AUC not computable: {auc.get('reason')}"), highlight=False)
    _print_models(report)
    out_console.print(safe(f"report: {html_path}\nresults: {json_path}"), soft_wrap=True)
