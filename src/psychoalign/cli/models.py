"""`psychoalign models …`: which model backends work here and what each role resolves to."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from ..models import BACKENDS, ModelSpec, backend_class, resolved_label
from .common import ConfigOpt, JsonOpt, emit_json, out_console, print_pairs, safe, settings_from

models_app = typer.Typer(help="Model backends: what is installed and usable here.", no_args_is_help=True)


@models_app.command("list")
def models_list(config: Path | None = ConfigOpt, json_out: bool = JsonOpt) -> None:
    """List backends, whether each is usable here, and the model each role resolves to."""
    settings = settings_from(config)
    specs = {r: settings.model_spec(r) for r in ("drive", "evaluator", "mediator", "chat")}
    rows = []
    for name in BACKENDS:
        cls = backend_class(name)
        # a backend a role is configured on is probed with that role's spec (its base_url, its key
        # variable): "set base_url" beside a configured base_url would contradict the roles below
        spec = next((s for s in specs.values() if s.backend == name), ModelSpec(backend=name))
        ok, detail = cls.availability(spec)
        rows.append({"backend": name, "usable": ok, "detail": detail, "default_model": cls.default_model})
    roles = {r: resolved_label(spec) for r, spec in specs.items()}
    if json_out:
        emit_json({"backends": rows, "roles": roles})
        return
    table = Table(title="Model backends")
    for col in ("backend", "usable", "default model", "detail"):
        table.add_column(col)
    for row in rows:
        table.add_row(
            str(row["backend"]),
            "[green]yes[/]" if row["usable"] else "[red]no[/]",
            safe(row["default_model"]),
            safe(str(row["detail"])),
        )
    out_console.print(table)
    print_pairs("Roles (effective configuration)", ("role", "model"), roles)
