"""What every part of the SQL STAR store shares: the engine, the schema check, and the reads
and checks several operations make inside their transaction."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from ...storage import MigrateOnce, create_engine_for
from ..model import Participant, TaskKind
from ..policy import Policy
from .base import LIVE, StarStore, closed_error
from .rules import not_claimed, not_of_kind, unknown
from .schema import campaign_rows, participants, tasks

_PARTICIPANT = select(participants.c.body).where(participants.c.id == bindparam("pid"))
#: A campaign's status, share-locked on PostgreSQL: a lead's pause or close (an update of the row)
#: waits for claims and submissions in flight, and they wait for it.
_STATUS_SHARED = (
    select(campaign_rows.c.status).where(campaign_rows.c.name == bindparam("campaign")).with_for_update(read=True)
)


class SQLBase(StarStore):
    """The SQL store's engine and shared steps (the operations are in the modules by concern)."""

    def __init__(
        self,
        url: str,
        policy: Policy,
        *,
        lease_s: float = 3600.0,
        clock: Callable[[], datetime] | None = None,
        **engine_kwargs: Any,
    ) -> None:
        super().__init__(policy, lease_s=lease_s, clock=clock)
        # WAL + busy timeout on SQLite: the web platform and a campaign may share one store file
        self.engine: AsyncEngine = create_engine_for(url, **engine_kwargs)
        # The same pool in autocommit, for reads: no BEGIN / ROLLBACK around a single SELECT.
        self._reader = self.engine.execution_options(isolation_level="AUTOCOMMIT")
        self._migrate = MigrateOnce(self.engine, "star")
        self._quotas: dict[str, dict[str, int]] = {}  # campaign -> quota (set at creation, never changed)

    async def init(self) -> None:
        await self._migrate()

    async def close(self) -> None:
        await self.engine.dispose()

    def _read(self) -> Any:
        """A connection for reads in autocommit: one round trip per query (no BEGIN / ROLLBACK)."""
        return self._reader.connect()

    async def _participant(self, conn: AsyncConnection, pid: str) -> Participant:
        row = (await conn.execute(_PARTICIPANT, {"pid": pid})).first()
        if row is None:
            raise unknown("participant", pid)
        return Participant.model_validate_json(row[0])

    async def _refuse_if_closed(self, conn: AsyncConnection, campaign: str) -> str:
        """The campaign's status under a share lock; raises :class:`CampaignClosedError` if closed."""
        status = (await conn.execute(_STATUS_SHARED, {"campaign": campaign})).scalar_one_or_none() or LIVE
        if status == "closed":
            raise closed_error(campaign)
        return str(status)

    async def _own(self, conn: AsyncConnection, task_id: str, participant_id: str, kind: TaskKind) -> Any:
        """The task's row if ``participant_id`` holds this task of ``kind`` in an unclosed campaign."""
        row = (await conn.execute(select(tasks).where(tasks.c.id == task_id))).mappings().first()
        if row is None or row["kind"] != kind.value:
            raise not_of_kind(kind, task_id)
        await self._refuse_if_closed(conn, row["campaign"])
        if row["participant_id"] != participant_id or row["status"] != "claimed":
            raise not_claimed(task_id, participant_id, row["status"])
        return row
