"""Lead pages: campaigns (create, live progress, coverage heat map, shortfall, time spent, export,
analysis report) and participants (create, invite, import, roles).

Every route declares :func:`require_lead`. Leads are the only ones who see identities
(usernames next to pseudonymous participant ids); exports and analyses carry pseudonyms only.
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import re
from collections import defaultdict
from collections.abc import AsyncIterator
from typing import Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request, UploadFile
from fastapi.responses import JSONResponse, RedirectResponse, Response, StreamingResponse

from ...errors import InputError, PsychoAlignError
from ...star.campaign import TargetConfig
from ...star.instructions import Instruction, coverage, generate_instructions
from ...star.lab_store import LabCampaignSettings
from ...star.policy import Policy
from ...star.store import StarStore
from ...textio import spreadsheet_safe
from ..accounts import Account, Role
from ..auth import PageTemplates
from ..security import LeadAccount, csrf_protect
from .lab import OPEN_IN_LAB, StarLab, rows_json
from .launch import NOUN, launch_checks, shortfall_reason
from .participant import Lab
from .results import campaign_results

router = APIRouter(prefix="/lead", dependencies=[Depends(csrf_protect)])
MAX_UPLOAD = 1_000_000
ROLES = ("red_teamer", "annotator", "arbitrator")
#: A campaign's name is in its URLs: "." or ".." as a path segment would be resolved away by browsers.
CAMPAIGN_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


async def upload_text(upload: UploadFile | None, what: str) -> str | None:
    if upload is None or not upload.filename:
        return None
    data = await upload.read(MAX_UPLOAD + 1)
    if len(data) > MAX_UPLOAD:
        raise InputError(f"the {what} file is larger than 1 MB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"the {what} file is not UTF-8 text") from None
    if "\x00" in text:  # the database cannot store it (web.security.refuse_nul does forms)
        raise InputError(f"the {what} file contains a NUL character", hint="remove it and upload the file again")
    if what in ("policy", "parameter-space"):
        _no_yaml_aliases(text, what)
    return text


def _no_yaml_aliases(text: str, what: str) -> None:
    """Refuse YAML aliases in uploads: a few nested ``*alias`` lines expand to billions of values
    when the file is validated (the "billion laughs"), which would stall the server. The strict
    loader bounds them anyway (psychoalign.yamlio); an upload is stricter. The C parser: this runs
    on the event loop, and the pure-Python one took 3.3 s on a 1 MB upload (libyaml: 0.16 s)."""
    import yaml

    try:
        loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        if any(isinstance(event, yaml.AliasEvent) for event in yaml.parse(text, Loader=loader)):
            raise InputError(f"the {what} file uses YAML aliases (*name)", hint="write the repeated values out in full")
    except yaml.YAMLError:
        return  # the loader reports the syntax error with its line


@router.get("")
async def lead_home(request: Request, account: LeadAccount, lab: Lab, templates: PageTemplates) -> Response:
    """Lead: every campaign with its task counts."""
    rows = []
    campaigns = await lab.lab.campaigns()
    statuses = await lab.store.campaign_statuses([c.name for c in campaigns])
    for campaign in campaigns:
        counts = await lab.store.task_counts(campaign.name)
        rows.append((campaign, counts, statuses[campaign.name]))
    context = {"campaigns": rows, "unopened": await lab.unopened(campaigns), "open_in_lab": OPEN_IN_LAB}
    return await templates.render(request, "star/lead_home.html", context)


@router.get("/campaigns/new")
async def campaign_new(request: Request, account: LeadAccount, templates: PageTemplates) -> Response:
    """Lead: the create-campaign form."""
    from ...star.policy import load_policy

    return await templates.render(
        request,
        "star/campaign_new.html",
        {
            "policy": load_policy(),
            "error": None,
            "roles": _model_roles(request),
            "frameworks": _frameworks(request),
        },
    )


def _frameworks(request: Request) -> list[str]:
    """A PsychoAlign-target campaign may use the served deployment's frameworks (by name) and the built-in ones."""
    from ...frameworks.loader import builtin_names

    lab: StarLab = request.app.state.star_lab
    settings = lab.settings
    deployment = settings.deployment(settings.serve.a2a_deployment or next(iter(settings.deployments)))
    named = [f for f in deployment.frameworks() if re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", f)]
    return list(dict.fromkeys([*named, *builtin_names()]))


def _model_roles(request: Request) -> list[str]:
    """The model roles a campaign may talk to: ``target`` first (the documented one), then the configured ones."""
    lab: StarLab = request.app.state.star_lab
    return ["target", *sorted(set(lab.settings.roles) - {"target"})]


@router.post("/campaigns")
async def campaign_create(
    request: Request,
    account: LeadAccount,
    lab: Lab,
    templates: PageTemplates,
    name: str = Form(""),
    instructions: int = Form(20),
    seed: int = Form(0),
    target_kind: str = Form("model"),
    target_role: str = Form("target"),
    framework: str = Form("general"),
    outgroup_share: float = Form(0.0),
    quota_red_team: str = Form(""),
    quota_annotate: str = Form(""),
    quota_arbitrate: str = Form(""),
    members_only: str = Form(""),
    policy_file: UploadFile | None = None,
    parameters_file: UploadFile | None = None,
) -> Response:
    """Lead: create a campaign from a policy and parameter space (built-in or uploaded)."""
    form = await request.form()
    rules = [str(r) for r in form.getlist("rules")]
    try:
        if not CAMPAIGN_NAME.fullmatch(name.strip()):
            raise InputError(
                "the campaign name is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
                hint="e.g. pilot-2026.1",
            )
        if target_kind not in ("model", "psychoalign"):
            raise InputError("the target is a configured model or psychoalign")
        if target_role not in _model_roles(request):
            raise InputError(f"unknown model role '{target_role[:40]}'", hint=", ".join(_model_roles(request)))
        if framework not in _frameworks(request):  # found now, not at a red teamer's first message
            raise InputError(f"unknown framework '{framework[:40]}'", hint=", ".join(_frameworks(request)))
        if not 0.0 <= outgroup_share <= 1.0:
            raise InputError("the out-group annotator share is between 0 and 1")
        if not 1 <= instructions <= 100_000:
            raise InputError("the number of planned dialogues must be between 1 and 100,000")
        quota = _quota(red_team=quota_red_team, annotate=quota_annotate, arbitrate=quota_arbitrate)
        settings = LabCampaignSettings(
            name=name.strip(),
            policy_yaml=await upload_text(policy_file, "policy"),
            parameters_yaml=await upload_text(parameters_file, "parameter-space"),
            target=TargetConfig.model_validate({"kind": target_kind, "role": target_role, "framework": framework}),
            instructions=instructions,
            seed=seed,
            rules=rules,
            created_by=account.id,
        )
        # parsing and a plan of up to 100,000 instructions take seconds: off the event loop
        settings, items = await asyncio.to_thread(plan_campaign, settings)
        if await lab.store.has_campaign(settings.name):
            raise InputError(f"a campaign named '{settings.name}' exists", hint="choose another name")
        await lab.lab.save_campaign(settings)
        store = await lab.store_for(settings.name)
        await store.create_campaign(
            settings.name,
            items,
            outgroup_annotator_share=outgroup_share,
            quota=quota,
            members_only=members_only == "on",
            status="draft",  # nobody takes its tasks before the lead launches it (after the checks)
        )
    except (PsychoAlignError, ValueError) as exc:
        from ...star.policy import load_policy

        message = exc.message if isinstance(exc, PsychoAlignError) else _first_error(exc)
        return await templates.render(
            request,
            "star/campaign_new.html",
            {
                "policy": load_policy(),
                "error": message,
                "roles": _model_roles(request),
                "frameworks": _frameworks(request),
            },
            status_code=400,
        )
    return RedirectResponse(f"/lead/campaigns/{settings.name}?msg=campaign_draft", status_code=303)


def plan_campaign(settings: LabCampaignSettings) -> tuple[LabCampaignSettings, list[Instruction]]:
    """Parse the campaign's policy and parameter space and generate its instructions (blocking).
    The rules kept are those the policy has (built-in rules checked beside an uploaded policy
    are dropped; none left means every rule)."""
    policy = settings.policy()
    rules = [r for r in settings.rules if r in {x.id for x in policy.rules()}]
    items = generate_instructions(
        policy, settings.parameters(), settings.instructions, seed=settings.seed, rules=rules or None
    )
    return settings.model_copy(update={"rules": rules}), items


def _quota(**fields: str) -> dict[str, int]:
    """The per-person quota from the form: empty is no limit, otherwise a whole number from 1."""
    quota = {}
    for kind, raw in fields.items():
        if not raw.strip():
            continue
        if not raw.strip().isdigit() or int(raw) < 1:
            raise InputError(
                f"the {NOUN[kind]} quota must be a whole number from 1 (got '{raw[:20]}')",
                hint="leave it empty for no limit",
            )
        quota[kind] = int(raw)
    return quota


def _first_error(exc: ValueError) -> str:
    errors = getattr(exc, "errors", None)
    if callable(errors):
        first = errors()[0]
        return f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return str(exc)


def heat_map(policy: Policy, report: Any) -> dict[str, Any]:
    """Coverage as a grid: rows rule × target group, columns the other cell parameters. Rows and
    columns without a planned dialogue are left out (a small campaign plans a few cells of a large
    space); ``hidden`` says how many such cells there are."""
    grid: dict[str, dict[str, tuple[int, int]]] = defaultdict(dict)
    columns: list[str] = []
    for row in report.rows:
        parts = row.cell.split("|")
        rule = parts[0]
        group = next((p.removeprefix("group=") for p in parts[1:] if p.startswith("group=")), "")
        column = " · ".join(p.split("=", 1)[1] for p in parts[1:] if not p.startswith("group="))
        if column not in columns:
            columns.append(column)
        grid[f"{rule}{' — ' + group if group else ''}"][column] = (row.planned, row.done)
    planned_columns = [c for c in columns if any(by.get(c, (0, 0))[0] for by in grid.values())]
    cells: list[tuple[str, list[tuple[str, int, int, str]]]] = []
    for label, by_column in grid.items():
        if not any(planned for planned, _ in by_column.values()):
            continue
        line = []
        for column in planned_columns:
            planned, done = by_column.get(column, (0, 0))
            level = "none" if planned == 0 else str(min(8, round(8 * done / planned)))
            line.append((column, planned, done, f"heat-{level}"))
        cells.append((label, line))
    shown = {label for label, _ in cells}
    hidden = sum(1 for label, by in grid.items() for c in by if label not in shown or c not in planned_columns)
    return {"columns": planned_columns, "rows": cells, "hidden": hidden}


async def _progress(lab: StarLab, name: str) -> dict[str, Any]:
    """The campaign (through the lab's cache) and its task counts; 404 for an unknown campaign."""
    try:
        campaign = await lab.campaign(name)
        store = await lab.store_for(name)
        counts = await store.task_counts(name)
    except InputError:
        raise HTTPException(status_code=404, detail=await lab.not_found(name)) from None
    flat = {f"{kind}:{status}": n for kind, by in counts.items() for status, n in by.items()}
    return {"campaign": campaign, "counts": counts, "flat": flat}


async def _campaign_or_404(lab: StarLab, name: str) -> LabCampaignSettings:
    found = await lab.lab.campaign(name)
    if found is None:
        raise HTTPException(status_code=404, detail=await lab.not_found(name))
    return found


async def _campaign_store(lab: StarLab, name: str) -> StarStore:
    """The store of the campaign named in the URL (404 for an unknown campaign)."""
    await _campaign_or_404(lab, name)
    return await lab.store_for(name)


@router.get("/campaigns/{name}")
async def campaign_page(
    request: Request, name: str, account: LeadAccount, lab: Lab, templates: PageTemplates
) -> Response:
    """Lead: live progress, coverage heat map, shortfall with reasons, time spent."""
    progress = await _progress(lab, name)
    campaign: LabCampaignSettings = progress["campaign"]
    policy = await lab.policy(name)
    store = await lab.store_for(name)
    records, done = await store.plan_and_done(name)
    items = [Instruction.from_record(r, i) for i, r in enumerate(records)]
    report = coverage(policy, campaign.parameters(), items, done, rules=sorted({i.rule for i in items}))
    accounts = await lab.accounts.list_accounts(Role.PARTICIPANT)
    shortfall = [
        {**s, "reason": shortfall_reason(s["kind"], s["requirement"], s.get("reason", ""))}
        for s in await store.shortfall(name, available=await _available(lab, accounts))
    ]
    people = {a.participant_id: a for a in accounts}
    times = await lab.lab.times(name)
    settings = await store.campaign_settings(name)
    status = await store.campaign_status(name)
    return await templates.render(
        request,
        "star/campaign.html",
        {
            "campaign": campaign,
            "policy": policy,
            "outgroup_share": settings.outgroup_annotator_share,
            "relaxed": settings.relax_red_team,
            "quota": settings.quota,
            "status": status,
            "checks": await launch_checks(lab, name) if status == "draft" else None,
            "results": await campaign_results(lab, name),
            "name": name,  # the results panel's template (also rendered alone for the page's refresh)
            "members_only": await store.members_only(name),
            "members": await store.members(name),
            "accounts": accounts,
            "failures": await store.recent_target_failures(name),
            "counts": progress["counts"],
            "report": report,
            "heat": heat_map(policy, report),
            "shortfall": shortfall,
            "times": times,
            "per_person": time_per_person(times),
            "people": people,
            "job": lab.job_status(name),
        },
    )


async def _available(lab: StarLab, accounts: list[Account]) -> set[str]:
    """Participants who can work: an active account, or an invite they may still accept."""
    invited = await lab.accounts.invited_accounts()
    return {a.participant_id for a in accounts if a.participant_id and (a.active or a.id in invited)}


def time_per_person(times: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Seconds per participant, in total and per task kind, and tasks done (for compensation)."""
    people: dict[str, dict[str, Any]] = {}
    for t in times:
        row = people.setdefault(
            t["participant_id"],
            {"participant_id": t["participant_id"], "total": 0.0, "done": 0, **dict.fromkeys(NOUN, 0.0)},
        )
        row["total"] += t["seconds"]
        row[t["kind"]] = row.get(t["kind"], 0.0) + t["seconds"]
        row["done"] += t["state"] == "done"
    return sorted(people.values(), key=lambda r: r["participant_id"])


@router.get("/campaigns/{name}/progress.json")
async def campaign_progress(name: str, account: LeadAccount, lab: Lab) -> JSONResponse:
    """Lead: the live numbers (the page refreshes them with fetch)."""
    progress = await _progress(lab, name)
    return JSONResponse({"counts": progress["flat"]})


@router.get("/campaigns/{name}/export")
async def campaign_export(name: str, account: LeadAccount, lab: Lab, format: str = "jsonl") -> Response:
    """Lead: one row per dialogue (pseudonymous ids only), as JSONL, CSV or Parquet. JSONL
    streams (a large campaign is never held in memory); CSV and Parquet need every row first
    (the CSV header is the union of the rows' columns; Parquet is columnar)."""
    await _campaign_or_404(lab, name)
    if format not in ("jsonl", "csv", "parquet"):
        raise HTTPException(status_code=400, detail="format must be jsonl, csv or parquet")
    disposition = {"content-disposition": f'attachment; filename="{name}.{format}"'}
    if format == "jsonl":

        async def lines() -> AsyncIterator[bytes]:
            async for row in lab.export_rows(name):
                yield rows_json([row]).encode("utf-8")

        return StreamingResponse(lines(), media_type="application/x-ndjson", headers=disposition)
    rows = [
        {k: json.dumps(v, ensure_ascii=False) if isinstance(v, list | dict) else v for k, v in r.items()}
        async for r in lab.export_rows(name)
    ]
    body = await asyncio.to_thread(tabular, rows, format)  # pandas work off the event loop
    media = "text/csv; charset=utf-8" if format == "csv" else "application/vnd.apache.parquet"
    return Response(body, media_type=media, headers=disposition)


def tabular(rows: list[dict[str, Any]], format: str) -> bytes:
    """CSV (cells that are never formulas: untrusted text must not run in the lead's spreadsheet)
    or Parquet bytes of flat export rows."""
    import pandas as pd

    frame = pd.DataFrame(rows)
    if format == "csv":
        safe = frame.apply(lambda column: column.map(spreadsheet_safe)) if len(frame) else frame
        text: str = safe.to_csv(index=False)
        return text.encode("utf-8")
    buffer = io.BytesIO()
    frame.to_parquet(buffer, index=False)
    return buffer.getvalue()


@router.get("/campaigns/{name}/time.csv")
async def campaign_time_sheet(name: str, account: LeadAccount, lab: Lab) -> Response:
    """Lead: time per task and person, for time-based compensation (an identity view: names are in it)."""
    await _campaign_or_404(lab, name)
    people = {a.participant_id: a for a in await lab.accounts.list_accounts(Role.PARTICIPANT)}
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["participant_id", "name", "username", "task_id", "kind", "state", "started_at", "seconds"])
    for t in await lab.lab.times(name):
        person = people.get(t["participant_id"])
        row = [
            t["participant_id"],
            person.display_name if person else "",
            (person.username or "") if person else "",
            t["task_id"],
            t["kind"],
            t["state"],
            t["started_at"].isoformat(),
            t["seconds"],
        ]
        writer.writerow([spreadsheet_safe(v) for v in row])
    disposition = {"content-disposition": f'attachment; filename="{name}-time.csv"'}
    return Response(out.getvalue(), media_type="text/csv; charset=utf-8", headers=disposition)


@router.post("/campaigns/{name}/relax")
async def campaign_relax(name: str, account: LeadAccount, lab: Lab, relax: str = Form("off")) -> Response:
    """Lead: let red teamers who do not meet a task's in/out-group requirement take it when nobody
    who does is there (``on``), or not (``off``). Every relaxed task records why."""
    store = await _campaign_store(lab, name)
    await store.update_campaign_settings(name, relax_red_team=relax == "on")
    return RedirectResponse(f"/lead/campaigns/{name}?msg=saved", status_code=303)


@router.post("/campaigns/{name}/release-expired")
async def campaign_release_expired(name: str, account: LeadAccount, lab: Lab) -> Response:
    """Lead: re-queue every claim of the campaign whose lease expired (holder gone quiet)."""
    store = await _campaign_store(lab, name)
    await store.expire_leases(name)
    return RedirectResponse(f"/lead/campaigns/{name}?msg=released", status_code=303)


@router.post("/campaigns/{name}/personas")
async def campaign_personas(name: str, account: LeadAccount, lab: Lab, max_tasks: int = Form(50)) -> Response:
    """Lead: let LLM personas (simulated, labelled in all data) fill the annotation shortfall."""
    from .personas import fill_with_personas

    status = await (await _campaign_store(lab, name)).campaign_status(name)
    if status != "live":
        raise HTTPException(status_code=409, detail=f"the campaign is {status}: personas do not run on it")
    running = lab.jobs.get(name)
    if running is None or running.done():
        limit = max(1, min(max_tasks, 1000))
        lab.jobs[name] = asyncio.create_task(fill_with_personas(lab, name, max_tasks=limit))
    return RedirectResponse(f"/lead/campaigns/{name}?msg=personas", status_code=303)


#: The lead's lifecycle actions: the status each sets, and the flash message after it.
STATUS_ACTIONS = {
    "launch": ("live", "campaign_launched"),
    "pause": ("paused", "campaign_paused"),
    "resume": ("live", "campaign_resumed"),
}


@router.post("/campaigns/{name}/status")
async def campaign_status(
    name: str,
    account: LeadAccount,
    lab: Lab,
    action: str = Form(""),
    confirm: str = Form(""),
    areas_ok: str = Form(""),
    anyway: str = Form(""),
) -> Response:
    """Lead: launch a draft (after its checks), pause (no new claims; held tasks may be finished),
    resume, or close the campaign. Launching needs ``areas_ok=yes`` (the lead read the areas red
    teamers will see) and, when people are short, ``anyway=yes``; a problem (a target that cannot
    be built) refuses it. Closing is final and needs ``confirm=yes`` (the form's checkbox): every
    task still held is released (the participants' clocks stop) and further submissions are refused."""
    store = await _campaign_store(lab, name)
    if action == "launch":
        await _check_launch(lab, name, areas_ok=areas_ok == "yes", anyway=anyway == "yes")
    if action == "close":
        if confirm != "yes":
            raise HTTPException(
                status_code=400, detail="closing is final: tick the box to confirm that you want to close the campaign"
            )
        wanted, flash = "closed", "campaign_closed"
    elif action in STATUS_ACTIONS:
        wanted, flash = STATUS_ACTIONS[action]
    else:
        raise HTTPException(status_code=400, detail="the action is launch, pause, resume or close")
    try:
        released = await store.set_campaign_status(name, wanted)
    except InputError as exc:
        raise HTTPException(status_code=409, detail=exc.message) from None
    for task_id, pid in released:
        await lab.lab.stop(task_id, pid)
    return RedirectResponse(f"/lead/campaigns/{name}?msg={flash}", status_code=303)


async def _check_launch(lab: StarLab, name: str, *, areas_ok: bool, anyway: bool) -> None:
    """Refuse a launch in one line: a problem, the areas not confirmed, or people short without ``anyway``."""
    if await (await lab.store_for(name)).campaign_status(name) != "draft":
        raise HTTPException(status_code=409, detail=f"campaign '{name}' was launched already")
    checks = await launch_checks(lab, name)
    if checks.problems:
        raise HTTPException(status_code=409, detail=f"not launched: {checks.problems[0]}")
    if not areas_ok:
        raise HTTPException(
            status_code=400,
            detail="not launched: tick the box to confirm the areas red teamers will read beside each rule",
        )
    if checks.warnings and not anyway:
        raise HTTPException(
            status_code=409,
            detail=f"not launched: {checks.warnings[0]} (or tick 'launch anyway': people invited later take the tasks)",
        )


@router.post("/campaigns/{name}/access")
async def campaign_access(name: str, account: LeadAccount, lab: Lab, members_only: str = Form("off")) -> Response:
    """Lead: only the campaign's members take its tasks (``on``), or every participant (``off``)."""
    store = await _campaign_store(lab, name)
    await store.set_members_only(name, members_only == "on")
    return RedirectResponse(f"/lead/campaigns/{name}?msg=saved#members", status_code=303)


@router.post("/campaigns/{name}/members")
async def campaign_members_add(request: Request, name: str, account: LeadAccount, lab: Lab) -> Response:
    """Lead: add participants (by pseudonym, from the form's checkboxes) to the campaign."""
    store = await _campaign_store(lab, name)
    form = await request.form()
    wanted = [str(p) for p in form.getlist("participant_ids")]
    if not wanted:
        raise HTTPException(status_code=400, detail="tick the participants to add")
    try:
        await store.add_members(name, wanted)
    except InputError as exc:
        raise HTTPException(status_code=400, detail=exc.message) from None
    return RedirectResponse(f"/lead/campaigns/{name}?msg=members_added#members", status_code=303)


@router.post("/campaigns/{name}/members/{participant_id}/remove")
async def campaign_member_remove(name: str, participant_id: str, account: LeadAccount, lab: Lab) -> Response:
    """Lead: take a participant out of the campaign; the tasks of it they hold go back to the pool
    (their clocks stop; their submitted work stays)."""
    store = await _campaign_store(lab, name)
    try:
        released = await store.remove_member(name, participant_id)
    except InputError as exc:  # not a member: say so rather than flash "removed"
        raise HTTPException(status_code=404, detail=exc.message) from None
    for task_id in released:
        await lab.lab.stop(task_id, participant_id)
    return RedirectResponse(f"/lead/campaigns/{name}?msg=member_removed#members", status_code=303)
