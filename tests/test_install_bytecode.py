"""scripts/bytecode.py, which compiles a venv's bytecode beside pip during `make install`."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "bytecode.py"


def distribution(site: Path, name: str, modules: dict[str, str]) -> Path:
    """Lays out an installed distribution as pip does: its modules, then its RECORD last."""
    for rel, text in modules.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    info = site / f"{name}-1.0.dist-info"
    info.mkdir()
    rows = [f"{rel},," for rel in modules] + [f"../../../bin/{name},,", f"{info.name}/RECORD,,"]
    record = info / "RECORD"
    record.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return record


def pyc(path: Path) -> Path:
    return Path(importlib.util.cache_from_source(str(path)))


def test_all_compiles_what_has_no_bytecode_and_leaves_a_broken_module_without(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    distribution(site, "good", {"good/__init__.py": "X = 1\n", "good/sub/mod.py": "def f():\n    return 2\n"})
    distribution(site, "bad", {"bad/__init__.py": "def (:\n"})

    proc = subprocess.run([sys.executable, str(SCRIPT), "all", str(site)], capture_output=True, text=True, check=False)

    assert proc.returncode == 0, proc.stderr
    assert pyc(site / "good/__init__.py").is_file()
    assert pyc(site / "good/sub/mod.py").is_file()
    assert not pyc(site / "bad/__init__.py").exists()
    assert "checked 3 modules; 1 do not compile" in proc.stdout


def test_all_keeps_bytecode_that_is_up_to_date(tmp_path: Path) -> None:
    site = tmp_path / "site-packages"
    distribution(site, "good", {"good/__init__.py": "X = 1\n"})
    subprocess.run([sys.executable, str(SCRIPT), "all", str(site)], check=True, capture_output=True)
    first = pyc(site / "good/__init__.py").stat().st_mtime_ns

    subprocess.run([sys.executable, str(SCRIPT), "all", str(site)], check=True, capture_output=True)

    assert pyc(site / "good/__init__.py").stat().st_mtime_ns == first


def test_follow_compiles_each_distribution_once_its_record_is_there_and_stops_on_the_stop_file(
    tmp_path: Path,
) -> None:
    site = tmp_path / "site-packages"
    site.mkdir()
    stop = tmp_path / "stop"
    distribution(site, "early", {"early.py": "A = 1\n"})
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "follow", str(site), str(stop)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        later = site / "later/__init__.py"
        distribution(site, "later", {"later/__init__.py": "B = 2\n"})
        # Synchronise on the files the follower writes (the deadline only bounds a broken run).
        deadline = time.monotonic() + 60
        while not (pyc(site / "early.py").is_file() and pyc(later).is_file()):
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the follower compiled nothing"
            time.sleep(0.05)
        stop.touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()

    assert proc.returncode == 0, err
    assert "bytecode: 2 modules compiled alongside pip" in out


def test_usage_error_exits_2(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, str(SCRIPT), "sideways"], capture_output=True, text=True, check=False)

    assert proc.returncode == 2
    assert proc.stderr.startswith("usage: bytecode.py")
