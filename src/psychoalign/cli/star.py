"""`psychoalign star …`: policy, instruction generation and coverage."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from ..errors import NO_REPLY_ERRORS, InputError
from ..star import Instruction, coverage, generate_instructions, load_parameters, load_policy
from ..star.files import PolicyError
from ..textio import nonblank_lines, read_text
from ..yamlio import MAX_YAML_CHARS, parse_yaml
from .common import (
    ConfigOpt,
    JsonOpt,
    check_out_folder,
    emit_json,
    err_console,
    no_reply_stop,
    open_out,
    out_console,
    out_folder,
    out_or_stdout,
    progress_bar,
    run_closing,
    safe,
    settings_from,
)

star_app = typer.Typer(
    help="STAR red teaming: policy, instructions, coverage, participants, assignment, campaigns, export, analysis.",
    no_args_is_help=True,
)
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
    table = Table(title=safe(f"Policy {pol.name} v{pol.version} ({pol.sha256[:12]})"))
    for col in ("area", "rule", "matching", "targets group", "parameters", "text"):
        table.add_column(col, overflow="fold")
    for area in pol.areas:
        for rule in area.rules:
            params = ", ".join(f"{p.name} ({len(p.values)})" for p in rule.parameters)
            table.add_row(
                safe(area.id),
                safe(rule.id),
                safe(rule.matching),
                "yes" if rule.targets_group else "",
                safe(params),
                safe(rule.text),
            )
    out_console.print(table)


@policy_app.command("validate")
def policy_validate(
    path: Path = typer.Argument(..., help="Policy or parameter-space YAML."), json_out: bool = JsonOpt
) -> None:
    """Check a policy (or parameter-space) file; errors name the file and line."""
    data = parse_yaml(read_text(path, what="policy file", max_bytes=MAX_YAML_CHARS), str(path), error=PolicyError)
    if isinstance(data, dict) and "parameters" in data and "areas" not in data:
        space = load_parameters(path)
        groups = len(space.target_group.groups()) if space.target_group else 0
        if json_out:
            emit_json({"ok": True, "kind": "parameters", "parameters": len(space.parameters), "target_groups": groups})
            return
        out_console.print(
            f"[green]ok[/green] parameter space: {len(space.parameters)} parameters, {groups} target groups"
        )
        return
    pol = load_policy(path)
    if json_out:
        emit_json(
            {
                "ok": True,
                "kind": "policy",
                "name": pol.name,
                "version": pol.version,
                "rules": len(pol.rules()),
                "sha256": pol.sha256,
            }
        )
        return
    line = f"{pol.name} v{pol.version}: {len(pol.rules())} rules, sha256 {pol.sha256[:12]}"
    out_console.print(Text.assemble(("ok", "green"), " ", safe(line)))


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
    with out_or_stdout(out) as sink:
        for item in items:
            sink.write(json.dumps(item.record(), ensure_ascii=False) + "\n")
    if out:
        err_console.print(safe(f"wrote {len(items)} instructions to {out}"), soft_wrap=True)


def _read_instructions(path: Path) -> list[Instruction]:
    items = []
    for lineno, line in nonblank_lines(path, what="instructions file"):
        try:
            items.append(Instruction.from_record(json.loads(line), lineno - 1))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
            raise InputError(
                f"{path}:{lineno}: not an instruction record ({type(exc).__name__}: {exc})",
                hint="give a plan as `psychoalign star instructions generate --out FILE` writes it (JSONL)",
            ) from None
    return items


def _read_done(path: Path) -> list[str]:
    ids = []
    for lineno, line in nonblank_lines(path, what="file"):
        try:
            row = json.loads(line)
            ids.append(str(row["instruction_id"] if isinstance(row, dict) else row))
        except (json.JSONDecodeError, KeyError) as exc:
            raise InputError(f"{path}:{lineno}: expected {{'instruction_id': …}} per line ({exc})") from None
    return ids


@star_app.command("coverage")
def star_coverage(
    plan: Path | None = typer.Option(None, "--plan", help="Instructions JSONL (from `star instructions generate`)."),
    done: Path | None = typer.Option(None, "--done", help="JSONL with an instruction_id per completed dialogue."),
    campaign: str | None = typer.Option(None, "--campaign", help="Read plan and progress from the store instead."),
    policy: Path | None = PolicyOpt,
    parameters: Path | None = ParamsOpt,
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Planned vs done per cell, and how even the plan is (max/min per cell, overall and per rule)."""
    pol, space = load_policy(policy), load_parameters(parameters)
    if campaign:
        records, done_ids = _on_store(config, lambda store: store.plan_and_done(campaign))
        items = [Instruction.from_record(row, i) for i, row in enumerate(records)]
    elif plan is not None:
        items = _read_instructions(plan)
        done_ids = _read_done(done) if done else []
    else:
        raise InputError("give --plan FILE or --campaign NAME")
    report = coverage(pol, space, items, done_ids)
    if json_out:
        emit_json(report.model_dump(mode="json"))
        return
    table = Table(title=f"Coverage: {report.planned} planned, {report.done} done, {report.cells} cells")
    for col in ("rule", "cells", "min planned", "max planned", "done"):
        table.add_column(col)
    for rule, (lo, hi) in report.per_rule.items():
        rows = [r for r in report.rows if r.rule == rule]
        table.add_row(safe(rule), str(len(rows)), str(lo), str(hi), str(sum(r.done for r in rows)))
    out_console.print(table)
    if report.uncovered_cells:
        out_console.print(f"[yellow]{report.uncovered_cells} cells have no planned instruction[/yellow]")


