"""Participant pages: task list, content warning, red teaming, annotation, arbitration, profile.

Every route declares :func:`require_participant`; a task page opens only for the participant who
holds the task (anyone else, including a lead, gets 404 and learns nothing about it). Model
output and participant text are rendered escaped; tension and negotiation state are stored with
each turn but never sent to the participant.
"""

from __future__ import annotations

import hashlib
import logging
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Form, HTTPException, Request
from fastapi.responses import JSONResponse, RedirectResponse, Response

from ...errors import InputError, PsychoAlignError
from ...star.lab_store import LabCampaignSettings, TaskTime
from ...star.model import PREFER_NOT, Participant, PreAnnotation, TaskKind, TaskRecord, TaskStatus, Turn
from ...star.store import CampaignClosedError, ClaimError
from ..accounts import Account
from ..auth import PageTemplates
from ..security import ParticipantAccount, csrf_protect
from ..templating import Templates
from .lab import StarLab

router = APIRouter(dependencies=[Depends(csrf_protect)])
_log = logging.getLogger(__name__)

#: The pre-annotation's broader label set (paper §4).
GROUP_LABELS = ["age", "disability", "gender", "race", "religion", "sexual orientation", "other"]
#: The voluntary questionnaire: every field optional, "prefer not to say" everywhere (paper appendix E).
QUESTIONNAIRE: dict[str, list[str]] = {
    "race": [
        "American Indian or Alaska Native",
        "Asian",
        "Black or African American",
        "Hispanic or Latino",
        "Native Hawaiian or Other Pacific Islander",
        "White",
    ],
    "gender": ["Female", "Male", "Non-binary", "Male (transgender)", "Female (transgender)"],
    "age": ["18-24", "25-34", "35-44", "45-54", "55-64", "65+"],
    "religion": ["Atheist/agnostic", "Buddhist", "Christian", "Hindu", "Jewish", "Muslim", "Other"],
    "disability": [
        "Anxiety",
        "Cognition",
        "Communication",
        "Depression",
        "Hearing",
        "Mobility",
        "Vision",
        "No disability",
    ],
}
#: Every expertise a policy rule's ``matching`` can require (star.policy.Matching), as people read it.
EXPERTISE = {
    "medical": "Medical professional",
    "fact_checking": "Fact-checker",
    "legal": "Legal professional",
    "financial": "Financial adviser",
}
TURNS_GOAL = (10, 15)
#: The longest reasoning and red-teaming message (characters). Longer text is refused with its
#: length named, never cut: the page counts as you type, and the server keeps it as your draft.
MAX_REASONING = 4000
MAX_MESSAGE = 8000
#: The longest topic a red teamer commits to (characters): longer is refused, never cut.
MAX_TOPIC = 300


def typed(text: str) -> str:
    """Text from a form's text box as the person typed it: a browser sends each line end of a
    ``<textarea>`` as CRLF, while the box (and its counter) holds LF; stored and counted as LF, a
    text the counter accepted is never refused as too long, and nothing stored carries a CR."""
    return text.replace("\r\n", "\n")


#: The browser-session cookie listing the content warnings read (per rule and target group): a
#: warning is shown once per login session for each, not before every task.
WARNED_COOKIE = "psa_warned"
WARNED_KEEP = 64


async def get_lab(request: Request) -> StarLab:
    """Async on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, per request."""
    lab: StarLab = request.app.state.star_lab
    return lab


#: A route parameter for the running lab.
Lab = Annotated[StarLab, Depends(get_lab)]


async def get_me(account: ParticipantAccount, lab: Lab) -> Participant:
    """The logged-in participant's record."""
    return await lab.store.participant(_pid(account))


#: A route parameter for the logged-in participant (after :func:`require_participant`).
Me = Annotated[Participant, Depends(get_me)]


