"""Every command that prints JSON, JSONL, CSV or YAML, run as a subprocess whose standard output is
a pipe: a plain pipe with COLUMNS=20 and with COLUMNS=300, and a 20-column "terminal" (rich is told
the pipe is one): the output parses, holds values longer than the line exactly and carries no
terminal escape. test_every_machine_readable_option_is_run_here walks the CLI's own command tree,
so a new command with ``--json``, ``--yaml`` or ``--format`` fails until it is added here. None
of these commands needs the evaluation data or a model endpoint (scripted models, the package's
own dilemmas benchmark), so the test runs in a clone with nothing beside it.

Also: a link or path printed for a person to copy (the lab invite link) is not folded with hard
line breaks on a narrow terminal, where copying it back would give a broken link.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.test_main import cli
from tests.cli.test_negotiate import write_config
from tests.conftest import ROOT

#: rich treats the pipe as a terminal 20 columns wide.
NARROW = {"TTY_COMPATIBLE": "1", "COLUMNS": "20"}
#: A pipe, as `cmd | jq` gives it, under a narrow and a wide COLUMNS.
PIPES: dict[str, dict[str, str]] = {"tty-20": NARROW, "pipe-20": {"COLUMNS": "20"}, "pipe-300": {"COLUMNS": "300"}}
#: Longer than any line here, with a word too long to break.
LONG = "a-rather-long-value-" * 5
REQUEST = f"How do I boil an egg for a {LONG} breakfast?"


def _json(text: str) -> Any:
    return json.loads(text)


def _jsonl(text: str) -> list[Any]:
    lines = text.splitlines()
    assert all(lines), "a blank line in JSONL"
    return [json.loads(line) for line in lines]


def _csv(text: str) -> list[list[str]]:
    rows = list(csv.reader(io.StringIO(text)))
    assert rows and all(len(row) == len(rows[0]) for row in rows), "ragged CSV"
    return rows


def _yaml(text: str) -> Any:
    data = yaml.safe_load(text)
    assert isinstance(data, dict)
    return data


PARSERS: dict[str, Callable[[str], Any]] = {"json": _json, "jsonl": _jsonl, "csv": _csv, "yaml": _yaml}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Scripted roles (a chat and a judge role too), a home path longer than the terminal, one
    stored negotiation, one participant, and one finished experiment run on the dilemmas."""
    tmp = tmp_path_factory.mktemp("narrow")
    with pytest.MonkeyPatch.context() as mp:  # as conftest's per-test isolation, for this setup too
        for name in list(os.environ):
            if name.startswith("PSYCHOALIGN_") or name.endswith("_API_KEY"):
                mp.delenv(name)
        mp.setenv("XDG_DATA_HOME", str(tmp / "xdg"))
        mp.chdir(tmp)
        return _world(tmp)


def _world(tmp: Path) -> dict[str, str]:
    config = write_config(tmp)
    home = tmp / ("long-home-" * 4) / "home"
    text = config.read_text().replace(f'home = "{tmp / "home"}"', f'home = "{home}"')
    chat = tmp / "chat.yaml"
    chat.write_text(yaml.safe_dump({"rules": [], "default": "A considered answer."}))
    judge = tmp / "judge.yaml"
    judge.write_text(yaml.safe_dump({"rules": [], "default": {"explanation": LONG, "alignment": 8, "capability": 7}}))
    text += f'\n[roles.chat]\nbackend = "scripted"\nscript = "{chat}"\n'
    text += f'\n[roles.judge]\nbackend = "scripted"\nscript = "{judge}"\n'
    config.write_text(text)
    spec = tmp / "dil.yaml"
    spec.write_text("name: dil\nsystems: [vanilla]\nbenchmarks: [dilemmas]\nn: 2\njudge: {calibration_n: 0}\n")
    c = str(config)
    for args in (
        ("negotiate", "--config", c, REQUEST),
        ("star", "participants", "add", "--id", "p-1", "--expertise", LONG, "--config", c),
        ("experiment", "run", str(spec), "--out", str(tmp / "out"), "--no-progress", "-c", c),
    ):
        done = cli(*args)
        assert done.returncode == 0, f"{args}: {done.stderr}"
    run_id = json.loads((tmp / "out" / "results.json").read_text())["run"]["id"]
    [trace] = json.loads(cli("traces", "list", "--json", "--config", c).stdout)
    plan = tmp / "plan.jsonl"
    assert cli("star", "instructions", "generate", "--n", "6", "--seed", "1", "--out", str(plan)).returncode == 0
    framework = tmp / "framework.yaml"
    framework.write_text((ROOT / "examples" / "my-clinic.yaml").read_text(encoding="utf-8"), encoding="utf-8")
    data = tmp / ("long-data-folder-" * 3) / "data"  # an empty data folder, its path longer than the line
    data.mkdir(parents=True)
    people = tmp / "participants.jsonl"
    people.write_text(json.dumps({"id": "p-imported", "expertise": [LONG]}) + "\n")
    return {
        "participants": str(people),
        "policy": str(ROOT / "src" / "psychoalign" / "star" / "builtin" / "policy.yaml"),
        "config": c,
        "run": run_id,
        "trace": trace["id"],
        "spec": str(spec),
        "plan": str(plan),
        "framework": str(framework),
        "data": str(data),
        "home": str(home),
        "tmp": str(tmp),
    }


