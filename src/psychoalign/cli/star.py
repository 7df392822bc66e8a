"""`psychoalign star …`: policy, instruction generation and coverage."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
import yaml
from rich.table import Table

from ..errors import InputError
from ..star import Instruction, coverage, generate_instructions, load_parameters, load_policy
from .common import JsonOpt, emit_json, err_console, out_console, safe

__all__ = ["register"]

star_app = typer.Typer(help="STAR red teaming: policy, instructions, coverage.", no_args_is_help=True)
policy_app = typer.Typer(help="The content policy red teamers attack.", no_args_is_help=True)
instructions_app = typer.Typer(help="Procedurally generated red-teaming instructions.", no_args_is_help=True)
star_app.add_typer(policy_app, name="policy")
star_app.add_typer(instructions_app, name="instructions")

PolicyOpt = typer.Option(None, "--policy", help="Policy YAML (default: the built-in policy).")
ParamsOpt = typer.Option(None, "--parameters", help="Parameter-space YAML (default: built-in).")


@policy_app.command("show")
def policy_show(policy: Path | None = PolicyOpt, json_out: bool = JsonOpt) -> None:
    """Areas and rules, with the matching each rule needs."""
    pol = load_policy(policy)
    if json_out:
        emit_json({**pol.model_dump(mode="json"), "sha256": pol.sha256})
        return
    table = Table(title=f"Policy {pol.name} v{pol.version} ({pol.sha256[:12]})")
    for col in ("area", "rule", "matching", "targets group", "text"):
        table.add_column(col, overflow="fold")
    for area in pol.areas:
        for rule in area.rules:
            table.add_row(area.id, rule.id, rule.matching, "yes" if rule.targets_group else "", safe(rule.text))
    out_console.print(table)


@policy_app.command("validate")
def policy_validate(path: Path = typer.Argument(..., help="Policy or parameter-space YAML.")) -> None:
    """Check a policy (or parameter-space) file; errors name the file and line."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError:
        data = {}
    if isinstance(data, dict) and "parameters" in data and "areas" not in data:
        space = load_parameters(path)
        groups = len(space.target_group.groups()) if space.target_group else 0
        out_console.print(
            f"[green]ok[/green] parameter space: {len(space.parameters)} parameters, {groups} target groups"
        )
        return
    pol = load_policy(path)
    out_console.print(
        f"[green]ok[/green] {pol.name} v{pol.version}: {len(pol.rules())} rules, sha256 {pol.sha256[:12]}"
    )


@instructions_app.command("generate")
def instructions_generate(
    n: int = typer.Option(..., "--n", help="How many instructions."),
    seed: int = typer.Option(0, "--seed", help="Same seed, same instructions."),
    out: Path | None = typer.Option(None, "--out", "-o", help="JSONL file (default stdout)."),
    rules: list[str] | None = typer.Option(None, "--rule", help="Only these rules (repeatable)."),
    balance: str = typer.Option("hierarchical", "--balance", help="hierarchical (rules, then cells) or flat."),
    policy: Path | None = PolicyOpt,
    parameters: Path | None = ParamsOpt,
) -> None:
    """Generate N instructions, evenly covering the parameter cells; one JSON object per line."""
    if balance not in ("hierarchical", "flat"):
        raise InputError(f"unknown balance '{balance}'", hint="hierarchical or flat")
    items = generate_instructions(
        load_policy(policy),
        load_parameters(parameters),
        n,
        seed=seed,
        rules=rules,
        balance=balance,  # type: ignore[arg-type]
    )
    sink = out.open("w", encoding="utf-8") if out else sys.stdout
    try:
        for item in items:
            sink.write(json.dumps(item.record(), ensure_ascii=False) + "\n")
    finally:
        if out:
            sink.close()
    if out:
        err_console.print(f"wrote {len(items)} instructions to {out}")


def _read_instructions(path: Path) -> list[Instruction]:
    items = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror}") from None
    for lineno, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            params = {k: row[k] for k in row if k not in _RESERVED and not k.startswith("target_") and k != "topic"}
            group = {
                k.removeprefix("target_"): v for k, v in row.items() if k.startswith("target_") and k != "target_group"
            }
            items.append(
                Instruction(
                    id=row["id"],
                    index=lineno - 1,
                    seed=row["seed"],
                    policy=row["policy"],
                    area=row["area"],
                    rule=row["rule"],
                    params=params,
                    sampled={"topic": row.get("topic")},
                    target_group=group or None,
                    cell=row["cell"],
                    text=row["text"],
                )
            )
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise InputError(f"{path}:{lineno}: not an instruction record ({type(exc).__name__}: {exc})") from None
    return items


_RESERVED = {"id", "seed", "policy", "area", "rule", "cell", "text"}


def _read_done(path: Path) -> list[str]:
    ids = []
    for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            ids.append(str(row["instruction_id"] if isinstance(row, dict) else row))
        except (json.JSONDecodeError, KeyError) as exc:
            raise InputError(f"{path}:{lineno}: expected {{'instruction_id': …}} per line ({exc})") from None
    return ids


@star_app.command("coverage")
def star_coverage(
    plan: Path = typer.Option(..., "--plan", help="Instructions JSONL (from `star instructions generate`)."),
    done: Path | None = typer.Option(None, "--done", help="JSONL with an instruction_id per completed dialogue."),
    policy: Path | None = PolicyOpt,
    parameters: Path | None = ParamsOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Planned vs done per cell, and how even the plan is (max/min per cell, overall and per rule)."""
    pol, space = load_policy(policy), load_parameters(parameters)
    report = coverage(pol, space, _read_instructions(plan), _read_done(done) if done else ())
    if json_out:
        emit_json(report.model_dump(mode="json"))
        return
    table = Table(title=f"Coverage: {report.planned} planned, {report.done} done, {report.cells} cells")
    for col in ("rule", "cells", "min planned", "max planned", "done"):
        table.add_column(col)
    for rule, (lo, hi) in report.per_rule.items():
        rows = [r for r in report.rows if r.rule == rule]
        table.add_row(rule, str(len(rows)), str(lo), str(hi), str(sum(r.done for r in rows)))
    out_console.print(table)
    if report.uncovered_cells:
        out_console.print(f"[yellow]{report.uncovered_cells} cells have no planned instruction[/yellow]")


def register(app: typer.Typer) -> None:
    app.add_typer(star_app, name="star")
