"""``--out FILE`` is all or nothing: an export that fails (a store that cannot be opened, a record
that breaks mid-read, an unknown campaign) leaves the file that was there byte for byte, and no
temporary file beside it."""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
from pathlib import Path

import pytest

from psychoalign.cli.common import open_out, out_or_stdout
from psychoalign.errors import InputError
from tests.cli.test_main import cli
from tests.cli.test_negotiate import write_config

OLD = b"the export from last week\r\n\x00 kept as it was\n"


def _existing(tmp_path: Path) -> Path:
    path = tmp_path / "export.jsonl"
    path.write_bytes(OLD)
    return path


def _untouched(path: Path) -> None:
    assert path.read_bytes() == OLD
    assert sorted(p.name for p in path.parent.iterdir() if p.name.startswith(f".{path.name}.")) == []


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.strip()]


def test_traces_export_that_fails_mid_read_keeps_the_old_file(tmp_path: Path) -> None:
    """Two traces stored, the second's record broken: the first was written before the read
    failed, and `--out` used to be truncated before the read began."""
    config = write_config(tmp_path)
    db = tmp_path / "traces.db"
    store = f"sqlite+aiosqlite:///{db}"
    for request in ("How do I boil an egg?", "And a duck egg?"):
        done = cli("negotiate", "--config", str(config), "--store", store, request)
        assert done.returncode == 0, done.stderr
    with sqlite3.connect(db) as conn:
        newest = conn.execute("SELECT id FROM psychoalign_traces ORDER BY created_at DESC LIMIT 1").fetchone()[0]
        conn.execute("UPDATE psychoalign_traces SET body = ? WHERE id = ?", ('{"broken": true}', newest))
    conn.close()
    out = _existing(tmp_path)
    failed = cli("traces", "export", "--store", store, "--out", str(out))
    assert failed.returncode == 1 and len(_error_lines(failed.stderr)) == 1, failed.stderr
    assert "Traceback" not in failed.stderr and "exported" not in failed.stderr
    _untouched(out)


def test_traces_export_from_a_store_that_cannot_be_opened_keeps_the_old_file(tmp_path: Path) -> None:
    broken = tmp_path / "broken.db"
    broken.write_bytes(b"not a database, " * 16)
    out = _existing(tmp_path)
    failed = cli("traces", "export", "--store", f"sqlite+aiosqlite:///{broken}", "--out", str(out))
    lines = _error_lines(failed.stderr)
    assert failed.returncode == 2 and len(lines) == 1 and "cannot open store" in lines[0], failed.stderr
    _untouched(out)


def test_a_successful_traces_export_replaces_the_file_and_keeps_its_permissions(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    assert cli("negotiate", "--config", str(config), "How do I boil an egg?").returncode == 0
    out = _existing(tmp_path)
    out.chmod(0o640)
    done = cli("traces", "export", "--config", str(config), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert len(out.read_text(encoding="utf-8").splitlines()) == 1 and b"kept as it was" not in out.read_bytes()
    if sys.platform != "win32":
        assert stat.S_IMODE(out.stat().st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".export.jsonl.")] == []


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_star_export_of_an_unknown_campaign_keeps_the_old_file(tmp_path: Path, fmt: str) -> None:
    config = tmp_path / "lab.toml"
    config.write_text(f'home = "{tmp_path / "lab"}"\n')
    out = _existing(tmp_path)
    failed = cli("star", "export", "--format", fmt, "--campaign", "nope", "--out", str(out), "--config", str(config))
    lines = _error_lines(failed.stderr)
    assert failed.returncode == 2 and len(lines) == 1 and "no campaign 'nope'" in lines[0], failed.stderr
    _untouched(out)


def test_experiment_cells_of_an_unknown_run_keeps_the_old_file(tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text(f'home = "{tmp_path / "lab"}"\n')
    out = _existing(tmp_path)
    failed = cli("experiment", "cells", "nope", "--out", str(out), "--config", str(config))
    assert failed.returncode == 2 and len(_error_lines(failed.stderr)) == 1, failed.stderr
    _untouched(out)


# The helper itself: what each command above relies on.


def _half_written(out: Path, error: BaseException, *, binary: bool = False) -> None:
    """Write part of an export to ``--out out``, then fail with ``error``."""
    with open_out(out, binary=binary) as sink:
        sink.write(b"half" if binary else "half")
        raise error


@pytest.mark.parametrize("binary", [False, True])
def test_an_error_in_the_block_leaves_the_file_and_no_temporary_file(tmp_path: Path, binary: bool) -> None:
    out = _existing(tmp_path)
    with pytest.raises(RuntimeError, match="the store broke"):
        _half_written(out, RuntimeError("the store broke"), binary=binary)
    _untouched(out)


def test_an_interrupt_in_the_block_leaves_the_file(tmp_path: Path) -> None:
    out = _existing(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        _half_written(out, KeyboardInterrupt())
    _untouched(out)


def test_nothing_is_written_until_the_block_ends(tmp_path: Path) -> None:
    out = _existing(tmp_path)
    with open_out(out, newline="") as sink:
        sink.write("new\r\n")
        assert out.read_bytes() == OLD  # the old file stays readable while the export runs
    assert out.read_bytes() == b"new\r\n"
    _new = tmp_path / "new.jsonl"
    with out_or_stdout(_new) as sink:
        sink.write("created\n")
    assert _new.read_text(encoding="utf-8") == "created\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.jsonl", "new.jsonl"]


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need privileges on Windows")
def test_through_a_symbolic_link_the_named_file_is_replaced_and_the_link_stays(tmp_path: Path) -> None:
    real = _existing(tmp_path)
    link = tmp_path / "latest.jsonl"
    link.symlink_to(real)
    with open_out(link) as sink:
        sink.write("new\n")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text(encoding="utf-8") == "new\n"


def test_a_path_that_cannot_be_written_is_one_line_before_the_block_runs(tmp_path: Path) -> None:
    ran = []
    for bad in (tmp_path, tmp_path / "no-such-folder" / "x.jsonl"):
        with pytest.raises(InputError, match=f"--out {bad}: cannot write there"), open_out(bad):
            ran.append(bad)
    assert ran == [] and sorted(p.name for p in tmp_path.iterdir()) == []
