"""Experiment-harness benchmark. Run: python bench/experiments.py [--quick]

1. Harness overhead per cell with zero-latency scripted models (target < 2 ms per cell): claim
   and finish in the result store (SQLite file, and in memory), metering, the system call, the
   refusal judge, for the `vanilla` system on AdvBench. Wall time and the process's CPU time per
   cell (``time.process_time``: much less sensitive to other load on the machine than wall time).
   The plugin modules `experiment run` imports (~3 s, once per process) are imported first, untimed.
2. Throughput: 2,000 cells at concurrency 50 against the loopback OpenAI-compatible server with a
   fixed 50 ms latency, one model call per cell, against the ideal (cells x 50 ms / 50 workers);
   target >= 85 % of ideal. Results in a SQLite file, as a user's default run (created before the
   timed run: creating a database file and its tables takes 20-80 ms, once per home). A 100-cell run
   against the same server comes first, untimed: it pays the once-per-process costs (importing
   the HTTP client, its TLS context) that are not throughput. Also prints the client's CPU per
   cell (the fake server is another process and is not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from _util import Target, add_doc_flag, captured, data_dir, fake_openai, peak_rss_mb, publish
from psychoalign.config import Settings
from psychoalign.experiments import ExperimentSpec, ResultStore, run_experiment
from psychoalign.experiments.harness.registry import default_registry
from psychoalign.experiments.harness.store import InMemoryResultStore, SQLResultStore
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend


def spec(copies: int, n: int, concurrency: int) -> ExperimentSpec:
    systems = [{"name": f"v{i}", "kind": "vanilla"} for i in range(copies)]
    return ExperimentSpec.model_validate(
        {
            "name": f"bench-{copies}x{n}",
            "systems": systems,
            "benchmarks": ["advbench"],
            "n": n,
            "concurrency": concurrency,
            "judge": {"harm": False, "calibration_n": 0},
        }
    )


async def overhead(cells: int, store: ResultStore, home: Path, data: Path) -> tuple[float, float]:
    settings = Settings(home=str(home), experiments={"data_dir": str(data)})
    mspec = ModelSpec(backend="scripted", model="zero")
    models = {"chat": ChatModel(mspec, ScriptedBackend(mspec, replies=["I can't help with that."], cycle=True))}
    s = spec(cells // 520 + 1, min(520, cells), concurrency=8)
    t, cpu = time.perf_counter(), time.process_time()
    summary = await run_experiment(s, settings, store=store, models=models, data_dir=data)
    wall, cpu = time.perf_counter() - t, time.process_time() - cpu
    assert summary.failed == 0, summary.errors
    await store.close()
    return wall / summary.ran * 1000, cpu / summary.ran * 1000


async def throughput(cells: int, concurrency: int, latency_ms: float, home: Path, data: Path) -> dict[str, float]:
    with fake_openai(latency_ms=latency_ms) as url:
        settings = Settings(
            home=str(home),
            experiments={"data_dir": str(data)},
            roles={"chat": {"backend": "openai", "base_url": url, "model": "fake", "api_key": "x"}},
        )
        warm = SQLResultStore(f"sqlite:///{home / 'warm.db'}")
        await run_experiment(spec(1, 100, concurrency), settings, store=warm, data_dir=data)  # untimed
        await warm.close()
        copies = -(-cells // 520)
        s = spec(copies, -(-cells // copies), concurrency)
        store = SQLResultStore(f"sqlite:///{home / 'results.db'}")
        await store.list_runs()  # the store file and its tables exist, as in a user's home after a first run
        t, cpu = time.perf_counter(), time.process_time()
        summary = await run_experiment(s, settings, store=store, data_dir=data)
        wall, cpu = time.perf_counter() - t, time.process_time() - cpu
        await store.close()
    assert summary.failed == 0, summary.errors
    ideal = summary.ran * latency_ms / 1000 / concurrency
    return {
        "cells": summary.ran,
        "wall_s": wall,
        "ideal_s": ideal,
        "efficiency": ideal / wall,
        "cpu_ms": cpu / summary.ran * 1000,
    }


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="Fewer cells (a smoke run, noisier).")
    add_doc_flag(parser)
    args = parser.parse_args()
    data = data_dir()
    cells = 520 if args.quick else 2080
    # Once per process, untimed: `experiment run` imports every plugin module (the boundary
    # analysis pulls in scipy and pandas, ~3 s); the first timed run would otherwise carry it.
    default_registry()
    with captured() as out, tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        mem, mem_cpu = await overhead(cells, InMemoryResultStore(), root / "a", data)
        sql, sql_cpu = await overhead(cells, SQLResultStore(f"sqlite:///{root / 'o.db'}"), root / "b", data)
        print(
            f"harness overhead per cell, zero-latency model, in-memory store: {mem:.3f} ms "
            f"(CPU {mem_cpu:.3f} ms; target < 2 ms)"
        )
        print(
            f"harness overhead per cell, zero-latency model, SQLite store:    {sql:.3f} ms "
            f"(CPU {sql_cpu:.3f} ms; target < 2 ms)"
        )
        t = await throughput(500 if args.quick else 2000, 50, 50.0, root / "c", data)
        print(
            f"{t['cells']:.0f} cells at concurrency 50 vs a 50 ms loopback server: {t['wall_s']:.2f} s, "
            f"ideal {t['ideal_s']:.2f} s, {100 * t['efficiency']:.1f} % of ideal (target >= 85 %); "
            f"client CPU {t['cpu_ms']:.3f} ms per cell"
        )
        print(f"peak RSS {peak_rss_mb():.0f} MB")
    if not args.no_doc:
        publish(
            "experiments",
            "Experiment harness — `bench/experiments.py`",
            out.getvalue(),
            [
                Target("harness overhead per cell, in-memory store", f"{mem:.3f} ms", "< 2 ms", mem < 2),
                Target("harness overhead per cell, SQLite store", f"{sql:.3f} ms", "< 2 ms", sql < 2),
                Target(
                    f"{t['cells']:.0f} cells at concurrency 50 vs the ideal",
                    f"{100 * t['efficiency']:.1f} %",
                    ">= 85 %",
                    t["efficiency"] >= 0.85,
                ),
            ],
            quick=args.quick,
            note="Overhead: the `vanilla` system on AdvBench with a zero-latency scripted model (claim, run, "
            "refusal judge, store). Throughput: one model call per cell against `bench/fake_openai_server.py` "
            "answering after 50 ms; the ideal is cells x 50 ms / 50 workers. CPU is the client process's only.",
        )


if __name__ == "__main__":
    asyncio.run(main())
