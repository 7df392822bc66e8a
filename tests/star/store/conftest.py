"""The STAR store tests' fixtures: a store of each kind (memory, SQLite, PostgreSQL), a clock
the test moves, and the built-in policy and parameter space."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from psychoalign.star import load_parameters, load_policy
from psychoalign.star.store import InMemoryStarStore, SQLStarStore, StarStore
from tests.helpers import PG_URL, pg_schema

POLICY = load_policy()
SPACE = load_parameters()
SQL_BACKENDS = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]

MakeStore = Callable[..., Awaitable[StarStore]]


class Clock:
    """A clock the test moves: no sleeping, no timing."""

    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture(params=["memory", *SQL_BACKENDS])
def backend(request: pytest.FixtureRequest) -> str:
    """Which store a test runs on: every contract test runs on each."""
    return str(request.param)


@pytest.fixture
async def make_store(backend: str, tmp_path: Path) -> AsyncIterator[MakeStore]:
    """Opens stores of ``backend`` (each SQL one on the test's own database; a second one opens
    the same database, as another process would) and closes them after the test."""
    async with AsyncExitStack() as stack:
        opened: list[StarStore] = []
        connect_args: dict[str, Any] | None = None

        async def make(**kwargs: Any) -> StarStore:
            nonlocal connect_args
            store: StarStore
            if backend == "memory":
                store = InMemoryStarStore(POLICY, **kwargs)
            elif backend == "sqlite":
                store = SQLStarStore(f"sqlite:///{tmp_path / 'star.db'}", POLICY, **kwargs)
            else:
                if connect_args is None:
                    connect_args = await stack.enter_async_context(pg_schema("st"))
                store = SQLStarStore(PG_URL, POLICY, connect_args=connect_args, **kwargs)
            opened.append(store)
            return store

        try:
            yield make
        finally:
            for store in opened:
                await store.close()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "short_leases: the store's leases last 60 s on the test's clock fixture")


@pytest.fixture
async def store(request: pytest.FixtureRequest, make_store: MakeStore, clock: Clock) -> StarStore:
    """A store with the default lease and the real clock; ``short_leases`` tests get leases of
    60 s on ``clock``, which they move."""
    if request.node.get_closest_marker("short_leases"):
        return await make_store(lease_s=60, clock=clock)
    return await make_store()
