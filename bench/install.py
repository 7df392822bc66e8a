"""A newcomer's first run: a fresh clone to `make run`'s table, timed.

Clones the checkout's committed HEAD into a temporary folder (nothing beside it, no virtual
environment, no build cache of the project's), runs ``make install`` there and then ``make run``,
and prints the time of each install step (as ``make install`` announces them), of the install, of
the first ``make run`` and of the two together, with the load average at each stage: on a shared
machine the figure says as much about the neighbours as about the install. It rewrites its section
of docs/performance.md.

    python bench/install.py             # about 5 minutes on a quiet 2-core machine
    python bench/install.py --no-doc    # print only

What pip and npm download depends on the network and on their own HTTP caches: pip's keeps nothing
from a registry whose answers carry no caching headers, and then every install downloads every
package, as a new machine does. When the prebuilt llama.cpp fails and llama.cpp is compiled, pip's
wheel cache is off.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import Target, add_doc_flag, captured, publish

ROOT = Path(__file__).resolve().parent.parent
TARGET_S = 180.0
# What `make install` prints to follow along: the step announcements and their durations (a step run
# in the background reports its own, indented and numbered, when the install waits for it).
STEP_LINE = re.compile(r"^(\s*\[\d+/\d+\] .*|\s+(done|compiled|installed|decoded) in .*|Installed in .*)$")


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load {one:.1f} / {five:.1f} (1 / 5 min)"


def cpu_seconds() -> float:
    """CPU time (user + system) of the finished child processes so far, theirs included."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], cwd: Path, log: Path) -> tuple[float, float, str]:
    """Run ``cmd`` in ``cwd`` without a terminal; returns its wall and CPU seconds and its output
    (written to ``log`` as it runs)."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "MAKEFLAGS")}
    t0, c0 = time.perf_counter(), cpu_seconds()
    with log.open("w", encoding="utf-8") as sink:  # written as it comes: `tail -f` follows a long run
        proc = subprocess.run(cmd, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=sink, stderr=subprocess.STDOUT)
    seconds, cpu = time.perf_counter() - t0, cpu_seconds() - c0
    output = log.read_text(encoding="utf-8")
    if proc.returncode != 0:
        tail = "\n".join(output.strip().splitlines()[-30:])
        raise SystemExit(f"error: `{' '.join(cmd)}` failed (exit {proc.returncode}) in the fresh clone:\n{tail}")
    return seconds, cpu, output


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=ROOT, help="the checkout to clone (its committed HEAD)")
    add_doc_flag(parser)
    args = parser.parse_args()

    with captured() as out, tempfile.TemporaryDirectory(prefix="psychoalign-install-") as tmp:
        clone = Path(tmp) / "psychoalign"
        subprocess.run(["git", "clone", "--quiet", str(args.source), str(clone)], check=True)
        print(f"fresh clone, `make install` ({load()} at start)")
        install_s, install_cpu, install_out = timed(["make", "install"], clone, Path(tmp) / "install.out")
        for line in install_out.splitlines():
            if STEP_LINE.match(line):
                print(f"  {line.replace(tmp, '…')}")
        print(f"`make run` ({load()} at start)")
        run_s, run_cpu, run_out = timed(["make", "run"], clone, Path(tmp) / "run.out")
        if "What the user gets" not in run_out:
            raise SystemExit("error: `make run` exited 0 without printing its summary table")
        total = install_s + run_s
        # CPU time hardly depends on the neighbours: on 2 idle cores the wall time cannot be below
        # half of it, which bounds what a quiet machine would show.
        print("               wall      CPU (user + system)")
        print(f"  make install {install_s:6.0f} s  {install_cpu:6.0f} s")
        print(f"  make run     {run_s:6.0f} s  {run_cpu:6.0f} s   (the first run: the models load)")
        print(f"  together     {total:6.0f} s  {install_cpu + run_cpu:6.0f} s   ({load()} at the end)")
    if not args.no_doc:
        publish(
            "install",
            "Fresh clone to `make run` — `bench/install.py`",
            out.getvalue(),
            [Target("fresh clone to `make run`'s table", f"{total:.0f} s", f"≤ {TARGET_S:.0f} s", total <= TARGET_S)],
            quick=False,
            note="A clone of the checkout in an empty folder: `make install` builds `.venv` (llama.cpp "
            "prebuilt, or compiled from source while torch and the other dependencies install when the "
            "prebuilt one fails: the step lines say which; bytecode compiled beside pip, so both cores work), "
            "then the first "
            "`make run` negotiates the bundled samples. The target is for a quiet 2-core machine; the load "
            "averages say how quiet this one was, and a quiet run takes at least half the CPU time."
            " Downloads come through pip's and npm's own HTTP caches as the machine has them; pip's keeps"
            " nothing from a registry whose answers carry no caching headers, and then every install"
            " downloads every package, as a new machine does.",
        )


if __name__ == "__main__":
    main()
