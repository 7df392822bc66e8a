"""The STAR store's decisions as pure functions over plain rows: both twins apply them.

A row here is a mapping with the columns of ``schema.py`` (requirements and records as JSON
text), so the SQL store passes what it reads and the in-memory store what it keeps.
"""

from __future__ import annotations

import heapq
import json
import uuid
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, get_args

from ...errors import InputError
from ..instructions import Instruction
from ..matching import annotation_requirement, eligible
from ..model import Likert, Participant, TaskKind, TaskRecord, TaskStatus
from ..policy import Matching, Policy

#: Open tasks read per claim attempt (keyset pages beyond it only when none of them fits the person).
CLAIM_PAGE = 200
#: Open tasks the "why no task" answer looks at.
NO_TASK_SAMPLE = 500
#: Dialogues read per round of export queries.
EXPORT_BATCH = 500
#: Every expertise a policy rule's matching can require: a participant who declared one is an expert.
EXPERTISE = frozenset(get_args(Matching)) - {"none", "demographic"}
#: Statuses that count towards a person's load and quota in a campaign.
LOADED = ("claimed", "submitted")


def arbitration_needed(a: int, b: int) -> bool:
    """Paper §3.2: arbitrate exactly when two ratings are two or more steps apart."""
    return abs(a - b) >= 2


