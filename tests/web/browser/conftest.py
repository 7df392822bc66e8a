"""Real-browser test infrastructure: Debian's Chromium driven by Playwright, the app served by uvicorn
on a free loopback port, one fresh database per test (SQLite file, or a PostgreSQL database), and
screenshots saved as test artefacts (``$PSYCHOALIGN_ARTIFACTS``, default ``test-artifacts/``).

No test waits on a clock: the listening socket is bound before the server starts (connections
queue in its backlog), and pages are driven with Playwright's auto-waiting locators.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from psychoalign.web.accounts import Role
from tests.weblab import PASSWORD, lab_settings, served_app

CHROMIUM = os.environ.get("PSYCHOALIGN_CHROMIUM", "/usr/bin/chromium")
ROOT = Path(__file__).resolve().parents[3]
PG_ADMIN = os.environ.get("PSYCHOALIGN_TEST_PG", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root in a container
    "--disable-dev-shm-usage",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-default-apps",
    "--disable-extensions",
    "--disable-sync",
    "--metrics-recording-only",
    "--no-first-run",
    "--mute-audio",
]


def run_async(coro: Any) -> Any:
    """Run a coroutine to completion in its own thread (Playwright's sync API owns this thread's loop)."""
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["value"] = asyncio.run(coro)
        except BaseException as exc:  # re-raised in the caller
            result["error"] = exc

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    if "error" in result:
        raise result["error"]
    return result.get("value")


def artifacts_dir() -> Path:
    path = Path(os.environ.get("PSYCHOALIGN_ARTIFACTS", ROOT / "test-artifacts")) / "screenshots"
    path.mkdir(parents=True, exist_ok=True)
    return path


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """One headless Chromium per test module (the system's, never a downloaded one). Module scope:
    Playwright's sync API runs an event loop on this thread while it lives, and the async tests
    of later modules need the thread free."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"Chromium is expected at {CHROMIUM}: run `make install` (apt-get install chromium chromium-driver)"
        )
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class LiveServer:
    """The app served by uvicorn in a thread, on a socket bound before it starts."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, lifespan="on", log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=60)
        self.sock.close()


@dataclass
class Lab:
    """What a browser test gets: the base URL, the store URL, and where screenshots go."""

    url: str
    store_url: str
    shots: Path
    taken: list[Path] = field(default_factory=list)

    def shot(self, page: Any, name: str) -> Path:
        path = self.shots / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        self.taken.append(path)
        return path


async def _seed_lead(store_url: str, home: Path) -> None:
    from psychoalign.web.star import StarLab

    lab = StarLab(lab_settings(home, store_url), store_url)
    try:
        await lab.accounts.create_account(Role.LEAD, username="lead", password=PASSWORD, display_name="Lab lead")
    finally:
        await lab.close()


async def _pg(sql: str) -> None:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    try:
        async with engine.connect() as conn:
            await conn.exec_driver_sql(sql)
    finally:
        await engine.dispose()


def _pg_available() -> bool:
    try:
        socket.create_connection(("127.0.0.1", 5432), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def live_lab(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Lab]:
    """A served lab with one lead account (``lead`` / PASSWORD) on a fresh database."""
    home = tmp_path / "home"
    database = None
    if request.param == "sqlite":
        store_url = f"sqlite+aiosqlite:///{tmp_path / 'lab.db'}"
    else:
        if not _pg_available():
            pytest.fail("PostgreSQL is expected at 127.0.0.1:5432 on this machine kind")
        database = f"lab_{uuid.uuid4().hex[:12]}"
        run_async(_pg(f"CREATE DATABASE {database}"))
        store_url = PG_ADMIN.rsplit("/", 1)[0] + f"/{database}"
    run_async(_seed_lead(store_url, home))
    shots = artifacts_dir() / f"{request.node.name}".replace("[", "-").replace("]", "")
    shutil.rmtree(shots, ignore_errors=True)
    shots.mkdir(parents=True)
    try:
        with LiveServer(served_app(lab_settings(home, store_url))) as server:
            yield Lab(url=server.url, store_url=store_url, shots=shots)
    finally:
        if database:
            run_async(_pg(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))
