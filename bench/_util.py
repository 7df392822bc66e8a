"""Shared benchmark helpers: a loopback server in a child process, peak memory, and the writer of
each bench's section of docs/performance.md."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import os
import platform
import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import httpx

HERE = Path(__file__).resolve().parent
PERFORMANCE_MD = HERE.parent / "docs" / "performance.md"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def fake_openai(latency_ms: float = 0.0) -> Iterator[str]:
    """Start bench/fake_openai_server.py in its own process; yield its /v1 base URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "fake_openai_server.py"), "--port", str(port), "--latency-ms", str(latency_ms)]
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.post(f"{url}/chat/completions", json={"messages": []}, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("fake server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


#: HHH's tasks whose inputs are ordinary requests (the harmless task's are harmful asks).
HHH_PARTS = ("helpful", "honest", "other")


def hhh_inputs(data: Path, parts: Sequence[str] = HHH_PARTS) -> list[str]:
    """The distinct inputs of HHH's ``parts`` tasks (BIG-bench hhh_alignment), stripped, in file
    order; a missing file is a one-line error naming it."""
    import json

    from psychoalign.textio import read_text

    texts = [
        str(ex["input"]).strip()
        for part in parts
        for ex in json.loads(read_text(data / "hhh_alignment" / f"{part}.task.json", what="benchmark file"))["examples"]
    ]
    return list(dict.fromkeys(t for t in texts if t))


def data_dir() -> Path:
    """The evaluation data folder: $PSYCHOALIGN_DATA_DIR, else ``shared/data`` in the working
    directory, the checkout or any folder above them (as the CLI looks for it)."""
    env = os.environ.get("PSYCHOALIGN_DATA_DIR")
    if env:
        return Path(env)
    for base in (Path.cwd().resolve(), HERE.parent):
        for folder in (base, *base.parents):
            if (folder / "shared" / "data").is_dir():
                return folder / "shared" / "data"
    raise SystemExit(
        "error: cannot find the evaluation data folder (shared/data) — set PSYCHOALIGN_DATA_DIR to a copy, or fill "
        "the user data folder with `psychoalign data fetch all --from URL` (README, Data)"
    )


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- docs/performance.md -------------------------------------------------------------------------


def write_section(name: str, body: str, path: Path = PERFORMANCE_MD) -> None:
    """Put ``body`` between ``<!-- bench:NAME start -->`` and ``<!-- bench:NAME end -->`` in ``path``.

    Only that block changes: every byte before and after it stays as it was. A file without the
    block gets it appended (after one blank line); a missing file is created with it."""
    start, end = f"<!-- bench:{name} start -->", f"<!-- bench:{name} end -->"
    block = f"{start}\n{body.strip(chr(10))}\n{end}"
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    i = text.find(start)
    j = text.find(end, i + len(start)) if i >= 0 else -1
    if i >= 0 and j >= 0:
        text = text[:i] + block + text[j + len(end) :]
    else:
        if text:  # keep what is there, byte for byte; the block follows after a blank line
            text += "\n" if text.endswith("\n") else "\n\n"
        text += block + "\n"
    path.write_text(text, encoding="utf-8")


@dataclass(frozen=True)
class Target:
    """One target a bench checks: what, the measured value as printed, the goal, and whether it was met."""

    what: str
    measured: str
    goal: str
    met: bool


def machine_summary() -> str:
    """CPU model and count, RAM, Python, OS and load: enough to compare figures, nothing that names the host."""
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = " ".join(line.split(":", 1)[1].split())
                break
    ram = ""
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = f", {int(line.split()[1]) / 2**20:.0f} GiB RAM"
                break
    try:
        os_name = platform.freedesktop_os_release().get("PRETTY_NAME", platform.system())
    except OSError:
        os_name = platform.system()
    # The load averages say how busy the machine was while the bench ran (the 5- and 15-minute
    # ones span a typical run): figures from a busy machine are not comparable with a quiet one.
    one, five, fifteen = os.getloadavg()
    return (
        f"{cpu}, {os.cpu_count()} CPUs{ram}; Python {platform.python_version()}; "
        f"{os_name}, {platform.system()} {platform.release()}; "
        f"load average {one:.1f} / {five:.1f} / {fifteen:.1f} (1 / 5 / 15 min) when written"
    )


def command_line() -> str:
    """The command as run from the repository root, e.g. ``python bench/star.py --quick``."""
    return " ".join(["python", f"bench/{Path(sys.argv[0]).name}", *sys.argv[1:]])


class _Tee(io.StringIO):
    def __init__(self, out: TextIO) -> None:
        super().__init__()
        self._out = out

    def write(self, s: str) -> int:
        self._out.write(s)
        return super().write(s)

    def flush(self) -> None:
        self._out.flush()


@contextmanager
def captured() -> Iterator[io.StringIO]:
    """Print as usual and keep a copy of what was printed (the figures of the section)."""
    tee = _Tee(sys.stdout)
    with contextlib.redirect_stdout(tee):
        yield tee


def publish(
    name: str,
    title: str,
    figures: str,
    targets: Sequence[Target],
    *,
    quick: bool,
    note: str = "",
    path: Path = PERFORMANCE_MD,
) -> None:
    """Write this bench's section of docs/performance.md: command, date, mode, machine, figures,
    targets met or missed (``note``: one short paragraph on what the figures measure)."""
    lines = [
        f"## {title}",
        "",
        f"Command: `{command_line()}` ({'quick' if quick else 'full'} mode)  ",
        f"Date: {dt.datetime.now(dt.UTC).date().isoformat()}  ",
        f"Machine: {machine_summary()}",
        "",
    ]
    if note:
        lines += [note.strip(), ""]
    lines += ["```", figures.strip("\n"), "```", ""]
    if targets:
        lines += ["| target | measured | goal | result |", "|---|---|---|---|"]
        lines += [f"| {t.what} | {t.measured} | {t.goal} | {'met' if t.met else '**missed**'} |" for t in targets]
    else:
        lines.append("No target: the figures are reported as measured.")
    write_section(name, "\n".join(lines), path)
    print(f"wrote section '{name}' of docs/{path.name}" if path == PERFORMANCE_MD else f"wrote section '{name}'")


def add_doc_flag(parser: argparse.ArgumentParser) -> None:
    """``--no-doc``: print the figures only and leave docs/performance.md as it is."""
    parser.add_argument(
        "--no-doc", action="store_true", help="print only; do not rewrite this bench's section of docs/performance.md"
    )
