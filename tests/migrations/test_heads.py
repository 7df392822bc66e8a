"""The migration check: for every store, a new database upgraded to the head revision has exactly
the tables, columns (with their types) and indexes the code defines. A schema change without a
migration fails here; CONTRIBUTING.md tells how to add one."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

import psychoalign
from psychoalign.storage import STORES, Store, head_revision, migrate, migrations_config

from .conftest import Database
from .stores import MODULES, schema_diff, versions


@pytest.mark.parametrize("store", STORES)
async def test_the_head_revision_is_the_code_s_schema(database: Database, store: Store) -> None:
    engine = database.engine()
    heads = ScriptDirectory.from_config(migrations_config(store)).get_heads()
    try:
        await migrate(engine, store)
        async with engine.connect() as conn:
            assert await conn.run_sync(schema_diff, store) == []
            assert await conn.run_sync(versions, store) == list(heads)
    finally:
        await engine.dispose()


def test_every_store_with_tables_has_migrations_with_one_head() -> None:
    """A module that defines tables (``metadata = MetaData()``) is one of the migrated stores."""
    src = Path(psychoalign.__file__).parent
    defined = {p for p in src.rglob("*.py") if "\nmetadata = MetaData()" in p.read_text(encoding="utf-8")}
    assert defined == {Path(str(module.__file__)) for module in MODULES.values()}
    assert set(MODULES) == set(STORES)
    for store in STORES:
        assert len(ScriptDirectory.from_config(migrations_config(store)).get_heads()) == 1, store


@pytest.mark.parametrize("store", STORES)
def test_the_head_read_from_file_names_is_alembic_s(store: Store) -> None:
    """migrate() skips Alembic when the database holds head_revision(): it must be the real head."""
    assert [head_revision(store)] == ScriptDirectory.from_config(migrations_config(store)).get_heads()
