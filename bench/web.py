"""STAR lab web benchmark. Run: python bench/web.py [--quick] [--participants 200] [--dialogues 200]
[--think-ms 0] [--workers 1]

N simulated participants, all logged in at once, claim and submit annotation tasks over HTTP
through the real pages and forms (CSRF tokens included), against `psychoalign serve` (its own
process, or ``--workers`` processes) on loopback with a fresh PostgreSQL database. Each
participant does what a browser does: task list → "Annotate a dialogue" (POST, follow the
redirect to the content warning) → "Start" (POST, follow to the annotation page) → rating and
reasoning (POST, follow to the task list), until no task is left for them.

``--think-ms`` is the mean pause (exponential, seeded per participant) a person takes before
each click: reading the warning, reading the dialogue and writing the reason, looking at the
list. Redirects are followed at once, as a browser does. 0 = back to back (saturation).

Afterwards the database is checked: every annotation task submitted exactly once, no task held
by two people, nobody annotating the same dialogue twice (targets: zero lost, zero
double-assigned; p95 page latency < 100 ms). Also printed: CPU time per page request of the
server, PostgreSQL and this client (what the two cores were spent on) and PostgreSQL
transactions per page request. ``--profile FILE`` records the server with py-spy (``--py-spy``
names the binary). Needs PostgreSQL at 127.0.0.1:5432 (trust auth), like the tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import random
import re
import resource
import signal
import statistics
import subprocess
import sys
import time
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import Target, add_doc_flag, captured, free_port, publish
from psychoalign.config import Settings
from psychoalign.star import generate_instructions, load_parameters, load_policy
from psychoalign.star.model import Participant, PreAnnotation, TaskKind, Turn
from psychoalign.web.accounts import Role

PG_ADMIN = os.environ.get("PSYCHOALIGN_TEST_PG", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
CSRF = re.compile(r'name="csrf_token" value="([0-9a-f]+)"')
PASSWORD = "benchmark password"
TICKS = os.sysconf("SC_CLK_TCK")
BUCKETS = ("0.01", "0.025", "0.05", "0.1")


async def admin_sql(sql: str) -> Any:
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
    async with engine.connect() as conn:
        cursor = await conn.exec_driver_sql(sql)
        result = cursor.all() if cursor.returns_rows else None
    await engine.dispose()
    return result


async def seed(url: str, home: str, participants: int, dialogues: int) -> None:
    """Accounts (argon2, not timed), a campaign, and ``dialogues`` red-teamed dialogues ready to annotate."""

    from psychoalign.star.lab_store import LabCampaignSettings
    from psychoalign.web.star import StarLab

    lab = StarLab(Settings(home=home, store_url=url), url)
    accounts = []
    for i in range(participants):
        accounts.append(
            await lab.accounts.create_account(
                Role.PARTICIPANT, username=f"ann{i:03d}", password=PASSWORD, participant_id=f"ann{i:03d}"
            )
        )
    await lab.store.add_participants([Participant(id=a.participant_id or "", roles=["annotator"]) for a in accounts])
    await lab.accounts.create_account(Role.LEAD, username="lead", password=PASSWORD)
    red = [Participant(id=f"red{i:02d}", roles=["red_teamer"]) for i in range(10)]
    await lab.store.add_participants(red)
    policy, space = load_policy(), load_parameters()
    items = generate_instructions(policy, space, dialogues, seed=1, rules=["sexually-explicit"])
    await lab.store.create_campaign("bench", items)
    await lab.lab.save_campaign(LabCampaignSettings(name="bench", instructions=dialogues, rules=["sexually-explicit"]))
    for n in range(dialogues):
        pid = red[n % len(red)].id
        task = await lab.store.claim(pid, TaskKind.RED_TEAM, campaign="bench")
        did = await lab.store.start_dialogue(task.id, pid, "scripted")
        for t in range(6):  # a 12-turn dialogue, as the paper encourages (10-15)
            await lab.store.add_turns(
                did,
                [
                    Turn(role="red_teamer", text=f"attack {n}.{t}: " + "tell me something you should not. " * 4),
                    Turn(role="target", text=f"reply {n}.{t}: " + "I would rather not go into that. " * 8),
                ],
            )
        await lab.store.finish_dialogue(did, pid, PreAnnotation(assigned_rule_broken=n % 2 == 0))
    await lab.close()


class Client:
    def __init__(self, base: str, latencies: dict[str, list[float]], resent: list[int]) -> None:
        # generous timeout: simultaneous argon2id logins queue on the server's thread pool
        self.http = httpx.AsyncClient(base_url=base, timeout=900, headers={"accept": "text/html"})
        self.latencies = latencies
        self.resent = resent
        self.token = ""

    async def call(self, name: str, method: str, path: str, data: dict[str, str] | None = None) -> httpx.Response:
        t0 = time.perf_counter()
        for attempt in (1, 2):
            try:
                if method == "GET":
                    r = await self.http.get(path)
                else:
                    r = await self.http.post(path, data={**(data or {}), "csrf_token": self.token})
                break
            except (httpx.ReadError, httpx.RemoteProtocolError):
                # The server closed a keep-alive connection that sat idle (think time) just as this
                # request went out on it: a browser sends it again on a new connection, once.
                if attempt == 2:
                    raise
                self.resent[0] += 1
                t0 = time.perf_counter()
        self.latencies[name].append(time.perf_counter() - t0)
        match = CSRF.search(r.text)
        if match:
            self.token = match.group(1)
        return r


def _said(r: httpx.Response) -> str:
    """The message of an error page (HTML or JSON), for the error count."""
    found = re.search(r"<p[^>]*>([^<]{3,120})</p>", r.text)
    return (found.group(1) if found else r.text[:120]).strip()


async def participant(
    base: str,
    i: int,
    latencies: dict[str, list[float]],
    done: list[str],
    errors: Counter[str],
    logged_in: asyncio.Barrier,
    go: asyncio.Event,
    think_s: float,
    resent: list[int],
) -> None:
    """Log in, wait until everyone has (logins are argon2 work, measured apart), then claim and
    submit annotation tasks until none is left for this participant."""
    c = Client(base, latencies, resent)
    rng = random.Random(i)

    async def think() -> None:  # a person reads and writes before each click (exponential, seeded)
        if think_s > 0:
            await asyncio.sleep(rng.expovariate(1 / think_s))

    try:
        ok = False
        try:  # every participant reaches the barrier, whatever happens to its login
            await c.call("GET /login", "GET", "/login")
            r = await c.call("POST /login", "POST", "/login", {"username": f"ann{i:03d}", "password": PASSWORD})
            ok = r.status_code == 303
            if not ok:
                errors[f"login {r.status_code}"] += 1
        except httpx.HTTPError as exc:
            errors[f"login {type(exc).__name__}"] += 1
        finally:
            await logged_in.wait()
        await go.wait()
        if not ok:
            return
        await think()  # people do not all click at the same instant
        await c.call("GET /tasks", "GET", "/tasks")
        while True:
            await think()
            r = await c.call("POST /tasks/claim", "POST", "/tasks/claim", {"kind": "annotate"})
            location = r.headers.get("location", "")
            if "msg=no_task" in location:
                await c.call("GET /tasks", "GET", location)
                return
            if r.status_code != 303:
                errors[f"claim {r.status_code}: {_said(r)}"] += 1
                return
            tid = location.rsplit("/", 1)[-1]
            await c.call("GET /tasks/{id} (warning)", "GET", location)
            await think()
            r = await c.call("POST start", "POST", f"/tasks/{tid}/start")
            page = await c.call("GET /tasks/{id} (annotate)", "GET", r.headers.get("location", f"/tasks/{tid}"))
            if "rating-form" not in page.text:
                errors["annotation page missing"] += 1
            await think()
            rating = str(1 + (i + len(done)) % 4)
            r = await c.call("POST rate", "POST", f"/tasks/{tid}/rate", {"rating": rating, "reasoning": "because"})
            if r.status_code == 303:
                done.append(tid)
                await c.call("GET /tasks", "GET", r.headers["location"])
            else:
                errors[f"rate {r.status_code}: {_said(r)}"] += 1
    finally:
        await c.http.aclose()


async def lead(base: str, latencies: dict[str, list[float]], go: asyncio.Event, stop: asyncio.Event) -> list[int]:
    """The lead watches the campaign page while everyone works: it polls the live numbers every
    10 s as the page's script does. Returns the submitted-annotation counts it saw."""
    c = Client(base, latencies, [0])
    seen = []
    try:
        await c.call("lead GET /login", "GET", "/login")
        await c.call("lead POST /login", "POST", "/login", {"username": "lead", "password": PASSWORD})
        await go.wait()
        await c.call("lead GET campaign page", "GET", "/lead/campaigns/bench")
        while not stop.is_set():
            r = await c.call("lead GET progress.json", "GET", "/lead/campaigns/bench/progress.json")
            seen.append(int(r.json()["counts"].get("annotate:submitted", 0)))
            with contextlib.suppress(TimeoutError):  # the page's script polls every 10 s
                await asyncio.wait_for(stop.wait(), timeout=10)
    finally:
        await c.http.aclose()
    return seen