#: (format, arguments); {config}, {run}, {spec}, {plan} are filled from the world. test_piped_output
#: runs `config show --json`, `negotiate --json`, `traces export` and `star participants list --json`
#: on a 40-column terminal already.
COMMANDS: list[tuple[str, tuple[str, ...]]] = [
    ("yaml", ("config", "show", "--config", "{config}")),
    ("json", ("config", "show", "--json", "--sources", "--config", "{config}")),
    ("json", ("models", "list", "--json", "--config", "{config}")),
    ("json", ("chat", "--json", "--role", "chat", "--config", "{config}", REQUEST)),
    ("json", ("traces", "list", "--json", "--config", "{config}")),
    ("json", ("traces", "show", "{trace}", "--json", "--config", "{config}")),
    ("json", ("frameworks", "list", "--json")),
    ("json", ("frameworks", "show", "general", "--json")),
    ("json", ("frameworks", "validate", "{framework}", "--json")),
    ("json", ("data", "list", "--json", "--data", "{data}")),
    ("json", ("data", "path", "--json", "--data", "{data}")),
    ("json", ("judge", "refusal", f"I can't help with that {LONG}.", "--tier", "rules", "--json")),
    ("json", ("experiment", "list", "--json", "--config", "{config}")),
    ("yaml", ("experiment", "show", "{spec}")),
    ("json", ("experiment", "show", "{spec}", "--json")),
    ("json", ("experiment", "status", "--json", "--config", "{config}")),
    ("json", ("experiment", "status", "{run}", "--json", "--config", "{config}")),
    ("json", ("experiment", "report", "{run}", "--json", "--out", "{tmp}/again", "--config", "{config}")),
    ("jsonl", ("experiment", "cells", "{run}", "--format", "jsonl", "--config", "{config}")),
    ("csv", ("experiment", "cells", "{run}", "--format", "csv", "--config", "{config}")),
    ("json", ("experiment", "run", "cross-turn-scripted", "--n", "2", "--json")),
    ("json", ("star", "policy", "show", "--json")),
    ("json", ("star", "coverage", "--plan", "{plan}", "--json")),
    ("jsonl", ("star", "export", "--config", "{config}")),
    ("csv", ("star", "export", "--format", "csv", "--config", "{config}")),
    ("json", ("lab", "accounts", "--json", "--config", "{config}")),
    ("json", ("serve-key", "--deployment", LONG, "--json")),
    ("jsonl", ("traces", "export", "--format", "jsonl", "--config", "{config}")),
    ("json", ("negotiate", "--json", "--no-store", "--config", "{config}", REQUEST)),
    ("json", ("star", "policy", "validate", "{policy}", "--json")),
    ("json", ("star", "participants", "list", "--json", "--config", "{config}")),
    ("json", ("star", "assign", "--json", "--config", "{config}")),
    # {fresh}: a configuration of its own, with an empty home, for a command that adds what it can add once
    ("json", ("star", "participants", "add", "--id", "p-2", "--expertise", LONG, "--json", "--config", "{fresh}")),
    ("json", ("star", "participants", "import", "{participants}", "--json", "--config", "{fresh}")),
    (
        "json",
        ("lab", "add-lead", "--invite", "--base-url", f"https://lab.example.org/{LONG}", "--json", "-c", "{fresh}"),
    ),
    (
        "json",
        ("experiment", "run", "{spec}", "--json", "--no-progress", "--out", "{tmp}/{fresh_name}", "-c", "{fresh}"),
    ),
]

#: Commands with such an option that this test does not run, and why.
NOT_RUN: dict[tuple[str, ...], str] = {
    ("data", "verify"): "exits 1 on an empty data folder: test_data_verify_reports_missing_files_as_json_when_piped",
    ("data", "fetch"): "downloads the public datasets",
    ("judge", "eval-refusal"): "reads the evaluation data",
    ("judge", "eval-harm"): "reads the evaluation data",
    ("judge", "eval-jailbreak"): "reads the evaluation data",
    ("star", "campaign", "run"): "runs a whole red-teaming campaign on the configured models",
    ("star", "analyze"): "--format names the input files' format; it writes a report folder",
    ("experiment", "run", "h1"): "--format names the ratings file's format; it negotiates every rated item",
}


