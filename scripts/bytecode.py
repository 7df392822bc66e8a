"""Bytecode for a virtual environment's packages, compiled beside pip instead of by it.

scripts/install.sh runs pip with ``--no-compile`` and this alongside, so that the compile (most of
an install's CPU time) uses the second core while pip resolves, downloads and unpacks on the first:

    python scripts/bytecode.py follow SITE_PACKAGES STOP_FILE
        compiles each installed distribution's modules as soon as its RECORD is there (pip writes
        that file last, once every other file of the distribution is in place), until STOP_FILE
        exists: then it stops at once and leaves the rest to ``all``, which has every core

    python scripts/bytecode.py all SITE_PACKAGES
        compiles whatever is not compiled yet, on every core (a .pyc is up to date when it records
        its source's modification time, as ``compileall`` checks)

The same .pyc files as pip writes (``compileall.compile_file`` with the default invalidation
mode), so the first import reads them instead of compiling. A module that does not compile is left
without one, as pip leaves it; the exit status is 0 all the same.
"""

from __future__ import annotations

import compileall
import csv
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

USAGE = "usage: bytecode.py follow SITE_PACKAGES STOP_FILE | bytecode.py all SITE_PACKAGES"


def modules(site: Path, record: Path) -> list[Path]:
    """The .py files a distribution's RECORD lists, inside SITE_PACKAGES."""
    with record.open(newline="", encoding="utf-8") as f:
        rows = [row[0] for row in csv.reader(f) if row]
    return [site / name for name in rows if name.endswith(".py") and not name.startswith("..")]


def compile_one(path: Path) -> bool:
    return bool(compileall.compile_file(str(path), quiet=2))


def follow(site: Path, stop: Path) -> int:
    done: set[Path] = set()
    files = 0
    while not stop.exists():
        for record in sorted(site.glob("*.dist-info/RECORD")):
            if record in done:
                continue
            done.add(record)
            for path in modules(site, record):
                if stop.exists():
                    break
                compile_one(path)
                files += 1
        time.sleep(0.5)
    print(f"bytecode: {files} modules compiled alongside pip")
    return 0


def compile_all(site: Path) -> int:
    paths = sorted(site.rglob("*.py"))
    with ProcessPoolExecutor() as pool:
        results = list(pool.map(compile_one, paths, chunksize=64))
    print(f"checked {len(paths)} modules; {results.count(False)} do not compile and stay without bytecode")
    return 0


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "follow":
        return follow(Path(argv[1]), Path(argv[2]))
    if len(argv) == 2 and argv[0] == "all":
        return compile_all(Path(argv[1]))
    print(USAGE, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
