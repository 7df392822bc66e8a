"""Every runnable example of the docs runs as written.

A fenced block with the info string ``console`` in README.md or docs/*.md is runnable: each line
starting with ``$ `` is a command (a trailing backslash continues it), and the lines under it are
output it must print (each found in its standard output or error). The block's commands run in
order, in a fresh folder holding a copy of ``examples/`` (the files the docs name), with every
role on a fake OpenAI-compatible endpoint on loopback (its reply satisfies
``examples/answer.schema.json``, so ``chat --schema`` examples run too). A block preceded by
``<!-- needs data -->`` reads the evaluation data and is skipped without it; one preceded by
``<!-- embedded -->`` runs on the embedded default instead of the fake endpoint (a real negotiation
on the shipped models, as a newcomer runs it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, SHARED_DATA
from tests.loopback import FakeServer, Scripted, fake_endpoint, openai_reply

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: What the fake endpoint answers every call with: valid for examples/answer.schema.json.
REPLY = '{"answer": "Yes: botanically a tomato is a fruit.", "confidence": 0.9}'
_FENCE = re.compile(r"^```console[ \t]*\n(.*?)^```", re.M | re.S)


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int
    commands: tuple[tuple[str, tuple[str, ...]], ...]
    needs_data: bool
    embedded: bool = False

    @property
    def id(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            before = text[: match.start()].rstrip().rsplit("\n", 1)[-1]
            commands: list[tuple[str, list[str]]] = []
            pending = ""
            for raw in match.group(1).splitlines():
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
            marker = before.strip()
            out.append(
                Block(
                    doc,
                    line,
                    tuple((c, tuple(o)) for c, o in commands),
                    needs_data=marker == "<!-- needs data -->",
                    embedded=marker == "<!-- embedded -->",
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
    shims = tmp_path / ".bin"
    shims.mkdir()
    shim = shims / "psychoalign"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m psychoalign "$@"\n')
    shim.chmod(0o755)
    fake = FakeServer(default=Scripted(openai_reply(REPLY)))
    with fake_endpoint("/v1/chat/completions", fake):
        env = {
            **os.environ,
            "PATH": f"{shims}{os.pathsep}{os.environ['PATH']}",
            "PSYCHOALIGN_HOME": str(tmp_path / "home"),
            "PSYCHOALIGN_DATA_DIR": str(SHARED_DATA),
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
        assert out.returncode == 0, f"{block.id}: `{command}` exited {out.returncode}:\n{out.stderr[-2000:]}"
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


@pytest.mark.parametrize(
    ("block_id", "code"), [(i, c) for i, c, server in python_blocks() if not server], ids=lambda v: str(v)[:40]
)
def test_python_example_runs_as_written(block_id: str, code: str, tmp_path: Path) -> None:
    """A standalone python example runs in a fresh folder and exits 0 with no warning printed."""
    env = {**os.environ, "PYTHONWARNINGS": "default", "PYTHONIOENCODING": "utf-8"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, f"{block_id} exited {out.returncode}:\n{out.stderr[-2000:]}"
    assert "Traceback" not in out.stderr and "Unclosed" not in out.stderr, f"{block_id}:\n{out.stderr[-2000:]}"