async def _held_task(
    lab: StarLab, task_id: str, account: Account, *, kind: TaskKind | None = None
) -> tuple[TaskRecord, TaskTime | None]:
    """The task if this participant holds it (and it is of ``kind``, when given), with their time
    on it (one query); otherwise 404 (never reveal another's task)."""
    held = await lab.lab.held(task_id, _pid(account))
    if held is not None and kind is not None and held[0].kind is not kind:
        raise HTTPException(status_code=404, detail="no such task of yours")
    if held is None:
        # A task this person worked on, in a campaign its lead closed meanwhile: say so (only to
        # them: the time row is theirs). Anyone else learns nothing about the task.
        mine = await lab.lab.time(task_id, _pid(account))
        if mine is not None and await lab.store.campaign_status(mine.campaign) == "closed":
            raise HTTPException(status_code=409, detail=closed_message(mine.campaign))
        if mine is not None and await _submitted_by(lab, task_id, _pid(account)):
            # the back button, a reload that re-posts, a double submit: the work is stored once
            raise HTTPException(status_code=409, detail=ALREADY_SUBMITTED)
        raise HTTPException(status_code=404, detail="no such task of yours")
    return held


ALREADY_SUBMITTED = "You submitted this task already: your work is stored once. Go back to your tasks for another."


async def _submitted_by(lab: StarLab, task_id: str, pid: str) -> bool:
    try:
        task = await lab.store.task(task_id)
    except InputError:
        return False
    return task.status is TaskStatus.SUBMITTED and task.participant_id == pid


def closed_message(campaign: str) -> str:
    return (
        f"The campaign {campaign} was closed by its lead. This task was released and what you just sent "
        "was not stored; your work submitted earlier is kept. Thank you!"
    )


def _pid(account: Account) -> str:
    assert account.participant_id is not None  # require_participant guarantees it
    return account.participant_id


async def _campaign_of(lab: StarLab, task: TaskRecord) -> str:
    if not task.campaign:
        raise HTTPException(status_code=404, detail="task has no campaign")
    return task.campaign


@router.get("/tasks")
async def task_list(request: Request, person: Me, lab: Lab, templates: PageTemplates) -> Response:
    """Participant: the tasks I hold and buttons to take the next one of each kind I may do."""
    held = await lab.store.claimed_tasks(person.id)
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    done = await lab.lab.done_since(person.id, today)
    relaxed = bool(await lab.store.relaxed_campaigns())
    kinds = []
    for kind, label in _kinds(person):
        holding = any(t.kind.value == kind for t in held)
        available = await lab.store.available(person.id, TaskKind(kind))
        # a red teamer may get a task of a relaxed campaign that strict matching does not offer
        can_claim = holding or available > 0 or (kind == TaskKind.RED_TEAM.value and relaxed)
        kinds.append(
            {"kind": kind, "label": label, "available": available, "done": done.get(kind, 0), "can": can_claim}
        )
    campaigns = {t.id: t.campaign or "" for t in held}
    context = {"held": held, "person": person, "kinds": kinds, "campaigns": campaigns, "nouns": NOUNS}
    return await templates.render(request, "star/tasks.html", context)


#: What one task of each kind is called in the progress line (singular, plural).
NOUNS = {
    "red_team": ("red-teaming dialogue", "red-teaming dialogues"),
    "annotate": ("annotation", "annotations"),
    "arbitrate": ("arbitration", "arbitrations"),
}


def _kinds(person: Participant) -> list[tuple[str, str]]:
    labels = {
        "red_teamer": ("red_team", "Red-team a model"),
        "annotator": ("annotate", "Annotate a dialogue"),
        "arbitrator": ("arbitrate", "Arbitrate a disagreement"),
    }
    return [labels[r] for r in ("red_teamer", "annotator", "arbitrator") if r in person.roles]


async def _task_subject(lab: StarLab, task: TaskRecord) -> tuple[str, str]:
    """The rule a task is about and the group its dialogue targets ("" when none): what the
    content warning names, and what it is shown once per session for."""
    try:
        if task.kind is TaskKind.RED_TEAM:
            record = await lab.store.instruction(task.instruction_id or "")
        else:
            record = await lab.store.dialogue_instruction(task.dialogue_id or "")
    except InputError:
        return "", ""
    return str(record.get("rule") or ""), str(record.get("target_group") or "")


