"""The baseline revision's tables (``psychoalign/migrations/baseline.yaml``, read by
``baseline.py``) are the schema of the last commit before migrations, 206ed0d: compiled for
SQLite and for PostgreSQL they give that commit's frozen DDL (``premigration/``), statement for
statement, so neither the description nor its reader can drift from history."""

from __future__ import annotations

import pytest
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.schema import CreateIndex, CreateTable

from psychoalign.migrations import baseline
from psychoalign.storage import STORES

from .test_upgrade import _statements

DIALECTS: dict[str, Dialect] = {"sqlite": sqlite.dialect(), "postgresql": postgresql.dialect()}


def _compiled(dialect: Dialect) -> list[str]:
    """Every store's baseline CREATE TABLE and CREATE INDEX, as freeze_schema.py writes them."""
    out = []
    for store in STORES:
        for table in getattr(baseline, store).sorted_tables:
            ddl = str(CreateTable(table).compile(dialect=dialect)).strip()
            out.append("\n".join(line.rstrip() for line in ddl.splitlines()))
            out.extend(str(CreateIndex(i).compile(dialect=dialect)).strip() for i in table.indexes)
    return out


@pytest.mark.parametrize("dialect", DIALECTS)
def test_the_baseline_is_the_schema_of_the_last_commit_before_migrations(dialect: str) -> None:
    mine = _compiled(DIALECTS[dialect])
    frozen = _statements("206ed0d", dialect)
    assert len(mine) == len(set(mine))  # no statement twice
    assert sorted(mine) == sorted(frozen)


def test_each_store_s_baseline_holds_only_its_own_tables() -> None:
    prefixes = {
        "traces": "psychoalign_trace",
        "star": "star_",
        "lab": "web_",
        "accounts": "web_",
        "experiments": "psychoalign_experiment_",
    }
    for store in STORES:
        names = list(getattr(baseline, store).tables)
        assert names and all(name.startswith(prefixes[store]) for name in names), (store, names)
    assert not set(baseline.lab.tables) & set(baseline.accounts.tables)
