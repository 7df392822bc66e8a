"""The migration tests' databases: a fresh SQLite file, or a fresh schema on the test
PostgreSQL server, each opened as the stores open theirs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from psychoalign.storage import create_engine_for
from tests.helpers import PG_URL, pg_schema

BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@dataclass
class Database:
    """Where a test's stores live: ``url`` and the engine arguments that put them there."""

    url: str
    engine_kwargs: dict[str, Any] = field(default_factory=dict)

    def engine(self) -> AsyncEngine:
        return create_engine_for(self.url, **self.engine_kwargs)


@pytest.fixture(params=BACKENDS)
async def database(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Database]:
    if request.param == "sqlite":
        yield Database(f"sqlite:///{tmp_path / 'store.db'}")
        return
    async with pg_schema("mig") as connect_args:
        yield Database(PG_URL, {"connect_args": connect_args})
