"""`psychoalign star` commands as a user runs them (subprocess)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from tests.cli.test_main import cli


def _config(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.toml"
    path.write_text(f'home = "{tmp_path / name}"\n')
    return path


def test_participants_list_json_imports_back_into_another_lab(tmp_path: Path) -> None:
    """What `participants list --json` prints (a JSON array) is a participants file for `import`;
    it used to fail on line 1 with 'Input should be a valid dictionary' and no way out."""
    one, two = _config(tmp_path, "one"), _config(tmp_path, "two")
    for pid, gender in (("alice", "Female"), ("bob", "Male")):
        added = cli("star", "participants", "add", "--id", pid, "--gender", gender, "--config", str(one))
        assert added.returncode == 0, added.stderr
    listed = cli("star", "participants", "list", "--config", str(one), "--json")
    dump = tmp_path / "people.json"
    dump.write_text(listed.stdout)
    imported = cli("star", "participants", "import", str(dump), "--config", str(two))
    assert imported.returncode == 0, imported.stderr
    again = json.loads(cli("star", "participants", "list", "--config", str(two), "--json").stdout)
    assert again == json.loads(listed.stdout)


def test_a_participants_file_that_is_neither_jsonl_nor_an_array_names_the_format(tmp_path: Path) -> None:
    config = _config(tmp_path, "lab")
    bad = tmp_path / "people.yaml"
    bad.write_text("id: p1\nroles: [red_teamer]\n")
    out = cli("star", "participants", "import", str(bad), "--config", str(config))
    assert out.returncode == 2, out.stderr
    lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"{bad}:1" in lines[0] and "one participant object per line" in lines[0], out.stderr


def test_a_participants_file_with_no_participants_is_an_error_naming_it(tmp_path: Path) -> None:
    """An empty file, blank lines only or an empty array imported nothing and exited 0."""
    config = _config(tmp_path, "lab")
    for name, text in (("empty.jsonl", ""), ("blank.jsonl", "\n  \n"), ("none.json", "[]\n")):
        path = tmp_path / name
        path.write_text(text)
        out = cli("star", "participants", "import", str(path), "--config", str(config))
        assert out.returncode == 2, out.stderr
        lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and f"no participants in {path}: expected one participant object" in lines[0]
        assert "imported" not in out.stdout


def test_star_export_to_a_directory_says_what_traces_export_says(tmp_path: Path) -> None:
    """``--out DIR`` was the operating system's bare 'Is a directory' (parquet: pyarrow's own
    text); each command now gives the one line `traces export` gives."""
    config = _config(tmp_path, "lab")
    folder = tmp_path / "out"
    folder.mkdir()
    traces = cli("traces", "export", "--out", str(folder), "--config", str(config))
    expected = [ln for ln in traces.stderr.splitlines() if ln.strip()]
    assert traces.returncode == 2 and len(expected) == 1 and f"--out {folder}: cannot write there" in expected[0]
    formats = ["jsonl", "csv"] + (["parquet"] if importlib.util.find_spec("pyarrow") else [])  # the star extra
    for fmt in formats:
        out = cli("star", "export", "--format", fmt, "--out", str(folder), "--config", str(config))
        assert out.returncode == 2 and [ln for ln in out.stderr.splitlines() if ln.strip()] == expected, out.stderr
    assert list(folder.iterdir()) == []