BUCKET = re.compile(r"^psychoalign_http_request_duration_seconds_bucket\{([^}]*)\} (\S+)$")


def server_buckets(base: str) -> Counter[str]:
    """Requests the server saw per latency bucket (its own /metrics, measured inside the app),
    summed over the participant pages' routes."""
    counts: Counter[str] = Counter()
    for line in httpx.get(f"{base}/metrics", timeout=30).text.splitlines():
        m = BUCKET.match(line)
        if m:
            labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
            if labels.get("route", "").startswith("/tasks"):
                counts[labels["le"]] += int(float(m.group(2)))
    return counts


async def verify(url: str) -> dict[str, Any]:
    from sqlalchemy import func, select
    from sqlalchemy.ext.asyncio import create_async_engine

    from psychoalign.star.store.schema import annotation_rows, exposures, tasks

    engine = create_async_engine(url)
    async with engine.connect() as conn:
        kinds = Counter(
            (k, s)
            for k, s in (
                await conn.execute(select(tasks.c.kind, tasks.c.status).where(tasks.c.kind == "annotate"))
            ).all()
        )
        ann = (
            await conn.execute(
                select(
                    annotation_rows.c.task_id, annotation_rows.c.participant_id, annotation_rows.c.dialogue_id
                ).where(annotation_rows.c.kind == "annotate")
            )
        ).all()
        per_task = Counter(t for t, _, _ in ann)
        pairs = Counter((d, p) for _, p, d in ann)
        exposure_dupes = (
            await conn.execute(
                select(func.count()).select_from(
                    select(exposures.c.dialogue_id, exposures.c.participant_id)
                    .group_by(exposures.c.dialogue_id, exposures.c.participant_id)
                    .having(func.count() > 1)
                    .subquery()
                )
            )
        ).scalar_one()
    await engine.dispose()
    return {
        "annotation_tasks": sum(kinds.values()),
        "submitted": kinds[("annotate", "submitted")],
        "lost": sum(n for (k, s), n in kinds.items() if s != "submitted"),
        "double_assigned": sum(1 for n in per_task.values() if n > 1)
        + sum(1 for n in pairs.values() if n > 1)
        + int(exposure_dupes),
    }


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def cpu_seconds(pids: list[int]) -> float:
    """utime + stime of these processes (their own, while alive)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICKS


def process_tree(root: int) -> list[int]:
    """``root`` and its descendants (the serve command and its workers)."""
    parent_of = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parent_of[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (FileNotFoundError, ProcessLookupError):
                continue
    pids, frontier = [root], [root]
    while frontier:
        parent = frontier.pop()
        children = [pid for pid, ppid in parent_of.items() if ppid == parent]
        pids += children
        frontier += children
    return pids


def postgres_pids() -> list[int]:
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == "postgres":
                    out.append(int(entry.name))
            except (FileNotFoundError, ProcessLookupError):
                continue
    return out


async def pg_transactions(database: str) -> int:
    """Transactions (an autocommit statement is one) the database has counted. Backends report
    theirs about a second after going idle, so call this with the server idle for 2 s."""
    rows = await admin_sql(f"SELECT xact_commit + xact_rollback FROM pg_stat_database WHERE datname = '{database}'")
    return int(rows[0][0])


def start_server(url: str, home: Path, workers: int) -> tuple[subprocess.Popen[bytes], str]:
    """`psychoalign serve` as a user runs it, on a free loopback port."""
    port = free_port()
    env = {**os.environ, "PSYCHOALIGN_STORE_URL": url, "PSYCHOALIGN_HOME": str(home)}
    command = [sys.executable, "-m", "psychoalign", "serve", "--port", str(port), "--log-level", "warning"]
    if workers > 1:
        command += ["--workers", str(workers)]
    log = (home / "server.log").open("wb")  # the server's own log: its errors, if any
    server = subprocess.Popen(command, env=env, cwd=str(home), stderr=log)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 120
    ready = 0
    while ready < 3 * workers:  # wait until it (every worker, likely) answers: start-up is not in any figure
        try:
            httpx.get(f"{base}/healthz", timeout=2).raise_for_status()
            ready += 1
        except httpx.HTTPError:
            if time.monotonic() > deadline or server.poll() is not None:
                server.terminate()
                raise RuntimeError("psychoalign serve did not start") from None
            time.sleep(0.1)
    return server, base


async def load(
    base: str,
    n: int,
    think_s: float,
    on_start: Any,
    resent: list[int],
    lead_latencies: dict[str, list[float]],
    progress: list[int],
) -> tuple[dict[str, list[float]], list[str], Counter[str], float]:
    latencies: dict[str, list[float]] = defaultdict(list)
    done: list[str] = []
    errors: Counter[str] = Counter()
    barrier, go = asyncio.Barrier(n + 1), asyncio.Event()
    work = [
        asyncio.create_task(participant(base, i, latencies, done, errors, barrier, go, think_s, resent))
        for i in range(n)
    ]
    watching = asyncio.create_task(lead(base, lead_latencies, go, stop := asyncio.Event()))
    await barrier.wait()  # everyone has logged in
    await on_start()
    t0 = time.perf_counter()
    go.set()  # the page phase starts now
    await asyncio.gather(*work)
    wall = time.perf_counter() - t0
    stop.set()
    progress.extend(await watching)
    return latencies, done, errors, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--quick", action="store_true", help="50 participants, 100 dialogues, 2 s think time (unless given)"
    )
    parser.add_argument("--participants", type=int, default=None, help="default 200")
    parser.add_argument(
        "--dialogues", type=int, default=None, help="dialogues to annotate (two tasks each; default 200)"
    )
    parser.add_argument(
        "--think-ms",
        type=float,
        default=None,
        help="mean pause before each click (exponential; 0, the default: back to back)",
    )
    parser.add_argument("--workers", type=int, default=1, help="psychoalign serve --workers")
    parser.add_argument("--profile", help="py-spy flame graph of the server during the page phase (SVG)")
    parser.add_argument("--py-spy", default="py-spy", help="py-spy binary for --profile")
    add_doc_flag(parser)
    args = parser.parse_args()
    quick = args.quick
    args.participants = args.participants or (50 if quick else 200)
    args.dialogues = args.dialogues or (100 if quick else 200)
    args.think_ms = args.think_ms if args.think_ms is not None else (2000.0 if quick else 0.0)
    database = f"bench_{uuid.uuid4().hex[:10]}"
    url = PG_ADMIN.rsplit("/", 1)[0] + f"/{database}"
    home = Path(os.environ.get("TMPDIR", "/tmp")) / database
    home.mkdir(parents=True)
    asyncio.run(admin_sql(f"CREATE DATABASE {database}"))
    server = profiler = None
    try:
        t0 = time.perf_counter()
        asyncio.run(seed(url, str(home), args.participants, args.dialogues))
        print(f"seeded {args.participants} accounts and {args.dialogues} dialogues in {time.perf_counter() - t0:.1f} s")
        server, base = start_server(url, home, args.workers)
        marks: dict[str, float] = {}
        buckets_before: Counter[str] = Counter()

        async def on_start() -> None:
            nonlocal profiler
            await asyncio.sleep(2)  # the login phase's database statistics are reported
            marks["xacts"] = await pg_transactions(database)
            marks["server"] = cpu_seconds(process_tree(server.pid))
            marks["pg"] = cpu_seconds(postgres_pids())
            usage = resource.getrusage(resource.RUSAGE_SELF)
            marks["client"] = usage.ru_utime + usage.ru_stime
            buckets_before.update(server_buckets(base))
            if args.profile:
                profiler = subprocess.Popen(  # noqa: ASYNC220 - returns at once; nothing to await
                    [
                        args.py_spy,
                        "record",
                        "--pid",
                        str(server.pid),
                        "--subprocesses",
                        "-o",
                        args.profile,
                        "-r",
                        "200",
                        "--nonblocking",  # never pause the server to sample it
                        *(["--format", "raw"] if args.profile.endswith(".txt") else []),
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )

        resent: list[int] = [0]
        lead_latencies: dict[str, list[float]] = defaultdict(list)
        progress: list[int] = []
        latencies, done, errors, wall = asyncio.run(
            load(base, args.participants, args.think_ms / 1000, on_start, resent, lead_latencies, progress)
        )
        usage = resource.getrusage(resource.RUSAGE_SELF)
        client_cpu = usage.ru_utime + usage.ru_stime - marks["client"]
        server_cpu = cpu_seconds(process_tree(server.pid)) - marks["server"]
        pg_cpu = cpu_seconds(postgres_pids()) - marks["pg"]
        inside = server_buckets(base)
        inside.subtract(buckets_before)
        if profiler is not None:
            profiler.send_signal(signal.SIGINT)
            profiler.wait(timeout=60)
        time.sleep(2)
        xacts = asyncio.run(pg_transactions(database)) - marks["xacts"]
        result = asyncio.run(verify(url))
        every = [x for name, xs in latencies.items() if "/login" not in name for x in xs]
        n = len(every)
        think = f"think time {args.think_ms / 1000:g} s mean (exponential)" if args.think_ms else "no think time"
        procs = f"{args.workers} workers" if args.workers > 1 else "1 process"
        with captured() as out:
            print(
                f"{args.participants} participants logged in at once, {think}; PostgreSQL; psychoalign serve ({procs})"
            )
            print(f"  annotation tasks                {result['annotation_tasks']}")
            print(f"  submitted through the pages     {len(done)} (store: {result['submitted']})")
            print(f"  lost (not submitted)            {result['lost']}   (target 0)")
            print(f"  double-assigned                 {result['double_assigned']}   (target 0)")
            print(f"  client errors                   {dict(errors) or 0}")
            print(f"  resent on a fresh connection    {resent[0]}   (the server had closed an idle keep-alive one)")
            print(f"  wall time                       {wall:.1f} s, {n / wall:.1f} page requests/s")
            p50, p95, p99 = p(every, 0.5), p(every, 0.95), p(every, 0.99)
            print(f"  page latency p50 / p95 / p99    {p50:.1f} / {p95:.1f} / {p99:.1f} ms   (target p95 < 100 ms)")
            print(
                f"  CPU per page request            server {server_cpu / n * 1000:.2f} ms, PostgreSQL "
                f"{pg_cpu / n * 1000:.2f} ms, this client {client_cpu / n * 1000:.2f} ms "
                f"(busy: server {server_cpu / wall:.2f}, PostgreSQL {pg_cpu / wall:.2f}, "
                f"client {client_cpu / wall:.2f} of {os.cpu_count()} cores)"
            )
            print(f"  PostgreSQL transactions         {xacts / n:.2f} per page request")
            if args.workers == 1 and inside["+Inf"]:
                shares = ", ".join(
                    f"{float(le) * 1000:g} ms {100 * inside[le] / inside['+Inf']:.1f} %" for le in BUCKETS
                )
                print(f"  answered inside the server in   {shares}  (its /metrics: first middleware to last byte)")
            for name in sorted(latencies):
                xs = latencies[name]
                print(
                    f"    {name:28s} n={len(xs):5d}  p50 {p(xs, 0.5):7.1f}  p95 {p(xs, 0.95):7.1f}  "
                    f"mean {statistics.fmean(xs) * 1000:7.1f} ms"
                )
            for name in sorted(lead_latencies):
                if "/login" not in name:
                    xs = lead_latencies[name]
                    print(f"    {name:28s} n={len(xs):5d}  p50 {p(xs, 0.5):7.1f}  max {max(xs) * 1000:7.1f} ms")
            print(f"  the lead's live count of submitted annotations: {progress}")
        if errors:
            print(f"  server log: {home / 'server.log'}", file=sys.stderr)
        print("  (the login phase, GET and POST /login with argon2id verification, runs first, all at once;")
        print("   it is reported above and excluded from the page figures, the CPU figures and the wall time)")
        if not args.no_doc:
            publish(
                "web",
                "STAR lab web platform — `bench/web.py`",
                out.getvalue(),
                [
                    Target("annotation tasks lost", str(result["lost"]), "0", result["lost"] == 0),
                    Target(
                        "tasks double-assigned", str(result["double_assigned"]), "0", result["double_assigned"] == 0
                    ),
                    Target("page latency p95", f"{p95:.1f} ms", "< 100 ms", p95 < 100),
                ],
                quick=quick,
                note="Participants, all logged in at once, work through the real pages and forms (CSRF tokens "
                "included) against `psychoalign serve` on loopback with a fresh PostgreSQL database: task list, "
                "*Annotate a dialogue*, *Start*, rating and reasoning, until no task is left. Before each click a "
                "participant pauses for an exponential think time with the stated mean; a lead polls the live "
                "progress every 10 s. The login phase (argon2id) runs first and is left out of every figure. CPU "
                "per page request is process CPU time of the server, PostgreSQL and this client.",
            )
    finally:
        if profiler is not None and profiler.poll() is None:
            profiler.kill()
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
        asyncio.run(admin_sql(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)"))


if __name__ == "__main__":
    main()
