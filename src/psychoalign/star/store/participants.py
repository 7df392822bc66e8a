"""The SQL STAR store's participant registry."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import insert, select, update
from sqlalchemy.exc import IntegrityError

from ..model import Participant
from .rules import participants_exist, unknown
from .schema import participants
from .sqlbase import SQLBase


class SQLParticipants(SQLBase):
    async def add_participants(self, people: Sequence[Participant]) -> None:
        await self.init()
        try:
            async with self.engine.begin() as conn:
                for p in people:
                    await conn.execute(
                        insert(participants).values(id=p.id, body=p.model_dump_json(), simulated=p.simulated)
                    )
        except IntegrityError:
            raise participants_exist() from None

    async def participant(self, pid: str) -> Participant:
        await self.init()
        async with self._read() as conn:
            return await self._participant(conn, pid)

    async def list_participants(self) -> list[Participant]:
        await self.init()
        async with self.engine.connect() as conn:
            rows = (await conn.execute(select(participants.c.body).order_by(participants.c.id))).all()
        return [Participant.model_validate_json(r[0]) for r in rows]

    async def update_participant(self, person: Participant) -> None:
        await self.init()
        async with self.engine.begin() as conn:
            result = await conn.execute(
                update(participants)
                .where(participants.c.id == person.id)
                .values(body=person.model_dump_json(), simulated=person.simulated)
            )
        if result.rowcount != 1:
            raise unknown("participant", person.id)
