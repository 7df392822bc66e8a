"""Start-up benchmark. Run: python bench/startup.py [--quick] [--runs N]

Times `psychoalign --help` and `psychoalign --version` as whole processes (interpreter start,
imports, the command, exit), several runs each, and prints min / median / max wall time against
the target of 0.3 s (the median). The command is `python -m psychoalign` with the interpreter
running this script, so it measures the source tree on PYTHONPATH (or the installed package).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import Target, add_doc_flag, captured, publish

TARGET_S = 0.3


def time_command(args: list[str], runs: int) -> tuple[list[float], int]:
    """Wall time of each run; the exit code of the last one."""
    cmd = [sys.executable, "-m", "psychoalign", *args]
    subprocess.run(cmd, capture_output=True, check=False)  # untimed: fills the OS file cache
    times, code = [], 0
    for _ in range(runs):
        t = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, check=False)
        times.append(time.perf_counter() - t)
        code = done.returncode
    return times, code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="5 runs per command instead of 20")
    parser.add_argument("--runs", type=int, default=None, help="runs per command")
    add_doc_flag(parser)
    args = parser.parse_args()
    runs = args.runs or (5 if args.quick else 20)
    targets = []
    with captured() as out:
        print(f"whole-process wall time, {runs} runs each (python -m psychoalign …)")
        for flag in ("--help", "--version"):
            times, code = time_command([flag], runs)
            med = statistics.median(times)
            status = "" if code == 0 else f"   (exit code {code}: the command failed)"
            print(
                f"  psychoalign {flag:<10} min {min(times):.3f} s   median {med:.3f} s   max {max(times):.3f} s"
                f"   (target median <= {TARGET_S} s){status}"
            )
            targets.append(
                Target(
                    f"`psychoalign {flag}`, median", f"{med:.3f} s", f"<= {TARGET_S} s", code == 0 and med <= TARGET_S
                )
            )
    if not args.no_doc:
        publish(
            "startup",
            "Start-up — `bench/startup.py`",
            out.getvalue(),
            targets,
            quick=args.quick,
            note="Each run is a new process: interpreter start, imports, the command, exit. "
            "A command that fails (exit code other than 0) counts as missed.",
        )


if __name__ == "__main__":
    main()
