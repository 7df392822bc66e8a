"""Every command of the CLI, given bad input, ends in one line naming the problem and the fix.

:data:`CASES` holds, for each leaf of the command tree (``psychoalign chat``, ``star policy
show``, …), the bad inputs a newcomer meets: a missing or malformed file (TOML, YAML, JSON, CSV),
a file or standard input that is not UTF-8, empty standard input, a flag of the wrong type, an
unknown framework, role or preset, an unreachable endpoint, a home that cannot be a folder, a
database a newer psychoalign wrote. Each must exit non-zero with one ``error:`` line on standard
error holding the expected words, and no traceback; with ``--debug`` the traceback is shown. A
command added to the CLI without a row here fails :func:`test_every_command_has_an_error_case`.

The commands run in this process (through the console script's entry point,
:func:`psychoalign.cli.main.run`): starting an interpreter per case would take minutes.
"""

from __future__ import annotations

import io
import sqlite3
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from psychoalign.cli.main import COMMANDS, load_command


@dataclass(frozen=True)
class Case:
    args: tuple[str, ...]
    #: Words the error line must hold.
    says: str
    #: Standard input, as bytes (None: a terminal-less empty input is not needed).
    stdin: bytes | None = None
    env: tuple[tuple[str, str], ...] = ()


#: Files the cases name, written into the test's folder: {name: bytes}.
FILES: dict[str, bytes] = {
    "bad.toml": b"[defaults\nbackend = 1\n",
    "bad.yaml": b"a: [1\n",
    "bad.json": b'{"type": "object",\n "properties": }\n',
    "bad.csv": b'item,rater\n"1,2\n',
    "latin1.yaml": b'name: "caf\xe9"\n',
    "latin1.jsonl": b'{"id": "caf\xe9"}\n',
    "spec.yaml": b"name: x\nsystems: 5\n",
    "list.yaml": b"[]\n",
}

UNREACHABLE = "http://127.0.0.1:9/v1"  # the discard port: connection refused at once

