"""Every runnable example of the docs runs as written.

The docs are README.md, CONTRIBUTING.md, docs/*.md, examples/README.md and the embedded
classifier's model card. A fenced block with the info string ``console`` is runnable: each line
starting with ``$ `` is a command (a trailing backslash continues it), and the lines under it are
output it must print (each found in its standard output or error). A ``bash`` or ``sh`` block is
runnable too: each line is a command (``#`` lines are comments; an ``export`` applies to the lines
after it). A block's commands run in order, in a fresh folder holding a copy of ``examples/`` (the
files the docs name), with every role on a fake OpenAI-compatible endpoint on loopback (each agent
gets a valid reply for its schema, so a negotiation completes; any other call a reply valid for
``examples/answer.schema.json``, so ``chat --schema`` examples run too) and a fresh
``PSYCHOALIGN_HOME``. A command the doc shows failing says so in its comment (``# one-line error,
exit 2``); a file the doc asks the reader to save is a block preceded by ``<!-- file: NAME -->``,
written into the folder before the doc's later blocks run.

The line before a block says when it cannot run that way:

* ``<!-- needs data -->``: it reads the evaluation data, and is skipped without it;
* ``<!-- embedded -->``: it runs on the embedded default instead of the fake endpoint (a real
  negotiation on the shipped models, as a newcomer runs it);
* ``<!-- needs a server -->``: it starts a server, or talks to one the reader has started;
* ``<!-- needs an endpoint -->``: it needs the reader's real model endpoint, database or a long
  run (a campaign, a full benchmark);
* ``<!-- set-up -->``: the ``make`` targets that build the environment the tests run in;
* ``<!-- not a command -->``: it is not a command to run (another program's syntax).

Blocks marked so are not run; test_doc_commands.py still checks every ``psychoalign`` command line
in them against the CLI (command, options, choices), the ``make`` targets against the Makefile and
the ``python bench/….py --option`` lines against their scripts. Inside a block that runs, a line
holding a placeholder (``TRACE_ID``, ``RUN_ID``, ``FILE``, ``…``) is checked the same way but not
run: the reader fills it in.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from starlette.requests import Request
from starlette.responses import JSONResponse

from tests.conftest import ROOT, SHARED_DATA, USER_DOCS
from tests.loopback import FakeServer, fake_endpoint, openai_reply
from tests.scenario import APPROVE, proposals

DOCS = USER_DOCS
#: What the fake endpoint answers a call with: by the name of the schema it asks for, a valid reply
#: of the agent that asks (so a negotiation completes: one draft, approved, composed), else one that
#: is valid for examples/answer.schema.json (``chat --schema``) and readable as plain text.
REPLY = '{"answer": "Yes: botanically a tomato is a fruit.", "confidence": 0.9}'
AGENT_REPLIES: dict[str, dict[str, Any]] = {
    "drive_proposals": proposals(("Boil it for six minutes, then cool it in cold water.", 0.9)),
    "evaluation": APPROVE,
    "assessment": {"assessments": [{"proposal": 1, "feasibility": 0.9}]},
    "final_response": {"response": "Boil it for six minutes, then cool it in cold water."},
}


@dataclass
class DocsEndpoint(FakeServer):
    """An OpenAI-compatible endpoint that answers each agent with a reply valid for its schema."""

    async def handle(self, request: Request) -> JSONResponse:
        body = json.loads(await request.body() or b"{}")
        self.requests.append(body)
        name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
        reply = AGENT_REPLIES.get(name)
        return JSONResponse(openai_reply(REPLY if reply is None else json.dumps(reply)))


_FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```", re.M | re.S)
_SHELLS = {"console", "bash", "sh"}
#: A block the doc asks the reader to save: ``<!-- file: my-run.yaml -->`` before it.
_FILE = re.compile(r"<!-- file: ([\w.-]+) -->")
#: The markers of blocks that do not run here (see the module's docstring).
NOT_RUN = {
    "<!-- needs a server -->",
    "<!-- needs an endpoint -->",
    "<!-- set-up -->",
    "<!-- not a command -->",
}
#: A word the reader replaces before running the line: an upper-case name standing alone
#: (``TRACE_ID``, ``RUN_ID``, ``FILE``; not ``$VAR`` nor ``NAME=value``), an ellipsis, ``<...>``.
_PLACEHOLDER = re.compile(r"(?<![\w$/.=-])[A-Z][A-Z_]{2,}(?![\w=])|…|<[a-z][^<>]*>|\[-")
#: A command the doc shows failing says so in its comment: ``# one-line error, exit 2``.
_EXIT = re.compile(r"\s#.*\bexit (\d+)")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    commands: tuple[tuple[str, tuple[str, ...]], ...]
    needs_data: bool
    embedded: bool = False
    #: The files the doc asked the reader to save before this block: (name, text).
    files: tuple[tuple[str, str], ...] = ()

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def _console(body: str) -> list[tuple[str, list[str]]]:
    """``$ `` lines are commands, the lines under one the output it prints."""
    commands: list[tuple[str, list[str]]] = []
    pending = ""
    for raw in body.splitlines():
        if pending:
            pending += "\n" + raw
        elif raw.startswith("$ "):
            pending = raw[2:]
        else:
            if commands and raw.strip():
                commands[-1][1].append(raw.strip())  # output the doc shows
            continue
        if not pending.endswith("\\"):
            commands.append((pending, []))
            pending = ""
    return commands


def _script(body: str) -> list[tuple[str, list[str]]]:
    """Every line is a command (continued by a trailing backslash); ``export`` lines apply to the
    commands after them; lines with a placeholder are left to test_doc_commands.py."""
    commands: list[tuple[str, list[str]]] = []
    exports: list[str] = []
    pending = ""
    for raw in body.splitlines():
        pending = f"{pending}\n{raw}" if pending else raw
        if pending.endswith("\\"):
            continue
        command, pending = pending.strip(), ""
        if not command or command.startswith("#"):
            continue
        if command.startswith("export "):
            exports.append(command)
        elif not _PLACEHOLDER.search(re.sub(r"\s#.*", "", command)):
            commands.append(("; ".join([*exports, command]), []))
    return commands


def blocks() -> list[Block]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        files: list[tuple[str, str]] = []
        for match in _FENCE.finditer(text):
            marker = text[: match.start()].rstrip().rsplit("\n", 1)[-1].strip()
            if saved := _FILE.fullmatch(marker):
                files.append((saved.group(1), match.group(2)))
            if match.group(1) not in _SHELLS or marker in NOT_RUN:
                continue
            commands = _console(match.group(2)) if match.group(1) == "console" else _script(match.group(2))
            if not commands:
                continue  # placeholders only: test_doc_commands.py checks them
            out.append(
                Block(
                    doc,
                    text.count("\n", 0, match.start()) + 1,
                    tuple((c, tuple(o)) for c, o in commands),
                    needs_data=marker == "<!-- needs data -->",
                    embedded=marker == "<!-- embedded -->",
                    files=tuple(files),
                )
            )
    return out


def test_the_docs_hold_runnable_examples() -> None:
    found = blocks()
    assert len(found) >= 3
    assert all(b.commands for b in found), [b.id for b in found if not b.commands]


@pytest.mark.parametrize("block", blocks(), ids=lambda b: b.id)
def test_runnable_example(block: Block, tmp_path: Path) -> None:
    if block.needs_data:
        from tests.conftest import REQUIRE_DATA, missing_data

        if missing_data():
            if REQUIRE_DATA:
                pytest.fail(f"{block.id} needs the evaluation data, missing at {SHARED_DATA}")
            pytest.skip(f"evaluation data not found at {SHARED_DATA} (README, Data: psychoalign data fetch)")
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    for name, content in block.files:
        (tmp_path / name).write_text(content, encoding="utf-8")
    shims = tmp_path / ".bin"
    shims.mkdir()
    shim = shims / "psychoalign"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m psychoalign "$@"\n')
    shim.chmod(0o755)
    fake = DocsEndpoint()
    with fake_endpoint("/v1/chat/completions", fake):
        env = {
            **os.environ,
            "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
            "PSYCHOALIGN_HOME": str(tmp_path / "home"),
            # A block not marked as needing the data runs as in a fresh clone with nothing beside
            # it: the data folder it would look in does not exist, also where the data is present.
            "PSYCHOALIGN_DATA_DIR": str(SHARED_DATA if block.needs_data else tmp_path / "no-data"),
        }
        if not block.embedded:
            env |= {
                "PSYCHOALIGN_DEFAULTS__BACKEND": "openai",
                "PSYCHOALIGN_DEFAULTS__BASE_URL": f"{fake.url}/v1",
                "PSYCHOALIGN_DEFAULTS__MODEL": "fake-model",
            }
        _run(block, tmp_path, env)


def _run(block: Block, cwd: Path, env: dict[str, str]) -> None:
    for command, shown in block.commands:
        out = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        expected = int(shown_exit.group(1)) if (shown_exit := _EXIT.search(command)) else 0
        assert out.returncode == expected, f"{block.id}: `{command}` exited {out.returncode}:\n{out.stderr[-2000:]}"
        for line in shown:
            shown_text = out.stdout + out.stderr  # what the terminal shows
            assert line in shown_text, f"{block.id}: `{command}` did not print {line!r}:\n{shown_text[-2000:]}"


def test_the_example_framework_is_the_one_the_doc_shows() -> None:
    """docs/frameworks.md says "save the YAML above"; examples/my-clinic.yaml is that YAML."""
    text = (ROOT / "docs" / "frameworks.md").read_text(encoding="utf-8")
    shown = re.search(r"^```yaml\n(.*?)^```", text, re.M | re.S)
    assert shown is not None
    assert (ROOT / "examples" / "my-clinic.yaml").read_text(encoding="utf-8") == shown.group(1)


#: A ``python`` block preceded by this marker talks to a server the reader has started (a
#: gateway, an A2A agent, their own model endpoint); every other python block runs standalone.
_NEEDS_SERVER = "<!-- needs a server -->"
_PYTHON = re.compile(r"^```python[ \t]*\n(.*?)^```", re.M | re.S)


def python_blocks() -> list[tuple[str, str, bool]]:
    """(id, code, needs a server) for every python block of the docs."""
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in _PYTHON.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            before = text[: match.start()].rstrip().rsplit("\n", 1)[-1]
            out.append((f"{doc.relative_to(ROOT)}:{line}", match.group(1), before.strip() == _NEEDS_SERVER))
    return out


def test_the_docs_mark_every_python_block_that_needs_a_server() -> None:
    standalone = [block_id for block_id, _, server in python_blocks() if not server]
    assert len(standalone) >= 5, standalone  # the library, framework and judge examples


@pytest.mark.parametrize(("block_id", "code"), [(i, c) for i, c, _ in python_blocks()], ids=lambda v: str(v)[:40])
def test_every_python_example_is_valid_python(block_id: str, code: str) -> None:
    """The examples that need a server are not run here; they still parse, so a reader who
    starts the server can paste them as they stand."""
    try:
        compile(code, block_id, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
    except SyntaxError as exc:
        pytest.fail(f"{block_id}, line {exc.lineno} of the block: {exc.msg}")


#: Every marker a fenced block may carry on the line before it (a misspelt one is read as none).
_MARKERS = re.compile(
    r"<!-- (?:needs data|embedded|needs a server|needs an endpoint|set-up|not a command|file: [\w.-]+"
    r"|bench:[\w-]+ (?:start|end)) -->"  # bench/ writes its sections of performance.md between these
)


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_every_block_marker_is_one_the_tests_read(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    unknown = [
        f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
        for m in re.finditer(r"<!--[^>]*-->\n```", text)
        if not _MARKERS.fullmatch(m.group(0).removesuffix("\n```"))
    ]
    assert not unknown, f"markers the doc tests do not know (see the module docstring): {unknown}"


@pytest.mark.parametrize(
    ("block_id", "code"), [(i, c) for i, c, server in python_blocks() if not server], ids=lambda v: str(v)[:40]
)
def test_python_example_runs_as_written(block_id: str, code: str, tmp_path: Path) -> None:
    """A standalone python example runs in a fresh folder and exits 0 with no warning printed."""
    env = {
        **os.environ,
        "PYTHONWARNINGS": "default",
        "PYTHONIOENCODING": "utf-8",
        "PSYCHOALIGN_HOME": str(tmp_path / "home"),
        "PSYCHOALIGN_DATA_DIR": str(tmp_path / "no-data"),  # a fresh clone: no evaluation data beside it
    }
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, f"{block_id} exited {out.returncode}:\n{out.stderr[-2000:]}"
    assert "Traceback" not in out.stderr and "Unclosed" not in out.stderr, f"{block_id}:\n{out.stderr[-2000:]}"


#: What a user-facing doc never says: how the project is staffed, where a machine keeps its files,
#: what time or day it was, how the work went. (``session`` alone stays: the lab's login sessions are
#: a user concept.)
_NOT_FOR_USERS = {
    "a team-role name": re.compile(
        r"\b(?:coordinators?|founding engineer|CEO|helper (?:session|brief)|worktrees?|engineers? \(an? AI)\b"
    ),
    "a machine path": re.compile(r"(?<![\w.])/(?:work|tmp|root|home/\w+)/"),
    "a time of day": re.compile(
        r"\b(?:[01]?\d|2[0-3]):[0-5]\d\s?(?:UTC|am|pm|AM|PM)\b|\bat (?:[01]?\d|2[0-3]):[0-5]\d\b"
    ),
    # A bench section's "Date:" line says when its figures were measured; any other date is history.
    "a date": re.compile(r"(?<!Date: )\b20\d\d-[01]\d-[0-3]\d\b"),
    "how the work went (history belongs in commit messages)": re.compile(
        r"(?i)\b(?:this round|this session|we found|we tried|(?:it )?turned out|after the (?:fix|change)|the issue's"
        r"|(?:in|from|per) the issue)\b"
    ),
    # A lab notebook's account of how a figure or a build was reached: CHANGELOG.md keeps it.
    "a build's or a run's story (history belongs in CHANGELOG.md)": re.compile(
        r"(?i)\b(?:(?:was )?found after|an earlier run|we then|then we|was made, in order|in the time there was"
        r"|on the shared machine|stop numbers?|the first run of the rule|the defect was reproduced)\b"
    ),
}


@pytest.mark.parametrize("doc", DOCS, ids=lambda d: str(d.relative_to(ROOT)))
def test_the_docs_speak_to_users(doc: Path) -> None:
    """Docs speak to users about the project: no staffing, no machine paths, no times of day or
    dates, no account of how the work went."""
    text = doc.read_text(encoding="utf-8")
    found = [
        f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}: {what} ({m.group(0)!r})"
        for what, pattern in _NOT_FOR_USERS.items()
        for m in pattern.finditer(text)
    ]
    assert not found, found


_INDEX_ROW = re.compile(r"^\| \[[^\]]+\]\(([^)]+\.md)\) \| (.*?) \|$", re.M)


def test_the_readme_indexes_every_doc() -> None:
    """README's documentation table links every page under docs/ and the model card, each with a
    one-line purpose, so a reader finds each doc from the front page."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    rows = {link: purpose.strip() for link, purpose in _INDEX_ROW.findall(section)}
    wanted = {str(doc.relative_to(ROOT)) for doc in DOCS if doc.parent == ROOT / "docs"}
    wanted.add("src/psychoalign/models/classifier_data/MODEL_CARD.md")
    assert wanted <= set(rows), sorted(wanted - set(rows))
    assert all(rows[link] for link in wanted), [link for link in wanted if not rows[link]]
    assert all((ROOT / link).is_file() for link in rows), [link for link in rows if not (ROOT / link).is_file()]


