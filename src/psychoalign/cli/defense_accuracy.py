"""The defense-accuracy experiment as a command: ``psychoalign experiment run defense-accuracy``
(added to the registry by :func:`add_experiments`). The experiment is in
:mod:`psychoalign.experiments.studies.defense_accuracy`; this module holds the options and the output."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table
from rich.text import Text

from ..a2a import remote_transport
from ..errors import ModelError
from ..negotiation import Negotiator
from .boundary import _out, _params, _progress, _with_store, write_report_folder
from .common import (
    ConcurrencyOpt,
    FrameworkOpt,
    NoStoreOpt,
    ProposalsOpt,
    RoundsOpt,
    TraceStoreOpt,
    check_out_folder,
    err_console,
    out_console,
    print_wide,
    safe,
    settings_from,
)

if TYPE_CHECKING:
    from ..experiments.harness.registry import Registry
    from ..traces import TraceStore


_SHORT = {
    "repression": "repr",
    "sublimation": "subl",
    "rationalization": "ratio",
    "displacement": "displ",
    "projection": "proj",
    "reaction_formation": "react",
}


def print_report(report: dict[str, Any]) -> None:
    table = Table(title=f"Defense mechanism: expected (rows) × selected (columns) — {report['mode']}")
    table.add_column("expected")
    for c in report["columns"]:
        table.add_column(_SHORT.get(c, c), justify="right")
    for e in report["labels"]:
        table.add_row(e, *(str(report["confusion"][e][c]) for c in report["columns"]))
    print_wide(table, min_width=110)
    acc = report["accuracy"]
    # with its interval (score() puts it in the report): on a few items (--n 6) 0/6 spans [0, 0.39]
    ci = report.get("accuracy_ci")
    interval = f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""
    if acc is None:
        out_console.print(
            f"accuracy: not measured ({report.get('not_measured', 'no items')}); failed {report['failed']}",
            highlight=False,
        )
    else:
        out_console.print(
            f"accuracy {report['correct']}/{report['n']} = {acc:.3f}{interval}; "
            f"activation rate {report['activation_rate']:.3f}; failed {report['failed']}",
            highlight=False,
        )
    if acc is not None and report["failed"]:
        err_console.print(
            Text.assemble(
                ("warning:", "yellow"),
                f" {report['failed']} of {report['n']} negotiations failed and count as wrong answers: "
                "the accuracy above is a lower bound; re-run once the models answer",
            ),
            highlight=False,
        )
    if report.get("models"):  # the oracle mode has none: the rule table alone
        models = ", ".join(f"{role}={label}" for role, label in report["models"].items())
        out_console.print(safe(f"models: {models}; framework {report.get('framework', '-')}"), highlight=False)


def add_experiments(registry: Registry) -> None:
    """The named experiment of this module (``psychoalign experiment run defense-accuracy``)."""
    registry.add_command(
        "defense-accuracy",
        defense_accuracy_command,
        "Defense-mechanism accuracy: confusion matrix and activation rate.",
    )


def defense_accuracy_command(
    items_source: str = typer.Option("defense_accuracy", "--items", help="Item set (YAML) or built-in name."),
    oracle: bool = typer.Option(
        False, "--oracle", help="Apply the selection rules to the items' given classifications (no model)."
    ),
    n: int | None = typer.Option(None, "--n", min=1, help="First N items only (default: all)."),
    framework: str = FrameworkOpt,
    rounds: int | None = RoundsOpt,
    proposals: int | None = ProposalsOpt,
    concurrency: int = ConcurrencyOpt,
    store_url: str | None = TraceStoreOpt,
    no_store: bool = NoStoreOpt,
    out: Path | None = typer.Option(None, "--out", "-o", help="Report directory (default: experiments/NAME-TIME)."),
    config: Path | None = typer.Option(None, "--config", "-c", help="Config file (TOML or YAML)."),
) -> None:
    """Defense-mechanism accuracy on a labelled item set (paper Experiment 3)."""
    from ..experiments.studies.defense_accuracy import load_items, negotiate_items, render_html, rule_table_label, score
    from ..frameworks import load_framework

    items = load_items(items_source)[:n]
    target = _out(out, "defense-accuracy")
    check_out_folder(target)  # before the negotiations, not after them
    fw = load_framework(framework)
    if oracle:
        report = score(items, [rule_table_label(it, fw) for it in items])
        report["mode"] = "oracle (given classifications, rule table only)"
    else:
        settings = settings_from(config)
        # The study measures the paper's protocol (the DRIVE always proposes, the EVALUATOR's
        # classification selects the defense): _params never decides a request before drafting.
        params = _params(settings, rounds, proposals)

        errors: list[str] = []

        async def body(store: TraceStore | None) -> dict[str, Any]:
            negotiator = Negotiator(settings, params=params, store=store, transport=remote_transport(settings))
            progress, tick = _progress(len(items), "negotiating")
            try:
                with progress:
                    predicted, trace_ids = await negotiate_items(
                        items,
                        negotiator,
                        framework=fw,
                        concurrency=concurrency,
                        on_done=tick,
                        errors=errors,
                    )
                result = score(items, predicted)
                result["models"] = negotiator.model_labels()
            finally:
                await negotiator.aclose()
            for row, tid in zip(result["items"], trace_ids, strict=True):
                row["trace_id"] = tid
            return result

        report = asyncio.run(_with_store(settings, store_url, no_store, body))
        report["mode"] = "negotiated (configured models)"
    report["framework"] = f"{fw.name}@{fw.version}"
    json_path, html_path = write_report_folder(target, report, render_html(report))
    print_report(report)
    out_console.print(safe(f"report: {html_path}\nresults: {json_path}"), soft_wrap=True)
    if report["accuracy"] is None and report["failed"]:
        first = errors[0] if not oracle and errors else "unknown error"
        raise ModelError(
            f"every one of the {report['n']} negotiations failed (first: {first}): no accuracy was measured",
            hint="check the configured models with `psychoalign models list`, then run again",
        )
