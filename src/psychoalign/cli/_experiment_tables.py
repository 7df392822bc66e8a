"""The tables `psychoalign experiment run` and `experiment report` print: Table 3 or 4 of a run's
report, its cost per item, its judges' calibration and its provenance."""

from __future__ import annotations

from typing import Any

from rich.table import Table

from .common import err_console, print_wide, safe


def _fmt(cell: dict[str, Any]) -> str:
    if cell["mean"] is None:
        return "no data" + (f" ({cell['failed']} failed)" if cell["failed"] else "")
    text = f"{cell['mean']:.3f}"
    if cell["ci_low"] is not None:  # with its n, as the page shows it: [0, 0.658] on 2 items says why
        text += f" [{cell['ci_low']:.3f}, {cell['ci_high']:.3f}] n={cell['n']}"
    else:  # no interval: one item, or items that all scored the same
        if cell.get("all_equal"):
            text += f" (n={cell['n']}, every item scored the same)"
        elif cell.get("ci_note"):
            text += f" (n={cell['n']}, no interval: {cell['ci_note']})"
        else:
            text += f" (n={cell['n']})"
    text += f" ({cell['failed']} failed)" if cell["failed"] else ""
    # set apart in the table itself, as the page does: the banner below may scroll away
    marks = {"weak": " (weak judge)", "unknown": " (judge agreement unknown)"}
    return text + marks.get(cell.get("judge_status") or "", "")


def _asr(cell: dict[str, Any]) -> str:
    if cell["asr"] is None:
        text = "no data"
    else:
        ci = f" [{cell['ci_low']:.3f}, {cell['ci_high']:.3f}]" if cell["ci_low"] is not None else ""
        ci = " (no interval)" if not ci and cell.get("ci_note") else ci
        text = f"{cell['asr']:.3f}{ci} {cell['successes']}/{cell['n']}"
        text += f" ({cell['dropped']} dropped)" if cell.get("dropped") else ""
    text += f" ({cell['failed']} failed)" if cell["failed"] else ""
    text += f" ({cell['degenerate']} degenerate)" if cell.get("degenerate") else ""
    # a weak judge's (or one of unknown agreement) ASR is set apart in the cell, as in the scores table
    marks = {"weak": " (weak judge)", "unknown": " (judge agreement unknown)"}
    return text + marks.get(cell.get("judge_status") or "", "")


def _print_table4(t: dict[str, Any], baseline: str) -> None:
    """Table 4 with the benign over-refusal row beside the ASR, then the breakdown."""
    main = [*t["rows"], *([t["benign"]] if t["benign"] else [])]
    for title, rows in (
        (
            "Table 4: attack success rate (ASR [95% Wilson CI, pooled: each attack once] successes/n; lower is better)",
            main,
        ),
        ("Table 4 breakdown", t["breakdown"]),
    ):
        if not rows:
            continue
        table = Table(title=title)
        table.add_column("attacks")
        for s in t["systems"]:
            table.add_column(safe(s), justify="right")
        table.add_column(safe(f"pooled (all but {baseline})"), justify="right")
        for row in rows:
            table.add_row(safe(row["title"]), *(_asr(c) for c in [*row["cells"], row["pooled"]]))
        print_wide(table)
    for m in t.get("multiturn", []):
        protocol = ", ".join(m.get("protocols", [])) or "structured"
        escalation = (
            f"driver-escalated/build-up middle turns {m.get('driver_escalated', 0)}/{m.get('driver_buildup', 0)}"
            if protocol == "plain"
            else f"middle-turn flags yes/no/unknown {m['flags_yes']}/{m['flags_no']}/{m['flags_unknown']}"
        )
        err_console.print(
            safe(
                f"multi-turn {m['system']} ({protocol} attacker): {m['dialogues']} dialogue(s), "
                f"{m.get('degenerate', 0)} degenerate, {m['attacker_messages']} attacker messages "
                f"({m['distinct_messages']} distinct, {m.get('on_objective', 0)} on the objective, "
                f"{m.get('rejected_messages', 0)} rejected), {escalation}, {m['judged_turns']} turns judged, "
                f"{m['backtracks']} backtracks"
            )
        )
    for j in t.get("judging", []):
        err_console.print(
            safe(
                f"judges on {j['system']}'s attack responses: {j['judged']} judged, {j['refused']} refused, "
                f"{j['harm_checked']} harm-checked, {j['harmful']} judged harmful"
            )
        )
    for note in t["notes"]:
        note_text = safe(note)  # literal: notes name config tables such as [roles.judge]
        note_text.stylize("yellow")
        err_console.print(note_text)


