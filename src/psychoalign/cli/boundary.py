"""The ``boundary`` and ``h1`` experiments as commands: ``psychoalign experiment run boundary …`` and
``psychoalign experiment run h1 --ratings FILE …`` (added to the registry by :func:`add_experiments`).

Each command builds the negotiators from the configuration (file + env + flags, the usual
precedence), stores every trace (``--no-store`` to skip), prints a summary and writes
``OUT/report.html`` and ``OUT/results.json``. The experiments themselves (negotiating, statistics,
the report files) are imported inside the commands: this module holds the options and the output.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from ..a2a import remote_transport
from ..config import Settings
from ..errors import InputError
from ..negotiation import NegotiationParams, Negotiator

# The option defaults name the tension definitions; this module is loaded by `experiment run`, never by --help.
from ..traces.tension import DEFAULT_DEFINITION, TensionDefinition
from .common import (
    ConcurrencyOpt,
    FrameworkOpt,
    NoStoreOpt,
    ProposalsOpt,
    RoundsOpt,
    TraceStoreOpt,
    err_console,
    out_console,
    print_wide,
    settings_from,
)

if TYPE_CHECKING:
    from ..experiments.harness.registry import Registry
    from ..experiments.studies.boundary.checkpoint import Checkpoint
    from ..experiments.studies.boundary.negotiate import ItemOutcome
    from ..traces import TraceStore

#: Sampling temperature for retest runs when the configuration samples greedily (temperature 0).
RETEST_TEMPERATURE = 0.7
TensionOpt = typer.Option(DEFAULT_DEFINITION.value, "--tension", help="Request-level tension definition.")


def add_experiments(registry: Registry) -> None:
    """The named experiments of this module (``psychoalign experiment run NAME``)."""
    registry.add_command("boundary", boundary_command, "Tension by domain and category, KW test, retest ICC.")
    registry.add_command("h1", h1_command, "H1: tension vs human inter-annotator disagreement on a ratings file.")


def _params(settings: Settings, rounds: int | None, proposals: int | None) -> NegotiationParams:
    overrides: dict[str, Any] = {}
    if rounds is not None:
        overrides["k"] = rounds
    if proposals is not None:
        overrides["n_proposals"] = proposals
    # The studies measure the tension of the paper's protocol: the DRIVE always proposes, so a
    # request that alone would decide still gets a tension (docs/negotiation.md).
    return NegotiationParams.model_validate({**settings.negotiation, **overrides, "decide_on_request": False})


def _out(out: Path | None, name: str) -> Path:
    return out or Path("experiments") / f"{name}-{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}"


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
    from ..traces import open_store

    store = None if no_store else open_store(store_url or settings.effective_store_url())
    try:
        return await body(store)
    finally:
        if store is not None:
            await store.close()


def _checkpoint(target: Path, *parts: Any) -> Checkpoint:
    """``target/outcomes.jsonl``, keyed by everything the negotiations depend on (``parts``)."""
    from ..experiments.studies.boundary.checkpoint import Checkpoint, fingerprint

    return Checkpoint(target / "outcomes.jsonl", fingerprint(*parts))


def _resuming(done: int, checkpoint: Checkpoint) -> None:
    if done:
        err_console.print(f"resuming: {done} negotiations already done in {checkpoint.path}")


def _recorder(checkpoint: Checkpoint, tick: Callable[[], None]) -> Callable[[ItemOutcome], None]:
    """What runs as each negotiation finishes: its outcome is appended, the progress bar advances."""

    def finished(outcome: ItemOutcome) -> None:
        checkpoint.append(outcome)
        tick()

    return finished


def _model_specs(settings: Settings) -> dict[str, Any]:
    return {
        role: settings.model_spec(role).model_dump(mode="json", exclude={"api_key"})
        for role in ("drive", "evaluator", "mediator")
    }


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
    store_url: str | None = TraceStoreOpt,
    no_store: bool = typer.Option(
        False, "--no-store", help="Do not store traces (the report then has no trace to show)."
    ),
    n_boot: int = typer.Option(2000, "--boot", min=100, help="Bootstrap resamples for CIs."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Report folder (default: experiments/boundary-<time>); rerun with it to resume."
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="Config file (TOML or YAML)."),
) -> None:
    """Profile alignment boundaries: negotiate a labelled corpus, report T by domain and category,
    the Kruskal–Wallis test across domains and, with --repeats 2+, test–retest ICC."""
    from ..experiments.studies.boundary.corpus import load_corpus
    from ..experiments.studies.boundary.report import render_boundary_html, write_report
    from ..experiments.studies.boundary.retest import SAMPLED_ROLES, sampled_settings
    from ..experiments.studies.boundary.run import run_boundary

    settings = settings_from(config)
    definition = _definition(tension)
    data = load_corpus(corpus).subset(n)
    params = _params(settings, rounds, proposals)
    if repeats >= 2:
        configured = max(settings.model_spec(role).temperature for role in SAMPLED_ROLES)
        temp = temperature if temperature is not None else (None if configured > 0 else RETEST_TEMPERATURE)
        runs = sampled_settings(settings, repeats=repeats, temperature=temp, base_seed=seed)
        used = max(runs[0].model_spec(role).temperature for role in SAMPLED_ROLES)
        err_console.print(f"retest: {repeats} runs at temperature {used:g}, seeds {seed}..{seed + repeats - 1}")
    else:
        runs = [settings]
    target = _out(out, "boundary")
    checkpoint = _checkpoint(
        target,
        [i.model_dump() for i in data.items],
        params.model_dump(mode="json"),
        [_model_specs(s) for s in runs],
        framework,
    )
    done = checkpoint.load()
    _resuming(len(done), checkpoint)
    total = len(data.items) * len(runs) - len(done)

    async def body(store: TraceStore | None) -> dict[str, Any]:
        negotiators = [Negotiator(s, params=params, store=store, transport=remote_transport(s)) for s in runs]
        progress, tick = _progress(total, "negotiating")
        try:
            with progress:
                return await run_boundary(
                    data,
                    negotiators,
                    framework=framework,
                    concurrency=concurrency,
                    definition=definition,
                    n_boot=n_boot,
                    on_done=_recorder(checkpoint, tick),
                    done=done,
                )
        finally:
            for negotiator in negotiators:
                await negotiator.aclose()

    report = asyncio.run(_with_store(settings, store_url, no_store, body))
    json_path, html_path = write_report(target, report, render_boundary_html(report))
    _print_boundary(report)
    out_console.print(f"report: {html_path}\nresults: {json_path}")


def _fmt(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def _print_boundary(report: dict[str, Any]) -> None:
    table = Table(title=f"Mean tension by domain ({report['definition']})")
    for col in ("domain", "mean T", "95% CI", "n", "failed"):
        table.add_column(col, justify="left" if col == "domain" else "right")
    for dom in report["domain_order"]:
        d = report["per_domain"][dom]
        table.add_row(
            dom, _fmt(d["mean"]), f"[{_fmt(d['ci_low'])}, {_fmt(d['ci_high'])}]", str(d["n"]), str(d["failed"])
        )
    print_wide(table, min_width=80)
    kw = report["kruskal_domains"]
    if kw.get("computable"):
        out_console.print(
            f"Kruskal–Wallis across domains: H = {kw['h']:.3f}, df = {kw['df']}, p = {kw['p']:.3g}, "
            f"ε² = {kw['epsilon2']:.3f}"
        )
    retest = report.get("retest")
    if retest is not None:
        overall = retest["definitions"][report["definition"]]["overall"]
        if overall.get("computable"):
            ci = overall["icc2_ci"] or [None, None]
            out_console.print(f"Test–retest ICC(2,1) = {_fmt(overall['icc2'])} [{_fmt(ci[0])}, {_fmt(ci[1])}]")
        if retest.get("warning"):
            err_console.print(f"[yellow]warning:[/] {retest['warning']}")
    counts = report["counts"]
    out_console.print(f"{counts['completed']} of {counts['items']} requests negotiated, {counts['failed']} failed")


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
    store_url: str | None = TraceStoreOpt,
    no_store: bool = NoStoreOpt,
    n_boot: int = typer.Option(2000, "--boot", min=100, help="Bootstrap resamples."),
    n_perm: int = typer.Option(5000, "--permutations", min=100, help="Permutations for the p-value."),
    out: Path | None = typer.Option(
        None, "--out", "-o", help="Report folder (default: experiments/h1-<time>); rerun with it to resume."
    ),
    config: Path | None = typer.Option(None, "--config", "-c", help="Config file (TOML or YAML)."),
) -> None:
    """Test H1: negotiate each rated item and correlate its tension with human disagreement."""
    from ..experiments.studies.boundary.h1 import load_h1_dataset, run_h1
    from ..experiments.studies.boundary.report import render_h1_html, write_report

    settings = settings_from(config)
    definition = _definition(tension)
    columns = None
    if mapping is not None:
        from ..star.analysis.data import load_mapping, mapping_from

        columns = mapping_from(load_mapping(mapping))
    dataset = load_h1_dataset(ratings, fmt, limit=n, seed=seed, mapping=columns)
    params = _params(settings, rounds, proposals)

    target = _out(out, "h1")
    checkpoint = _checkpoint(
        target,
        [(it.id, it.request, it.context) for it in dataset.items],
        params.model_dump(mode="json"),
        _model_specs(settings),
        framework,
    )
    done = {item_id: o for (_, item_id), o in checkpoint.load().items()}
    _resuming(len(done), checkpoint)

    async def body(store: TraceStore | None) -> dict[str, Any]:
        negotiator = Negotiator(settings, params=params, store=store, transport=remote_transport(settings))
        progress, tick = _progress(len(dataset.items) - len(done), "negotiating")
        try:
            with progress:
                return await run_h1(
                    dataset,
                    negotiator,
                    framework=framework,
                    concurrency=concurrency,
                    definition=definition,
                    n_boot=n_boot,
                    n_perm=n_perm,
                    seed=seed,
                    on_done=_recorder(checkpoint, tick),
                    done=done,
                )
        finally:
            await negotiator.aclose()

    report = asyncio.run(_with_store(settings, store_url, no_store, body))
    json_path, html_path = write_report(target, report, render_h1_html(report))
    s = report["spearman"]
    out_console.print(
        f"H1 on {report['dataset']['name']}: rho(T, 1 - alpha_item) = {_fmt(s['rho'])} "
        f"[{_fmt(s['ci_low'])}, {_fmt(s['ci_high'])}], permutation p = {_fmt(s['p_permutation'])}, n = {s['n']}"
    )
    auc = report["reverse_check"]["auc_t_for_majority_unsafe"]
    if auc.get("computable"):
        out_console.print(f"Reverse check: AUC of T for the majority-unsafe label = {_fmt(auc['auc'])}")
    out_console.print(f"report: {html_path}\nresults: {json_path}")