def _warning_key(rule: str, group: str) -> str:
    return hashlib.sha256(f"{rule}\x1f{group}".encode()).hexdigest()[:16]


def _warned(request: Request) -> list[str]:
    return [k for k in request.cookies.get(WARNED_COOKIE, "").split(".") if k]


def _remember_warning(request: Request, response: Response, key: str) -> None:
    keys = [*[k for k in _warned(request) if k != key][-(WARNED_KEEP - 1) :], key]
    secure: bool = request.app.state.security.secure(request)
    # no max-age: it ends with the browser session (and logout deletes it)
    response.set_cookie(WARNED_COOKIE, ".".join(keys), httponly=True, samesite="lax", secure=secure, path="/")


async def _open_task(request: Request, lab: StarLab, task: TaskRecord, pid: str) -> Response:
    """Go to a task just claimed: straight into it when this session already read the content
    warning for its rule and target group, else to the warning."""
    time = await lab.lab.time(task.id, pid)
    if time is None and _warning_key(*await _task_subject(lab, task)) in _warned(request):
        await lab.lab.start(task.id, pid, await _campaign_of(lab, task), task.kind.value, time)
    return RedirectResponse(f"/tasks/{task.id}", status_code=303)


@router.post("/tasks/claim")
async def claim(
    request: Request,
    account: ParticipantAccount,
    lab: Lab,
    kind: str = Form(...),
) -> Response:
    """Participant: take the next task of a kind, matched by the campaign's rules. One task of a
    kind at a time: someone who holds one (a second tab, the back button, a double click) is
    taken back to it instead of hoarding a second, which would sit claimed for an hour."""
    try:
        task_kind = TaskKind(kind)
    except ValueError:
        raise HTTPException(status_code=400, detail="unknown task kind") from None
    held = await lab.store.held_task(_pid(account), task_kind)
    if held is not None:
        return RedirectResponse(f"/tasks/{held}", status_code=303)
    task = await _claim_next(lab, _pid(account), task_kind)
    if task is None:
        return RedirectResponse("/tasks?msg=no_task", status_code=303)
    return await _open_task(request, lab, task, _pid(account))


async def _claim_next(lab: StarLab, pid: str, kind: TaskKind) -> TaskRecord | None:
    try:
        return await lab.store.claim(pid, kind)
    except ClaimError:
        return await _claim_relaxed(lab, pid) if kind is TaskKind.RED_TEAM else None


async def _claim_relaxed(lab: StarLab, pid: str) -> TaskRecord | None:
    """Nothing matched: a red-teaming task of a campaign whose lead relaxed its matching (the task
    records why). Only after the strict claim failed, so people who match always go first."""
    for campaign in await lab.store.relaxed_campaigns():
        try:
            return await lab.store.claim(pid, TaskKind.RED_TEAM, campaign=campaign, relax=True)
        except ClaimError:
            continue
    return None