#: leaf command -> its bad inputs. Every leaf of the command tree needs at least one.
CASES: dict[str, list[Case]] = {
    "chat": [
        Case(("chat", "--temperature", "warm", "hi"), "Invalid value for '--temperature'"),
        Case(("chat", "--config", "bad.toml", "hi"), "bad.toml:1:10: invalid TOML"),
        Case(("chat", "--backend", "scripted", "--schema", "bad.json", "hi"), "bad.json:2:16: invalid JSON"),
        Case(("chat", "--backend", "scripted", "-"), "standard input is not UTF-8", stdin=b"\xff\xfehi"),
        Case(("chat", "--backend", "scripted", "-"), "the prompt is empty", stdin=b""),
        Case(
            ("chat", "--backend", "openai", "--base-url", UNREACHABLE, "hi"),
            "connection refused",
            env=(("PSYCHOALIGN_DEFAULTS__MAX_RETRIES", "0"),),
        ),
    ],
    "negotiate": [
        Case(("negotiate", "--framework", "nope", "hi"), "unknown framework 'nope'"),
        Case(("negotiate", "--framework", "bad.yaml", "hi"), "bad.yaml:2:1: invalid YAML"),
        Case(("negotiate", "--framework", "latin1.yaml", "hi"), "latin1.yaml is not UTF-8 text"),
        Case(("negotiate", "--tau", "2", "hi"), "tau = 2.0 is invalid"),
        Case(("negotiate", "-"), "the request is empty", stdin=b""),
    ],
    "serve": [
        Case(("serve", "--config", "missing.toml"), "cannot read config file missing.toml"),
        Case(("serve", "--port", "99999"), "a command-line flag: invalid configuration at serve.port"),
        # an empty bind address is every interface to the server, not "no address"
        Case(("serve", "--host", ""), "a command-line flag: invalid configuration at serve.host"),
    ],
    "serve-key": [Case(("serve-key", "--deployment", ""), "--deployment is empty")],
    "serve-a2a": [Case(("serve-a2a", "--deployment", "nope"), "unknown deployment 'nope'")],
    "up": [
        Case(("up", "--framework", "nope"), "unknown framework 'nope'"),
        # started four processes, then waited "-1s" for the first card
        Case(("up", "--startup-timeout", "-1"), "Invalid value for '--startup-timeout'"),
    ],
    "agent serve": [Case(("agent", "serve", "--role", "nope"), "unknown role 'nope'")],
    "experiment run": [
        Case(("experiment", "run", "nope"), "no spec file or preset named 'nope'"),
        Case(("experiment", "run", "spec.yaml"), "spec.yaml:2: systems"),
        Case(("experiment", "run", "bad.yaml"), "bad.yaml:2:1: invalid YAML"),
        Case(("experiment", "run", "dilemmas", "--n", "many"), "Invalid value for '--n'"),
    ],
    # --config was accepted and ignored: a broken file listed the presets as if it were fine
    "experiment list": [Case(("experiment", "list", "--config", "bad.yaml"), "bad.yaml:2:1: invalid YAML")],
    "experiment show": [Case(("experiment", "show", "nope"), "no spec file or preset named 'nope'")],
    "experiment status": [Case(("experiment", "status", "nope"), "no result store")],
    "experiment report": [Case(("experiment", "report", "nope"), "no result store")],
    "experiment cells": [Case(("experiment", "cells", "nope", "--format", "xml"), "unknown --format 'xml'")],
    "experiment view": [Case(("experiment", "view", "--host", "192.0.2.1"), "serves loopback only")],
    "star coverage": [
        Case(("star", "coverage", "--plan", "missing.jsonl"), "cannot read instructions file missing.jsonl"),
        Case(("star", "coverage", "--plan", "latin1.jsonl"), "latin1.jsonl is not UTF-8 text"),
    ],
    "star assign": [
        Case(("star", "assign", "--kind", "nope"), "unknown task kind 'nope'"),
        # a campaign typo printed "assigned 0 of 0 open red_team tasks" and exited 0
        Case(("star", "assign", "--campaign", "nope"), "no campaign 'nope' in this store"),
        Case(("star", "assign", "--max-per-participant", "0"), "--max-per-participant must be at least 1"),
    ],
    "star export": [
        Case(("star", "export", "--format", "xml"), "unknown format 'xml'"),
        # a campaign typo exported nothing and exited 0
        Case(("star", "export", "--campaign", "nope"), "no campaign 'nope' in this store"),
    ],
    "star analyze": [
        Case(("star", "analyze", "missing.csv", "--out", "r.md"), "cannot read missing.csv"),
        Case(("star", "analyze", "bad.csv", "--out", "r.md"), "pass --item-col"),
    ],
    "star policy show": [Case(("star", "policy", "show", "--policy", "missing.yaml"), "cannot read policy file")],
    "star policy validate": [Case(("star", "policy", "validate", "bad.yaml"), "bad.yaml:2:1: invalid YAML")],
    "star instructions generate": [
        Case(("star", "instructions", "generate", "--n", "0"), "--n must be between 1"),
        Case(("star", "instructions", "generate", "--n", "3", "--policy", "bad.yaml"), "bad.yaml:2:1: invalid YAML"),
    ],
    "star participants add": [Case(("star", "participants", "add", "--id", "p1", "--role", "nope"), "unknown roles")],
    "star participants import": [
        Case(("star", "participants", "import", "bad.csv"), "bad.csv:1: invalid JSON"),
        Case(("star", "participants", "import", "latin1.jsonl"), "latin1.jsonl is not UTF-8 text"),
    ],
    "star participants list": [
        Case(("star", "participants", "list"), "cannot create the folder", env=(("PSYCHOALIGN_HOME", "bad.csv/home"),)),
        Case(("star", "participants", "list"), "newer than this psychoalign knows", env=(("NEWER", "star"),)),
    ],
    "star campaign run": [Case(("star", "campaign", "run", "missing.yaml"), "cannot read campaign file")],
    "judge refusal": [
        Case(("judge", "refusal", "hi", "--tier", "nope"), "unknown tier 'nope'"),
        # the offline tiers read no settings: a broken --config and a --role typo were ignored
        Case(("judge", "refusal", "hi", "--config", "bad.toml"), "bad.toml:1:10: invalid TOML"),
        Case(("judge", "refusal", "hi", "--role", "nope"), "unknown role 'nope' for --role"),
        Case(("judge", "refusal", "-", "--tier", "rules"), "standard input is empty", stdin=b""),
        Case(("judge", "refusal", "-", "--tier", "rules"), "standard input is not UTF-8", stdin=b"I can\xff"),
    ],
    "judge eval-refusal": [Case(("judge", "eval-refusal", "--data", "no-data"), "no-data does not exist")],
    "judge eval-harm": [Case(("judge", "eval-harm", "--data", "no-data"), "no-data does not exist")],
    "judge eval-jailbreak": [Case(("judge", "eval-jailbreak", "--data", "no-data"), "no-data does not exist")],
    "data list": [Case(("data", "list", "--config", "missing.toml"), "cannot read config file")],
    "data path": [Case(("data", "path", "--config", "latin1.yaml"), "latin1.yaml is not UTF-8 text")],
    "data verify": [Case(("data", "verify", "--data", "no-data"), "no-data does not exist")],
    "data fetch": [
        Case(("data", "fetch", "nope", "--from", UNREACHABLE, "--data", "d"), "unknown dataset 'nope'"),
        Case(("data", "fetch", "xstest", "--from", "http://127.0.0.1:9", "--data", "d"), "cannot download"),
        # no "fetching …" line first: the URL is checked before any file
        Case(("data", "fetch", "xstest", "--from", "mirror", "--data", "d"), "'mirror': not an http(s) URL"),
    ],
    "lab add-lead": [
        Case(("lab", "add-lead"), "neither --username nor --invite was given"),
        Case(("lab", "add-lead", "--username", "lead"), "no password was given", stdin=b""),
        Case(("lab", "add-lead", "--username", "lead"), "password on standard input is not UTF-8", stdin=b"\xff" * 12),
    ],
    "lab accounts": [Case(("lab", "accounts"), "newer than this psychoalign knows", env=(("NEWER", "accounts"),))],
    "models list": [
        Case(("models", "list", "--config", "bad.toml"), "bad.toml:1:10: invalid TOML"),
        # an empty YAML list was read as no settings at all
        Case(("models", "list", "--config", "list.yaml"), "list.yaml: the top level must be a table/mapping"),
    ],
    "config show": [
        Case(("config", "show"), "k = 'five' is invalid", env=(("PSYCHOALIGN_NEGOTIATION__K", "five"),)),
        Case(
            ("config", "show"),
            "PSYCHOALIGN_SERVE__PORT: invalid configuration at serve.port",
            env=(("PSYCHOALIGN_SERVE__PORT", "http"),),
        ),
    ],
    "frameworks list": [Case(("frameworks", "list", "--yaml"), "No such option: --yaml")],
    "frameworks show": [
        Case(("frameworks", "show", "nope"), "unknown framework 'nope'"),
        # Path("") is ".": "cannot read framework file .: Is a directory"
        Case(("frameworks", "show", ""), "the framework name is empty"),
    ],
    "frameworks validate": [
        Case(("frameworks", "validate", "missing.yaml"), "cannot read framework file"),
        Case(("frameworks", "validate", "latin1.yaml"), "latin1.yaml is not UTF-8 text"),
    ],
    "traces list": [
        Case(("traces", "list", "--store", "nope://x"), "cannot open store"),
        Case(("traces", "list"), "newer than this psychoalign knows", env=(("NEWER", "traces"),)),
    ],
    "traces show": [Case(("traces", "show", "nope"), "no trace with id")],
    "traces export": [Case(("traces", "export", "--format", "xml"), "unknown export format 'xml'")],
}


