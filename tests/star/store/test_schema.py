"""The SQL STAR store on databases written by earlier versions: missing columns and indexes are
added in place and nothing stored is lost (the store's baseline migration). A store from before
migrations has no version table: each test drops it with the columns."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

from psychoalign.star import generate_instructions
from psychoalign.star.model import TaskKind
from psychoalign.star.store import ClaimError, SQLStarStore, StarStore
from psychoalign.star.store.schema import campaign_rows, dialogues, tasks
from tests.star.store.conftest import POLICY, SPACE, SQL_BACKENDS, MakeStore
from tests.star.store.test_contract import RULE, people, person


@pytest.fixture(params=SQL_BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_a_store_from_before_leases_gains_the_column(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    first = SQLStarStore(f"sqlite:///{path}", POLICY)
    await first.init()
    await first.close()
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:  # an old store had neither the column nor the indexes on it
        conn.exec_driver_sql("DROP INDEX ix_star_tasks_lease")
        conn.exec_driver_sql("ALTER TABLE star_tasks DROP COLUMN lease_expires_at")
        conn.exec_driver_sql("DROP TABLE alembic_version_star")
    again = SQLStarStore(f"sqlite:///{path}", POLICY)
    await again.add_participants([person("a")])
    await again.create_campaign("c", generate_instructions(POLICY, SPACE, 1, seed=1, rules=["sexually-explicit"]))
    assert (await again.claim("a", TaskKind.RED_TEAM)).lease_expires_at is not None
    await again.close()
    with engine.connect() as conn:  # and gains the index too
        names = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'index'")}
    engine.dispose()
    assert {"ix_star_tasks_lease", "ix_star_tasks_queue", "ix_star_tasks_holder"} <= names


async def test_a_store_from_before_statuses_gains_the_column_and_loses_nothing(
    store: StarStore, make_store: MakeStore
) -> None:
    assert isinstance(store, SQLStarStore)
    await store.add_participants(people("a", "b"))
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 2, seed=1, rules=RULE), quota={"red_team": 1})
    await store.update_campaign_settings("c", relax_red_team=True)
    held = await store.claim("a", TaskKind.RED_TEAM)
    async with store.engine.begin() as conn:  # an older store: star_campaigns without the columns
        await conn.exec_driver_sql("ALTER TABLE star_campaigns DROP COLUMN status")
        await conn.exec_driver_sql("ALTER TABLE star_campaigns DROP COLUMN members_only")
        await conn.exec_driver_sql("DROP TABLE alembic_version_star")
    again = await make_store()  # a new process on the same database
    assert await again.campaign_status("c") == "live"  # what took claims is live after the upgrade
    assert await again.members_only("c") is False  # still open to every participant
    settings = await again.campaign_settings("c")
    assert settings.quota == {"red_team": 1} and settings.relax_red_team is True
    assert [t.id for t in await again.claimed_tasks("a")] == [held.id]
    assert (await again.claim("b", TaskKind.RED_TEAM)).campaign == "c"
    await again.set_campaign_status("c", "paused")
    assert await again.campaign_status("c") == "paused"


async def test_a_campaign_stored_before_settings_existed_can_be_paused(tmp_path: Path) -> None:
    """The oldest stores have no star_campaigns row for a campaign: it counts as live, and pausing
    it writes the row (default settings) without touching its plan."""
    path = tmp_path / "old.db"
    store = SQLStarStore(f"sqlite:///{path}", POLICY)
    await store.add_participants(people("a"))
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 2, seed=1, rules=RULE))
    await store.close()
    engine = create_engine(f"sqlite:///{path}")
    with engine.begin() as conn:
        conn.execute(campaign_rows.delete())
    store = SQLStarStore(f"sqlite:///{path}", POLICY)
    try:
        assert await store.campaign_status("c") == "live"
        await store.set_campaign_status("c", "paused")
        with pytest.raises(ClaimError):
            await store.claim("a", TaskKind.RED_TEAM)
        assert (await store.task_counts("c"))["red_team"] == {"open": 2}
    finally:
        await store.close()
    with engine.connect() as conn:
        assert conn.execute(select(campaign_rows.c.status)).scalar_one() == "paused"
        assert len(conn.execute(select(tasks.c.id)).all()) == 2
        assert conn.execute(select(dialogues.c.id)).all() == []
    engine.dispose()
