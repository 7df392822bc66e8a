"""The SQL STAR store's campaigns: plan, settings, lifecycle, membership and progress."""

from __future__ import annotations

import json
from collections.abc import Collection
from typing import Any

from sqlalchemy import and_, func, insert, select, update

from ..model import TaskKind
from .base import LIVE, CampaignSettings, check_status
from .rules import (
    check_status_change,
    data_version,
    no_campaign,
    no_settings,
    not_a_member,
    quota_fixed,
    unknown,
    unknown_people,
)
from .schema import campaign_rows, dialogues, instructions, members, participants, tasks
from .sqlbase import SQLBase


class SQLCampaigns(SQLBase):
    async def _store_plan(
        self, campaign: dict[str, Any], instruction_rows: list[dict[str, Any]], task_rows: list[dict[str, Any]]
    ) -> None:
        async with self.engine.begin() as conn:  # one transaction: the whole plan or nothing
            existing = (
                await conn.execute(select(campaign_rows.c.name).where(campaign_rows.c.name == campaign["name"]))
            ).first()
            if existing is None:
                await conn.execute(insert(campaign_rows).values(**campaign))
            if instruction_rows:
                await conn.execute(insert(instructions), instruction_rows)
                await conn.execute(insert(tasks), task_rows)

    async def campaign_settings(self, campaign: str) -> CampaignSettings:
        await self.init()
        async with self._read() as conn:
            row = (await conn.execute(select(campaign_rows.c.settings).where(campaign_rows.c.name == campaign))).first()
        return CampaignSettings.model_validate_json(row[0]) if row else CampaignSettings()

    async def update_campaign_settings(self, campaign: str, **changes: Any) -> CampaignSettings:
        if "quota" in changes:
            raise quota_fixed()
        current = await self.campaign_settings(campaign)
        updated = CampaignSettings.model_validate({**current.model_dump(), **changes})
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(campaign_rows).where(campaign_rows.c.name == campaign).values(settings=updated.model_dump_json())
            )
        if result.rowcount != 1:
            raise no_campaign(campaign)
        return updated

    async def relaxed_campaigns(self) -> list[str]:
        await self.init()
        async with self._read() as conn:
            rows = (
                await conn.execute(
                    select(campaign_rows.c.name, campaign_rows.c.settings).order_by(campaign_rows.c.created_at)
                )
            ).all()
        return [str(n) for n, body in rows if CampaignSettings.model_validate_json(body).relax_red_team]

    async def campaign_statuses(self, campaigns: Collection[str] | None = None) -> dict[str, str]:
        await self.init()
        query = select(campaign_rows.c.name, campaign_rows.c.status)
        if campaigns is not None:
            query = query.where(campaign_rows.c.name.in_(list(campaigns)))
        async with self._read() as conn:
            found = {str(n): str(st) for n, st in (await conn.execute(query)).all()}
        return {c: found.get(c, LIVE) for c in campaigns} if campaigns is not None else found

    async def set_campaign_status(self, campaign: str, status: str) -> list[tuple[str, str]]:
        check_status(status)
        await self.init()
        async with self.engine.begin() as conn:
            row = (
                await conn.execute(
                    select(campaign_rows.c.status).where(campaign_rows.c.name == campaign).with_for_update()
                )
            ).first()
            if row is None:  # a campaign stored before settings existed gets its row now
                planned = (
                    await conn.execute(select(instructions.c.id).where(instructions.c.campaign == campaign).limit(1))
                ).first()
                if planned is None:
                    raise no_campaign(campaign)
                await conn.execute(
                    insert(campaign_rows).values(
                        name=campaign, settings=CampaignSettings().model_dump_json(), created_at=self._now()
                    )
                )
                current = LIVE
            else:
                current = str(row[0])
            check_status_change(campaign, current, status)
            if current != status:
                await conn.execute(update(campaign_rows).where(campaign_rows.c.name == campaign).values(status=status))
        if status != "closed":
            return []
        # Committed: from here no claim of this campaign succeeds (each checks the status under a
        # share lock), so the claims read now are all there will be.
        async with self._read() as conn:
            held = (
                await conn.execute(
                    select(tasks.c.id, tasks.c.participant_id).where(
                        and_(tasks.c.campaign == campaign, tasks.c.status == "claimed")
                    )
                )
            ).all()
        return await self._release_each([(str(task_id), str(pid)) for task_id, pid in held])

    async def data_version(self, campaign: str) -> str:
        await self.init()
        query = select(func.count(), func.max(tasks.c.updated_at)).where(
            and_(tasks.c.campaign == campaign, tasks.c.status == "submitted")
        )
        async with self._read() as conn:
            n, latest = (await conn.execute(query)).one()
        return data_version(int(n), latest)

    async def members_only(self, campaign: str) -> bool:
        await self.init()
        async with self._read() as conn:
            query = select(campaign_rows.c.members_only).where(campaign_rows.c.name == campaign)
            return bool((await conn.execute(query)).scalar_one_or_none())

    async def set_members_only(self, campaign: str, on: bool) -> None:
        await self.init()
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(campaign_rows).where(campaign_rows.c.name == campaign).values(members_only=on)
            )
        if result.rowcount != 1:
            raise no_settings(campaign)

    async def members(self, campaign: str) -> list[str]:
        await self.init()
        async with self._read() as conn:
            query = select(members.c.participant_id).where(members.c.campaign == campaign)
            return sorted(str(r[0]) for r in (await conn.execute(query)).all())

    async def add_members(self, campaign: str, participant_ids: Collection[str]) -> int:
        await self.init()
        wanted = set(participant_ids)
        if not wanted:
            return 0
        async with self.engine.begin() as conn:
            known = {
                str(r[0])
                for r in (await conn.execute(select(participants.c.id).where(participants.c.id.in_(wanted)))).all()
            }
            if wanted - known:
                raise unknown_people(wanted - known)
            have = {
                str(r[0])
                for r in (
                    await conn.execute(
                        select(members.c.participant_id).where(
                            and_(members.c.campaign == campaign, members.c.participant_id.in_(wanted))
                        )
                    )
                ).all()
            }
            new = sorted(wanted - have)
            if new:
                now = self._now()
                await conn.execute(
                    insert(members), [{"campaign": campaign, "participant_id": p, "created_at": now} for p in new]
                )
        return len(new)

    async def remove_member(self, campaign: str, participant_id: str) -> list[str]:
        await self.init()
        async with self.engine.begin() as conn:
            result = await conn.execute(
                members.delete().where(and_(members.c.campaign == campaign, members.c.participant_id == participant_id))
            )
        held = [task for task in await self.claimed_tasks(participant_id) if task.campaign == campaign]
        if result.rowcount == 0 and not held:
            raise not_a_member(campaign, participant_id)
        return [task for task, _ in await self._release_each([(task.id, participant_id) for task in held])]

    async def has_campaign(self, campaign: str) -> bool:
        await self.init()
        async with self.engine.connect() as conn:
            query = select(instructions.c.id).where(instructions.c.campaign == campaign).limit(1)
            return (await conn.execute(query)).first() is not None

    async def campaigns(self) -> list[str]:
        await self.init()
        async with self.engine.connect() as conn:
            query = select(instructions.c.campaign).distinct().order_by(instructions.c.campaign)
            rows = (await conn.execute(query)).all()
        return [str(r[0]) for r in rows]

    async def instruction(self, instruction_id: str) -> dict[str, Any]:
        async with self._read() as conn:
            row = (await conn.execute(select(instructions.c.record).where(instructions.c.id == instruction_id))).first()
        if row is None:
            raise unknown("instruction", instruction_id)
        result: dict[str, Any] = json.loads(row[0])
        return result

    async def quotas(self, campaigns: Collection[str]) -> dict[str, dict[str, int]]:
        missing = [c for c in campaigns if c not in self._quotas]  # cached: a quota never changes
        if missing:
            async with self._read() as conn:
                query = select(campaign_rows.c.name, campaign_rows.c.settings).where(campaign_rows.c.name.in_(missing))
                for name, body in (await conn.execute(query)).all():
                    self._quotas[str(name)] = CampaignSettings.model_validate_json(body).quota
        return {c: self._quotas.get(c, {}) for c in campaigns}

    async def task_counts(self, campaign: str) -> dict[str, dict[str, int]]:
        await self.init()
        async with self.engine.connect() as conn:
            query = (
                select(tasks.c.kind, tasks.c.status, func.count())
                .where(tasks.c.campaign == campaign)
                .group_by(tasks.c.kind, tasks.c.status)
            )
            rows = (await conn.execute(query)).all()
        out: dict[str, dict[str, int]] = {k.value: {} for k in TaskKind}
        for kind, status, n in rows:
            out.setdefault(str(kind), {})[str(status)] = int(n)
        return out

    async def plan_and_done(self, campaign: str) -> tuple[list[dict[str, Any]], list[str]]:
        await self.init()
        async with self.engine.connect() as conn:
            plan = (await conn.execute(select(instructions.c.record).where(instructions.c.campaign == campaign))).all()
            done = (
                await conn.execute(
                    select(dialogues.c.instruction_id).where(
                        and_(dialogues.c.campaign == campaign, dialogues.c.status == "submitted")
                    )
                )
            ).all()
        if not plan:
            raise no_campaign(campaign)
        return [json.loads(r[0]) for r in plan], [str(r[0]) for r in done]
