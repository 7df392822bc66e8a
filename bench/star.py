"""STAR benchmark. Run: python bench/star.py

1. Generating 100,000 instructions with quotas (target < 5 s).
2. Assigning tasks for 300 participants x 10,000 dialogues (target < 10 s): a 10,000-instruction
   campaign on SQLite, every red-teaming task assigned in one batch under the in/out-group rules.
Peak memory for each. CPU time (``time.process_time``: this process, all its threads, including
SQLite's) is printed beside each wall time: on a shared machine it moves much less with other load.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import Target, add_doc_flag, captured, peak_rss_mb, publish
from psychoalign.star import coverage, generate_instructions, load_parameters, load_policy
from psychoalign.star.model import Participant, TaskKind
from psychoalign.star.store import SQLStarStore

RACES = ["Asian", "Black or African American", "Hispanic or Latino", "White"]
GENDERS = ["Female", "Male", "Non-binary"]


def participants(n: int) -> list[Participant]:
    out = []
    for i in range(n):
        demographics = {"race": [RACES[i % 4]], "gender": [GENDERS[(i // 4) % 3]]}
        if i % 17 == 0:
            demographics["race"] = ["prefer not to say"]
        expertise = ["medical"] if i % 10 == 0 else (["fact_checking"] if i % 10 == 1 else [])
        out.append(Participant(id=f"p{i:04d}", demographics=demographics, expertise=expertise))
    return out


async def assignment(tmp: Path, policy: object, space: object) -> dict[str, float]:
    store = SQLStarStore(f"sqlite:///{tmp / 'star.db'}", policy)  # type: ignore[arg-type]
    await store.add_participants(participants(300))
    items = generate_instructions(policy, space, 10_000, seed=1)  # type: ignore[arg-type]
    t, cpu = time.perf_counter(), time.process_time()
    await store.create_campaign("bench", items)
    create_s, create_cpu = time.perf_counter() - t, time.process_time() - cpu
    t, cpu = time.perf_counter(), time.process_time()
    result = await store.assign_all(TaskKind.RED_TEAM, campaign="bench")
    assign_s, assign_cpu = time.perf_counter() - t, time.process_time() - cpu
    await store.close()
    return {
        "create_s": create_s,
        "create_cpu": create_cpu,
        "assign_s": assign_s,
        "assign_cpu": assign_cpu,
        "assigned": result["assigned"],
        "max_load": result["max_load"],
        "used": result["participants_used"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_doc_flag(parser)
    args = parser.parse_args()
    policy, space = load_policy(), load_parameters()
    with captured() as out:
        t, cpu = time.perf_counter(), time.process_time()
        items = generate_instructions(policy, space, 100_000, seed=0)
        elapsed, elapsed_cpu = time.perf_counter() - t, time.process_time() - cpu
        del items
        tracemalloc.start()  # memory in a second, traced run: tracing slows allocation several-fold
        items = generate_instructions(policy, space, 100_000, seed=0)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        report = coverage(policy, space, items)
        del items
        print("STAR instruction generation (built-in policy and parameters)")
        print(f"  100,000 instructions          {elapsed:.2f} s   (target < 5 s), CPU {elapsed_cpu:.2f} s")
        print(f"  cells                         {report.cells}, uncovered {report.uncovered_cells}")
        worst = max(hi - lo for lo, hi in report.per_rule.values())
        print(f"  max - min per cell, any rule  {worst}")
        print(f"  peak Python allocations       {peak / 2**20:.0f} MB")
        with tempfile.TemporaryDirectory() as tmp:
            a = asyncio.run(assignment(Path(tmp), policy, space))
        print("STAR task assignment, 300 participants x 10,000 red-teaming tasks (SQLite)")
        print(f"  storing the campaign          {a['create_s']:.2f} s, CPU {a['create_cpu']:.2f} s")
        print(f"  batch assignment              {a['assign_s']:.2f} s   (target < 10 s), CPU {a['assign_cpu']:.2f} s")
        print(f"  assigned / participants used  {a['assigned']:.0f} / {a['used']:.0f}, max load {a['max_load']:.0f}")
        print(f"peak RSS                        {peak_rss_mb():.0f} MB")
    if not args.no_doc:
        publish(
            "star",
            "STAR instructions and assignment — `bench/star.py`",
            out.getvalue(),
            [
                Target("100,000 instructions generated", f"{elapsed:.2f} s", "< 5 s", elapsed < 5),
                Target("even quotas: max - min per cell within a rule", str(worst), "<= 1", worst <= 1),
                Target(
                    "10,000 red-teaming tasks assigned in one batch",
                    f"{a['assign_s']:.2f} s",
                    "< 10 s",
                    a["assign_s"] < 10,
                ),
            ],
            quick=False,
            note="Built-in policy and parameter space. Peak allocations come from a second, traced run "
            "(tracemalloc slows allocation several-fold). The assignment stores a 10,000-instruction "
            "campaign on SQLite and assigns every red-teaming task to 300 participants under the "
            "in-/out-group rules. The targets are on wall time; the CPU time beside each (this process, "
            "SQLite's thread included) moves much less with other load on the machine and is the steadier "
            "figure. Generation does no I/O beyond reading its template once: the gap between its wall "
            "and CPU time is time spent waiting for a CPU.",
        )


if __name__ == "__main__":
    main()
