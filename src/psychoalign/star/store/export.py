"""The SQL STAR store's export: one row per dialogue, read in batches."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy import func, select, tuple_

from .rules import EXPORT_BATCH, export_row, turn_dict
from .schema import annotation_rows, dialogues, instructions, target_failures, tasks, turns
from .sqlbase import SQLBase


class SQLExport(SQLBase):
    async def iter_export_rows(
        self, campaign: str | None = None, *, batch: int = EXPORT_BATCH
    ) -> AsyncIterator[dict[str, Any]]:
        """Keyset pages of ``batch`` dialogues, a handful of queries per page (not a few per
        dialogue); no connection is held while the caller consumes the rows."""
        people = {p.id: p for p in await self.list_participants()}
        models: dict[str, dict[str, str]] = {}  # per campaign, read once
        after: tuple[Any, Any] | None = None
        while True:
            async with self._read() as conn:
                query = select(dialogues)
                if campaign:
                    query = query.where(dialogues.c.campaign == campaign)
                if after is not None:
                    query = query.where(tuple_(dialogues.c.created_at, dialogues.c.id) > tuple_(*after))
                ds = (
                    (await conn.execute(query.order_by(dialogues.c.created_at, dialogues.c.id).limit(batch)))
                    .mappings()
                    .all()
                )
                if not ds:
                    return
                ids = [d["id"] for d in ds]
                records = {
                    i: json.loads(r)
                    for i, r in (
                        await conn.execute(
                            select(instructions.c.id, instructions.c.record).where(
                                instructions.c.id.in_({d["instruction_id"] for d in ds})
                            )
                        )
                    ).all()
                }
                red_tasks = {
                    r["id"]: r
                    for r in (
                        await conn.execute(
                            select(tasks.c.id, tasks.c.requirement, tasks.c.relaxed).where(
                                tasks.c.id.in_([d["task_id"] for d in ds])
                            )
                        )
                    ).mappings()
                }
                anns: dict[str, list[Any]] = {}
                for a in (
                    await conn.execute(
                        select(annotation_rows, tasks.c.requirement.label("slot"))
                        .select_from(annotation_rows.outerjoin(tasks, tasks.c.id == annotation_rows.c.task_id))
                        .where(annotation_rows.c.dialogue_id.in_(ids))
                        .order_by(annotation_rows.c.dialogue_id, annotation_rows.c.created_at)
                    )
                ).mappings():
                    anns.setdefault(a["dialogue_id"], []).append(a)
                said: dict[str, list[dict[str, Any]]] = {}
                for t in (
                    await conn.execute(
                        select(turns).where(turns.c.dialogue_id.in_(ids)).order_by(turns.c.dialogue_id, turns.c.idx)
                    )
                ).mappings():
                    said.setdefault(t["dialogue_id"], []).append(turn_dict(t))
                failures = {
                    str(d): int(n)
                    for d, n in (
                        await conn.execute(
                            select(target_failures.c.dialogue_id, func.count())
                            .where(target_failures.c.dialogue_id.in_(ids))
                            .group_by(target_failures.c.dialogue_id)
                        )
                    ).all()
                }
            for name in {d["campaign"] for d in ds} - set(models):
                models[name] = (await self.campaign_settings(name)).persona_models
            for d in ds:
                yield export_row(
                    d,
                    records[d["instruction_id"]],
                    red_tasks[d["task_id"]],
                    anns.get(d["id"], []),
                    said.get(d["id"], []),
                    failures.get(d["id"], 0),
                    people,
                    models[d["campaign"]],
                )
            if len(ds) < batch:
                return
            after = (ds[-1]["created_at"], ds[-1]["id"])