@star_app.command("assign")
def star_assign(
    kind: str = typer.Option("red_team", "--kind", help="red_team, annotate or arbitrate."),
    campaign: str | None = typer.Option(None, "--campaign"),
    relax: bool = typer.Option(False, "--relax", help="Let red teamers take tasks they do not match (logged)."),
    max_per_participant: int | None = typer.Option(
        None, "--max-per-participant", help="Most tasks of this kind one participant may hold or have done."
    ),
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Assign every open task of a kind at once, balanced; report the shortfall per requirement."""
    from ..star.model import TaskKind

    try:
        task_kind = TaskKind(kind)
    except ValueError:
        raise InputError(f"unknown task kind '{kind}'", hint="red_team, annotate or arbitrate") from None

    if max_per_participant is not None and max_per_participant < 1:
        raise InputError(
            f"--max-per-participant must be at least 1 (got {max_per_participant})",
            hint="leave it out for no limit",
        )

    async def assign(store: Any) -> dict[str, Any]:
        out: dict[str, Any] = await store.assign_all(
            task_kind, campaign=campaign, relax=relax, max_per_participant=max_per_participant
        )
        await _known_campaign(store, campaign, found=bool(out["open_before"]))
        return out

    result: dict[str, Any] = _on_store(config, assign)
    if json_out:
        emit_json(result)
        return
    out_console.print(safe(f"assigned {result['assigned']} of {result['open_before']} open {kind} tasks"))
    for item in result["shortfall"]:
        out_console.print(
            safe(f"shortfall: {item['open_tasks']} task(s) nobody can take ({item['reason']}): {item['requirement']}")
        )


# -- participants, campaigns, export -------------------------------------------------------------
participants_app = typer.Typer(
    help="The participant registry (voluntary, self-identified demographics).", no_args_is_help=True
)
campaign_app = typer.Typer(help="Unattended campaigns with LLM personas (hybrid red teaming).", no_args_is_help=True)
star_app.add_typer(participants_app, name="participants")
star_app.add_typer(campaign_app, name="campaign")


def _store(config: Path | None) -> Any:
    from ..star.store import SQLStarStore

    return SQLStarStore(settings_from(config).effective_store_url(), load_policy())


async def _known_campaign(store: Any, campaign: str | None, *, found: bool) -> None:
    """A --campaign that matched nothing is a typo (or another store) unless the store has it:
    say so instead of "assigned 0" or an empty export."""
    if campaign is not None and not found and not await store.has_campaign(campaign):
        from ..star.store.rules import no_campaign

        raise no_campaign(campaign)


def _on_store(config: Path | None, work: Callable[[Any], Awaitable[Any]]) -> Any:
    """Run ``work`` on the STAR store of ``config`` (opened and closed around it)."""
    return run_closing(lambda: _store(config), work)


@participants_app.command("add")
def participants_add(
    pid: str = typer.Option(..., "--id", help="Participant id (letters, digits, . _ -)."),
    race: list[str] | None = typer.Option(None, "--race", help="Repeatable; 'prefer not to say' allowed."),
    gender: list[str] | None = typer.Option(None, "--gender"),
    demographic: list[str] | None = typer.Option(None, "--demographic", help="Other dimensions as dim=label."),
    expertise: list[str] | None = typer.Option(None, "--expertise", help="medical, fact_checking, legal, financial."),
    role: list[str] | None = typer.Option(None, "--role", help="red_teamer, annotator, arbitrator (default all)."),
    simulated: bool = typer.Option(False, "--simulated", help="An LLM persona, not a person."),
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Register one participant."""
    demographics: dict[str, list[str]] = {}
    if race:
        demographics["race"] = list(race)
    if gender:
        demographics["gender"] = list(gender)
    for item in demographic or []:
        dim, sep, label = item.partition("=")
        if not sep or not dim.strip() or not label.strip():
            raise InputError(f"--demographic '{item}' is not dim=label")
        demographics.setdefault(dim.strip(), []).append(label.strip())
    body: dict[str, Any] = {
        "id": pid,
        "demographics": demographics,
        "expertise": list(expertise or []),
        "simulated": simulated,
    }
    if role:
        body["roles"] = list(role)
    person = _participant(body, f"participant {pid}")
    _on_store(config, lambda store: store.add_participants([person]))
    if json_out:
        emit_json({"added": [pid]})
    else:
        out_console.print(safe(f"added participant {pid}"))


def _participant(body: dict[str, Any], where: str) -> Any:
    from pydantic import ValidationError

    from ..star.model import Participant

    try:
        return Participant.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        raise InputError(
            f"{where}: {field}: {message}", hint=f"fix {field} (docs/star.md lists a participant's fields)"
        ) from None


@participants_app.command("import")
def participants_import(
    path: Path = typer.Argument(
        ..., help="JSONL, one participant object per line, or a JSON array (what `participants list --json` prints)."
    ),
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Register many participants at once (all or nothing)."""
    shape = "write one participant object per line (JSONL), or a JSON array as `participants list --json` prints"
    text = read_text(path, what="participants file")
    if text.lstrip().startswith("["):  # the whole file is one JSON array
        try:
            array = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}", hint=shape) from None
        entries = [(f"{path}: item {i}", body) for i, body in enumerate(array, start=1)]
    else:
        entries = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entries.append((f"{path}:{lineno}", json.loads(line)))
            except json.JSONDecodeError as exc:
                raise InputError(f"{path}:{lineno}: invalid JSON: {exc.msg}", hint=shape) from None
    if not entries:
        raise InputError(
            f"no participants in {path}: expected one participant object per line (JSONL), or a JSON array of them",
            hint="add at least one participant, or check that this is the file you meant",
        )
    people = []
    for where, body in entries:
        if not isinstance(body, dict):
            raise InputError(f"{where}: expected a participant object, got {type(body).__name__}", hint=shape)
        people.append(_participant(body, where))
    _on_store(config, lambda store: store.add_participants(people))
    if json_out:
        emit_json({"added": [p.id for p in people]})
    else:
        out_console.print(f"imported {len(people)} participant{'' if len(people) == 1 else 's'}")


@participants_app.command("list")
def participants_list(config: Path | None = ConfigOpt, json_out: bool = JsonOpt) -> None:
    """Registered participants (demographics are for matching and analysis only)."""

    people: list[Any] = _on_store(config, lambda store: store.list_participants())
    if json_out:
        emit_json([p.model_dump() for p in people])
        return
    table = Table(title=f"{len(people)} participant{'' if len(people) == 1 else 's'}")
    for col in ("id", "roles", "expertise", "simulated"):
        table.add_column(col)
    for p in people:
        table.add_row(safe(p.id), safe(", ".join(p.roles)), safe(", ".join(p.expertise)), "yes" if p.simulated else "")
    out_console.print(table)


class _PhaseBar:
    """One rich bar per campaign phase on the terminal's stderr (the campaign's ``progress``)."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err_console,
        )
        self._tasks: dict[str, Any] = {}
        self._bar.start()

    def update(self, phase: str, done: int, total: int) -> None:
        if phase not in self._tasks:
            self._tasks[phase] = self._bar.add_task(phase.replace("_", " "), total=total)
        self._bar.update(self._tasks[phase], completed=done, total=total)

    def stop(self) -> None:
        self._bar.stop()