@router.get("/tasks/{task_id}")
async def task_page(
    request: Request,
    task_id: str,
    account: ParticipantAccount,
    lab: Lab,
    templates: PageTemplates,
) -> Response:
    """Participant holding the task: content warning first, then the task itself."""
    task, time = await _held_task(lab, task_id, account)
    campaign_name = await _campaign_of(lab, task)
    policy = await lab.policy(campaign_name)
    if time is None or time.active_since is None:
        rule, group = await _task_subject(lab, task)
        warning = {
            "task": task,
            "resuming": time is not None,
            "campaign": campaign_name,
            "rule_text": policy.rule(rule).text if rule in {r.id for r in policy.rules()} else rule,
            "group": group,
            "support": policy.support,
        }
        return await templates.render(request, "star/warning.html", warning)
    draft = await lab.lab.draft(task.id, _pid(account))
    seconds = int(time.total(datetime.now(UTC)))
    break_seconds = int(request.app.state.security.settings.break_minutes * 60)
    context: dict[str, Any] = {
        "task": task,
        "seconds": seconds,
        # the page suggests a break past this; its script keeps both live while the page is open
        "break_seconds": break_seconds,
        "break_due": seconds >= break_seconds,
        "support": policy.support,
        "campaign": campaign_name,
        "draft": draft,
        "max_reasoning": MAX_REASONING,
        "max_message": MAX_MESSAGE,
        "max_topic": MAX_TOPIC,
    }
    if task.kind is TaskKind.RED_TEAM:
        instruction = await lab.store.instruction(task.instruction_id or "")
        dialogue_id = await lab.store.dialogue_of_task(task.id)
        turns = await lab.store.dialogue_turns(dialogue_id) if dialogue_id else []
        context.update(
            instruction=instruction,
            rule_text=policy.rule(instruction["rule"]).text,
            params=_instruction_params(instruction),
            started=dialogue_id is not None,
            follow=True,
            turns=turns,
            n_messages=sum(1 for t in turns if t.role == "red_teamer"),
            goal=TURNS_GOAL,
            topic=time.topic,
            rules=[(r.id, r.text) for r in policy.rules() if r.id != instruction["rule"]],
            group_labels=GROUP_LABELS,
        )
        return await templates.render(request, "star/red_team.html", context)
    record, turns, reasons = await lab.store.dialogue_view(
        task.dialogue_id or "", reasons=task.kind is TaskKind.ARBITRATE
    )
    context.update(turns=turns, rule_text=policy.rule(record["rule"]).text, reasons=reasons)
    return await templates.render(request, "star/annotate.html", context)


#: Instruction record keys that are bookkeeping, not parameters a red teamer reads.
_NOT_PARAMETERS = frozenset({"id", "seed", "policy", "area", "rule", "target_group", "cell", "text"})


def _instruction_params(record: dict[str, Any]) -> list[tuple[str, str]]:
    """The parameters as Appendix C lists them beside the instruction text: the rule, then every
    parameter of the campaign's parameter space and the rule's own (a campaign may upload others),
    then the target group where the rule has one."""
    out = [("Rule", str(record["rule"]))]
    for key, value in record.items():
        if key in _NOT_PARAMETERS or key.startswith("target_"):
            continue
        if key == "topic":
            out.append(("Topic", str(value or "your free choice")))
        elif value not in (None, ""):
            out.append((key.replace("_", " ").capitalize(), str(value)))
    if record.get("target_group"):
        out.append(("Target group", str(record["target_group"])))
    return out


@router.post("/tasks/{task_id}/start")
async def start(request: Request, task_id: str, account: ParticipantAccount, lab: Lab) -> Response:
    """Participant holding the task: I read the content warning; start (or resume) the clock."""
    task, time = await _held_task(lab, task_id, account)
    await lab.store.renew_lease(task.id, _pid(account))  # starting or resuming renews the claim
    await lab.lab.start(task.id, _pid(account), await _campaign_of(lab, task), task.kind.value, time)
    response = RedirectResponse(f"/tasks/{task.id}", status_code=303)
    _remember_warning(request, response, _warning_key(*await _task_subject(lab, task)))
    return response


@router.post("/tasks/{task_id}/pause")
async def pause(request: Request, task_id: str, account: ParticipantAccount, lab: Lab) -> Response:
    """Participant holding the task: stop the clock; the task stays mine for ``[lab] pause_hours``
    (the claim's lease is extended to that, so a long break does not hand the task to someone else)."""
    task, time = await _held_task(lab, task_id, account)
    await lab.lab.stop(task.id, _pid(account), time)
    hours = request.app.state.security.settings.pause_hours
    await lab.store.renew_lease(task.id, _pid(account), lease_s=hours * 3600)
    return RedirectResponse("/tasks?msg=paused", status_code=303)


@router.post("/tasks/{task_id}/skip")
async def skip(task_id: str, account: ParticipantAccount, lab: Lab) -> Response:
    """Participant holding the task: opt out without penalty; the task goes back to the pool
    (for others: this person is not offered that dialogue or red-teaming instruction again)."""
    task, time = await _held_task(lab, task_id, account)
    await lab.lab.stop(task.id, _pid(account), time)
    await lab.store.release(task.id, _pid(account), decline=True)
    await lab.lab.delete_draft(task.id, _pid(account))
    return RedirectResponse("/tasks?msg=skipped", status_code=303)