#: A ``toml`` block of the docs is a settings file (or a part of one) the reader copies; a value in
#: angle brackets (``"<sha256 hex of the key>"``) is one the reader fills in.
_TOML = re.compile(r"^```toml[ \t]*\n(.*?)^```", re.M | re.S)
_TOML_PLACEHOLDER = re.compile(r"<[a-z][^<>]*>")


def toml_blocks() -> list[tuple[str, str]]:
    return [
        (f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1))
        for doc in DOCS
        for text in [doc.read_text(encoding="utf-8")]
        for m in _TOML.finditer(text)
    ]


def test_the_docs_show_settings_files() -> None:
    assert len(toml_blocks()) >= 5


@pytest.mark.parametrize(("block_id", "text"), toml_blocks(), ids=lambda v: str(v)[:40])
def test_every_settings_example_loads(block_id: str, text: str, tmp_path: Path) -> None:
    """A settings example parses as TOML and, unless it holds a placeholder the reader fills in
    (``<sha256 hex of the key>``), loads as the settings file it would be, with every value valid."""
    import tomllib

    from psychoalign.config import load_settings

    tomllib.loads(text)
    if _TOML_PLACEHOLDER.search(text):
        return
    path = tmp_path / "psychoalign.toml"
    path.write_text(text, encoding="utf-8")
    load_settings(path, environ={})