def _print_tables(report: dict[str, Any]) -> None:
    if report.get("table4"):
        _print_table4(report["table4"], report["run"]["baseline"])
    title = {"table5": "Table 5 (component ablation)", "table4": "Scores by benchmark"}.get(
        report["run"]["layout"], "Table 3"
    )
    table = Table(title=safe(f"{title}: {report['run']['name']} (mean [95% CI] n)"))
    table.add_column("system")
    for c in report["columns"]:
        table.add_column(safe(c["title"] + ("" if c["higher_is_better"] else " ↓")), justify="right")
    for row in report["table"]:
        table.add_row(safe(row["system"]), *(_fmt(c) for c in row["cells"]))
    print_wide(table)
    cost = Table(title=safe(f"Cost per item (ratios to {report['run']['baseline']} over the items both completed)"))
    for c in (
        "system",
        "items",
        "calls",
        "critical path",
        "tokens",
        "wall s",
        "paired",
        "calls ×",
        "crit ×",
        "tokens ×",
        "wall ×",
    ):
        cost.add_column(c, justify="left" if c == "system" else "right")
    for r in report["cost"]:
        if not r.get("items"):
            cost.add_row(safe(r["system"]), "0", *(["–"] * 9))
            continue
        ratios = [
            "–" if r[k] is None else f"{r[k]:.2f}"
            for k in ("calls_ratio", "critical_path_ratio", "tokens_ratio", "wall_s_ratio")
        ]
        cost.add_row(
            safe(r["system"]),
            str(r["items"]),
            f"{r['calls']:.2f}",
            f"{r['critical_path']:.2f}",
            f"{r['tokens']:.0f}",
            f"{r['wall_s']:.3f}",
            str(r.get("ratio_items", "–")),
            *ratios,
        )
    print_wide(cost)
    for j in report["judges"]:
        if j["status"] in ("measured", "weak") and j.get("agreement") is not None:
            ci = j.get("agreement_ci")
            line = (
                f"judge of {j['benchmark']} ({j['judge']}): agreement {j['agreement']}"
                + (f" [{ci[0]}, {ci[1]}]" if ci else "")
                + (f", sensitivity {j['sensitivity']}, specificity {j['specificity']}" if j.get("sensitivity") else "")
                + f" on {j['n']} ({j['reference']})"
            )
            err_console.print(safe(line), style="yellow" if j.get("weak") else None)
    unknown = [j["benchmark"] for j in report["judges"] if j["status"] == "unknown"]
    if unknown:
        err_console.print(safe(f"judge agreement unknown (no labels) for: {', '.join(unknown)}", style="yellow"))
    for j in report["judges"]:
        if j.get("weak"):  # the validity gate (or the embedded judge model): its columns are unmeasured
            err_console.print(safe(f"Weak judge ({j['benchmark']}): {j['weak']}."), style="bold yellow")
    for line in _provenance_lines(report["run"].get("identity")):
        err_console.print(safe(line), soft_wrap=True)
    if mixed := report["run"].get("mixed_revisions"):
        err_console.print(safe(f"Mixed code: {mixed}."), style="bold yellow", soft_wrap=True)


def _provenance_lines(identity: dict[str, Any] | None) -> list[str]:
    """Which models produced the numbers above, one line per system (the page's Provenance)."""
    if not identity:
        return ["models: unknown (this run was stored without its identity)"]
    lines = []
    for name, system in identity.get("systems", {}).items():
        models = ", ".join(
            f"{role}={m['backend']}:{m['model']}"
            + (f"@{m['host']}" if m.get("host") else "")
            + (f" (script {m['script_sha256'][:12]})" if m.get("script_sha256") else "")
            for role, m in system.get("models", {}).items()
        )
        extra = "".join(f", {k}={v}" for k, v in (system.get("negotiation") or {}).items())
        lines.append(f"models of {name}: {models or 'none'}{extra}")
    judges = identity.get("judges") or {}
    spec, model = judges.get("spec") or {}, judges.get("model") or {}
    if model:
        lines.append(
            f"judges: refusal {spec.get('refusal')}, harm {spec.get('harm')}; model {model['backend']}:{model['model']}"
        )
    return lines
