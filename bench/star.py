"""STAR benchmark. Run: .venv/bin/python bench/star.py

Generating 100,000 instructions with quotas (target < 5 s), with peak memory. (The assignment
benchmark, 300 participants x 10,000 dialogues, arrives with participant matching.)
"""

from __future__ import annotations

import sys
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import peak_rss_mb
from psychoalign.star import coverage, generate_instructions, load_parameters, load_policy


def main() -> None:
    policy, space = load_policy(), load_parameters()
    t = time.perf_counter()
    items = generate_instructions(policy, space, 100_000, seed=0)
    elapsed = time.perf_counter() - t
    # Memory in a second, traced run: tracing slows allocation several-fold.
    del items
    tracemalloc.start()
    items = generate_instructions(policy, space, 100_000, seed=0)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    report = coverage(policy, space, items)
    print("STAR instruction generation (built-in policy and parameters)")
    print(f"  100,000 instructions          {elapsed:.2f} s   (target < 5 s)")
    print(f"  cells                         {report.cells}, uncovered {report.uncovered_cells}")
    worst = max(hi - lo for lo, hi in report.per_rule.values())
    print(f"  max - min per cell, any rule  {worst}")
    print(f"  peak Python allocations       {peak / 2**20:.0f} MB")
    print(f"  peak RSS                      {peak_rss_mb():.0f} MB")


if __name__ == "__main__":
    main()
