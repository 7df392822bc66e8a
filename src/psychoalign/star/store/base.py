"""The STAR store's contract: :class:`StarStore`, with the errors and settings its users need.

Two implementations keep it: :class:`~psychoalign.star.store.sql.SQLStarStore` (SQLite or
PostgreSQL, what the lab and the CLI use) and
:class:`~psychoalign.star.store.memory.InMemoryStarStore` (tests, throwaway runs). One contract
test (``tests/star/store/test_contract.py``) runs against both, on both databases.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Callable, Collection, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...errors import InputError
from ..instructions import Instruction
from ..model import Participant, PreAnnotation, TaskKind, TaskRecord, Turn
from ..policy import Policy
from .rules import AssignmentPlan, AssignmentQueue, assignment_report, plan_assignment, plan_rows

#: A campaign's lifecycle: ``draft`` (planned, not launched: no claims), ``live`` (claims allowed),
#: ``paused`` (no new claims; held tasks may be finished), ``closed`` (final: held tasks released,
#: submissions refused).
CAMPAIGN_STATUSES = ("draft", "live", "paused", "closed")
#: The status of a campaign stored without one (before statuses existed): it took claims.
LIVE = "live"


class ClaimError(InputError):
    """No task can be given to this participant (with the reason)."""


class CampaignClosedError(InputError):
    """The campaign was closed by its lead: nothing more is submitted to it."""


def closed_error(campaign: str) -> InputError:
    return CampaignClosedError(
        f"campaign '{campaign}' was closed by its lead: this task was released and nothing more is stored",
        hint="your earlier work is kept; take a task of another campaign",
    )


def check_status(status: str) -> None:
    if status not in CAMPAIGN_STATUSES:
        raise InputError(f"unknown campaign status '{status[:20]}'", hint=", ".join(CAMPAIGN_STATUSES))


class CampaignSettings(BaseModel):
    """Settings a campaign stores with its plan; the store applies them to every task it opens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("quota")
    @classmethod
    def _quota(cls, value: dict[str, int]) -> dict[str, int]:
        kinds = {k.value for k in TaskKind}
        bad = sorted(set(value) - kinds)
        if bad:
            raise ValueError(f"quota for unknown task kinds {bad}: use {sorted(kinds)}")
        if any(n < 1 for n in value.values()):
            raise ValueError("a quota is at least 1 (leave it out for no limit)")
        return value

    outgroup_annotator_share: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Share of annotation slots on group-targeting dialogues reserved for out-group annotators "
        "(the control group); the rest need in-group annotators. Balanced within ±1 per target group.",
    )
    quota: dict[str, int] = Field(
        default_factory=dict,
        description="Per-person quota: the most tasks of a kind (red_team, annotate, arbitrate) one participant "
        "takes in this campaign (claimed or done), so no single person's view dominates. Set at creation.",
    )
    persona_models: dict[str, str] = Field(
        default_factory=dict,
        description="The models a persona campaign (psychoalign star campaign run) ran on, by role: attacker, "
        "annotator (annotators, arbitrators and the pre-annotation), refusal_judge. Recorded by its first run, "
        "checked by every rerun; empty for a campaign of people or one stored before it was recorded.",
    )
    relax_red_team: bool = Field(
        False,
        description="When nobody who meets a red-teaming task's in/out-group requirement takes it, a red "
        "teamer who does not may (the lab's claims; the task records why, the export says matching_relaxed).",
    )


def _utc_now() -> datetime:
    return datetime.now(UTC)


