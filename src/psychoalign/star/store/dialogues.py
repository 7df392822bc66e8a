"""The SQL STAR store's red-teaming dialogues: start, turns, target failures, submission."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ..model import TaskKind, Turn
from .rules import (
    annotation_tasks,
    aware,
    dialogue_requirement,
    dialogue_row,
    failure_row,
    finished_status,
    not_in_progress,
    not_open_dialogue,
    splits_annotators,
    unknown,
)
from .schema import dialogues, exposures, instructions, target_failures, tasks, turns
from .sqlbase import SQLBase


class SQLDialogues(SQLBase):
    async def start_dialogue(self, task_id: str, participant_id: str, target: str) -> str:
        async with self.engine.begin() as conn:
            row = await self._own(conn, task_id, participant_id, TaskKind.RED_TEAM)
            existing = (await conn.execute(select(dialogues.c.id).where(dialogues.c.task_id == task_id))).first()
            if existing is not None:
                return str(existing[0])  # resuming after a crash
            dialogue = dialogue_row(row, participant_id, target, self._now())
            await conn.execute(insert(dialogues).values(**dialogue))
            await conn.execute(
                insert(exposures).values(dialogue_id=dialogue["id"], participant_id=participant_id, role="red_team")
            )
        return str(dialogue["id"])

    async def add_turns(self, dialogue_id: str, new_turns: Sequence[Turn]) -> list[int]:
        async with self.engine.begin() as conn:
            # The row lock (PostgreSQL) serialises two appends to one dialogue, from any server
            # worker: the second numbers its turns after the first's instead of colliding.
            d = (
                await conn.execute(
                    select(dialogues.c.status, dialogues.c.task_id, dialogues.c.campaign)
                    .where(dialogues.c.id == dialogue_id)
                    .with_for_update()
                )
            ).first()
            if d is not None:
                await self._refuse_if_closed(conn, d[2])
            if d is None or d[0] != "in_progress":
                raise not_in_progress(dialogue_id, d[0] if d else None)
            n = await _turn_count(conn, dialogue_id)
            for i, turn in enumerate(new_turns):
                await conn.execute(insert(turns).values(dialogue_id=dialogue_id, idx=n + i, **turn.model_dump()))
            await conn.execute(
                update(tasks)
                .where(and_(tasks.c.id == d[1], tasks.c.status == "claimed"))
                .values(lease_expires_at=self._lease(), updated_at=self._now())
            )
        return list(range(n, n + len(new_turns)))

    async def record_target_failure(
        self, dialogue_id: str, reason: str, *, attempt: int = 1, trace_id: str | None = None
    ) -> None:
        async with self.engine.begin() as conn:
            n = await _turn_count(conn, dialogue_id)
            row = failure_row(dialogue_id, n, reason, attempt, trace_id, self._now())
            await conn.execute(insert(target_failures).values(**row))

    async def target_failure_counts(self, campaign: str) -> dict[str, int]:
        async with self.engine.connect() as conn:
            rows = (
                await conn.execute(
                    select(target_failures.c.dialogue_id, func.count())
                    .join(dialogues, dialogues.c.id == target_failures.c.dialogue_id)
                    .where(dialogues.c.campaign == campaign)
                    .group_by(target_failures.c.dialogue_id)
                )
            ).all()
        return {str(d): int(n) for d, n in rows}

    async def recent_target_failures(self, campaign: str, limit: int = 3) -> tuple[int, list[dict[str, Any]]]:
        async with self._read() as conn:
            base = (
                select(target_failures.c.created_at, target_failures.c.reason)
                .join(dialogues, dialogues.c.id == target_failures.c.dialogue_id)
                .where(dialogues.c.campaign == campaign)
            )
            total = (await conn.execute(select(func.count()).select_from(base.subquery()))).scalar_one()
            rows = (await conn.execute(base.order_by(target_failures.c.created_at.desc()).limit(limit))).all()
        return int(total), [{"at": aware(at), "reason": str(reason)} for at, reason in rows]

    async def _submit_dialogue(
        self, dialogue_id: str, participant_id: str, pre: str, refused: bool, target_failed: bool, share: float
    ) -> list[str]:
        async with self.engine.begin() as conn:
            d = (await conn.execute(select(dialogues).where(dialogues.c.id == dialogue_id))).mappings().first()
            if d is not None:
                await self._refuse_if_closed(conn, d["campaign"])
            if d is None or d["red_teamer_id"] != participant_id or d["status"] != "in_progress":
                raise not_open_dialogue(dialogue_id, participant_id)
            status = finished_status(dialogue_id, await _turn_count(conn, dialogue_id), refused, target_failed)
            await conn.execute(
                update(dialogues)
                .where(dialogues.c.id == dialogue_id)
                .values(status=status, pre_annotation=pre, refused=refused)
            )
            await conn.execute(
                update(tasks).where(tasks.c.id == d["task_id"]).values(status="submitted", updated_at=self._now())
            )
            if status != "submitted":
                return []
            record = json.loads(
                (
                    await conn.execute(select(instructions.c.record).where(instructions.c.id == d["instruction_id"]))
                ).scalar_one()
            )
            requirement = dialogue_requirement(self.policy, record)
            split = splits_annotators(requirement, share)
            earlier = await _annotation_requirements(conn, d["campaign"]) if split else []
            rows = annotation_tasks(d["campaign"], dialogue_id, requirement, share, earlier, self._now())
            await conn.execute(insert(tasks), rows)
        return [row["id"] for row in rows]

    async def _dialogue_campaign(self, dialogue_id: str) -> str:
        async with self._read() as conn:
            row = (await conn.execute(select(dialogues.c.campaign).where(dialogues.c.id == dialogue_id))).first()
        if row is None:
            raise unknown("dialogue", dialogue_id)
        return str(row[0])

    async def dialogue_turns(self, dialogue_id: str) -> list[Turn]:
        async with self._read() as conn:
            return await dialogue_turns(conn, dialogue_id)

    async def dialogue_of_task(self, task_id: str) -> str | None:
        async with self._read() as conn:
            row = (await conn.execute(select(dialogues.c.id).where(dialogues.c.task_id == task_id))).first()
        return str(row[0]) if row else None

    async def dialogue_info(self, dialogue_id: str) -> dict[str, Any]:
        async with self._read() as conn:
            row = (await conn.execute(select(dialogues).where(dialogues.c.id == dialogue_id))).mappings().first()
        if row is None:
            raise unknown("dialogue", dialogue_id)
        info = dict(row)
        info["pre_annotation"] = json.loads(row["pre_annotation"]) if row["pre_annotation"] else None
        return info

    async def dialogue_instruction(self, dialogue_id: str) -> dict[str, Any]:
        async with self._read() as conn:
            return await dialogue_instruction(conn, dialogue_id)

    async def dialogue_task_ids(self, campaign: str) -> dict[str, str]:
        async with self._read() as conn:
            query = select(dialogues.c.id, dialogues.c.task_id).where(dialogues.c.campaign == campaign)
            return {str(d): str(t) for d, t in (await conn.execute(query)).all()}


async def dialogue_turns(conn: AsyncConnection, dialogue_id: str) -> list[Turn]:
    query = select(turns).where(turns.c.dialogue_id == dialogue_id).order_by(turns.c.idx)
    return [Turn.model_validate(dict(r)) for r in (await conn.execute(query)).mappings().all()]


async def dialogue_instruction(conn: AsyncConnection, dialogue_id: str) -> dict[str, Any]:
    """The instruction record a dialogue was red-teamed from."""
    query = (
        select(instructions.c.record)
        .join(dialogues, dialogues.c.instruction_id == instructions.c.id)
        .where(dialogues.c.id == dialogue_id)
    )
    row = (await conn.execute(query)).first()
    if row is None:
        raise unknown("dialogue", dialogue_id)
    result: dict[str, Any] = json.loads(row[0])
    return result


async def _turn_count(conn: AsyncConnection, dialogue_id: str) -> int:
    return len((await conn.execute(select(turns.c.idx).where(turns.c.dialogue_id == dialogue_id))).all())


async def _annotation_requirements(conn: AsyncConnection, campaign: str) -> list[str]:
    """The campaign's annotation requirements that split annotators in and out of a group."""
    query = select(tasks.c.requirement).where(
        and_(
            tasks.c.campaign == campaign,
            tasks.c.kind == TaskKind.ANNOTATE.value,
            tasks.c.requirement.like('%"annotator"%'),
        )
    )
    return [str(r[0]) for r in (await conn.execute(query)).all()]