def aware(value: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; every time the store writes is UTC."""
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


def new_id() -> str:
    return uuid.uuid4().hex


def task_record(row: Mapping[Any, Any]) -> TaskRecord:
    """A :class:`TaskRecord` from a ``star_tasks`` row mapping."""
    return TaskRecord(
        id=row["id"],
        kind=TaskKind(row["kind"]),
        status=TaskStatus(row["status"]),
        campaign=row["campaign"],
        instruction_id=row["instruction_id"],
        dialogue_id=row["dialogue_id"],
        participant_id=row["participant_id"],
        requirement=json.loads(row["requirement"]),
        relaxed=row["relaxed"],
        lease_expires_at=aware(row["lease_expires_at"]),
    )


def task_row(campaign: str, kind: str, requirement: str, now: datetime, **columns: Any) -> dict[str, Any]:
    """A new open ``star_tasks`` row (``columns`` override the empty ones)."""
    row: dict[str, Any] = {
        "id": new_id(),
        "campaign": campaign,
        "kind": kind,
        "status": "open",
        "instruction_id": None,
        "dialogue_id": None,
        "participant_id": None,
        "requirement": requirement,
        "relaxed": None,
        "created_at": now,
        "updated_at": now,
        "lease_expires_at": None,
    }
    row.update(columns)
    return row


def dialogue_row(task: Mapping[Any, Any], participant_id: str, target: str, now: datetime) -> dict[str, Any]:
    """A new ``star_dialogues`` row for a red-teaming task."""
    return {
        "id": new_id(),
        "campaign": task["campaign"],
        "instruction_id": task["instruction_id"],
        "task_id": task["id"],
        "red_teamer_id": participant_id,
        "target": target,
        "status": "in_progress",
        "pre_annotation": None,
        "refused": False,
        "created_at": now,
    }


def failure_row(
    dialogue_id: str, turn_index: int, reason: str, attempt: int, trace_id: str | None, now: datetime
) -> dict[str, Any]:
    """A ``star_target_failures`` row: the target failed where turn ``turn_index`` would be."""
    return {
        "id": new_id(),
        "dialogue_id": dialogue_id,
        "turn_index": turn_index,
        "attempt": attempt,
        "reason": reason[:2000],
        "trace_id": trace_id,
        "created_at": now,
    }


def finished_status(dialogue_id: str, n_turns: int, refused: bool, target_failed: bool) -> str:
    """A submitted dialogue's status: ``refused``, ``target_failed`` (no turns) or ``submitted``."""
    if n_turns == 0 and not (refused or target_failed):
        raise InputError(f"dialogue '{dialogue_id}' has no turns")
    return "refused" if refused else ("target_failed" if n_turns == 0 else "submitted")


#: The longest model label a rating carries (the column's width).
MAX_MODEL_LABEL = 300


def check_model_stamp(model: str | None, person: Participant) -> None:
    """A rating's model stamp (:meth:`StarStore.submit_annotation`): only a simulated participant's
    rating names the model that wrote it, and the label fits its column. A persona's rating without
    one is refused: the analysis could not tell which model's ratings it pools (fail closed)."""
    if model is None:
        if person.simulated:
            raise InputError(
                f"participant '{person.id}' is a simulated persona: its rating needs the model that wrote it",
                hint="pass model=psychoalign.star.personas.model_label(<the persona's ChatModel>)",
            )
        return
    if not person.simulated:
        raise InputError(
            f"participant '{person.id}' is a person, not a simulated persona: their rating carries no model",
            hint="pass model= only for an LLM persona's rating",
        )
    if not model.strip() or len(model) > MAX_MODEL_LABEL:
        raise InputError(
            f"model label of participant '{person.id}''s rating is empty or longer than {MAX_MODEL_LABEL} characters",
            hint="pass the persona model's label (psychoalign.star.personas.model_label)",
        )


def annotation_row(
    task: Mapping[Any, Any],
    participant_id: str,
    kind: TaskKind,
    rating: int,
    reasoning: str,
    now: datetime,
    model: str | None = None,
) -> dict[str, Any]:
    """A ``star_annotations`` row: a rating given on an annotation or arbitration task, with the
    model that wrote it when an LLM persona did (None: a person's)."""
    return {
        "model": model,
        "dialogue_id": task["dialogue_id"],
        "participant_id": participant_id,
        "kind": kind.value,
        "rating": rating,
        "reasoning": reasoning,
        "task_id": task["id"],
        "created_at": now,
    }


def replacement_row(row: Mapping[Any, Any], now: datetime) -> dict[str, Any]:
    """The fresh open task that replaces a released red-teaming task (same place in the queue)."""
    return task_row(
        row["campaign"],
        row["kind"],
        row["requirement"],
        now,
        instruction_id=row["instruction_id"],
        created_at=row["created_at"],
    )


def likert(rating: int) -> int:
    try:
        return int(Likert(int(rating)))
    except (ValueError, TypeError):
        raise InputError(
            f"rating {rating!r} is outside the 4-point scale (1 = definitely broken … 4 = definitely not)"
        ) from None


def check_reasoning(reasoning: str, what: str) -> None:
    if not reasoning.strip():
        raise InputError(f"{what} needs its reasoning")


def relaxable(kind: TaskKind, why: str) -> bool:
    """Only a red-teaming task's in/out-group requirement may be relaxed, never the role."""
    return kind is TaskKind.RED_TEAM and ("attacker" in why or "demographics unknown" in why)


#: Where a campaign name is looked up: the hint of the errors for an unknown campaign.
_CAMPAIGN_HINT = "check the name (the lab's campaign list shows them) and the config's home or store_url"


def no_settings(campaign: str) -> InputError:
    return InputError(f"no campaign '{campaign}' with stored settings in this store", hint=_CAMPAIGN_HINT)


def quota_fixed() -> InputError:
    return InputError("a campaign's quota is set when it is created", hint="create a new campaign")


def participants_exist() -> InputError:
    return InputError("a participant with one of these ids already exists; nothing was added")


def no_campaign(campaign: str) -> InputError:
    return InputError(f"no campaign '{campaign}' in this store", hint=_CAMPAIGN_HINT)


def not_claimed(task_id: str, participant_id: str, status: str | None = None) -> InputError:
    suffix = f" (status {status})" if status is not None else ""
    return InputError(f"task '{task_id}' is not claimed by '{participant_id}'{suffix}")


def not_of_kind(kind: TaskKind, task_id: str) -> InputError:
    return InputError(f"no {kind.value} task '{task_id}'")


def not_open_dialogue(dialogue_id: str, participant_id: str) -> InputError:
    return InputError(f"dialogue '{dialogue_id}' is not an open dialogue of '{participant_id}'")


def nothing_to_arbitrate(dialogue_id: str) -> InputError:
    return InputError(f"dialogue '{dialogue_id}' has no diverging pair of annotations to arbitrate")


def not_in_progress(dialogue_id: str, status: str | None) -> InputError:
    return InputError(
        f"dialogue '{dialogue_id}' is not in progress ({status or 'unknown'})",
        hint="a released or expired task's dialogue takes no more turns; claim a new task",
    )


def unknown(what: str, key: str) -> InputError:
    return InputError(f"unknown {what} '{key}'")


def unknown_people(unknown_ids: Collection[str]) -> InputError:
    names = sorted(unknown_ids)
    more = f" and {len(names) - 5} more" if len(names) > 5 else ""
    return InputError(f"unknown participants {', '.join(names[:5])}{more}; nobody was added")


def not_a_member(campaign: str, participant_id: str) -> InputError:
    return InputError(
        f"'{participant_id[:64]}' is not a member of campaign '{campaign}'; nothing was changed",
        hint="remove a participant listed under the campaign's members",
    )


def check_status_change(campaign: str, current: str, status: str) -> None:
    if current == "closed" and status != "closed":
        raise InputError(f"campaign '{campaign}' is closed, which is final", hint="start a new campaign")
    if current == "draft" and status == "paused":
        raise InputError(f"campaign '{campaign}' is a draft: nobody takes its tasks yet", hint="launch it first")
    if status == "draft" and current != "draft":
        raise InputError(f"campaign '{campaign}' was launched: it cannot become a draft again", hint="pause it")


def data_version(submitted: int, latest: datetime | None) -> str:
    """:meth:`StarStore.data_version` from the count of submitted tasks and the latest one's time."""
    when = aware(latest)  # microseconds since the epoch: a version that needs no quoting in a URL
    return f"{submitted}-{round(when.timestamp() * 1_000_000) if when is not None else 0}"


# -- the plan ----------------------------------------------------------------------------------
def plan_rows(
    campaign: str, items: Sequence[Instruction], now: datetime
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The ``star_instructions`` and ``star_tasks`` rows of a campaign's plan.

    Group-targeting instructions alternate in/out-group attackers within each cell, starting each
    cell with whichever status its group is short of (ties: whichever the whole campaign is short
    of): balanced within ±1 per cell, per group, and overall."""
    by_cell: dict[str, list[Instruction]] = {}
    for item in items:
        by_cell.setdefault(item.cell, []).append(item)
    group_counts: dict[str, Counter[str]] = {}
    overall: Counter[str] = Counter()
    instruction_rows: list[dict[str, Any]] = []
    task_rows: list[dict[str, Any]] = []
    for cell in sorted(by_cell):
        cell_items = by_cell[cell]
        counts = group_counts.setdefault(json.dumps(cell_items[0].target_group, sort_keys=True), Counter())
        if counts["in"] != counts["out"]:
            first = "in" if counts["in"] < counts["out"] else "out"
        else:
            first = "in" if overall["in"] <= overall["out"] else "out"
        other = "out" if first == "in" else "in"
        for i, item in enumerate(cell_items):
            requirement: dict[str, Any] = {}
            if item.target_group:
                status = first if i % 2 == 0 else other
                counts[status] += 1
                overall[status] += 1
                requirement = {"attacker": status, "group": item.target_group}
            # Instruction ids are unique per seed, not across campaigns: stored ids carry the
            # campaign, so two campaigns with the same seed do not collide.
            stored_id = f"{campaign}:{item.id}"
            record = json.dumps({**item.record(), "id": stored_id})
            instruction_rows.append(
                {"id": stored_id, "campaign": campaign, "rule": item.rule, "cell": item.cell, "record": record}
            )
            task_rows.append(
                task_row(campaign, TaskKind.RED_TEAM.value, json.dumps(requirement), now, instruction_id=stored_id)
            )
    return instruction_rows, task_rows


def dialogue_requirement(policy: Policy, record: dict[str, Any]) -> dict[str, Any]:
    """Who may annotate a dialogue red-teamed from instruction ``record``."""
    group = {k.removeprefix("target_"): v for k, v in record.items() if k.startswith("target_") and k != "target_group"}
    return annotation_requirement(policy.rule(record["rule"]), group or None)


def annotation_slots(requirement: dict[str, Any], share: float, out: int, total: int) -> list[dict[str, Any]]:
    """A submitted dialogue's two annotation requirements. On a group-targeting dialogue each slot
    is out-group while the campaign's out-group slots on that group (``out`` of ``total``) are
    short of ``share``, else in-group."""
    slots = [dict(requirement), dict(requirement)]
    if splits_annotators(requirement, share):
        for slot in slots:
            wanted_out = int(share * (total + 1) + 0.5)
            slot["annotator"] = "out" if out < wanted_out else "in"
            out += slot["annotator"] == "out"
            total += 1
    return slots


def annotation_tasks(
    campaign: str, dialogue_id: str, requirement: dict[str, Any], share: float, earlier: Iterable[str], now: datetime
) -> list[dict[str, Any]]:
    """The two open annotation tasks of a submitted dialogue (``requirement``: who may annotate it,
    ``share``: the campaign's out-group annotator share). ``earlier`` are the campaign's annotation
    requirements so far (JSON); they are read only when the slots split annotators in and out of a
    group (:func:`splits_annotators`)."""
    out, total = annotator_split(earlier, requirement["group"]) if splits_annotators(requirement, share) else (0, 0)
    return [
        task_row(campaign, TaskKind.ANNOTATE.value, json.dumps(slot), now, dialogue_id=dialogue_id)
        for slot in annotation_slots(requirement, share, out, total)
    ]


def splits_annotators(requirement: dict[str, Any], share: float) -> bool:
    """Whether a dialogue's annotation slots are split between in- and out-group annotators."""
    return requirement.get("matching") == "demographic" and share > 0


def annotator_split(requirements: Iterable[str], group: dict[str, str]) -> tuple[int, int]:
    """(out-group slots, all slots) among the annotation requirements (JSON) on ``group`` that
    split annotators in and out of it."""
    out = total = 0
    for req_json in requirements:
        req = json.loads(req_json)
        if "annotator" in req and req.get("group") == group:
            total += 1
            out += req.get("annotator") == "out"
    return out, total


def arbitration_requirement(annotation_requirement_json: str) -> str:
    """Arbitrators follow the dialogue's matching; the in/out-group annotator split does not apply
    to them (Decision, docs/star.md: ties are broken by a matched, in-group arbitrator)."""
    requirement = json.loads(annotation_requirement_json)
    requirement.pop("annotator", None)
    return json.dumps(requirement)


# -- claims ------------------------------------------------------------------------------------
class Candidate(NamedTuple):
    """An open task as the claim path reads it."""

    id: str
    requirement: str
    dialogue_id: str | None
    created_at: datetime
    campaign: str


def sort_candidates(
    rows: Iterable[Candidate], person: Participant, kind: TaskKind, relax: bool, full: Collection[str]
) -> tuple[list[str], list[tuple[str, str]]]:
    """The ids this person may take as they are, and those they may take relaxed (with the note),
    both oldest first; tasks of campaigns whose quota they reached are left out."""
    verdicts: dict[str, tuple[bool, str]] = {}
    strict: list[str] = []
    relaxed: list[tuple[str, str]] = []
    for row in rows:
        if row.campaign in full:
            continue
        if row.requirement not in verdicts:
            verdicts[row.requirement] = eligible(person, kind, json.loads(row.requirement))
        ok, why = verdicts[row.requirement]
        if ok:
            strict.append(row.id)
        elif relax and relaxable(kind, why):
            relaxed.append((row.id, f"relaxed: {why}"))  # never relax the role
    return strict, relaxed


def available_count(rows: Iterable[Candidate], person: Participant, kind: TaskKind, full: Collection[str]) -> int:
    """How many of ``rows`` this person could claim as they are: one per dialogue (a person never
    sees a dialogue twice, so its second annotation slot is not theirs), quota respected."""
    strict = set(sort_candidates(rows, person, kind, False, full)[0])
    return len({row.dialogue_id or row.id for row in rows if row.id in strict})


def first_beyond(
    rows: Iterable[Candidate], person: Participant, kind: TaskKind, relax: bool, skip: Collection[str]
) -> Iterable[tuple[str, str | None]]:
    """The deep queue, oldest first: each task this person may take, with its relaxed note."""
    for row in rows:
        if row.id in skip:
            continue
        ok, why = eligible(person, kind, json.loads(row.requirement))
        if ok:
            yield row.id, None
        elif relax and relaxable(kind, why):
            yield row.id, f"relaxed: {why}"


def no_task_reason(
    person: Participant,
    kind: TaskKind,
    rows: Iterable[tuple[str, str | None, str | None, str]],
    seen: Collection[str],
    skipped: Collection[str],
    scope: Mapping[str, Collection[str]],
    at_quota: Collection[str],
) -> str:
    """Why nothing could be claimed, from the oldest open tasks of ``kind`` (requirement,
    dialogue, instruction, campaign), the dialogues ``seen`` and instructions ``skipped`` by the
    person, and the members of each members-only campaign (``scope``)."""
    reasons: Counter[str] = Counter()
    for requirement, dialogue_id, instruction_id, task_campaign in rows:
        if task_campaign in scope and person.id not in scope[task_campaign]:
            reasons["not a member of this campaign"] += 1
            continue
        if task_campaign in at_quota:
            reasons["reached this campaign's per-person quota"] += 1
            continue
        if dialogue_id is not None and dialogue_id in seen:
            reasons["already saw this dialogue"] += 1
            continue
        if dialogue_id is None and kind is TaskKind.RED_TEAM and instruction_id in skipped:
            reasons["skipped this instruction before"] += 1
            continue
        ok, why = eligible(person, kind, json.loads(requirement))
        if not ok:
            reasons[why] += 1
    detail = "; ".join(f"{why} ({n})" for why, n in reasons.most_common(3)) or "no open tasks"
    return f"no {kind.value} task for participant '{person.id}': {detail}"


# -- batch assignment ----------------------------------------------------------------------------
class OpenTask(NamedTuple):
    """An open task as batch assignment and the shortfall read it."""

    id: str
    dialogue_id: str | None
    requirement: str
    instruction_id: str | None
    campaign: str


class AssignmentQueue(NamedTuple):
    """What batch assignment reads before it plans (the plan adds its picks to ``seen`` and ``load``)."""

    open_tasks: list[OpenTask]  # of live campaigns, oldest first
    seen: set[tuple[str, str]]  # (dialogue, participant) exposures
    declined: set[tuple[str, str]]  # (instruction, participant) skips
    load: Counter[str]  # participant -> tasks of the kind held or done (in the campaign, if one)
    scope: dict[str, set[str]]  # members-only campaign -> its members


class AssignmentPlan(NamedTuple):
    assignments: list[tuple[str, str, str | None, str | None]]  # task, participant, dialogue, note
    shortfall: Counter[tuple[str, str]]  # (requirement, reason) -> tasks
    eligible: dict[str, list[str]]  # requirement -> eligible participant ids
    load: Counter[str]  # participant -> tasks of the kind, with the planned ones


def plan_assignment(
    kind: TaskKind,
    queue: AssignmentQueue,
    people: Sequence[Participant],
    *,
    max_per_participant: int | None,
    relax: bool,
    limit: int | None,
) -> AssignmentPlan:
    """Batch assignment (see :meth:`StarStore.assign_all`): the most constrained tasks first
    (oldest first among equals), each to the least-loaded eligible participant who may take it."""
    open_tasks, seen, declined, load, scope = queue
    eligible_by_req: dict[str, list[str]] = {}
    relaxed_by_req: dict[str, list[str]] = {}
    for task in open_tasks:
        if task.requirement not in eligible_by_req:
            requirement = json.loads(task.requirement)
            checks = [(p.id, eligible(p, kind, requirement)) for p in people]
            eligible_by_req[task.requirement] = [pid for pid, (ok, _) in checks if ok]
            relaxed_by_req[task.requirement] = [pid for pid, (ok, why) in checks if not ok and relaxable(kind, why)]
    ordered = sorted(open_tasks, key=lambda t: len(eligible_by_req[t.requirement]))
    # One least-loaded queue per requirement (and per relaxed requirement): a pick pops only the
    # participants it passes over, where a scan would look at everyone eligible for every task.
    pickers: dict[tuple[str, bool], _LeastLoaded] = {}
    assignments: list[tuple[str, str, str | None, str | None]] = []
    shortfall: Counter[tuple[str, str]] = Counter()
    for task in ordered:
        if limit is not None and len(assignments) >= limit:
            break
        able = eligible_by_req[task.requirement]
        allowed = scope.get(task.campaign)

        def may_take(pid: str, task: OpenTask = task, allowed: set[str] | None = allowed) -> bool:
            return (
                (allowed is None or pid in allowed)
                and (task.dialogue_id is None or (task.dialogue_id, pid) not in seen)
                and (task.dialogue_id is not None or (task.instruction_id or "", pid) not in declined)
            )

        note = None
        chosen = _picker(pickers, task.requirement, False, able, load, max_per_participant).pick(may_take)
        if chosen is None and relax:
            relaxed = relaxed_by_req[task.requirement]
            chosen = _picker(pickers, task.requirement, True, relaxed, load, max_per_participant).pick(may_take)
            note = "relaxed: no matching participant (batch assignment)"
        if chosen is None:
            shortfall[(task.requirement, _assignment_shortfall(task, able, allowed, seen, declined))] += 1
            continue
        load[chosen] += 1
        if task.dialogue_id is not None:
            seen.add((task.dialogue_id, chosen))
        assignments.append((task.id, chosen, task.dialogue_id, note))
    return AssignmentPlan(assignments, shortfall, eligible_by_req, load)


class _LeastLoaded:
    """Participants by (load, id), lowest first, as loads grow during one plan.

    Entries carry the load they were pushed with; loads only grow, so a stale entry sorts too
    early and is re-pushed with its current load when it reaches the top: the first fresh top is
    the least-loaded participant. One at the cap never takes another task of the plan: dropped."""

    def __init__(self, pids: Sequence[str], load: Counter[str], cap: int | None) -> None:
        self.heap = [(load[pid], pid) for pid in pids]
        heapq.heapify(self.heap)
        self.load = load
        self.cap = cap

    def pick(self, may_take: Callable[[str], bool]) -> str | None:
        """The least-loaded participant under the cap who ``may_take`` the task (not removed)."""
        heap, load, cap = self.heap, self.load, self.cap
        passed: list[tuple[int, str]] = []
        chosen = None
        while heap:
            pushed, pid = heap[0]
            current = load[pid]
            if pushed != current:
                heapq.heapreplace(heap, (current, pid))
            elif cap is not None and current >= cap:
                heapq.heappop(heap)
            elif may_take(pid):
                chosen = pid
                break
            else:
                passed.append(heapq.heappop(heap))
        for entry in passed:
            heapq.heappush(heap, entry)
        return chosen


def _picker(
    pickers: dict[tuple[str, bool], _LeastLoaded],
    requirement: str,
    relaxed: bool,
    pids: Sequence[str],
    load: Counter[str],
    cap: int | None,
) -> _LeastLoaded:
    key = (requirement, relaxed)
    if key not in pickers:
        pickers[key] = _LeastLoaded(pids, load, cap)
    return pickers[key]


def _assignment_shortfall(
    task: OpenTask,
    able: list[str],
    allowed: set[str] | None,
    seen: set[tuple[str, str]],
    declined: set[tuple[str, str]],
) -> str:
    if not able:
        return "no eligible participant"
    if allowed is not None and not allowed & set(able):
        return "no eligible participant is a member of the campaign"
    if task.dialogue_id is not None and all((task.dialogue_id, p) in seen for p in able):
        return "every eligible participant has already seen the dialogue"
    if task.dialogue_id is None and all((task.instruction_id, p) in declined for p in able):
        return "every eligible participant skipped this instruction"
    return "every eligible participant is at the per-participant limit"


def assignment_report(open_before: int, taken: dict[str, str], plan: AssignmentPlan) -> dict[str, Any]:
    """What :meth:`StarStore.assign_all` returns."""
    return {
        "assigned": len(taken),
        "open_before": open_before,
        "participants_used": len(set(taken.values())),
        "max_load": max(plan.load.values(), default=0),
        "assignments": taken,
        "shortfall": [
            {
                "requirement": json.loads(r),
                "open_tasks": n,
                "reason": why,
                "eligible_participants": len(plan.eligible[r]),
            }
            for (r, why), n in plan.shortfall.items()
        ],
    }


# -- shortfall ---------------------------------------------------------------------------------
def shortfall_entries(
    rows: Iterable[tuple[str, str, str | None, str | None, str]],
    people: Sequence[Participant],
    *,
    seen: set[tuple[str, str]],
    declined: set[tuple[str, str]],
    quotas: Mapping[str, Mapping[str, int]],
    load: Counter[tuple[str, str, str]],
    scope: Mapping[str, set[str]],
) -> list[dict[str, Any]]:
    """:meth:`StarStore.shortfall` from the open tasks (kind, requirement, dialogue, instruction,
    campaign), who saw and skipped what, each campaign's quota and each person's load in it
    (``(campaign, kind, participant)``), and the members of members-only campaigns."""
    able: dict[tuple[str, str], list[str]] = {}
    need: Counter[tuple[str, str, str]] = Counter()
    per_dialogue: Counter[tuple[str, str, str]] = Counter()  # open tasks per (kind, requirement, dialogue)
    free: dict[tuple[str, str, str], list[str]] = {}  # eligible and under the campaign's quota
    for kind, req_json, dialogue_id, instruction_id, task_campaign in rows:
        key = (kind, req_json)
        if key not in able:
            requirement = json.loads(req_json)
            able[key] = [p.id for p in people if eligible(p, TaskKind(kind), requirement)[0]]
        cap = quotas.get(task_campaign, {}).get(kind)
        pool = able[key]
        member_ids = scope.get(task_campaign)
        if member_ids is not None:
            pool = [pid for pid in pool if pid in member_ids]
        members_able = bool(pool)
        if cap is not None:
            pool = [pid for pid in pool if load[(task_campaign, kind, pid)] < cap]
        if not able[key]:
            need[(kind, req_json, "no eligible participant")] += 1
        elif not members_able:
            need[(kind, req_json, "no eligible participant is a member of the campaign")] += 1
        elif not pool:
            need[(kind, req_json, "every eligible participant reached the campaign's per-person quota")] += 1
        elif dialogue_id is not None:
            per_dialogue[(kind, req_json, dialogue_id)] += 1
            free[(kind, req_json, dialogue_id)] = pool
        elif all((instruction_id, pid) in declined for pid in pool):
            need[(kind, req_json, "every eligible participant skipped this instruction")] += 1
    for (kind, req_json, dialogue_id), n_open in per_dialogue.items():
        fresh = sum(1 for pid in free[(kind, req_json, dialogue_id)] if (dialogue_id, pid) not in seen)
        if fresh == 0:
            need[(kind, req_json, "every eligible participant has already seen the dialogue")] += n_open
        elif fresh < n_open:  # each open task of a dialogue needs a different person
            reason = "too few eligible participants who have not seen the dialogue (each task needs another person)"
            need[(kind, req_json, reason)] += n_open - fresh
    return [
        {
            "kind": kind,
            "requirement": json.loads(req_json),
            "reason": reason,
            "open_tasks": n,
            "eligible_participants": len(able[(kind, req_json)]),
        }
        for (kind, req_json, reason), n in sorted(need.items())
    ]


# -- export ------------------------------------------------------------------------------------
def turn_dict(t: Mapping[Any, Any]) -> dict[str, Any]:
    """A turn as the export lists it."""
    return {k: t[k] for k in ("role", "text", "tension", "state", "trace_id", "refused")}


def export_row(
    d: Mapping[Any, Any],
    record: dict[str, Any],
    task: Mapping[Any, Any],
    ann: Sequence[Mapping[Any, Any]],
    said: list[dict[str, Any]],
    failures: int,
    people: dict[str, Participant],
    models: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One export row (docs/star.md, "Export schema") from a dialogue and what belongs to it:
    its instruction record, its red-teaming task, its annotations in order (each with the
    ``slot`` requirement of its task), its turns, its count of target failures and its
    campaign's recorded persona models (None: a campaign of people, or one stored before them)."""
    requirement = json.loads(task["requirement"])
    group = requirement.get("group")
    attacker = people.get(d["red_teamer_id"])
    row: dict[str, Any] = {
        "dialogue_id": d["id"],
        "campaign": d["campaign"],
        "status": d["status"],
        "refused": d["refused"],
        "instruction_id": d["instruction_id"],
        **{k: v for k, v in record.items() if k not in ("text", "id")},
        "red_teamer_id": d["red_teamer_id"],
        "red_teamer_simulated": attacker.simulated if attacker else None,
        "red_teamer_required": requirement.get("attacker"),
        "red_teamer_in_group": attacker.in_group(group) if attacker and group else None,
        "matching_relaxed": task["relaxed"],
        "target": d["target"],
        "persona_models": dict(models) if models else None,
        "turns": said,
        "pre_annotation": json.loads(d["pre_annotation"]) if d["pre_annotation"] else None,
    }
    anns = [a for a in ann if a["kind"] == TaskKind.ANNOTATE.value]
    arb = next((a for a in ann if a["kind"] == TaskKind.ARBITRATE.value), None)
    for i, a in enumerate(anns[:2], start=1):
        p = people.get(a["participant_id"])
        row[f"annotator{i}_id"] = a["participant_id"]
        row[f"annotator{i}_rating"] = a["rating"]
        row[f"annotator{i}_reasoning"] = a["reasoning"]
        row[f"annotator{i}_in_group"] = p.in_group(group) if p and group else None
        row[f"annotator{i}_simulated"] = p.simulated if p else None
        row[f"annotator{i}_model"] = a.get("model")
        row[f"annotator{i}_required"] = json.loads(a["slot"]).get("annotator") if a["slot"] else None
        row[f"annotator{i}_expert"] = _is_expert(p)
        row[f"annotator{i}_matched_expertise"] = _expert_slot(a["slot"])
    row["arbitration_needed"] = len(anns) == 2 and arbitration_needed(anns[0]["rating"], anns[1]["rating"])
    row["arbitrator_id"] = arb["participant_id"] if arb else None
    row["arbitrator_rating"] = arb["rating"] if arb else None
    row["arbitrator_reasoning"] = arb["reasoning"] if arb else None
    row["arbitrator_model"] = arb.get("model") if arb else None
    arbitrator = people.get(arb["participant_id"]) if arb else None
    row["arbitrator_in_group"] = arbitrator.in_group(group) if arbitrator and group else None
    row["arbitrator_expert"] = _is_expert(arbitrator)
    row["arbitrator_matched_expertise"] = _expert_slot(arb["slot"]) if arb else None
    row["target_failures"] = failures
    return row


def _is_expert(person: Participant | None) -> bool | None:
    """The rater is an expert: they declared an expertise a policy rule can be matched on (medical,
    fact-checking, legal, financial). None for a rater the store does not know."""
    return bool(EXPERTISE & set(person.expertise)) if person is not None else None


def _expert_slot(slot: str | None) -> str | None:
    """The expertise this rating's task required (the rater was matched as an expert on it), or None."""
    requirement = json.loads(slot) if slot else {}
    return str(requirement["expertise"]) if requirement.get("matching") == "expertise" else None