@campaign_app.command("run")
def campaign_run(
    campaign: Path = typer.Argument(..., metavar="CAMPAIGN", help="Campaign YAML (see docs/star.md)."),
    config: Path | None = ConfigOpt,
    settings_file: Path | None = typer.Option(None, "--settings", hidden=True, help="Old name of --config."),
    json_out: bool = JsonOpt,
) -> None:
    """Run a whole campaign unattended: personas red-team, annotate and arbitrate."""
    from ..star.campaign import load_campaign, run_campaign
    from ..star.lab_store import LabCampaignSettings, SQLLabStore

    if config is not None and settings_file is not None:
        raise InputError("--settings is the old name of --config: give one of them")
    spec = load_campaign(campaign)
    settings = settings_from(config or settings_file)
    recorded = LabCampaignSettings.of_campaign_file(spec)  # its policy and parameter files, read now

    bar = _PhaseBar() if err_console.is_terminal and not json_out else None

    async def go() -> Any:
        from ..star.store import SQLStarStore

        store = SQLStarStore(settings.effective_store_url(), load_policy(spec.policy))
        try:
            # The lab (`psychoalign lab`, same store) opens the campaign like one a lead made, while
            # it runs: recorded once its plan is stored, so a run that fails before leaves nothing.
            return await run_campaign(
                spec,
                settings,
                store,
                progress=bar.update if bar else None,
                on_planned=lambda: SQLLabStore(store.engine).record_campaign(recorded),
            )
        finally:
            await store.close()
            if bar is not None:
                bar.stop()

    try:
        report = asyncio.run(go())
    except NO_REPLY_ERRORS as exc:  # a persona's model got no reply: what the campaign stored is kept
        raise no_reply_stop(exc, "what the campaign stored is kept: rerun the same command to resume it") from exc
    if report.models_recorded_late:  # before any figure: what the numbers below may pool
        err_console.print(
            safe(
                f"warning: campaign {report.campaign} has work from runs that did not record their persona "
                "models; recorded from this run on, the earlier work's models are unknown"
            ),
            soft_wrap=True,
            highlight=False,
        )
    if json_out:
        emit_json(report.model_dump())
        return
    if report.models:
        out_console.print(
            safe("models: " + ", ".join(f"{role} {label}" for role, label in report.models.items())),
            highlight=False,
            soft_wrap=True,
        )
    rate = "n/a" if report.target_failure_rate is None else f"{report.target_failure_rate:.1%}"
    out_console.print(
        safe(
            f"campaign {report.campaign}: {report.planned} planned, {report.dialogues} dialogues, "
            f"{report.refused_attacks} refused attacks, {report.target_failed_dialogues} with no target answer, "
            f"{report.annotations} annotations ({report.annotations_in_group} in-group, "
            f"{report.annotations_out_group} out-group), {report.arbitrations} arbitrations; "
            f"target failures {report.target_failures} of {report.target_calls} calls ({rate})"
            + (f"; resumed {report.resumed_tasks} held tasks" if report.resumed_tasks else "")
            + (
                f"; {report.target_changed} unfinished dialogue(s) of an earlier run were against another "
                "target: kept as abandoned (turns kept), their instructions red-teamed again"
                if report.target_changed
                else ""
            )
        ),
        highlight=False,
    )
    for kind, w in report.work.items():
        out_console.print(
            safe(f"  {kind}: {w['personas']} personas, {w['min']}-{w['max']} tasks each"), highlight=False
        )
    for item in report.shortfall:
        out_console.print(
            safe(
                f"shortfall: {item['open_tasks']} open {item['kind']} task(s) nobody can take "
                f"({item['reason']}): {item['requirement']}"
            )
        )


