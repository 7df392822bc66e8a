"""The in-memory STAR store's rows and the steps its operations share, with the participants
and campaigns (the base of :class:`~psychoalign.star.store.memory.InMemoryStarStore`)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime
from typing import Any

from ...errors import InputError
from ..model import Participant, TaskKind
from ..policy import Policy
from .base import LIVE, CampaignSettings, StarStore, check_status, closed_error
from .rules import (
    LOADED,
    check_status_change,
    data_version,
    no_campaign,
    no_settings,
    not_a_member,
    not_claimed,
    not_of_kind,
    participants_exist,
    quota_fixed,
    unknown,
    unknown_people,
)


def _oldest(row: dict[str, Any]) -> tuple[datetime, str]:
    return row["created_at"], row["id"]


class _MemoryState(StarStore):
    """The rows (the SQL store's, in dicts), the shared steps, participants and campaigns."""

    def __init__(self, policy: Policy, *, lease_s: float = 3600.0, clock: Callable[[], datetime] | None = None) -> None:
        super().__init__(policy, lease_s=lease_s, clock=clock)
        self._people: dict[str, str] = {}  # id -> the participant as JSON
        self._instructions: dict[str, dict[str, Any]] = {}
        self._tasks: dict[str, dict[str, Any]] = {}
        self._campaigns: dict[str, dict[str, Any]] = {}  # name -> its star_campaigns row
        self._members: dict[tuple[str, str], datetime] = {}  # (campaign, participant) -> added
        self._dialogues: dict[str, dict[str, Any]] = {}
        self._dialogue_of: dict[str, str] = {}  # red-teaming task -> its dialogue
        self._turns: dict[str, list[dict[str, Any]]] = {}
        self._annotations: list[dict[str, Any]] = []
        self._exposures: dict[tuple[str, str], str] = {}  # (dialogue, participant) -> role
        self._declines: dict[tuple[str, str], datetime] = {}  # (instruction, participant) -> when
        self._failures: list[dict[str, Any]] = []

    # -- shared steps ------------------------------------------------------------------------------
    def _person(self, pid: str) -> Participant:
        if pid not in self._people:
            raise unknown("participant", pid)
        return Participant.model_validate_json(self._people[pid])

    def _status(self, campaign: str) -> str:
        row = self._campaigns.get(campaign)
        return str(row["status"]) if row else LIVE

    def _refuse_if_closed(self, campaign: str) -> None:
        if self._status(campaign) == "closed":
            raise closed_error(campaign)

    def _own(self, task_id: str, participant_id: str, kind: TaskKind) -> dict[str, Any]:
        row = self._tasks.get(task_id)
        if row is None or row["kind"] != kind.value:
            raise not_of_kind(kind, task_id)
        self._refuse_if_closed(row["campaign"])
        if row["participant_id"] != participant_id or row["status"] != "claimed":
            raise not_claimed(task_id, participant_id, row["status"])
        return row

    def _may_claim(self, campaign: str, pid: str) -> bool:
        row = self._campaigns.get(campaign)
        return row is None or (row["status"] == LIVE and (not row["members_only"] or (campaign, pid) in self._members))

    def _scope(self, campaigns: Iterable[str]) -> dict[str, set[str]]:
        """The members of each members-only campaign among ``campaigns``."""
        scoped = {c for c in campaigns if c in self._campaigns and self._campaigns[c]["members_only"]}
        return {c: {p for m, p in self._members if m == c} for c in scoped}

    def _open_tasks(self, kind: str | None = None, campaign: str | None = None) -> list[dict[str, Any]]:
        rows = [
            r
            for r in self._tasks.values()
            if r["status"] == "open"
            and (kind is None or r["kind"] == kind)
            and (not campaign or r["campaign"] == campaign)
        ]
        return sorted(rows, key=_oldest)

    def _load(
        self, pid: str | None, kind: str | None, campaigns: Collection[str] | None
    ) -> Counter[tuple[str, str, str]]:
        """Tasks held or done per (campaign, kind, participant)."""
        return Counter(
            (r["campaign"], r["kind"], r["participant_id"])
            for r in self._tasks.values()
            if r["status"] in LOADED
            and r["participant_id"]
            and (pid is None or r["participant_id"] == pid)
            and (kind is None or r["kind"] == kind)
            and (campaigns is None or r["campaign"] in campaigns)
        )

    def _at_quota(self, pid: str, kind: TaskKind, campaigns: Collection[str]) -> set[str]:
        caps = {c: q[kind.value] for c, q in self._quotas(campaigns).items() if kind.value in q}
        load = self._load(pid, kind.value, caps)
        return {c for c, cap in caps.items() if load[(c, kind.value, pid)] >= cap}

    def _quotas(self, campaigns: Collection[str]) -> dict[str, dict[str, int]]:
        return {c: self._settings(c).quota for c in campaigns}

    def _settings(self, campaign: str) -> CampaignSettings:
        row = self._campaigns.get(campaign)
        return CampaignSettings.model_validate_json(row["settings"]) if row else CampaignSettings()

    # -- participants ----------------------------------------------------------------------------
    async def add_participants(self, people: Sequence[Participant]) -> None:
        ids = [p.id for p in people]
        if len(set(ids)) != len(ids) or any(i in self._people for i in ids):
            raise participants_exist()
        self._people.update({p.id: p.model_dump_json() for p in people})

    async def participant(self, pid: str) -> Participant:
        return self._person(pid)

    async def list_participants(self) -> list[Participant]:
        return [Participant.model_validate_json(self._people[pid]) for pid in sorted(self._people)]

    async def update_participant(self, person: Participant) -> None:
        self._person(person.id)
        self._people[person.id] = person.model_dump_json()

    # -- campaigns -------------------------------------------------------------------------------
    async def _store_plan(
        self, campaign: dict[str, Any], instruction_rows: list[dict[str, Any]], task_rows: list[dict[str, Any]]
    ) -> None:
        ids = [r["id"] for r in instruction_rows]
        taken = sorted({i for i in ids if i in self._instructions} | {i for i, n in Counter(ids).items() if n > 1})
        if taken:
            raise InputError(f"campaign '{campaign['name']}' already has instruction '{taken[0]}'; nothing was stored")
        self._campaigns.setdefault(campaign["name"], campaign)
        self._instructions.update({r["id"]: r for r in instruction_rows})
        self._tasks.update({r["id"]: r for r in task_rows})

    async def campaign_settings(self, campaign: str) -> CampaignSettings:
        return self._settings(campaign)

    async def update_campaign_settings(self, campaign: str, **changes: Any) -> CampaignSettings:
        if "quota" in changes:
            raise quota_fixed()
        updated = CampaignSettings.model_validate({**self._settings(campaign).model_dump(), **changes})
        if campaign not in self._campaigns:
            raise no_campaign(campaign)
        self._campaigns[campaign]["settings"] = updated.model_dump_json()
        return updated

    async def relaxed_campaigns(self) -> list[str]:
        by_age = sorted(self._campaigns, key=lambda c: self._campaigns[c]["created_at"])
        return [c for c in by_age if self._settings(c).relax_red_team]

    async def data_version(self, campaign: str) -> str:
        done = [
            r["updated_at"] for r in self._tasks.values() if r["campaign"] == campaign and r["status"] == "submitted"
        ]
        return data_version(len(done), max(done, default=None))

    async def campaign_statuses(self, campaigns: Collection[str] | None = None) -> dict[str, str]:
        names = self._campaigns if campaigns is None else campaigns
        return {c: self._status(c) for c in names}

    async def set_campaign_status(self, campaign: str, status: str) -> list[tuple[str, str]]:
        check_status(status)
        if campaign not in self._campaigns:  # a campaign stored before settings existed gets its row now
            if not await self.has_campaign(campaign):
                raise no_campaign(campaign)
            settings = CampaignSettings().model_dump_json()
            self._campaigns[campaign] = {
                "name": campaign,
                "settings": settings,
                "created_at": self._now(),
                "status": LIVE,
                "members_only": False,
            }
        check_status_change(campaign, self._status(campaign), status)
        self._campaigns[campaign]["status"] = status
        if status != "closed":
            return []
        held = [
            (r["id"], r["participant_id"])
            for r in self._tasks.values()
            if r["campaign"] == campaign and r["status"] == "claimed"
        ]
        return await self._release_each(held)

    async def members_only(self, campaign: str) -> bool:
        return bool(self._campaigns.get(campaign, {}).get("members_only"))

    async def set_members_only(self, campaign: str, on: bool) -> None:
        if campaign not in self._campaigns:
            raise no_settings(campaign)
        self._campaigns[campaign]["members_only"] = on

    async def members(self, campaign: str) -> list[str]:
        return sorted(p for c, p in self._members if c == campaign)

    async def add_members(self, campaign: str, participant_ids: Collection[str]) -> int:
        wanted = set(participant_ids)
        if wanted - set(self._people):
            raise unknown_people(wanted - set(self._people))
        new = sorted(p for p in wanted if (campaign, p) not in self._members)
        now = self._now()
        self._members.update({(campaign, p): now for p in new})
        return len(new)

    async def remove_member(self, campaign: str, participant_id: str) -> list[str]:
        was_member = self._members.pop((campaign, participant_id), None) is not None
        held = [task for task in await self.claimed_tasks(participant_id) if task.campaign == campaign]
        if not was_member and not held:
            raise not_a_member(campaign, participant_id)
        return [task for task, _ in await self._release_each([(task.id, participant_id) for task in held])]

    async def has_campaign(self, campaign: str) -> bool:
        return any(r["campaign"] == campaign for r in self._instructions.values())

    async def campaigns(self) -> list[str]:
        return sorted({r["campaign"] for r in self._instructions.values()})

    async def instruction(self, instruction_id: str) -> dict[str, Any]:
        if instruction_id not in self._instructions:
            raise unknown("instruction", instruction_id)
        record: dict[str, Any] = json.loads(self._instructions[instruction_id]["record"])
        return record

    async def quotas(self, campaigns: Collection[str]) -> dict[str, dict[str, int]]:
        return self._quotas(campaigns)

    async def task_counts(self, campaign: str) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {k.value: {} for k in TaskKind}
        for r in self._tasks.values():
            if r["campaign"] == campaign:
                out[r["kind"]][r["status"]] = out[r["kind"]].get(r["status"], 0) + 1
        return out

    async def plan_and_done(self, campaign: str) -> tuple[list[dict[str, Any]], list[str]]:
        plan = [json.loads(r["record"]) for r in self._instructions.values() if r["campaign"] == campaign]
        if not plan:
            raise no_campaign(campaign)
        done = [
            d["instruction_id"]
            for d in self._dialogues.values()
            if d["campaign"] == campaign and d["status"] == "submitted"
        ]
        return plan, done