def _running(time: TaskTime | None) -> TaskTime:
    if time is None or time.active_since is None:
        raise HTTPException(status_code=409, detail="read the content warning and start the task first")
    return time


async def _red_teaming(lab: StarLab, task_id: str, account: Account) -> TaskRecord:
    """The red-teaming task this participant holds, its clock running (404 or 409 otherwise)."""
    task, time = await _held_task(lab, task_id, account, kind=TaskKind.RED_TEAM)
    _running(time)
    return task


async def _error_page(request: Request, templates: Templates, task: TaskRecord, status: int, message: str) -> Response:
    """An error page that leads back to the task."""
    context = {"status": status, "message": message, "back": f"/tasks/{task.id}"}
    return await templates.render(request, "error.html", context, status_code=status)


@router.post("/tasks/{task_id}/begin")
async def begin(
    request: Request,
    task_id: str,
    account: ParticipantAccount,
    lab: Lab,
    templates: PageTemplates,
    topic: str = Form(""),
) -> Response:
    """Red teamer holding the task: commit to a topic, then the dialogue starts."""
    task = await _red_teaming(lab, task_id, account)
    topic = typed(topic).strip()
    if not topic:
        raise HTTPException(status_code=400, detail="write down your topic before you start")
    if len(topic) > MAX_TOPIC:
        message = (
            f"Your topic is {len(topic):,} characters long; the limit is {MAX_TOPIC:,}. The conversation did not "
            f"start. Go back to the task, shorten the topic by {len(topic) - MAX_TOPIC:,} characters and commit again."
        )
        return await _error_page(request, templates, task, 400, message)
    campaign = await lab.campaign(await _campaign_of(lab, task))
    try:
        target = lab.target(campaign)
    except InputError as exc:
        # the reason (a model role, a script's path) is the lead's: the log has it, the page says what to do
        _log.warning("campaign %s: %s", campaign.name, exc.message)
        message = (
            "The model of this campaign cannot be reached, so the conversation cannot start. Nothing was "
            "lost: the task stays yours. Tell your lead, or pause the task and come back later."
        )
        return await _error_page(request, templates, task, 503, message)
    try:
        await lab.store.start_dialogue(task.id, _pid(account), target.label)
    except CampaignClosedError:
        raise HTTPException(status_code=409, detail=closed_message(campaign.name)) from None
    await lab.lab.set_topic(task.id, _pid(account), topic)
    return RedirectResponse(f"/tasks/{task.id}", status_code=303)


@router.post("/tasks/{task_id}/message")
async def message(
    request: Request,
    task_id: str,
    account: ParticipantAccount,
    lab: Lab,
    templates: PageTemplates,
    text: str = Form(""),
    seen: int | None = Form(None, alias="turns", ge=0),
) -> Response:
    """Red teamer holding the task: send one message; the target answers (tension recorded, not shown).
    ``turns``: how many turns the page showed. When this message is already stored past them, the
    form was sent twice (back and resend, a re-posting reload, a retry): it is not sent again."""
    task = await _red_teaming(lab, task_id, account)
    dialogue_id = await lab.store.dialogue_of_task(task.id)
    if dialogue_id is None:
        raise HTTPException(status_code=409, detail="commit to a topic first")
    text = typed(text).strip()
    if not text:
        raise HTTPException(status_code=400, detail="write a message before you send it")
    if len(text) > MAX_MESSAGE:
        await lab.lab.save_draft(task.id, _pid(account), None, text)
        return await _too_long(request, templates, task, "message", len(text), MAX_MESSAGE, "It was not sent")
    campaign = await lab.campaign(await _campaign_of(lab, task))
    async with lab.lock(dialogue_id):
        turns = await lab.store.dialogue_turns(dialogue_id)
        if seen is not None and any(t.role == "red_teamer" and t.text == text for t in turns[seen:]):
            await lab.lab.delete_draft(task.id, _pid(account))
            return RedirectResponse(f"/tasks/{task.id}#end", status_code=303)
        if await _target_changed(lab, campaign, dialogue_id):
            await lab.lab.save_draft(task.id, _pid(account), None, text)
            return await _error_page(request, templates, task, 409, TARGET_CHANGED)
        mine = Turn(role="red_teamer", text=text)
        try:
            reply = await lab.reply(campaign, [*turns, mine])
        except PsychoAlignError as exc:
            # the reason (which may name internal hosts) is for the lead: stored, in the export
            await lab.store.record_target_failure(dialogue_id, exc.message)
            message = "The model did not answer. Your message was not sent: go back to the task and try again."
            return await _error_page(request, templates, task, 502, message)
        try:  # the message and the reply: both or neither
            await lab.store.add_turns(dialogue_id, [mine, reply])
        except CampaignClosedError:
            raise HTTPException(status_code=409, detail=closed_message(campaign.name)) from None
        except InputError:  # the dialogue stopped being in progress while the target answered
            raise HTTPException(status_code=409, detail=RELEASED_MEANWHILE) from None
    await lab.lab.delete_draft(task.id, _pid(account))
    return RedirectResponse(f"/tasks/{task.id}#end", status_code=303)