@star_app.command("export")
def star_export(
    fmt: str = typer.Option("jsonl", "--format", help="jsonl, csv or parquet."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Output file (default stdout for jsonl/csv)."),
    campaign: str | None = typer.Option(None, "--campaign"),
    config: Path | None = ConfigOpt,
) -> None:
    """One row per dialogue (schema: docs/star.md)."""
    if fmt not in ("jsonl", "csv", "parquet"):
        raise InputError(f"unknown format '{fmt}'", hint="jsonl, csv or parquet")
    if fmt == "parquet" and out is None:
        raise InputError("parquet needs --out FILE")

    async def export(store: Any) -> list[dict[str, Any]]:
        from ..star.lab_store import SQLLabStore, lab_export_rows

        # the lab's columns too (topic, time spent), by the lab export's own code: one schema
        found = [row async for row in lab_export_rows(store, SQLLabStore(store.engine), campaign)]
        await _known_campaign(store, campaign, found=bool(found))
        return found

    rows: list[dict[str, Any]] = _on_store(config, export)
    write_rows(rows, fmt, out)
    if out:
        err_console.print(safe(f"exported {len(rows)} dialogues to {out}"), soft_wrap=True)


def write_rows(rows: list[dict[str, Any]], fmt: str, out: Path | None) -> None:
    """The export rows as JSONL (each row as it is), or CSV or Parquet with one column per field any
    row has, in name order (a field only later rows carry, such as a lab column, is a column; a row
    without it has an empty cell)."""
    flat = [
        {k: json.dumps(v, ensure_ascii=False) if isinstance(v, list | dict) else v for k, v in r.items()} for r in rows
    ]
    columns = sorted({k for r in flat for k in r})
    if fmt == "parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise InputError("parquet export needs pyarrow", hint="pip install 'psychoalign[star]'") from None
        assert out is not None  # the command refuses parquet without --out
        # not from_pylist(flat): it takes its columns from the first row and drops any other field
        table = pa.table({k: [r.get(k) for r in flat] for k in columns})
        with open_out(out, binary=True) as sink:
            pq.write_table(table, sink)
        return
    with out_or_stdout(out, newline="") as sink:  # --out FILE is replaced only when it is whole
        if fmt == "jsonl":
            for r in rows:
                sink.write(json.dumps(r, ensure_ascii=False) + "\n")
        else:
            import csv

            from ..textio import spreadsheet_safe

            writer = csv.DictWriter(sink, fieldnames=columns)
            writer.writeheader()
            writer.writerows({k: spreadsheet_safe(v) for k, v in r.items()} for r in flat)


def _choose_targets(data: Any, attach: list[str], target: str | None) -> Any:
    """--attach-legacy then --target on a STAR export; other formats have no target to choose."""
    from ..star.analysis.targets import attach_legacy, select_target

    if data.format != "star":
        raise InputError(f"{data.name}: --target and --attach-legacy apply to STAR exports, not '{data.format}'")
    before = len(data.notes)
    data = attach_legacy(data, attach)
    data = select_target(data, target) if target is not None else data
    for note in data.notes[before:]:  # what was relabelled or left out, before any figure
        err_console.print(safe(f"{data.name}: {note}"), soft_wrap=True, highlight=False)
    return data


@star_app.command("analyze")
def star_analyze(
    data: list[Path] = typer.Argument(
        ..., help="Datasets: rating files (CSV/TSV/JSONL/Parquet), STAR exports, DICES, DiaSafety-CC, XSTest, HH."
    ),
    fmt: str | None = typer.Option(None, "--format", help="Force one adapter for every file (default: detect)."),
    compare: list[str] | None = typer.Option(None, "--compare", help="NAME=FILE, an extra dataset under a name."),
    out: Path = typer.Option(..., "--out", help="Directory for report.html, report.json, item_disagreement.csv."),
    item_col: str | None = typer.Option(None, "--item-col", help="One row per rating: the item id column."),
    rater_col: str | None = typer.Option(None, "--rater-col", help="The rater id column."),
    rating_col: str | None = typer.Option(None, "--rating-col", help="The rating column."),
    scale: str | None = typer.Option(None, "--scale", help="LO..HI (e.g. 1..5) or unordered labels 'a,b,c'."),
    order: str | None = typer.Option(None, "--order", help="Ordered labels, lowest first: 'No,Unsure,Yes'."),
    level: str | None = typer.Option(None, "--level", help="Default alpha level: nominal, ordinal or interval."),
    text_col: str | None = typer.Option(None, "--text-col", help="Item text column (embedding map)."),
    item_attr: list[str] | None = typer.Option(None, "--item-attr", help="Item attribute column (repeatable)."),
    rater_attr: list[str] | None = typer.Option(None, "--rater-attr", help="Rater attribute column (repeatable)."),
    positive: str | None = typer.Option(None, "--positive", help="Scale points counted positive: '4..5' or 'Yes'."),
    neutral: str | None = typer.Option(None, "--neutral", help="Scale points left out of the binarised view."),
    positive_label: str | None = typer.Option(None, "--positive-label", help="Name of the positive view."),
    expert: str | None = typer.Option(None, "--expert", help="COL=VALUE marks expert raters (e.g. pool=expert)."),
    no_auto: bool = typer.Option(False, "--no-auto-attributes", help="Do not classify unnamed columns."),
    mapping_file: Path | None = typer.Option(None, "--mapping", help="YAML with the same keys (flags win)."),
    raters_file: Path | None = typer.Option(
        None, "--raters", help="Rater attributes, one row per rater (e.g. `star participants list --json`)."
    ),
    raters_id_col: str | None = typer.Option(None, "--raters-id-col", help="Rater id column in --raters."),
    target: str | None = typer.Option(
        None, "--target", help="STAR: analyse only the dialogues of this target (the export's target column)."
    ),
    attach_legacy: list[str] | None = typer.Option(
        None,
        "--attach-legacy",
        help="STAR: LEGACY=LABEL analyses dialogues with a legacy label (psychoalign:<framework>) as the current "
        "target LABEL of that framework, on your word (recorded in the report). Repeatable.",
    ),
    bootstrap: int = typer.Option(1000, "--bootstrap", min=0, help="Bootstrap resamples for intervals (0: none)."),
    seed: int = typer.Option(0, "--seed"),
    no_embed: bool = typer.Option(False, "--no-embed", help="Skip the embedding map."),
    per_dataset: int = typer.Option(4000, "--per-dataset", min=1, help="Dialogues sampled per dataset for the map."),
    clusters: int = typer.Option(20, "--clusters", min=1, help="Clusters in the embedding map."),
    embed_model: str | None = typer.Option(None, "--embed-model", help="Local sentence-transformers model path."),
    embed_url: str | None = typer.Option(None, "--embed-url", help="OpenAI-compatible embeddings endpoint (…/v1)."),
) -> None:
    """Analyse rating data into an HTML report, a JSON file with every number and a per-item CSV.

    One row per rating: --item-col ID --rater-col RATER --rating-col SCORE [--scale 1..5]; other
    columns constant within a rater become rater attributes (gender, country, expertise…)."""
    from ..star.analysis import analyze, load, write_report
    from ..star.analysis.corpora import PERSONA_NOTES
    from ..star.analysis.data import load_mapping, mapping_from

    check_out_folder(out)  # before the analysis, not after it
    values: dict[str, Any] = load_mapping(mapping_file) if mapping_file else {}
    flags: dict[str, Any] = {
        "item_col": item_col,
        "rater_col": rater_col,
        "rating_col": rating_col,
        "scale": scale,
        "order": order,
        "level": level,
        "text_col": text_col,
        "item_cols": item_attr or None,
        "rater_cols": rater_attr or None,
        "positive": positive,
        "neutral": neutral,
        "positive_label": positive_label,
    }
    if expert:
        col, sep, val = expert.partition("=")
        if not sep or not col.strip() or not val.strip():
            raise InputError(f"--expert '{expert}' is not COL=VALUE", hint="e.g. --expert pool=expert")
        flags.update(expert_col=col.strip(), expert_value=val.strip())
    if no_auto:
        flags["auto_attributes"] = False
    values.update({k: v for k, v in flags.items() if v is not None})
    mapping = None
    if values:
        if "item_col" not in values or "rating_col" not in values:
            raise InputError(
                "a one-row-per-rating file needs --item-col and --rating-col (and usually --rater-col)",
                hint="or a --mapping YAML with item_col, rater_col, rating_col",
            )
        mapping = mapping_from(values)
    datasets = [load(path, fmt, mapping=mapping) for path in data]
    for item in compare or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--compare '{item}' is not NAME=FILE")
        datasets.append(load(Path(path), fmt, name=name, mapping=mapping))
    if raters_file is not None:
        from ..star.analysis.data import attach_raters

        datasets = [attach_raters(d, raters_file, raters_id_col) for d in datasets]
    if attach_legacy or target is not None:
        datasets = [_choose_targets(d, attach_legacy or [], target) for d in datasets]
    names = [d.name for d in datasets]
    if len(set(names)) != len(names):
        raise InputError(f"two datasets share a name: {names}", hint="use --compare NAME=FILE to rename one")
    for d in datasets:
        if mapping is not None and d.format != "ratings":
            err_console.print(safe(f"{d.name}: recognised as '{d.format}'; the column mapping is not used for it"))
        err_console.print(safe(f"{d.name}: {d.counts.line()}"), highlight=False)
        for note in d.notes:  # which persona models wrote the work, before any figure
            if note.startswith(PERSONA_NOTES):
                err_console.print(safe(f"{d.name}: {note}"), soft_wrap=True, highlight=False)
        if d.format != "anthropic-hh" and d.counts.ratings_kept == 0:
            raise InputError(
                f"{d.name}: nothing to analyse: {d.counts.line()}",
                hint="check --scale / --rating-col against the file",
            )
    embedder = None
    if not no_embed and (embed_model or embed_url):
        from ..star.analysis.embedding import minilm_embedder, openai_embedder

        embedder = (
            openai_embedder(embed_url, embed_model or "text-embedding-3-small")
            if embed_url
            else minilm_embedder(embed_model)
        )
    # The bar counts the per-dataset sections; it stays (its clock running) through the
    # cross-dataset ones and the embedding map.
    with progress_bar("analysing") as bar:
        report = analyze(
            datasets,
            n_boot=bootstrap,
            seed=seed,
            embed=not no_embed,
            embedder=embedder,
            per_dataset=per_dataset,
            n_clusters=clusters,
            progress=bar,
        )
    with out_folder(out) as partial:
        written = write_report(report, datasets, partial)
    for file in written:
        err_console.print(safe(f"wrote {out / file.name}"), soft_wrap=True)
    from ..star.analysis.report import sided_summary

    for name, entry in report["datasets"].items():  # the arbitration verdicts: shares with n and interval
        line = sided_summary(entry.get("arbitration") or {})
        if line is not None:
            err_console.print(safe(f"{name}: {line}"), soft_wrap=True, highlight=False)