@pytest.mark.parametrize("pipe", sorted(PIPES))
@pytest.mark.parametrize(("fmt", "args"), COMMANDS, ids=[" ".join(a[:3]) + f" {f}" for f, a in COMMANDS])
def test_machine_output_parses_when_piped_to_a_narrow_terminal(
    world: dict[str, str], fmt: str, args: tuple[str, ...], pipe: str, tmp_path: Path
) -> None:
    fresh = write_config(tmp_path) if "{fresh}" in args else ""
    filled = [a.format(**world, fresh=fresh, fresh_name=tmp_path.name) for a in args]
    out = cli(*filled, env=PIPES[pipe])
    assert out.returncode == 0, f"{' '.join(filled)}: {out.stderr}"
    assert "\x1b" not in out.stdout, "a terminal escape in machine-readable output"
    parsed = PARSERS[fmt](out.stdout)
    flat = json.dumps(parsed, ensure_ascii=False)
    if args[:2] == ("config", "show") and "--sources" not in args:
        assert world["home"] in flat  # a value longer than the line, kept whole
    if args[0] == "chat":
        assert "A considered answer." in flat
    if args[:2] in {("traces", "list"), ("traces", "show")}:
        assert REQUEST in flat
    if args[0] == "data":
        assert world["data"] in flat  # the folder's path, longer than the line, kept whole
    if args[0] == "serve-key":
        assert LONG in flat


def test_data_verify_reports_missing_files_as_json_when_piped(world: dict[str, str]) -> None:
    """`data verify --json` on an empty data folder exits 1 (files missing) and still prints one
    JSON document, whole, on a narrow terminal."""
    out = cli("data", "verify", "--json", "--data", world["data"], env=NARROW)
    assert out.returncode == 1, out.stderr
    report = _json(out.stdout)
    assert world["data"] in json.dumps(report, ensure_ascii=False)


def test_cells_and_report_carry_the_long_judge_text_whole(world: dict[str, str]) -> None:
    records = _jsonl(cli("experiment", "cells", world["run"], "-c", world["config"], env=NARROW).stdout)
    assert len(records) == 2 and LONG in json.dumps(records)
    rows = _csv(cli("experiment", "cells", world["run"], "--format", "csv", "-c", world["config"], env=NARROW).stdout)
    assert len(rows) == 3 and any(LONG in cell for row in rows[1:] for cell in row)


def test_an_invite_link_is_not_folded_on_a_narrow_terminal(tmp_path: Path) -> None:
    config = tmp_path / "lab.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n')
    base = f"https://lab.example.org/{LONG}"
    out = cli("lab", "add-lead", "--invite", "--base-url", base, "-c", str(config), env=NARROW)
    assert out.returncode == 0, out.stderr
    [line] = [line for line in out.stdout.splitlines() if line.strip()]
    link = line.split(": ", 1)[1]
    assert link.startswith(f"{base}/invite/") and " " not in link


_FORMAT_OPTIONS = ("--json", "--yaml", "--format")


def _commands_with_a_format_option() -> set[tuple[str, ...]]:
    """Every command path of the CLI (named experiments included) that has one of _FORMAT_OPTIONS."""
    import typer

    from psychoalign.cli.experiment import experiment_registry
    from psychoalign.cli.main import COMMANDS as TOP
    from psychoalign.cli.main import load_command

    def walk(command: Any, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], Any]]:
        if hasattr(command, "commands"):
            return [leaf for name, sub in command.commands.items() for leaf in walk(sub, (*path, name))]
        return [(path, command)]

    leaves = [leaf for name in TOP for leaf in walk(load_command(name), (name,))]
    for name, named in experiment_registry().commands.items():
        app = typer.Typer()
        app.command(name)(named.command)
        leaves.append((("experiment", "run", name), typer.main.get_command(app)))
    return {
        path
        for path, command in leaves
        if any(opt in _FORMAT_OPTIONS for param in command.params for opt in getattr(param, "opts", []))
    }


def _path_of(args: tuple[str, ...], known: set[tuple[str, ...]]) -> tuple[str, ...] | None:
    """The longest known command path ``args`` starts with."""
    for n in (3, 2, 1):
        if tuple(args[:n]) in known:
            return tuple(args[:n])
    return None


def test_every_machine_readable_option_is_run_here() -> None:
    known = _commands_with_a_format_option()
    assert {("config", "show"), ("experiment", "cells"), ("traces", "export")} <= known  # the walk finds them
    run_here = {_path_of(args, known) for _, args in COMMANDS} - {None}
    missing = sorted(" ".join(p) for p in known - run_here - set(NOT_RUN))
    assert not missing, f"add these to COMMANDS (or NOT_RUN, with why): {missing}"
    assert not set(NOT_RUN) - known, "NOT_RUN names a command that has no such option now"
