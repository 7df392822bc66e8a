"""Shared SQL plumbing for every store (traces, STAR, web): one way to open an engine, one write path.

* :func:`create_engine_for` accepts plain SQLAlchemy URLs (``sqlite:///file.db``,
  ``postgresql://…``), picks the async drivers we ship, creates the SQLite file's directory,
  and configures SQLite for concurrent use: WAL journal (readers never block the writer), a busy
  timeout (a writer waits for another process's write instead of failing with "database is
  locked"), and ``synchronous=NORMAL`` (safe with WAL).
* :func:`write` is the one writer path: a transaction that, on SQLite, is serialised within the
  process (SQLite has one writer at a time anyway; queueing in-process is cheaper than spinning
  on the file lock). On PostgreSQL it is a plain transaction.
* :func:`migrate` brings a store's tables to the schema this code knows (its Alembic migrations
  under ``psychoalign/migrations/<store>``, each store with its own version table, so several
  stores share one database), on open: no DDL when the schema is current, one store's upgrade
  at a time when several processes open a database at once, and a one-line error when a newer
  version of psychoalign wrote the database.
* :func:`describe_error` turns a driver/SQLAlchemy exception into one clean line for users:
  never the SQL statement or its parameters.

The embedded SQLite store holds 100 concurrent clients of one server process with zero failures
(tests/test_storage.py); use PostgreSQL for more, or for several server processes.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import sqlite3
import threading
import time
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from sqlalchemy import Column, DateTime, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine

from .errors import ConfigError, redact_url

if TYPE_CHECKING:
    from alembic.config import Config
    from sqlalchemy.engine import Connection

__all__ = [
    "MigrateOnce",
    "create_engine_for",
    "created_at_column",
    "describe_error",
    "normalise_url",
    "sqlite_file",
    "time_column",
    "write",
]

#: How long a SQLite writer waits for the lock held by another connection or process.
BUSY_TIMEOUT_MS = 30_000

_log = logging.getLogger(__name__)
_locks: weakref.WeakKeyDictionary[Any, asyncio.Lock] = weakref.WeakKeyDictionary()
#: Alembic's ``op`` and ``context`` are process-wide proxies, so a process runs one upgrade at a
#: time: the coroutines of one event loop queue on its lock, other threads' loops on the thread lock.
_upgrade_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = weakref.WeakKeyDictionary()
_upgrading = threading.Lock()

#: The stores with SQL tables; each has its migrations in ``psychoalign/migrations/<store>``.
Store = Literal["traces", "star", "lab", "accounts", "experiments"]
STORES: tuple[Store, ...] = get_args(Store)
_MIGRATIONS = Path(__file__).with_name("migrations")


def time_column(name: str, **kwargs: Any) -> Column[Any]:
    """A column of a store's table that holds a time: time-zone aware, as every time a store keeps
    (``kwargs``, such as ``nullable=False``, go to :class:`~sqlalchemy.Column`)."""
    return Column(name, DateTime(timezone=True), **kwargs)


def created_at_column(**kwargs: Any) -> Column[Any]:
    """The ``created_at`` column of a store's table: when the row was made, time-zone aware, never
    empty (``kwargs``, such as ``index=True``, go to :class:`~sqlalchemy.Column`)."""
    return time_column("created_at", nullable=False, **kwargs)


def sqlite_file(url: str) -> Path | None:
    """The file a SQLite store URL names; None for another database or an in-memory one."""
    for prefix in ("sqlite+aiosqlite:///", "sqlite:///"):
        if url.startswith(prefix):
            path = url.removeprefix(prefix).split("?", 1)[0]
            return Path(path).expanduser() if path and path != ":memory:" else None
    return None


def normalise_url(url: str) -> str:
    """Accept plain SQLAlchemy URLs and pick the async drivers we ship; create SQLite's directory."""
    if url.startswith("sqlite:///"):
        url = "sqlite+aiosqlite:///" + url.removeprefix("sqlite:///")
    elif url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+asyncpg://" + url.split("://", 1)[1]
    path = sqlite_file(url)
    if path is not None:
        folder = path.parent
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            shown = redact_url(str(folder))
            raise ConfigError(
                f"cannot create the folder {shown} for the SQLite store: {exc.strerror or type(exc).__name__}",
                hint="check store_url (or --store): a sqlite:/// path in a writable folder",
            ) from None
    return url