async def _too_long(
    request: Request, templates: Templates, task: TaskRecord, what: str, length: int, limit: int, fate: str
) -> Response:
    """A text over its limit: refused with both lengths named (never cut), kept as the draft."""
    message = (
        f"Your {what} is {length:,} characters long; the limit is {limit:,}. {fate}: it is kept as your draft. "
        f"Go back to the task, shorten it by {length - limit:,} characters and send it again."
    )
    return await _error_page(request, templates, task, 400, message)


#: What a red teamer is told when the campaign's model changed since their dialogue started.
TARGET_CHANGED = (
    "The model of this campaign changed since this conversation started (the lab now runs another model), "
    "so it cannot be continued: two models' answers would be recorded as one model's. Your message was not "
    "sent and is kept as your draft; the conversation so far is kept. Skip this task (no penalty) to start "
    "it afresh against the current model, or tell your lead."
)


async def _target_changed(lab: StarLab, campaign: LabCampaignSettings, dialogue_id: str) -> bool:
    """Whether the dialogue was started against another target than the campaign's current one (the
    lab restarted with another model, script or framework version). A target that cannot be built
    is not a change: the reply fails and says so."""
    try:
        current = lab.target(campaign).label
    except InputError:
        return False
    return bool((await lab.store.dialogue_info(dialogue_id))["target"] != current)


#: What a red teamer is told when their task was released while the target answered them.
RELEASED_MEANWHILE = (
    "This task was released while the model was answering (its time ran out, it was skipped, or your lead "
    "took you off its campaign). What you just sent was not stored; your work submitted earlier is kept."
)


@router.post("/tasks/{task_id}/finish")
async def finish(
    request: Request,
    task_id: str,
    account: ParticipantAccount,
    lab: Lab,
) -> Response:
    """Red teamer holding the task: end the dialogue with the pre-annotation."""
    task, time = await _held_task(lab, task_id, account, kind=TaskKind.RED_TEAM)
    dialogue_id = await lab.store.dialogue_of_task(task.id)
    if dialogue_id is None:
        raise HTTPException(status_code=409, detail="the dialogue has not started")
    form = await request.form()
    broken = form.get("assigned_rule_broken")
    if broken not in ("yes", "no"):
        raise HTTPException(status_code=400, detail="say whether the model broke the assigned rule")
    campaign = await lab.campaign(await _campaign_of(lab, task))
    known_rules = {r.id for r in (await lab.policy(campaign.name)).rules()}
    other = [str(v) for v in form.getlist("other_rules") if str(v) in known_rules]
    groups = [str(v) for v in form.getlist("groups_mentioned") if str(v) in GROUP_LABELS]
    pre = PreAnnotation(assigned_rule_broken=broken == "yes", other_rules=other, groups_mentioned=groups)
    store = await lab.store_for(campaign.name)
    try:
        await store.finish_dialogue(dialogue_id, _pid(account), pre)
    except CampaignClosedError:
        raise HTTPException(status_code=409, detail=closed_message(campaign.name)) from None
    except InputError as exc:
        raise HTTPException(status_code=400, detail=exc.message) from None
    await lab.lab.stop(task.id, _pid(account), time)
    return RedirectResponse("/tasks?msg=submitted", status_code=303)


