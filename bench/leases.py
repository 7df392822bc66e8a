"""Leases across runners. Run: python bench/leases.py [--quick]   (needs PostgreSQL, see --pg)

Three runner processes share one PostgreSQL store and one run (same spec, no shards: each claims
from the whole run), each with ``--follow`` and a zero-latency scripted model, each as if on its
own machine (its owner names another host, so only its lease, never the pid check, tells whether
it is alive). Once a fifth of the cells are done, runner 0 is killed with SIGKILL. The survivors
finish the run: they take over runner 0's cells as its leases lapse (lease 6 s here, heartbeat
every 2 s; the default is 120 s). Prints the cells lost (planned but not done), the rows
duplicated (rows beyond the planned cells), the cells run again (runner 0's unfinished claims),
and each runner's cells and throughput (runner 0's: the cells it stored done before the kill, over
the time it ran). Full mode: 10,000 cells (20 systems x 500 AdvBench items); quick: 2,080 (4 x 520).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _util import Target, add_doc_flag, captured, data_dir, publish
from psychoalign.config import Settings
from psychoalign.experiments import ExperimentSpec, run_experiment
from psychoalign.experiments.harness import runner as runner_module
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.store import SQLResultStore
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
from psychoalign.storage import create_engine_for

LEASE_S = 6.0
RUNNERS = 3


#: (systems, AdvBench items) of each mode: cells = systems x items.
SIZES = {"full": (20, 500), "quick": (4, 520)}


def spec(copies: int, items: int) -> ExperimentSpec:
    return ExperimentSpec.model_validate(
        {
            "name": f"leases-{copies}x{items}",
            "systems": [{"name": f"v{i}", "kind": "vanilla"} for i in range(copies)],
            "benchmarks": ["advbench"],
            "n": items,
            "concurrency": 8,
            "judge": {"harm": False, "calibration_n": 0},
        }
    )


async def runner(index: int, pg: str, schema: str, copies: int, items: int, home: str) -> None:
    """One runner process: prints its summary as one JSON line."""
    runner_module.current_owner = lambda: f"bench-host-{index}:{os.getpid()}"  # another machine
    store = SQLResultStore(pg, lease_s=LEASE_S, connect_args={"server_settings": {"search_path": schema}})
    mspec = ModelSpec(backend="scripted", model="zero")
    models = {"chat": ChatModel(mspec, ScriptedBackend(mspec, replies=["I can't help with that."], cycle=True))}
    t = time.perf_counter()
    summary = await run_experiment(
        spec(copies, items),
        Settings(home=home, experiments={"data_dir": str(data_dir())}),
        store=store,
        models=models,
        registry=Registry(),
        follow=True,
    )
    await store.close()
    print(json.dumps({"runner": index, "ran": summary.ran, "wall_s": time.perf_counter() - t}), flush=True)


async def _count(pg: str, schema: str, sql: str) -> list[tuple[object, ...]]:
    engine = create_engine_for(pg, connect_args={"server_settings": {"search_path": schema}})
    try:
        async with engine.connect() as conn:
            return [tuple(r) for r in (await conn.exec_driver_sql(sql)).all()]
    except Exception:
        return []
    finally:
        await engine.dispose()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="2,080 cells instead of 10,000.")
    parser.add_argument(
        "--pg", default=os.environ.get("PSYCHOALIGN_TEST_PG", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
    )
    parser.add_argument("--runner", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--schema", help=argparse.SUPPRESS)
    parser.add_argument("--home", help=argparse.SUPPRESS)
    add_doc_flag(parser)
    args = parser.parse_args()
    copies, items = SIZES["quick" if args.quick else "full"]
    if args.runner is not None:
        await runner(args.runner, args.pg, args.schema, copies, items, args.home)
        return
    total = copies * items
    schema = f"bench_leases_{uuid.uuid4().hex[:8]}"
    admin = create_engine_for(args.pg)
    async with admin.begin() as conn:
        await conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        with captured() as out, tempfile.TemporaryDirectory() as tmp:
            procs = [
                await asyncio.create_subprocess_exec(
                    sys.executable,
                    __file__,
                    "--runner",
                    str(i),
                    "--pg",
                    args.pg,
                    "--schema",
                    schema,
                    "--home",
                    str(Path(tmp) / f"h{i}"),
                    *(["--quick"] if args.quick else []),
                    stdout=asyncio.subprocess.PIPE,
                )
                for i in range(RUNNERS)
            ]
            t = time.perf_counter()
            done_at_kill = held_n = 0
            # kill runner 0 mid-run: once a fifth of the cells are done and it holds some running
            while done_at_kill < total // 5 or held_n == 0:
                await asyncio.sleep(0.1)  # poll, without taking a core from the runners
                rows = await _count(
                    args.pg, schema, "SELECT count(*), sum(CASE WHEN status = 'running' AND owner LIKE "
                    "'bench-host-0:%' THEN 1 ELSE 0 END) FROM psychoalign_experiment_cells WHERE status <> 'failed'"
                )  # fmt: skip
                done_at_kill = int(rows[0][0] or 0) if rows else 0  # type: ignore[call-overload]
                held_n = int(rows[0][1] or 0) if rows else 0  # type: ignore[call-overload]
                assert procs[0].returncode is None, "runner 0 ended before it could be killed mid-run"
            procs[0].send_signal(signal.SIGKILL)
            await procs[0].wait()
            summaries = []
            for p in procs[1:]:
                line, _ = await p.communicate()
                summaries.append(json.loads(line.decode().strip().splitlines()[-1]))
            wall = time.perf_counter() - t
            rows = await _count(args.pg, schema, "SELECT status, attempts, owner FROM psychoalign_experiment_cells")
            done = sum(1 for r in rows if r[0] == "done")
            lost = total - done
            duplicated = len(rows) - total
            again = sum(1 for r in rows if int(r[1]) > 1)  # type: ignore[call-overload]
            print(f"{total} cells, {RUNNERS} runners (each its own 'host')")
            print(f"runner 0 SIGKILLed when {done_at_kill} cells were claimed or done")
            print(f"cells runner 0 held running when it was killed: {held_n}")
            print(f"lost {lost}, duplicated {duplicated}, run again after the kill {again}; wall {wall:.1f} s")
            by_owner: dict[str, int] = {}
            for r in rows:
                host = str(r[2]).split(":")[0]
                by_owner[host] = by_owner.get(host, 0) + (r[0] == "done")
            print(f"cells stored done by runner 0 before its death: {by_owner.get('bench-host-0', 0)}")
            # every runner alike, from the store: its cells done over the span of its writes
            spans = await _count(
                args.pg, schema, "SELECT split_part(owner, ':', 1), count(*), "
                "EXTRACT(EPOCH FROM max(updated_at) - min(updated_at)) FROM psychoalign_experiment_cells "
                "WHERE status = 'done' GROUP BY 1 ORDER BY 1"
            )  # fmt: skip
            for host, n, span in spans:
                rate = f"{int(n) / float(span):.0f} cells/s" if span else "n/a"  # type: ignore[call-overload, arg-type]
                print(f"{str(host).replace('bench-host-', 'runner ')}: {n} cells done, "
                      f"{float(span or 0):.1f} s from its first to its last write, {rate}")  # type: ignore[arg-type]  # fmt: skip
            for s in summaries:  # the survivors' own count, waiting on runner 0's leases included
                rate = s["ran"] / s["wall_s"]
                own = f"{s['ran']} cells in {s['wall_s']:.1f} s, {rate:.0f} cells/s"
                print(f"runner {s['runner']} (own summary, from its start): {own}")
    finally:
        async with admin.begin() as conn:
            await conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        await admin.dispose()
    if not args.no_doc:
        publish(
            "leases",
            "Leases across runners — `bench/leases.py`",
            out.getvalue(),
            [
                Target("cells lost after a runner is SIGKILLed", str(lost), "0", lost == 0),
                Target("rows duplicated", str(duplicated), "0", duplicated == 0),
            ],
            quick=args.quick,
            note="Three runner processes with `--follow` share one PostgreSQL run, each as its own host; runner 0 "
            "is killed with SIGKILL once a fifth of the cells are done; the survivors take over its cells as its "
            f"{LEASE_S:.0f} s leases lapse. Zero-latency scripted model, `vanilla` on AdvBench copies "
            f"({copies} systems x {items} items). Throughput per runner: its cells done over the span of its "
            "writes to the store (runner 0's until its death), and each survivor's own count from its start "
            "(start-up and the wait for runner 0's leases included).",
        )


if __name__ == "__main__":
    asyncio.run(main())
