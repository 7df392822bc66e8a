"""What the docs say prints YAML, JSON, JSONL or CSV parses back when standard output is a pipe.

Each command runs as a subprocess with its output captured (a pipe, as in ``cmd > file`` or
``cmd | jq``), on values longer than a terminal's 80 columns (a long home path, a long request
with a long word, a long participant attribute): nothing may be wrapped, boxed or cut, so the
parsed output must hold those values exactly. The commands are the ones the docs show with
``--json``, ``--format jsonl|csv`` or as YAML (``config show > settings.yaml``, ``experiment show
paper-table4 > t4.yaml``); none needs the evaluation data or a model endpoint.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest
import yaml

from tests.cli.test_main import cli
from tests.cli.test_negotiate import write_config

#: Longer than a terminal line, with a word too long to break: rich would fold it at 80 columns.
LONG_WORD = "supercalifragilistic" * 6
REQUEST = f"How do I boil an egg so that the yolk stays soft and runny for a {LONG_WORD} breakfast?"


@pytest.fixture
def config(tmp_path: Path) -> Path:
    """Scripted roles, and a home whose path is longer than a terminal line."""
    path = write_config(tmp_path)
    home = tmp_path / ("a-rather-long-folder-name-" * 4) / "home"
    path.write_text(path.read_text().replace(f'home = "{tmp_path / "home"}"', f'home = "{home}"'))
    return path


@pytest.fixture
def negotiated(config: Path) -> Path:
    """The same, with one negotiation of :data:`REQUEST` stored."""
    out = cli("negotiate", "--config", str(config), REQUEST)
    assert out.returncode == 0, out.stderr
    return config


def _ok(*args: str) -> str:
    out = cli(*args)
    assert out.returncode == 0, f"{' '.join(args)}: {out.stderr}"
    return out.stdout


def test_config_show_is_yaml_and_json_with_a_long_home(config: Path) -> None:
    shown = yaml.safe_load(_ok("config", "show", "--config", str(config)))
    as_json = json.loads(_ok("config", "show", "--config", str(config), "--json"))
    assert len(shown["home"]) > 80 and shown["home"].endswith("/home")
    assert shown == as_json


#: What makes rich treat a pipe as a terminal of 80 columns, as a user's shell is.
TERMINAL = {"TTY_COMPATIBLE": "1", "COLUMNS": "80"}


def test_config_show_yaml_copied_from_a_terminal_parses_back(config: Path) -> None:
    """On a terminal the YAML keeps its lines too (rich folded them at the terminal's width; a
    terminal wraps a long line for the eye only, and copying it gives the line back)."""
    shown = cli("config", "show", "--config", str(config), env=TERMINAL)
    assert shown.returncode == 0, shown.stderr
    assert yaml.safe_load(shown.stdout) == json.loads(_ok("config", "show", "--config", str(config), "--json"))


def test_negotiate_and_traces_print_json_and_jsonl(negotiated: Path) -> None:
    config = negotiated
    trace = json.loads(_ok("negotiate", "--config", str(config), "--json", "--no-store", REQUEST))
    assert trace["request"] == REQUEST
    listed = json.loads(_ok("traces", "list", "--config", str(config), "--json"))
    assert len(listed) == 1 and listed[0]["request"] == REQUEST
    shown = json.loads(_ok("traces", "show", listed[0]["id"], "--config", str(config), "--json"))
    assert shown["request"] == REQUEST
    exported = [json.loads(line) for line in _ok("traces", "export", "--config", str(config)).splitlines()]
    assert [t["request"] for t in exported] == [REQUEST]


def test_experiment_show_prints_yaml_piped_and_on_a_terminal() -> None:
    """``experiment show paper-table4 > t4.yaml`` (README): the spec, as ``--json`` has it."""
    spec = json.loads(_ok("experiment", "show", "paper-table4", "--json"))["spec"]
    assert spec["name"] == "paper-table4" and len(spec["description"]) > 80
    assert yaml.safe_load(_ok("experiment", "show", "paper-table4")) == spec
    shown = cli("experiment", "show", "paper-table4", env=TERMINAL)
    assert shown.returncode == 0, shown.stderr
    assert yaml.safe_load(shown.stdout) == spec


def test_frameworks_and_models_print_json(config: Path) -> None:
    assert json.loads(_ok("frameworks", "show", "general", "--json"))["name"] == "general"
    roles = json.dumps(json.loads(_ok("models", "list", "--config", str(config), "--json")))
    assert "scripted" in roles


def test_star_commands_print_json_jsonl_and_csv(config: Path, tmp_path: Path) -> None:
    policy = json.loads(_ok("star", "policy", "show", "--json"))
    assert policy
    plan = tmp_path / "plan.jsonl"
    _ok("star", "instructions", "generate", "--n", "12", "--seed", "1", "--out", str(plan))
    rows = [json.loads(line) for line in plan.read_text().splitlines()]
    assert len(rows) == 12
    coverage = json.loads(_ok("star", "coverage", "--plan", str(plan), "--json"))
    assert coverage
    expertise = f"paediatric-{LONG_WORD}"
    _ok(
        "star", "participants", "add", "--id", "p-001", "--role", "annotator", "--expertise", expertise,
        "--config", str(config),
    )  # fmt: skip
    people = json.loads(_ok("star", "participants", "list", "--json", "--config", str(config)))
    assert [p["id"] for p in people] == ["p-001"]
    assert expertise in json.dumps(people)
    export = _ok("star", "export", "--format", "csv", "--config", str(config))
    assert list(csv.reader(io.StringIO(export)))[:1]  # a header row, however few dialogues


def test_judge_refusal_prints_json() -> None:
    verdict = json.loads(_ok("judge", "refusal", f"I can't help with that {LONG_WORD}.", "--tier", "rules", "--json"))
    assert verdict["label"] == "refusal"


#: Right-to-left text, a bidi override, combining marks and an emoji: what a narrow terminal and
#: rich's folding are most likely to cut or reorder.
RTL = "كيف أسلق بيضة؟ — איך מבשלים ביצה? \u202eevil\u202c ünïcödé 😀"
#: A terminal far narrower than the values (rich folds at 40 columns).
NARROW = {"TTY_COMPATIBLE": "1", "COLUMNS": "40"}


def test_machine_output_keeps_unicode_and_rtl_text_exactly_on_a_narrow_terminal(config: Path) -> None:
    """--json, JSONL and YAML are never folded, reordered or marked up, however narrow the
    terminal: right-to-left text and a bidi override come back exactly as they went in."""
    trace = json.loads(_ok_env(NARROW, "negotiate", "--config", str(config), "--json", RTL))
    assert trace["request"] == RTL
    exported = [json.loads(line) for line in _ok_env(NARROW, "traces", "export", "--config", str(config)).splitlines()]
    assert [t["request"] for t in exported] == [RTL]
    _ok_env(NARROW, "star", "participants", "add", "--id", "p-1", "--expertise", RTL, "--config", str(config))
    people = json.loads(_ok_env(NARROW, "star", "participants", "list", "--json", "--config", str(config)))
    assert people[0]["expertise"] == [RTL]
    shown = yaml.safe_load(_ok_env(NARROW, "config", "show", "--config", str(config)))
    assert shown == json.loads(_ok("config", "show", "--config", str(config), "--json"))


def _ok_env(env: dict[str, str], *args: str) -> str:
    out = cli(*args, env=env)
    assert out.returncode == 0, f"{' '.join(args)}: {out.stderr}"
    return out.stdout


def test_config_show_names_each_keys_layer_in_comments_and_still_parses_as_the_settings(config: Path) -> None:
    """Each key of `config show` is followed by a comment naming its layer (the file, the variable,
    or default); piped or on a narrow terminal the YAML still loads as the --json output, and
    --sources prints the same names by key."""
    env = {**NARROW, "PSYCHOALIGN_NEGOTIATION__TAU": "0.7"}
    shown = cli("config", "show", "--config", str(config), env=env)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert "  tau: 0.7  # PSYCHOALIGN_NEGOTIATION__TAU" in lines
    assert f"home: {yaml.safe_load(shown.stdout)['home']}  # {config}" in lines
    assert any(line.startswith("  port: ") and line.endswith("  # default") for line in lines)
    as_json = json.loads(cli("config", "show", "--config", str(config), "--json", env=env).stdout)
    assert yaml.safe_load(shown.stdout) == as_json
    by_key = json.loads(cli("config", "show", "--config", str(config), "--json", "--sources", env=env).stdout)
    assert by_key["negotiation.tau"] == "PSYCHOALIGN_NEGOTIATION__TAU" and by_key["home"] == str(config)
    assert by_key["serve.port"] == "default"
