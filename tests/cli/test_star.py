"""`psychoalign star` commands as a user runs them (subprocess)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

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


def test_star_export_of_a_lab_campaign_has_the_labs_columns(tmp_path: Path) -> None:
    """`star export` left out `committed_topic` and the seconds columns the lab's export carries:
    a researcher exporting a lab campaign from the command line lost them without a word. Both
    now write the rows of one function; the values here are the lab's own export's."""
    import asyncio
    import csv

    from psychoalign.config import load_settings
    from psychoalign.star import generate_instructions, load_parameters, load_policy
    from psychoalign.star.lab_store import LAB_EXPORT_COLUMNS, LabCampaignSettings
    from psychoalign.star.model import Participant, PreAnnotation, TaskKind, Turn
    from psychoalign.web.star import StarLab

    config = _config(tmp_path, "lab")
    settings = load_settings(config, overrides={})

    async def lab_campaign() -> list[dict[str, object]]:
        star = StarLab(settings, settings.effective_store_url())
        try:
            await star.init()
            await star.lab.save_campaign(LabCampaignSettings(name="c", rules=["sexually-explicit"]))
            store = star.store
            await store.add_participants([Participant(id=p) for p in ("red", "ann")])
            plan = generate_instructions(load_policy(), load_parameters(), 1, seed=1, rules=["sexually-explicit"])
            await store.create_campaign("c", plan)
            task = await store.claim("red", TaskKind.RED_TEAM, campaign="c")
            await star.lab.start(task.id, "red", "c", "red_team")
            await star.lab.set_topic(task.id, "red", "=a joke about age")
            dialogue = await store.start_dialogue(task.id, "red", "scripted")
            await store.add_turns(dialogue, [Turn(role="red_teamer", text="hi"), Turn(role="target", text="no")])
            await store.finish_dialogue(dialogue, "red", PreAnnotation(assigned_rule_broken=False))
            await star.lab.stop(task.id, "red")
            rating = await store.claim("ann", TaskKind.ANNOTATE, campaign="c")
            await star.lab.start(rating.id, "ann", "c", "annotate")
            await store.submit_annotation(rating.id, "ann", 2, "it refused")
            await star.lab.stop(rating.id, "ann")
            return [row async for row in star.export_rows("c")]
        finally:
            await star.close()

    (lab_row,) = asyncio.run(lab_campaign())
    assert lab_row["committed_topic"] == "=a joke about age" and lab_row["red_team_seconds"] is not None
    assert lab_row["annotator1_seconds"] is not None
    out = cli("star", "export", "--campaign", "c", "--config", str(config))
    assert out.returncode == 0, out.stderr
    (row,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert set(row) == set(lab_row) and {k: row[k] for k in LAB_EXPORT_COLUMNS} == {
        k: lab_row[k] for k in LAB_EXPORT_COLUMNS
    }
    table = tmp_path / "c.csv"
    assert cli("star", "export", "--format", "csv", "--out", str(table), "--config", str(config)).returncode == 0
    (cells,) = list(csv.DictReader(table.open(encoding="utf-8")))
    assert set(LAB_EXPORT_COLUMNS) <= set(cells) and cells["committed_topic"] == "'=a joke about age"


def test_star_analyze_prints_the_arbitrators_shares_with_n_and_interval(tmp_path: Path) -> None:
    """The arbitration verdicts were counts in the report alone; `star analyze` now prints each
    share with the number arbitrated and its Wilson 95 % interval, one line per STAR dataset (each
    dialogue by its own arbitrator: independent decisions; one arbitrator for all: no interval)."""
    from statsmodels.stats.proportion import proportion_confint

    rows = [
        {
            "dialogue_id": f"d{i:02d}",
            "status": "submitted",
            "rule": "harassment",
            "annotator1_id": f"a{i % 3}",
            "annotator1_rating": 1,
            "annotator2_id": f"b{i % 4}",
            "annotator2_rating": 4,
            "arbitration_needed": True,
            "arbitrator_id": f"z{i}",
            "arbitrator_rating": 1 if i < 9 else 4,  # 9 of 12 with the first annotator
        }
        for i in range(12)
    ]
    export = tmp_path / "export.jsonl"
    export.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = cli("star", "analyze", str(export), "--out", str(tmp_path / "r"), "--no-embed", "--bootstrap", "0")
    assert out.returncode == 0, out.stderr
    low, high = proportion_confint(9, 12, method="wilson")
    (line,) = [ln for ln in out.stderr.splitlines() if "arbitrator sided with" in ln]
    assert f"closer to the first annotator 9 (75% of 12 arbitrated [95% CI {low:.0%}, {high:.0%}])" in line, line
    assert "closer to the second annotator 3 (25% of 12 arbitrated" in line
    export.write_text("".join(json.dumps({**r, "arbitrator_id": "z"}) + "\n" for r in rows))
    out = cli("star", "analyze", str(export), "--out", str(tmp_path / "one"), "--no-embed", "--bootstrap", "0")
    assert out.returncode == 0, out.stderr
    (line,) = [ln for ln in out.stderr.splitlines() if "arbitrator sided with" in ln]
    assert "closer to the first annotator 9 (75% of 12 arbitrated, no interval)" in line, line
    assert "one arbitrator decided all 12: one arbitrator's decisions are not independent" in line


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_star_export_rows_keep_a_field_only_a_later_row_has(tmp_path: Path, fmt: str) -> None:
    """Parquet took its columns from the first row: a field only a later dialogue carries (an
    arbitration, a lab column) was dropped without a word. Every format now has one column per
    field any row has, in name order; a row without it has an empty cell."""
    import csv

    from psychoalign.cli.star import write_rows

    if fmt == "parquet":
        pq = pytest.importorskip("pyarrow.parquet", reason="the star extra (pyarrow) is not installed")
    rows = [
        {"dialogue_id": "d1", "rule": "harassment", "turns": [{"role": "user", "text": "hi"}]},
        {"dialogue_id": "d2", "rule": "harassment", "turns": [], "arbitrator_rating": 3, "arbitration_needed": True},
    ]
    out = tmp_path / f"rows.{fmt}"
    write_rows(rows, fmt, out)
    if fmt == "parquet":
        got = pq.read_table(out).to_pylist()
    else:
        with out.open(newline="", encoding="utf-8") as fh:
            got = [{k: (v if v != "" else None) for k, v in r.items()} for r in csv.DictReader(fh)]
    columns = ["arbitration_needed", "arbitrator_rating", "dialogue_id", "rule", "turns"]
    assert [list(r) for r in got] == [columns, columns]
    assert got[0]["arbitrator_rating"] is None and str(got[1]["arbitrator_rating"]) == "3"
    assert got[1]["arbitration_needed"] in (True, "True") and got[0]["turns"] == '[{"role": "user", "text": "hi"}]'
