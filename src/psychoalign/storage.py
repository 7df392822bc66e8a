"""Shared SQL plumbing for every store (traces, STAR, web): one way to open an engine, one write path.

* :func:`create_engine_for` accepts plain SQLAlchemy URLs (``sqlite:///file.db``,
  ``postgresql://…``), picks the async drivers we ship, creates the SQLite file's directory,
  and configures SQLite for concurrent use: WAL journal (readers never block the writer), a busy
  timeout (a writer waits for another process's write instead of failing with "database is
  locked"), and ``synchronous=NORMAL`` (safe with WAL).
* :func:`write` is the one writer path: a transaction that, on SQLite, is serialised within the
  process (SQLite has one writer at a time anyway; queueing in-process is cheaper than spinning
  on the file lock). On PostgreSQL it is a plain transaction.
* :func:`create_tables` creates tables and indexes idempotently, safe when several processes
  start at once on a fresh database; :func:`ensure_schema` does so only when something is
  missing (no DDL, hence no table lock, beside a running server).
* :func:`describe_error` turns a driver/SQLAlchemy exception into one clean line for users:
  never the SQL statement or its parameters.

The embedded SQLite store holds 100 concurrent clients of one server process with zero failures
(tests/test_storage.py); use PostgreSQL for more, or for several server processes.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import MetaData, event, inspect
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.schema import CreateIndex, CreateTable

from .errors import ConfigError

__all__ = [
    "BUSY_TIMEOUT_MS",
    "create_engine_for",
    "create_tables",
    "describe_error",
    "ensure_schema",
    "normalise_url",
    "write",
]

#: How long a SQLite writer waits for the lock held by another connection or process.
BUSY_TIMEOUT_MS = 30_000

_locks: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()


def normalise_url(url: str) -> str:
    """Accept plain SQLAlchemy URLs and pick the async drivers we ship; create SQLite's directory."""
    if url.startswith("sqlite:///"):
        url = "sqlite+aiosqlite:///" + url.removeprefix("sqlite:///")
    elif url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+asyncpg://" + url.split("://", 1)[1]
    if url.startswith("sqlite+aiosqlite:///"):
        path = url.removeprefix("sqlite+aiosqlite:///").split("?", 1)[0]
        if path and path != ":memory:":
            folder = Path(path).expanduser().parent
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(
                    f"cannot create the folder {folder} for the SQLite store: {exc.strerror or type(exc).__name__}",
                    hint="check store_url (or --store): a sqlite:/// path in a writable folder",
                ) from None
    return url


def _is_sqlite(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "sqlite"


def create_engine_for(url: str, **engine_kwargs: Any) -> AsyncEngine:
    """An async engine for ``url`` (see module doc). Raises :class:`ConfigError` for a bad URL
    or a missing driver, naming the URL without its password."""
    normalised = normalise_url(url)
    try:
        shown = make_url(normalised).render_as_string(hide_password=True)
    except ArgumentError:
        shown = "(unparseable URL)"
    try:
        engine = create_async_engine(normalised, **engine_kwargs)
    except Exception as exc:  # bad URL or missing driver
        raise ConfigError(f"cannot open store {shown}: {type(exc).__name__}", hint="check store_url") from None
    if _is_sqlite(engine):

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.close()

    return engine


@asynccontextmanager
async def write(engine: AsyncEngine) -> AsyncIterator[AsyncConnection]:
    """One write transaction (commit on success, rollback on error); serialised per engine on SQLite."""
    if not _is_sqlite(engine):
        async with engine.begin() as conn:
            yield conn
        return
    lock = _locks.get(engine.sync_engine)
    if lock is None:
        lock = _locks.setdefault(engine.sync_engine, asyncio.Lock())
    async with lock, engine.begin() as conn:
        yield conn


async def create_tables(engine: AsyncEngine, metadata: MetaData) -> None:
    """Create every table and index of ``metadata`` that does not exist yet, idempotently."""
    for attempt in range(3):
        try:
            async with write(engine) as conn:
                for table in metadata.sorted_tables:
                    await conn.execute(CreateTable(table, if_not_exists=True))
                    for index in table.indexes:
                        await conn.execute(CreateIndex(index, if_not_exists=True))
            return
        except DBAPIError:
            # PostgreSQL can still race on its catalogue when two processes create at once.
            if attempt == 2:
                raise


async def ensure_schema(engine: AsyncEngine, metadata: MetaData) -> None:
    """:func:`create_tables`, but only when a table or index of ``metadata`` is missing: on a
    complete schema no DDL runs at all. (On PostgreSQL even ``CREATE INDEX IF NOT EXISTS``
    takes a table lock that conflicts with writes, so a server process starting beside busy
    ones must not issue it.)"""

    def missing(sync_conn: Any) -> bool:
        inspector = inspect(sync_conn)
        for table in metadata.sorted_tables:
            if not inspector.has_table(table.name):
                return True
            have = {index["name"] for index in inspector.get_indexes(table.name)}
            if any(index.name not in have for index in table.indexes):
                return True
        return False

    async with engine.connect() as conn:
        needed = await conn.run_sync(missing)
    if needed:
        await create_tables(engine, metadata)


def describe_error(exc: BaseException) -> str:
    """One line for users: the error class and the database's own message, never SQL or parameters."""
    if isinstance(exc, DBAPIError) and exc.orig is not None:
        detail = str(exc.orig).strip().splitlines()[0] if str(exc.orig).strip() else ""
        name = type(exc.orig).__name__
    elif isinstance(exc, SQLAlchemyError):
        detail, name = "", type(exc).__name__
    else:
        text = str(exc).strip()
        detail, name = (text.splitlines()[0] if text else ""), type(exc).__name__
    detail = detail.split("[SQL:", 1)[0].strip()[:200]
    return f"{name}: {detail}" if detail else name
