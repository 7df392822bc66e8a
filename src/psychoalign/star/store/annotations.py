"""The SQL STAR store's annotation and arbitration."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, insert, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from ..model import TaskKind, Turn
from .dialogues import dialogue_instruction, dialogue_turns
from .rules import (
    annotation_row,
    arbitration_needed,
    arbitration_requirement,
    check_model_stamp,
    check_reasoning,
    likert,
    nothing_to_arbitrate,
    task_row,
)
from .schema import annotation_rows, tasks
from .sqlbase import SQLBase


class SQLAnnotations(SQLBase):
    async def submit_annotation(
        self, task_id: str, participant_id: str, rating: int, reasoning: str, *, model: str | None = None
    ) -> str | None:
        rating = likert(rating)
        check_reasoning(reasoning, "an annotation")
        async with self.engine.begin() as conn:
            row = await self._own(conn, task_id, participant_id, TaskKind.ANNOTATE)
            check_model_stamp(model, await self._participant(conn, participant_id))
            await self._write_annotation(conn, row, participant_id, TaskKind.ANNOTATE, rating, reasoning, model)
            ratings = await _annotator_ratings(conn, row["dialogue_id"])
            if len(ratings) == 2 and arbitration_needed(*ratings):
                arbitration = task_row(
                    row["campaign"],
                    TaskKind.ARBITRATE.value,
                    arbitration_requirement(row["requirement"]),
                    self._now(),
                    dialogue_id=row["dialogue_id"],
                )
                await conn.execute(insert(tasks).values(**arbitration))
                return str(arbitration["id"])
        return None

    async def submit_arbitration(
        self, task_id: str, participant_id: str, rating: int, reasoning: str, *, model: str | None = None
    ) -> None:
        rating = likert(rating)
        check_reasoning(reasoning, "an arbitration")
        async with self.engine.begin() as conn:
            row = await self._own(conn, task_id, participant_id, TaskKind.ARBITRATE)
            check_model_stamp(model, await self._participant(conn, participant_id))
            ratings = await _annotator_ratings(conn, row["dialogue_id"])
            if len(ratings) != 2 or not arbitration_needed(*ratings):
                raise nothing_to_arbitrate(row["dialogue_id"])
            await self._write_annotation(conn, row, participant_id, TaskKind.ARBITRATE, rating, reasoning, model)

    async def _write_annotation(
        self,
        conn: AsyncConnection,
        row: Any,
        participant_id: str,
        kind: TaskKind,
        rating: int,
        reasoning: str,
        model: str | None,
    ) -> None:
        values = annotation_row(row, participant_id, kind, rating, reasoning, self._now(), model)
        await conn.execute(insert(annotation_rows).values(**values))
        await conn.execute(
            update(tasks).where(tasks.c.id == row["id"]).values(status="submitted", updated_at=self._now())
        )

    async def reasonings(self, dialogue_id: str) -> list[tuple[int, str]]:
        async with self._read() as conn:
            return await _reasonings(conn, dialogue_id)

    async def dialogue_view(
        self, dialogue_id: str, *, reasons: bool = False
    ) -> tuple[dict[str, Any], list[Turn], list[tuple[int, str]]]:
        async with self._read() as conn:  # one connection for the page
            record = await dialogue_instruction(conn, dialogue_id)
            said = await dialogue_turns(conn, dialogue_id)
            why = await _reasonings(conn, dialogue_id) if reasons else []
        return record, said, why


def _annotated(dialogue_id: str) -> Any:
    return and_(annotation_rows.c.dialogue_id == dialogue_id, annotation_rows.c.kind == TaskKind.ANNOTATE.value)


async def _reasonings(conn: AsyncConnection, dialogue_id: str) -> list[tuple[int, str]]:
    query = select(annotation_rows.c.rating, annotation_rows.c.reasoning).where(_annotated(dialogue_id))
    return [(int(r[0]), str(r[1])) for r in (await conn.execute(query)).all()]


async def _annotator_ratings(conn: AsyncConnection, dialogue_id: str) -> list[int]:
    """The (up to two) annotators' ratings of a dialogue, arbitration excluded."""
    return [rating for rating, _ in await _reasonings(conn, dialogue_id)]