def _is_sqlite(engine: AsyncEngine) -> bool:
    return engine.dialect.name == "sqlite"


def create_engine_for(url: str, **engine_kwargs: Any) -> AsyncEngine:
    """An async engine for ``url`` (see module doc). Raises :class:`ConfigError` for a bad URL
    or a missing driver, naming the URL without its password."""
    normalised = normalise_url(url)
    shown = redact_url(normalised)
    try:
        make_url(normalised)  # a bad port ("host:notaport") fails here too, not at the first connect
    except (ArgumentError, ValueError):
        raise ConfigError(
            f"cannot open store: '{shown}' is not a database URL",
            hint="check store_url (or --store): e.g. sqlite:///path/to/store.db or postgresql://user@host/db",
        ) from None
    try:
        engine = create_async_engine(normalised, **engine_kwargs)
    except Exception as exc:  # bad URL or missing driver
        raise ConfigError(f"cannot open store {shown}: {type(exc).__name__}", hint="check store_url") from None
    if _is_sqlite(engine):
        try:
            _enter_wal(engine.url.database or "")
        except sqlite3.Error as exc:
            raise ConfigError(f"cannot open store {shown}: {exc}", hint=_sqlite_hint(exc)) from None

        @event.listens_for(engine.sync_engine, "connect")
        def _pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            cursor.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA journal_mode = WAL")  # already WAL (see _enter_wal): no lock taken
            cursor.execute("PRAGMA synchronous = NORMAL")
            cursor.close()

    return engine


def _sqlite_hint(exc: sqlite3.Error) -> str:
    """The fix for a SQLite file that cannot be opened: a damaged file (or one that is not a
    database) is no matter of permissions, and nothing was written to it."""
    if not isinstance(exc, sqlite3.OperationalError):
        return (
            "the file is damaged or is not a SQLite database (it was left as it is): restore it from a "
            "backup, or move it aside and rerun to start a new store, or point store_url (or --store) elsewhere"
        )
    return "check store_url: a writable SQLite file"


def _enter_wal(path: str) -> None:
    """Switch a SQLite file to WAL once, before its engine opens connections.

    SQLite answers "database is locked" at once, without calling the busy handler, when another
    connection holds a lock while the mode changes (two engines or processes opening a new file
    together), so this waits as the busy timeout would, then fails as it would. It runs before
    the engine has a connection, so no transaction of this engine can be the one it waits for.
    The mode is stored in the file: later connections find it set."""
    if not path or path == ":memory:" or path.startswith("file:"):
        return
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while True:
        try:
            with closing(sqlite3.connect(Path(path).expanduser(), timeout=BUSY_TIMEOUT_MS / 1000)) as conn:
                if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


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


def migrations_config(store: Store, connection: Connection | None = None) -> Config:
    """Alembic's configuration for ``store``'s migrations (there is no alembic.ini): its scripts,
    its own version table ``alembic_version_<store>``, and the connection to run them on."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(_MIGRATIONS))
    config.set_main_option("version_locations", str(_MIGRATIONS / store))
    config.set_main_option("path_separator", "os")
    config.set_main_option("file_template", "r%%(rev)s_%%(slug)s")
    config.attributes["version_table"] = f"alembic_version_{store}"
    config.attributes["connection"] = connection
    return config


def head_revision(store: Store) -> str:
    """The newest revision of ``store``'s migrations, read from the file names without loading
    Alembic (a second of a CLI process's start-up): revisions are numbered ``r0001_…``,
    ``r0002_…`` (tests/migrations/new_migration.py) in one line (tests/migrations/test_heads.py
    checks that this is Alembic's head)."""
    return max(p.name[1:5] for p in (_MIGRATIONS / store).glob("r[0-9][0-9][0-9][0-9]_*.py"))


async def _at_head(engine: AsyncEngine, store: Store) -> bool:
    """The database holds exactly ``store``'s head revision: one read, no Alembic. Any doubt (no
    version table yet, an error) answers False, and :func:`migrate` asks Alembic."""
    try:
        async with engine.connect() as conn:
            rows = (await conn.execute(text(f"SELECT version_num FROM alembic_version_{store}"))).all()
    except SQLAlchemyError:
        return False
    return [r[0] for r in rows] == [head_revision(store)]


async def migrate(engine: AsyncEngine, store: Store) -> None:
    """Bring ``store``'s tables in ``engine``'s database to the newest schema this code knows.

    A current schema costs one read and no DDL (on PostgreSQL even ``CREATE INDEX IF NOT EXISTS``
    takes a table lock that conflicts with writes, so a process starting beside busy ones must not
    issue DDL). Otherwise the upgrade runs in one transaction that holds the store's migration
    lock: a transaction-level advisory lock on PostgreSQL, the write lock on SQLite (``BEGIN
    IMMEDIATE``, under :func:`write`), so two processes opening a new database at once upgrade it
    once. A database written by a newer psychoalign is refused before anything changes."""
    if await _at_head(engine, store):  # the common case, answered without loading Alembic
        return
    current, heads, known = await _revisions(engine, store)
    _refuse_newer(engine, store, current - known)
    if current == heads:
        return
    async with _one_upgrade_at_a_time(), write(engine) as conn:
        if _is_sqlite(engine):
            await conn.exec_driver_sql("BEGIN IMMEDIATE")
        elif engine.dialect.name == "postgresql":
            await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _lock_key(store)})
        await conn.run_sync(_upgrade, engine, store)