class StarStore(ABC):
    """The STAR lab's persistent state and its pipeline operations.

    **Atomicity and crashes.** Every operation is all or nothing: in the SQL store each is one
    transaction (a few documented ones are a sequence of them), so a crash loses no submitted work
    and leaves nothing half-done: a dialogue keeps every turn stored before the crash, a batch of
    participants or a campaign plan is stored whole or not at all. The in-memory store keeps
    nothing past the process.

    **Claims are leases.** A claimed task is held for ``lease_s`` seconds (default one hour),
    renewed by every turn and by :meth:`renew_lease`. A task whose holder vanished (a closed
    browser tab, a campaign killed with ``kill -9``) is re-queued once its lease expires
    (:meth:`expire_leases`, run before every claim, batch assignment, shortfall and listing of
    held tasks), exactly as if the holder had released it (:meth:`release`).

    **Never twice.** Nobody sees the same dialogue twice in any role: the red teamer who made it,
    each annotator and the arbitrator are different people (an exposure record per dialogue and
    person, kept when a task is released). A red-teaming instruction a participant skipped
    (``release(..., decline=True)``) is never offered to them again.

    **Ordering.** Queues are oldest first: by creation time, then task id. A task given back keeps
    its place (its replacement keeps the creation time).

    **Campaigns.** A campaign is ``draft``, ``live``, ``paused`` or ``closed``
    (:data:`CAMPAIGN_STATUSES`). Only live campaigns give tasks to claims or batch assignment; a closed campaign also
    refuses every submission with :class:`CampaignClosedError`. Members-only campaigns give tasks
    to their members alone. A campaign's per-person quota (:class:`CampaignSettings`) caps the
    tasks of a kind one person holds or did in it. A campaign stored before statuses, settings or
    membership existed counts as live, with default settings, open to everyone.

    **Errors.** A request the store refuses raises :class:`~psychoalign.errors.InputError` (one
    line naming what and why; nothing is stored): :class:`ClaimError` when no task can be given,
    :class:`CampaignClosedError` for work on a closed campaign.

    ``policy`` is the STAR policy whose rules decide who may annotate a dialogue; ``lease_s`` how
    long a claim lasts without activity; ``clock`` (a UTC ``datetime`` factory) exists so tests
    can move time instead of sleeping.
    """

    def __init__(self, policy: Policy, *, lease_s: float = 3600.0, clock: Callable[[], datetime] | None = None) -> None:
        if lease_s <= 0:
            raise InputError(f"lease_s must be positive (got {lease_s})")
        self.policy = policy
        self.lease_s = lease_s
        self._clock = clock or _utc_now

    def _now(self) -> datetime:
        return self._clock()

    def _lease(self, lease_s: float | None = None) -> datetime:
        return self._now() + timedelta(seconds=self.lease_s if lease_s is None else lease_s)

    async def init(self) -> None:  # noqa: B027 - nothing to prepare by default
        """Prepare the store (the SQL store creates what is missing). Idempotent; every
        operation that needs it calls it."""

    async def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release connections. Idempotent."""

    async def _release_each(self, held: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """Release each held ``(task, participant)``, each on its own; those submitted or released
        meanwhile are left out of the answer."""
        released = []
        for task_id, pid in held:
            try:
                await self.release(task_id, pid)
            except InputError:
                continue
            released.append((task_id, pid))
        return released

    async def _batch_people(
        self,
        kind: TaskKind,
        campaign: str | None,
        participant_ids: Collection[str] | None,
        max_per_participant: int | None,
    ) -> tuple[list[Participant], int | None]:
        """Who a batch assignment may give work to (expired leases re-queued first), and the most
        tasks each may get: the campaign's per-person quota caps the batch too."""
        await self.expire_leases(campaign)
        if campaign is not None:
            cap = (await self.quotas([campaign]))[campaign].get(kind.value)
            if cap is not None:
                max_per_participant = cap if max_per_participant is None else min(cap, max_per_participant)
        people = await self.list_participants()
        if participant_ids is not None:
            wanted = set(participant_ids)
            people = [p for p in people if p.id in wanted]
        return people, max_per_participant

    async def _counted_people(self, campaign: str | None, available: Collection[str] | None) -> list[Participant]:
        """Who the shortfall counts (expired leases re-queued first): ``available`` ids and every
        simulated participant, or everyone."""
        await self.expire_leases(campaign)
        people = await self.list_participants()
        if available is not None:
            allowed = set(available)
            people = [p for p in people if p.simulated or p.id in allowed]
        return people

    # -- participants ----------------------------------------------------------------------------
    @abstractmethod
    async def add_participants(self, people: Sequence[Participant]) -> None:
        """Register participants, all or nothing: an id already stored refuses the whole batch
        (:class:`InputError`, nothing added)."""

    @abstractmethod
    async def participant(self, pid: str) -> Participant:
        """The participant with this id; :class:`InputError` if unknown."""

    @abstractmethod
    async def list_participants(self) -> list[Participant]:
        """Every participant, by id."""

    @abstractmethod
    async def update_participant(self, person: Participant) -> None:
        """Replace a participant's questionnaire answers (demographics, expertise, roles).
        :class:`InputError` for an unknown id."""

    # -- campaigns -------------------------------------------------------------------------------
    async def create_campaign(
        self,
        campaign: str,
        items: Sequence[Instruction],
        *,
        outgroup_annotator_share: float = 0.0,
        quota: dict[str, int] | None = None,
        members_only: bool = False,
        status: str = LIVE,
    ) -> int:
        """Store the plan and one open red-teaming task per instruction, all or nothing; returns
        how many. Group-targeting instructions require an in-group or an out-group attacker,
        50/50 within ±1 per cell, group and campaign. Stored instruction ids are
        ``<campaign>:<id>`` (two campaigns from one seed do not collide; the same instruction
        twice in one campaign fails and stores nothing). ``outgroup_annotator_share`` and the
        per-person ``quota`` (see :class:`CampaignSettings`, validated first) are stored with a
        new campaign; adding instructions to an existing one keeps its settings.
        ``members_only`` campaigns are taken only by the participants added with
        :meth:`add_members`. ``status`` is a new campaign's: ``live`` (its tasks are taken at once)
        or ``draft`` (launched later with :meth:`set_campaign_status`)."""
        check_status(status)
        settings = CampaignSettings(outgroup_annotator_share=outgroup_annotator_share, quota=quota or {})
        await self.init()
        now = self._now()
        instruction_rows, task_rows = plan_rows(campaign, items, now)
        row = {
            "name": campaign,
            "settings": settings.model_dump_json(),
            "created_at": now,
            "members_only": members_only,
            "status": status,
        }
        await self._store_plan(row, instruction_rows, task_rows)
        return len(items)

    @abstractmethod
    async def _store_plan(
        self, campaign: dict[str, Any], instruction_rows: list[dict[str, Any]], task_rows: list[dict[str, Any]]
    ) -> None:
        """:meth:`create_campaign`'s writes, all or nothing: the ``campaign`` row unless the campaign
        exists (adding instructions keeps its settings), its instructions and their tasks."""

    @abstractmethod
    async def campaign_settings(self, campaign: str) -> CampaignSettings:
        """The campaign's stored settings (defaults for a campaign stored without them)."""

    @abstractmethod
    async def update_campaign_settings(self, campaign: str, **changes: Any) -> CampaignSettings:
        """Change a stored campaign's settings (validated); returns the new ones. The quota is
        fixed at creation (:class:`InputError`); so is an unknown campaign."""

    @abstractmethod
    async def relaxed_campaigns(self) -> list[str]:
        """Campaigns whose red teaming may be relaxed (:attr:`CampaignSettings.relax_red_team`), oldest first."""

    async def campaign_status(self, campaign: str) -> str:
        """``draft``, ``live``, ``paused`` or ``closed`` (a campaign stored before statuses existed is live)."""
        return (await self.campaign_statuses([campaign]))[campaign]

    @abstractmethod
    async def campaign_statuses(self, campaigns: Collection[str] | None = None) -> dict[str, str]:
        """The status of each of ``campaigns`` (unknown ones are live; default: every campaign
        with stored settings)."""

    @abstractmethod
    async def set_campaign_status(self, campaign: str, status: str) -> list[tuple[str, str]]:
        """Launch a draft or resume (``live``), pause (``paused``) or close (``closed``) a campaign.

        Draft: no claims (a draft may be launched or closed, nothing else). Paused: no new claims
        (held tasks may still be finished and submitted). Closed is final: no claims, no
        submissions, and every task still held is released (a started red-teaming dialogue is
        kept as ``abandoned``, as on a skip). Closing again releases anything still
        held (e.g. after a crash between the two steps: the status is committed first, then each
        held task is released on its own). Returns the released ``(task, participant)`` pairs, so
        the caller can stop their clocks. :class:`InputError` for an unknown status or campaign,
        for reopening or pausing a closed campaign, pausing a draft, or taking a launched campaign
        back to draft."""

    @abstractmethod
    async def members_only(self, campaign: str) -> bool:
        """Whether only the campaign's members take its tasks (False for a campaign without settings)."""

    @abstractmethod
    async def set_members_only(self, campaign: str, on: bool) -> None:
        """Restrict the campaign to its members (``on``) or open it to every participant.
        :class:`InputError` for a campaign without stored settings."""

    @abstractmethod
    async def members(self, campaign: str) -> list[str]:
        """The participant ids added to the campaign, sorted."""

    @abstractmethod
    async def add_members(self, campaign: str, participant_ids: Collection[str]) -> int:
        """Add participants to the campaign; returns how many were new (adding a member again is
        a no-op). Known participants only: one unknown id adds nobody (:class:`InputError`
        naming them)."""

    @abstractmethod
    async def remove_member(self, campaign: str, participant_id: str) -> list[str]:
        """Take a participant out of the campaign: no new claims of it (if it is members-only),
        and the tasks of it they hold are released as on a skip (each release on its own after
        the removal). Their submitted work stays. Returns the released task ids.
        :class:`InputError` for someone who is not a member and holds no task of it; tasks of it
        held without a membership (a removal interrupted before the release, an open campaign)
        are released."""

    @abstractmethod
    async def has_campaign(self, campaign: str) -> bool:
        """Whether the campaign has a stored plan."""

    @abstractmethod
    async def campaigns(self) -> list[str]:
        """Every campaign with a stored plan, by name."""

    @abstractmethod
    async def instruction(self, instruction_id: str) -> dict[str, Any]:
        """A stored instruction's record; :class:`InputError` if unknown."""

    @abstractmethod
    async def quotas(self, campaigns: Collection[str]) -> dict[str, dict[str, int]]:
        """The per-person quota of each of ``campaigns`` (``{}``: none; a quota never changes)."""

    @abstractmethod
    async def data_version(self, campaign: str) -> str:
        """A fingerprint of the campaign's submitted work (how many of its tasks were submitted, and
        the latest submission's time): it changes with every submitted dialogue, annotation or
        arbitration and with nothing else, so results computed from the data can be kept until it does."""

    @abstractmethod
    async def task_counts(self, campaign: str) -> dict[str, dict[str, int]]:
        """Tasks per kind and status for a campaign: ``{kind: {status: n}}``, every kind present."""

    @abstractmethod
    async def plan_and_done(self, campaign: str) -> tuple[list[dict[str, Any]], list[str]]:
        """The campaign's instruction records, and the ids of instructions with a submitted
        dialogue. :class:`InputError` for a campaign without a plan."""

    # -- claims, leases, batch assignment ----------------------------------------------------------
    async def claim(
        self,
        participant_id: str,
        kind: TaskKind,
        *,
        campaign: str | None = None,
        relax: bool = False,
        lease_s: float | None = None,
    ) -> TaskRecord:
        """Give the participant the oldest open task of ``kind`` they may take (in ``campaign``,
        or any), leased for ``lease_s`` (default: the store's). Expired leases are re-queued first.

        They may take it when they are eligible (:func:`~psychoalign.star.matching.eligible`),
        have not seen its dialogue, did not skip its instruction, are under the campaign's quota,
        and the campaign is live (and has them as a member if it is members-only). ``relax`` lets
        a red teamer take a task whose in/out-group requirement they do not meet (never the role)
        when none they meet is among the oldest candidates; the task records why (``relaxed``).

        Safe under concurrent claimers: a task goes to one claimer only, and a pause, close or
        removal that lands during a claim rolls it back. :class:`ClaimError` names the commonest
        reasons when nothing can be given; :class:`InputError` for an unknown participant."""
        person = await self.participant(participant_id)
        await self.expire_leases(campaign)
        return await self._claim(person, kind, campaign, relax, lease_s)

    @abstractmethod
    async def _claim(
        self, person: Participant, kind: TaskKind, campaign: str | None, relax: bool, lease_s: float | None
    ) -> TaskRecord:
        """:meth:`claim` once the person is known and expired leases are re-queued."""

    @abstractmethod
    async def available(self, participant_id: str, kind: TaskKind) -> int:
        """How many tasks of ``kind`` this person could claim now under the rules of :meth:`claim`
        (strict matching; one per dialogue), counted over the first page of the queue (the oldest
        200 open tasks not seen): a lower bound beyond it, and 0 exactly when a claim finds nothing
        on that page. For a progress line and to hide a button that would lead nowhere."""

    async def assign_all(
        self,
        kind: TaskKind,
        *,
        campaign: str | None = None,
        relax: bool = False,
        participant_ids: Collection[str] | None = None,
        max_per_participant: int | None = None,
        lease_s: float | None = None,
        limit: int | None = None,
    ) -> dict[str, Any]:
        """Assign every open task of ``kind`` at once (a research lead's batch assignment, and
        how an unattended campaign spreads work over its personas).

        Balanced: tasks with the fewest eligible participants go first, and each goes to the
        eligible participant (restricted to ``participant_ids`` if given) with the fewest tasks of
        this kind in this campaign (claimed or done) who has not seen its dialogue, so when
        everyone is eligible for everything loads differ by at most one. Nobody gets more than
        ``max_per_participant`` tasks of this kind in the campaign, nor more than its quota. Same
        rules as :meth:`claim`, and safe next to concurrent claimers (a task taken meanwhile is
        skipped). ``limit`` stops after that many assignments (a worker that takes work in rounds,
        so its leases do not run out while it works through a long batch). Returns ``assigned``,
        ``open_before``, ``participants_used``, ``max_load``, the ``assignments``
        (``task_id -> participant``) and the ``shortfall`` per requirement and reason for tasks
        nobody could take.

        Read once, plan in Python (:func:`~psychoalign.star.store.rules.plan_assignment`), then
        take the planned tasks."""
        await self.init()
        people, max_per_participant = await self._batch_people(kind, campaign, participant_ids, max_per_participant)
        queue = await self._assignable(kind, campaign)
        plan = plan_assignment(kind, queue, people, max_per_participant=max_per_participant, relax=relax, limit=limit)
        taken = await self._take_planned(kind, plan, lease_s)
        return assignment_report(len(queue.open_tasks), taken, plan)

    @abstractmethod
    async def _assignable(self, kind: TaskKind, campaign: str | None) -> AssignmentQueue:
        """What :meth:`assign_all` plans from: the open tasks of ``kind`` in live campaigns (of
        ``campaign``), who saw or skipped what, the load per person, and who may take a members-only
        campaign's tasks."""

    @abstractmethod
    async def _take_planned(self, kind: TaskKind, plan: AssignmentPlan, lease_s: float | None) -> dict[str, str]:
        """Claim the planned tasks, all at once, leased for ``lease_s``; a task claimed meanwhile
        (or of a campaign no longer live) is skipped. Returns ``task_id -> participant``."""

    @abstractmethod
    async def task(self, task_id: str) -> TaskRecord:
        """The task with this id; :class:`InputError` if unknown."""

    @abstractmethod
    async def list_tasks(self, campaign: str | None = None, *, kind: TaskKind | None = None) -> list[TaskRecord]:
        """Every task (of ``campaign`` and ``kind`` if given), oldest first."""

    @abstractmethod
    async def renew_lease(self, task_id: str, participant_id: str, lease_s: float | None = None) -> None:
        """Extend the lease of a task the participant holds (a page heartbeat, a long dialogue).
        :class:`InputError` naming why otherwise (unknown task, not theirs, campaign closed)."""

    @abstractmethod
    async def expire_leases(self, campaign: str | None = None) -> int:
        """Re-queue every claimed task (of ``campaign``) whose lease has expired, as
        :meth:`release` would; returns how many. Safe to run from many workers at once."""

    @abstractmethod
    async def release(self, task_id: str, participant_id: str, *, decline: bool = False) -> None:
        """Skip / opt out without penalty: give a claimed task back so someone else can take it.

        The participant's exposure stays, so they are never offered that dialogue again. A
        red-teaming task whose dialogue has started keeps that dialogue (status ``abandoned``,
        turns kept, never annotated), is marked ``released``, and a fresh open task for the same
        instruction and requirement replaces it (same place in the queue). ``decline`` (the
        participant skipped it, rather than a lease running out) also keeps a red-teaming
        instruction from being offered to them again. :class:`InputError` unless the participant
        holds the task."""

    @abstractmethod
    async def held_task(self, participant_id: str, kind: TaskKind) -> str | None:
        """The id of a task of ``kind`` this participant holds (the oldest claimed), if any."""

    @abstractmethod
    async def claimed_tasks(self, participant_id: str) -> list[TaskRecord]:
        """The tasks this participant holds right now, oldest claimed first. Expired leases are
        re-queued first, so a task that is no longer theirs is not listed."""

    @abstractmethod
    async def shortfall(
        self, campaign: str | None = None, *, available: Collection[str] | None = None
    ) -> list[dict[str, Any]]:
        """Open tasks nobody can take, per (kind, requirement, reason): no registered participant
        is eligible; none is a member of a members-only campaign; every eligible one reached the
        campaign's quota, has already seen the dialogue or skipped the red-teaming instruction; or
        a dialogue's open tasks need more different people than there are eligible ones who have
        not seen it (two annotators are two people). Expired leases are re-queued first, so a task
        stuck with a vanished holder shows up here too. ``available`` restricts who counts to
        these participant ids (e.g. accounts that can still log in); simulated participants
        always count. Each entry: ``kind``, ``requirement``, ``reason``, ``open_tasks``,
        ``eligible_participants``; sorted."""

    # -- red teaming -----------------------------------------------------------------------------
    @abstractmethod
    async def start_dialogue(self, task_id: str, participant_id: str, target: str) -> str:
        """Start the dialogue of a red-teaming task the participant holds; returns its id.
        Idempotent: a task whose dialogue exists (resuming after a crash) returns that one.
        :class:`InputError` unless they hold it; :class:`CampaignClosedError` if closed."""

    async def add_turn(self, dialogue_id: str, turn: Turn) -> int:
        """Append one turn (on its own: a crash keeps every turn before it) and renew the
        red-teaming task's lease. Refused unless the dialogue is in progress (an abandoned
        dialogue, whose task was released or expired, takes no more turns)."""
        return (await self.add_turns(dialogue_id, [turn]))[0]

    @abstractmethod
    async def add_turns(self, dialogue_id: str, new_turns: Sequence[Turn]) -> list[int]:
        """Append several turns at once (e.g. a red-teamer message with the target's reply: both
        or neither) and renew the task's lease. Returns their indices, numbered after the turns
        already stored even when two appends race. :class:`InputError` unless the dialogue is
        in progress; :class:`CampaignClosedError` if its campaign is closed."""

    @abstractmethod
    async def record_target_failure(
        self, dialogue_id: str, reason: str, *, attempt: int = 1, trace_id: str | None = None
    ) -> None:
        """The target failed to answer (error, timeout, fail-closed negotiation): a failure of the
        target, stored beside the dialogue at the next turn's index, never as a turn. ``attempt``
        counts retries from 1; ``reason`` is cut to 2000 characters."""

    @abstractmethod
    async def target_failure_counts(self, campaign: str) -> dict[str, int]:
        """Failed target attempts per dialogue of the campaign (dialogues with none are absent)."""

    @abstractmethod
    async def recent_target_failures(self, campaign: str, limit: int = 3) -> tuple[int, list[dict[str, Any]]]:
        """How often the target failed to answer in the campaign, and the latest ``limit``
        failures, newest first (``at``, ``reason``)."""

    async def finish_dialogue(
        self,
        dialogue_id: str,
        participant_id: str,
        pre: PreAnnotation,
        *,
        refused: bool = False,
        target_failed: bool = False,
    ) -> list[str]:
        """Submit the dialogue with its pre-annotation and open two annotation tasks (returns
        their ids), unless the attacker refused (status ``refused``: a non-attack is not annotated
        as an attack) or the target never answered (``target_failed`` with no turns: status
        ``target_failed``; its failures are in :meth:`target_failure_counts`). On a
        group-targeting dialogue the two slots need in- or out-group annotators per the
        campaign's ``outgroup_annotator_share`` (the requirement's ``annotator`` field), balanced
        within ±1 per target group. :class:`InputError` for an unknown dialogue, one that is not
        the participant's in-progress dialogue, or one without turns (unless refused or failed);
        :class:`CampaignClosedError` if closed."""
        settings = await self.campaign_settings(await self._dialogue_campaign(dialogue_id))
        share = settings.outgroup_annotator_share
        return await self._submit_dialogue(
            dialogue_id, participant_id, pre.model_dump_json(), refused, target_failed, share
        )

    @abstractmethod
    async def _dialogue_campaign(self, dialogue_id: str) -> str:
        """The campaign of a dialogue; :class:`InputError` if unknown."""

    @abstractmethod
    async def _submit_dialogue(
        self, dialogue_id: str, participant_id: str, pre: str, refused: bool, target_failed: bool, share: float
    ) -> list[str]:
        """:meth:`finish_dialogue`'s checks and writes, all or nothing (``pre``: the pre-annotation as
        JSON; ``share``: the campaign's out-group annotator share, read before)."""

    @abstractmethod
    async def dialogue_turns(self, dialogue_id: str) -> list[Turn]:
        """The dialogue's turns, in order (none for an unknown dialogue)."""

    @abstractmethod
    async def dialogue_of_task(self, task_id: str) -> str | None:
        """The dialogue a red-teaming task started, if any."""

    @abstractmethod
    async def dialogue_info(self, dialogue_id: str) -> dict[str, Any]:
        """A dialogue's record: ``id``, ``campaign``, ``instruction_id``, ``task_id``,
        ``red_teamer_id``, ``target``, ``status``, ``pre_annotation`` (a dict or None),
        ``refused``, ``created_at``. :class:`InputError` if unknown."""

    @abstractmethod
    async def dialogue_instruction(self, dialogue_id: str) -> dict[str, Any]:
        """The instruction record a dialogue was red-teamed from; :class:`InputError` if unknown."""

    @abstractmethod
    async def dialogue_task_ids(self, campaign: str) -> dict[str, str]:
        """dialogue id -> the red-teaming task it came from, for a campaign."""

    # -- annotation and arbitration -----------------------------------------------------------------
    @abstractmethod
    async def submit_annotation(
        self, task_id: str, participant_id: str, rating: int, reasoning: str, *, model: str | None = None
    ) -> str | None:
        """Store a rating (1-4) with its reasoning and submit the task; ``model``: the label of the
        model that wrote it when an LLM persona did (exported per rating, checked by the analysis;
        refused for a participant who is not simulated). Returns the arbitration
        task id when this completes a pair that is two or more steps apart
        (:func:`~psychoalign.star.store.arbitration_needed`), else None. :class:`InputError` for a
        rating off the scale, an empty reasoning, or a task the participant does not hold;
        :class:`CampaignClosedError` if closed."""

    @abstractmethod
    async def submit_arbitration(
        self, task_id: str, participant_id: str, rating: int, reasoning: str, *, model: str | None = None
    ) -> None:
        """Store the arbitrator's rating: as :meth:`submit_annotation`, and :class:`InputError`
        unless the dialogue has a diverging pair of annotations."""

    @abstractmethod
    async def reasonings(self, dialogue_id: str) -> list[tuple[int, str]]:
        """What an arbitrator sees besides the dialogue: both annotators' ratings and reasoning."""

    @abstractmethod
    async def dialogue_view(
        self, dialogue_id: str, *, reasons: bool = False
    ) -> tuple[dict[str, Any], list[Turn], list[tuple[int, str]]]:
        """What an annotation or arbitration page shows: the instruction record the dialogue came
        from, its turns, and (``reasons``, for arbitrators) both annotators' ratings and
        reasoning. :class:`InputError` for an unknown dialogue."""

    # -- export ----------------------------------------------------------------------------------
    async def export_rows(self, campaign: str | None = None) -> list[dict[str, Any]]:
        """One row per dialogue, oldest first: instruction parameters, matching, turns,
        pre-annotation, annotations and arbitration (docs/star.md, "Export schema")."""
        return [row async for row in self.iter_export_rows(campaign)]

    @abstractmethod
    def iter_export_rows(self, campaign: str | None = None, *, batch: int = 500) -> AsyncIterator[dict[str, Any]]:
        """:meth:`export_rows` one row at a time, reading ``batch`` dialogues at a time; nothing
        is held between rows, so a slow consumer holds no database resource."""
