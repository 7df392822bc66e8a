"""``--out DIR`` of a command that writes a folder (reports, results) is all or nothing: a
command that fails half-way leaves no half folder and no temporary folder, and an existing
DIR keeps its files (the old report when the new one failed; a user's own files always)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from psychoalign.cli import cross_turn as cross_turn_cli
from psychoalign.cli.common import check_out_folder, out_folder
from psychoalign.errors import InputError
from psychoalign.experiments.studies.cross_turn import run


class BoomError(Exception):
    pass


def _write(out: Path, files: dict[str, str], *, fail: bool = False) -> None:
    """``files`` written into ``--out out`` through :func:`out_folder`; with ``fail``, an error after them."""
    with out_folder(out) as partial:
        for name, text in files.items():
            (partial / name).write_text(text)
        if fail:
            raise BoomError


def _leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if p.name.startswith("."))


def _files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())}


def test_a_new_folder_appears_whole(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "report"
    with out_folder(out) as partial:
        assert not out.exists() and partial.parent == out.parent
        (partial / "results.json").write_text("{}")
        (partial / "report.html").write_text("<p>")
    assert _files(out) == {"report.html": "<p>", "results.json": "{}"}
    assert _leftovers(out.parent) == []


def test_a_failure_half_way_leaves_no_folder_and_no_folder_above_it_made_for_it(tmp_path: Path) -> None:
    out = tmp_path / "new" / "deeper" / "report"
    with pytest.raises(BoomError):
        _write(out, {"results.json": "{}"}, fail=True)
    assert sorted(os.listdir(tmp_path)) == []


def test_an_existing_folder_keeps_its_old_report_when_the_new_one_fails(tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "results.json").write_text("old results")
    (out / "notes.txt").write_text("mine")
    with pytest.raises(BoomError):
        _write(out, {"results.json": "new results"}, fail=True)
    assert _files(out) == {"notes.txt": "mine", "results.json": "old results"}
    assert _leftovers(tmp_path) == []


def test_an_existing_folder_gets_the_new_files_and_keeps_the_others(tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "results.json").write_text("old results")
    (out / "notes.txt").write_text("mine")
    with out_folder(out) as partial:
        (partial / "results.json").write_text("new results")
        (partial / "report.html").write_text("<p>")
    assert _files(out) == {"notes.txt": "mine", "report.html": "<p>", "results.json": "new results"}
    assert _leftovers(tmp_path) == []


def test_a_move_that_fails_puts_the_old_files_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "report"
    out.mkdir()
    (out / "a.json").write_text("old a")
    (out / "b.json").write_text("old b")
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        if Path(dst) == out / "b.json" and "old-" not in str(src):  # the new b.json cannot be moved in
            raise OSError(28, "No space left on device")
        real(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(InputError, match=f"--out {out}: cannot write there: No space left"):
        _write(out, {"a.json": "new a", "b.json": "new b"})
    assert _files(out) == {"a.json": "old a", "b.json": "old b"}
    assert _leftovers(tmp_path) == []


def test_a_file_in_the_way_is_one_line_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "report"
    out.write_text("a file")
    with pytest.raises(InputError, match=f"--out {out}: cannot write there: Not a directory"):
        check_out_folder(out)
    ran = []
    with pytest.raises(InputError), out_folder(out):
        ran.append(True)
    assert ran == [] and out.read_text() == "a file"


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="permission bits (not as root)")
def test_a_folder_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(InputError, match="cannot write there: Permission denied"):
            check_out_folder(locked / "new" / "report")
    finally:
        locked.chmod(0o700)


def _cross_turn(monkeypatch: pytest.MonkeyPatch, result: dict[str, Any], out: Path) -> Any:
    async def fake(n: int, seed: int) -> dict[str, Any]:
        return result

    monkeypatch.setattr(run, "simulate", fake)
    app = typer.Typer()
    app.command()(cross_turn_cli.cross_turn_scripted)
    return CliRunner().invoke(app, ["--n", "1", "--json", "--out", str(out)])


def test_the_command_that_fails_writing_keeps_the_old_results(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`experiment run cross-turn-scripted --out DIR`: a result that cannot be written (here one
    JSON cannot hold) leaves DIR's old results.json as it was, and no temporary folder."""
    out = tmp_path / "results"
    done = _cross_turn(monkeypatch, {"n_per_family": 1, "seed": 0, "systems": {}}, out)
    assert done.exit_code == 0, done.output
    before = _files(out)
    failed = _cross_turn(monkeypatch, {"n_per_family": 1, "seed": 0, "systems": {}, "x": object()}, out)
    assert failed.exit_code != 0
    assert _files(out) == before and _leftovers(tmp_path) == []