class MigrateOnce:
    """:func:`migrate` for one store, run before the store's first use and never again: the
    callers that arrive together while it runs wait for it. A failed run is tried again by the
    next caller."""

    def __init__(self, engine: AsyncEngine, store: Store) -> None:
        self._engine = engine
        self._store = store
        self._done = False
        self._lock = asyncio.Lock()

    async def __call__(self) -> None:
        if self._done:
            return
        async with self._lock:
            if not self._done:
                await migrate(self._engine, self._store)
                self._done = True


@asynccontextmanager
async def _one_upgrade_at_a_time() -> AsyncIterator[None]:
    loop = asyncio.get_running_loop()
    async with _upgrade_locks.setdefault(loop, asyncio.Lock()):
        if not _upgrading.acquire(blocking=False):  # another thread's loop is upgrading: wait off the loop
            waiting = asyncio.ensure_future(asyncio.to_thread(_upgrading.acquire))
            try:
                await asyncio.shield(waiting)
            except asyncio.CancelledError:
                waiting.add_done_callback(lambda _: _upgrading.release())  # it still acquires: give it back
                raise
        try:
            yield
        finally:
            _upgrading.release()


async def _revisions(engine: AsyncEngine, store: Store) -> tuple[set[str], set[str], set[str]]:
    async with engine.connect() as conn:
        return await conn.run_sync(_state, store)


def _state(sync_conn: Connection, store: Store) -> tuple[set[str], set[str], set[str]]:
    """The database's current revisions of ``store``, the scripts' heads, and every revision known."""
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    context = MigrationContext.configure(sync_conn, opts={"version_table": f"alembic_version_{store}"})
    script = ScriptDirectory.from_config(migrations_config(store))
    return set(context.get_current_heads()), set(script.get_heads()), {s.revision for s in script.walk_revisions()}


def _upgrade(sync_conn: Connection, engine: AsyncEngine, store: Store) -> None:
    """Alembic's upgrade to head on ``sync_conn``, inside the caller's transaction (which holds the lock)."""
    from alembic import command

    # Read again under the lock: another process may have upgraded meanwhile, maybe a newer one.
    current, heads, known = _state(sync_conn, store)
    _refuse_newer(engine, store, current - known)
    if current != heads:
        command.upgrade(migrations_config(store, sync_conn), "head")
        shown = _shown(engine)
        _log.info("%s tables in %s upgraded to schema revision %s", store, shown, ", ".join(sorted(heads)))


def _shown(engine: AsyncEngine) -> str:
    """The engine's URL as users may see it (in a message or a log line): no password."""
    return redact_url(engine.url.render_as_string(hide_password=False))


def _refuse_newer(engine: AsyncEngine, store: Store, unknown: set[str]) -> None:
    if unknown:
        shown = _shown(engine)
        raise ConfigError(
            f"the {store} tables in {shown} are at schema revision {', '.join(sorted(unknown))}, "
            "newer than this psychoalign knows: a newer version wrote them",
            hint="upgrade psychoalign (pip install --upgrade psychoalign) to open this database",
        )


def _lock_key(store: Store) -> int:
    """The store's PostgreSQL advisory lock: a stable signed 64-bit number from its name."""
    digest = hashlib.sha256(f"psychoalign.migrate.{store}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


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
    detail = redact_url(detail.split("[SQL:", 1)[0].strip())[:200]
    return f"{name}: {detail}" if detail else name