def _leaves(command: object, path: list[str]) -> list[str]:
    subs = getattr(command, "commands", None)
    if subs:
        return [leaf for name, sub in subs.items() for leaf in _leaves(sub, [*path, name])]
    return [" ".join(path)]


def test_every_command_has_an_error_case() -> None:
    tree = {leaf for name in COMMANDS for leaf in _leaves(load_command(name), [name])}
    assert sorted(tree - set(CASES)) == [], "add a bad-input case for these commands to CASES"
    assert sorted(set(CASES) - tree) == [], "these commands are gone: remove their CASES"
    assert all(CASES.values())


def _newer_database(home: Path, store: str) -> None:
    """A database that a newer psychoalign wrote: the store's schema revision is one this version
    does not know."""
    home.mkdir(parents=True, exist_ok=True)
    with sqlite3.connect(home / "psychoalign.db") as db:
        db.execute(f"CREATE TABLE alembic_version_{store} (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        db.execute(f"INSERT INTO alembic_version_{store} VALUES ('9999_from_the_future')")
    db.close()


def _run(args: tuple[str, ...], case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> object:
    """The console script's entry point on ``args`` in ``tmp_path``; its exit code."""
    import psychoalign.cli.main as cli_main

    for name, content in FILES.items():
        (tmp_path / name).write_bytes(content)
    monkeypatch.setenv("PSYCHOALIGN_HOME", str(tmp_path / "home"))
    for name, value in case.env:
        if name == "NEWER":
            _newer_database(tmp_path / "home", value)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.setattr(sys, "argv", ["psychoalign", *args])
    if case.stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(case.stdin), encoding="utf-8"))
    with pytest.raises(SystemExit) as exc:
        cli_main.run()
    return exc.value.code


_ALL = [(path, case) for path, cases in CASES.items() for case in cases]


@pytest.mark.parametrize(("path", "case"), _ALL, ids=[f"{p}:{' '.join(c.args[1:])[:50]}" for p, c in _ALL])
def test_bad_input_is_one_line_naming_the_fix(
    path: str, case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = _run(case.args, case, tmp_path, monkeypatch)
    out = capsys.readouterr()
    lines = [line for line in out.err.splitlines() if line.strip()]
    assert code not in (0, None), f"{path}: exited {code}\n{out.err}"
    # one error line, the last: what came before is progress (`data fetch` names each file it fetches)
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1 and lines[-1] == errors[0], f"{path}: not one error line, last:\n{out.err}"
    assert case.says in errors[0], f"{path}: {errors[0]!r} does not say {case.says!r}"
    assert " — " in errors[0], f"{path}: no fix named after the problem: {errors[0]!r}"
    assert "Traceback" not in out.err + out.out


#: With --debug the error raised (not a usage error: those are the user's, never a bug) reaches
#: the interpreter, which prints its traceback.
_DEBUG = [(p, c) for p, c in _ALL if not c.says.startswith(("Invalid value", "No such option"))][::4]


@pytest.mark.parametrize(("path", "case"), _DEBUG, ids=[f"{p}:{' '.join(c.args[1:])[:50]}" for p, c in _DEBUG])
def test_debug_lets_the_error_through_for_its_traceback(
    path: str, case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from psychoalign.errors import PsychoAlignError

    with pytest.raises((PsychoAlignError, OSError)):
        _run(("--debug", *case.args), case, tmp_path, monkeypatch)
