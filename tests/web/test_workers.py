"""Several server workers: everything they share lives in the database (sessions, the CSRF
secret, the login throttle, tasks), so a request may land on any of them.

Two lab apps on one PostgreSQL database stand for two worker processes (each has its own
in-process caches, engine and pool, as a worker does); and `psychoalign serve --workers 2` runs
for real on a fresh database."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from sqlalchemy.ext.asyncio import create_async_engine

from psychoalign.star import generate_instructions, load_parameters, load_policy
from psychoalign.star.lab_store import LabCampaignSettings
from psychoalign.star.model import Participant, TaskKind, Turn
from psychoalign.web.accounts import Role, SQLAccountStore
from tests.loopback import free_port
from tests.weblab import PASSWORD, Browser, add_person, lab_app, lab_settings

pytestmark = pytest.mark.postgres
PG_ADMIN = os.environ.get("PSYCHOALIGN_TEST_PG", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")


async def _admin(sql: str) -> None:
    engine = create_async_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    async with engine.connect() as conn:
        await conn.exec_driver_sql(sql)
    await engine.dispose()


@pytest.fixture
async def fresh_db() -> AsyncIterator[str]:
    name = f"workers_{uuid.uuid4().hex[:10]}"
    await _admin(f"CREATE DATABASE {name}")
    try:
        yield PG_ADMIN.rsplit("/", 1)[0] + f"/{name}"
    finally:
        await _admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


async def test_a_session_csrf_token_logout_and_throttle_hold_across_workers(tmp_path: Path, fresh_db: str) -> None:
    settings = lab_settings(tmp_path, fresh_db)
    app_a, lab_a = lab_app(settings)
    app_b, lab_b = lab_app(settings)  # the second worker: its own caches, engine and pool
    person = await add_person(lab_a, "ann", roles=["annotator"])
    await lab_a.store.create_campaign(
        "c", generate_instructions(load_policy(), load_parameters(), 1, seed=1, rules=["sexually-explicit"])
    )
    # as the lead's form does: the lab's settings beside the STAR campaign (the task pages read its policy)
    await lab_a.lab.save_campaign(LabCampaignSettings(name="c", instructions=1, seed=1, rules=["sexually-explicit"]))
    await lab_a.store.add_participants([Participant(id="red", roles=["red_teamer"])])
    red = await lab_a.store.claim("red", TaskKind.RED_TEAM)
    did = await lab_a.store.start_dialogue(red.id, "red", "t")
    await lab_a.store.add_turns(did, [Turn(role="red_teamer", text="hi"), Turn(role="target", text="hello")])
    from psychoalign.star.model import PreAnnotation

    await lab_a.store.finish_dialogue(did, "red", PreAnnotation(assigned_rule_broken=False))
    a, b = Browser(app_a), Browser(app_b)
    try:
        assert (await a.login("ann")).status_code == 303
        b.client.cookies = a.client.cookies  # the same browser, its next request answered by worker B
        page = await b.get("/tasks")
        assert page.status_code == 200 and "Annotate a dialogue" in page.text
        assert b.token == a.token  # the CSRF token binds to the session with the shared secret
        claimed = await b.post("/tasks/claim", {"kind": "annotate"})
        assert claimed.status_code == 303 and claimed.headers["location"].startswith("/tasks/")
        held = await lab_a.store.claimed_tasks(person.participant_id or "")
        assert [t.dialogue_id for t in held] == [did]
        a.token = None
        assert (await a.get(claimed.headers["location"])).status_code == 200  # worker A sees B's claim
        assert (await b.post("/logout")).status_code == 303
        gone = await a.client.get("/tasks")  # logged out on B: the session is gone on A too
        assert gone.status_code == 303 and gone.headers["location"].startswith("/login")
        # five failures on A, the sixth attempt on B is throttled
        c, d = Browser(app_a), Browser(app_b)
        for _ in range(5):
            assert (await c.login("ann", "wrong password!")).status_code == 401
        assert (await d.login("ann", PASSWORD)).status_code == 429
        await c.aclose()
        await d.aclose()
    finally:
        await a.aclose()
        await b.aclose()
        await lab_a.close()
        await lab_b.close()


async def test_claims_through_two_workers_never_double_assign(tmp_path: Path, fresh_db: str) -> None:
    settings = lab_settings(tmp_path, fresh_db)
    labs = [lab_app(settings)[1], lab_app(settings)[1]]
    policy, space = load_policy(), load_parameters()
    await labs[0].store.add_participants([Participant(id=f"r{i}", roles=["red_teamer"]) for i in range(2)])
    await labs[0].store.add_participants([Participant(id=f"a{i}", roles=["annotator"]) for i in range(12)])
    await labs[0].store.create_campaign(
        "c", generate_instructions(policy, space, 10, seed=2, rules=["sexually-explicit"])
    )
    from psychoalign.star.model import PreAnnotation
    from psychoalign.star.store import ClaimError

    for n in range(10):
        pid = f"r{n % 2}"
        task = await labs[0].store.claim(pid, TaskKind.RED_TEAM)
        did = await labs[0].store.start_dialogue(task.id, pid, "t")
        await labs[0].store.add_turns(did, [Turn(role="red_teamer", text="x"), Turn(role="target", text="y")])
        await labs[0].store.finish_dialogue(did, pid, PreAnnotation(assigned_rule_broken=False))

    async def annotator(i: int) -> list[tuple[str, str | None]]:
        store = labs[i % 2].store  # half of them on each worker
        got = []
        while True:
            try:
                task = await store.claim(f"a{i}", TaskKind.ANNOTATE)
            except ClaimError:
                return got
            got.append((task.id, task.dialogue_id))

    try:
        results = await asyncio.gather(*(annotator(i) for i in range(12)))
        claimed = [t for r in results for t, _ in r]
        assert len(claimed) == 20 and len(set(claimed)) == 20  # every task once, nobody shares one
        for r in results:
            dialogues = [d for _, d in r]
            assert len(dialogues) == len(set(dialogues))  # nobody got both tasks of one dialogue
    finally:
        for lab in labs:
            await lab.close()


def test_serve_with_two_workers_on_a_fresh_postgres_database(tmp_path: Path, fresh_db: str) -> None:
    async def lead() -> None:
        store = SQLAccountStore(fresh_db)
        await store.create_account(Role.LEAD, username="lead", password=PASSWORD)
        await store.close()

    port = free_port()
    env = {**os.environ, "PSYCHOALIGN_STORE_URL": fresh_db, "PSYCHOALIGN_HOME": str(tmp_path)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "psychoalign", "serve", "--port", str(port), "--workers", "2", "--log-level", "warning"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:  # the workers start on a fresh database: the parent created every table first
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                if httpx.get(f"{url}/healthz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "psychoalign serve --workers 2 did not come up"
            time.sleep(0.2)
        asyncio.run(lead())
        children = Path(f"/proc/{proc.pid}/task/{proc.pid}/children").read_text().split()
        workers = [c for c in children if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text()]
        assert len(workers) == 2

        async def visit() -> int:
            browser = Browser(base_url=url)  # a new connection each time: any worker may answer
            try:
                assert (await browser.login("lead")).status_code == 303
                return (await browser.get("/lead")).status_code
            finally:
                await browser.aclose()

        async def visits() -> list[int]:
            return list(await asyncio.gather(*(visit() for _ in range(6))))

        assert asyncio.run(visits()) == [200] * 6
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=90)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert code == 0
    for pid in workers:
        assert not Path(f"/proc/{pid}").exists()  # no worker left behind