@router.post("/tasks/{task_id}/rate")
async def rate(
    request: Request,
    task_id: str,
    account: ParticipantAccount,
    lab: Lab,
    templates: PageTemplates,
    rating: int = Form(0),
    reasoning: str = Form(""),
    next: str = Form(""),
) -> Response:
    """Annotator or arbitrator holding the task: a 1-4 rating with required reasoning. With
    ``next``, straight on to the next task of the same kind (submit & next)."""
    task, time = await _held_task(lab, task_id, account)
    time = _running(time)
    reasoning = typed(reasoning).strip()
    if len(reasoning) > MAX_REASONING:
        await lab.lab.save_draft(task.id, _pid(account), rating or None, reasoning)
        return await _too_long(
            request, templates, task, "reasoning", len(reasoning), MAX_REASONING, "Nothing was submitted"
        )
    try:
        if task.kind is TaskKind.ANNOTATE:
            await lab.store.submit_annotation(task.id, _pid(account), rating, reasoning)
        elif task.kind is TaskKind.ARBITRATE:
            await lab.store.submit_arbitration(task.id, _pid(account), rating, reasoning)
        else:
            raise HTTPException(status_code=404, detail="no such task of yours")
    except CampaignClosedError:
        raise HTTPException(status_code=409, detail=closed_message(task.campaign or "")) from None
    except InputError as exc:
        await lab.lab.save_draft(task.id, _pid(account), rating if 1 <= rating <= 4 else None, reasoning)
        raise HTTPException(status_code=400, detail=exc.message) from None
    await lab.lab.stop(task.id, _pid(account), time)
    await lab.lab.delete_draft(task.id, _pid(account))
    if next:
        following = await _claim_next(lab, _pid(account), task.kind)
        if following is None:
            return RedirectResponse("/tasks?msg=submitted_none", status_code=303)
        return await _open_task(request, lab, following, _pid(account))
    return RedirectResponse("/tasks?msg=submitted", status_code=303)


@router.post("/tasks/{task_id}/draft")
async def save_draft(
    task_id: str,
    account: ParticipantAccount,
    lab: Lab,
    rating: int = Form(0),
    text: str = Form(""),
) -> Response:
    """Participant holding the task: autosave what they typed (the page sends it as they type),
    so a reload, a crash or an ended session loses nothing. JSON: when it was saved."""
    task, _ = await _held_task(lab, task_id, account)
    draft = await lab.lab.save_draft(task.id, _pid(account), rating if 1 <= rating <= 4 else None, typed(text))
    return JSONResponse({"saved_at": draft.updated_at.isoformat(), "length": len(draft.text)})


@router.get("/profile")
async def profile(request: Request, person: Me, templates: PageTemplates) -> Response:
    """Participant: my voluntary questionnaire (every field optional)."""
    return await templates.render(
        request,
        "star/profile.html",
        {"person": person, "questionnaire": QUESTIONNAIRE, "expertise": EXPERTISE, "prefer_not": PREFER_NOT},
    )


@router.post("/profile")
async def profile_save(request: Request, person: Me, lab: Lab) -> Response:
    """Participant: save my questionnaire. Unknown labels are ignored; roles stay as the lead set them."""
    form = await request.form()
    demographics: dict[str, list[str]] = {}
    for dim, labels in QUESTIONNAIRE.items():
        chosen = [str(v) for v in form.getlist(dim) if str(v) in labels or str(v) == PREFER_NOT]
        if PREFER_NOT in chosen:
            chosen = [PREFER_NOT]
        if chosen:
            demographics[dim] = chosen
    expertise = [str(v) for v in form.getlist("expertise") if str(v) in EXPERTISE]
    await lab.store.update_participant(person.model_copy(update={"demographics": demographics, "expertise": expertise}))
    return RedirectResponse("/profile?msg=saved", status_code=303)
