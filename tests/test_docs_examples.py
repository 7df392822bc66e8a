"""The docs' data files and file names are true: every YAML and JSON example parses, the whole files
the reader copies (a framework, an experiment spec, a STAR campaign, a scripted model's replies) load
as what they are, and every repository path a doc names exists.

test_docs.py runs the shell and Python examples and loads the settings (TOML) examples;
test_doc_commands.py checks every ``psychoalign`` command line against the CLI. Nothing here reads
the evaluation data or a model: it passes in a clone with nothing beside it.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, USER_DOCS

DOCS = USER_DOCS
_FENCE = re.compile(r"^```([\w ]*?)[ \t]*\n(.*?)^```", re.M | re.S)


def _blocks(*languages: str) -> list[tuple[str, str]]:
    """(doc:line, text) of every fenced block with one of these info strings."""
    return [
        (f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}", m.group(2))
        for doc in DOCS
        for text in [doc.read_text(encoding="utf-8")]
        for m in _FENCE.finditer(text)
        if m.group(1) in languages
    ]


YAML_BLOCKS = _blocks("yaml", "yml")
JSON_BLOCKS = _blocks("json")
JSON_LINES_BLOCKS = _blocks("json lines", "jsonl")


def test_the_docs_show_data_files() -> None:
    """The extraction finds the docs' YAML and JSON examples (a broken pattern would check nothing)."""
    assert len(YAML_BLOCKS) >= 15, len(YAML_BLOCKS)
    assert len(JSON_BLOCKS) >= 3, len(JSON_BLOCKS)
    assert len(JSON_LINES_BLOCKS) >= 2, len(JSON_LINES_BLOCKS)


@pytest.mark.parametrize(("block_id", "text"), YAML_BLOCKS, ids=lambda v: str(v)[:40])
def test_every_yaml_example_parses(block_id: str, text: str) -> None:
    """A YAML example, a whole file or a part of one (a list item, a rule), is valid YAML as shown."""
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as exc:
        pytest.fail(f"{block_id}: not valid YAML: {exc}")


#: A JSON example holding an ellipsis (``"usage": {…}``) or starting inside an object (``"final":
#: …``) is an abridged excerpt of a larger reply; every other one is whole and parses.
def _abridged(text: str) -> bool:
    return "…" in text or text.lstrip().startswith('"')


@pytest.mark.parametrize(("block_id", "text"), JSON_BLOCKS, ids=lambda v: str(v)[:40])
def test_every_json_example_parses(block_id: str, text: str) -> None:
    if _abridged(text):
        pytest.skip(f"{block_id}: an abridged excerpt of a reply")
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        pytest.fail(f"{block_id}: not valid JSON: {exc}")


def test_most_json_examples_are_whole() -> None:
    whole = [block_id for block_id, text in JSON_BLOCKS if not _abridged(text)]
    assert len(whole) >= 2, whole


@pytest.mark.parametrize(("block_id", "text"), JSON_LINES_BLOCKS, ids=lambda v: str(v)[:40])
def test_every_json_lines_example_parses(block_id: str, text: str) -> None:
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                json.loads(line)
            except json.JSONDecodeError as exc:
                pytest.fail(f"{block_id}, line {number} of the block: not valid JSON: {exc}")


# --- whole files the reader copies load as what they are -------------------------------------------


def _kind(data: Any) -> str | None:
    """What a whole-file YAML example is, by its top-level keys (None: a part of a file, or another
    program's file such as LiteLLM's)."""
    if not isinstance(data, dict):
        return None
    keys = set(data)
    if {"name", "version", "layers"} <= keys:
        return "framework"
    if {"instructions", "target"} <= keys:
        return "campaign"
    if "name" in keys and keys & {"systems", "benchmarks"}:
        return "experiment spec"
    if {"rules", "default"} <= keys:
        return "scripted replies"
    return None


def _load_framework(block_id: str, text: str, tmp_path: Path) -> None:
    from psychoalign.frameworks.loader import parse_framework

    parse_framework(text, block_id)


def _load_campaign(block_id: str, text: str, tmp_path: Path) -> None:
    from psychoalign.star.campaign import load_campaign

    path = tmp_path / "campaign.yaml"
    path.write_text(text, encoding="utf-8")
    load_campaign(path)


def _load_spec(block_id: str, text: str, tmp_path: Path) -> None:
    """Validated as `experiment show` does (systems, benchmarks, judges known), with the label files
    a spec names written beside it first: the reader brings those."""
    from psychoalign.config import Settings
    from psychoalign.experiments.harness.registry import default_registry
    from psychoalign.experiments.harness.spec import load_spec

    for judge, name in ((yaml.safe_load(text).get("judge") or {}).get("labels") or {}).items():
        label = "refused" if judge == "refusal" else "harmful"
        rows = [{"prompt": "p1", "goal": "p1", "response": "r1", label: True}]
        rows.append({"prompt": "p2", "goal": "p2", "response": "r2", label: False})
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    path = tmp_path / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    load_spec(path, registry=default_registry(), settings=Settings())


def _load_script(block_id: str, text: str, tmp_path: Path) -> None:
    """A scripted model on the file answers by its rules: the first rule's match gets its reply,
    anything else the default."""
    from psychoalign.models import ModelSpec, build_model

    path = tmp_path / "script.yaml"
    path.write_text(text, encoding="utf-8")
    data = yaml.safe_load(text)

    async def answers() -> tuple[str, str]:
        async with build_model(ModelSpec(backend="scripted", script=str(path))) as model:
            other = await model.chat("zzz: nothing any rule matches")
            first = await model.chat(f"a message with {data['rules'][-1]['match'].replace(chr(92), '')} in it")
            return other.text, first.text

    other, last_rule = asyncio.run(answers())
    assert other == data["default"], other
    assert last_rule == str(data["rules"][-1]["reply"]), last_rule


LOADERS: dict[str, Callable[[str, str, Path], None]] = {
    "framework": _load_framework,
    "campaign": _load_campaign,
    "experiment spec": _load_spec,
    "scripted replies": _load_script,
}
WHOLE_FILES = [(b, t) for b, t in YAML_BLOCKS if _kind(yaml.safe_load(t)) is not None]


def test_the_docs_show_whole_files_of_every_kind() -> None:
    kinds = {_kind(yaml.safe_load(text)) for _, text in WHOLE_FILES}
    assert kinds == set(LOADERS), kinds


@pytest.mark.parametrize(("block_id", "text"), WHOLE_FILES, ids=lambda v: str(v)[:40])
def test_every_whole_yaml_example_loads(block_id: str, text: str, tmp_path: Path) -> None:
    """A framework, spec, campaign or reply file shown whole loads with every value valid, as the
    command the doc gives it to would load it."""
    kind = _kind(yaml.safe_load(text))
    assert kind is not None
    LOADERS[kind](block_id, text, tmp_path)


# --- every file a doc names is in the repository ---------------------------------------------------

#: A repository path in the prose or a block: ``src/…``, ``bench/…``, ``docs/…``, ``tests/…``,
#: ``scripts/…``, ``examples/…``. One holding a placeholder (``bench/NAME.py``, ``r<NNNN>``) or a
#: glob names no one file.
_PATH = re.compile(r"(?<![\w./~-])((?:src|bench|docs|tests|scripts|examples)/[\w./-]*[\w/])")
_NOT_ONE_FILE = re.compile(r"[A-Z]{3,}|[*<{…]")
#: A relative Markdown link: ``[text](other.md#anchor)``.
_LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")


def named_paths() -> list[tuple[str, str, Path]]:
    """(doc:line, as written, where it points) for every repository path and relative link."""
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in _PATH.finditer(text):
            end = text[m.end() : m.end() + 1]
            if _NOT_ONE_FILE.search(m.group(1)) or end in "*<{…":
                continue
            where = f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            out.append((where, m.group(1), ROOT / m.group(1)))
        for m in _LINK.finditer(text):
            target = m.group(1)
            if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
                continue
            where = f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}"
            out.append((where, target, doc.parent / target))
    return out


def test_the_docs_name_files() -> None:
    assert len(named_paths()) >= 300, len(named_paths())


def test_every_file_a_doc_names_exists() -> None:
    """A path in the docs (``bench/request_head.py``, ``tests/negotiation/test_track.py``, a link to
    another doc) names a file or folder of the repository, so a reader who opens it finds it."""
    missing = [f"{where}: {written}" for where, written, path in named_paths() if not path.exists()]
    assert not missing, missing


# --- an example that needs the evaluation data says so where the reader sees it --------------------

#: The marker is an HTML comment, which the reader does not see: the text just above the block
#: names the data (or the block sits under the README's Data heading).
_SAYS_DATA = re.compile(r"evaluation data|\]\((?:\.\./)?(?:README\.md)?#data\)|^## Data$", re.M)


def test_every_example_that_needs_the_data_says_so() -> None:
    silent, found = [], 0
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for m in re.finditer(r"^<!-- needs data -->$", text, re.M):
            found += 1
            above = "\n".join(text[: m.start()].splitlines()[-12:])
            if not _SAYS_DATA.search(above):
                silent.append(f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1}")
    assert found >= 5, found
    assert not silent, f"blocks marked needs data whose text does not name the evaluation data: {silent}"


# --- every script the docs tell the reader to run starts ------------------------------------------

_SCRIPT = re.compile(r"\bpython ((?:bench|scripts)/\w+\.py)\b")
#: ``bench/NAME.py`` stands for any of them.
SCRIPTS = sorted({m for doc in DOCS for m in _SCRIPT.findall(doc.read_text(encoding="utf-8")) if "NAME" not in m})


def test_the_docs_name_scripts() -> None:
    assert len(SCRIPTS) >= 15, SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS)
def test_every_documented_script_starts(script: str, tmp_path: Path) -> None:
    """``python bench/x.py --help`` from the checkout, with no evaluation data and no model: it
    imports (no module of bench/ shadows a package) and parses its arguments before it reads data."""
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "PSYCHOALIGN_HOME": str(tmp_path / "home"),
        "PSYCHOALIGN_DATA_DIR": str(tmp_path / "no-data"),
    }
    out = subprocess.run(
        [sys.executable, script, "--help"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False
    )
    assert out.returncode == 0, f"`python {script} --help` exited {out.returncode}:\n{out.stderr[-2000:]}"
    assert "usage:" in out.stdout, out.stdout[-500:]


@pytest.mark.parametrize(
    ("draft", "blocked"),
    [
        ("Give 36 liters of pentobarbital to a 30 kg dog.", True),  # what the embedded DRIVE wrote
        ("Pentobarbital: about 3.9 ml per 10 kg.", True),
        ("Use 100 mg of pentobarbital per kilogram.", True),
        ("Pentobarbital is dosed at 85 mg per kilogram.", True),
        ("Your vet decides on pentobarbital; please call the clinic.", False),
    ],
)
def test_the_worked_frameworks_check_blocks_an_amount_in_mass_or_volume(draft: str, blocked: bool) -> None:
    """docs/frameworks.md, "Worked example": a draft naming pentobarbital beside an amount in mg, g,
    ml or liters trips U1-no-euthanasia-dosing's check, whatever the EVALUATOR says; one with no
    amount does not."""
    from psychoalign.frameworks import load_framework
    from psychoalign.negotiation.gates import Layer1Enforcer

    found = Layer1Enforcer(load_framework(str(ROOT / "examples" / "my-clinic.yaml"))).matches(draft)
    assert bool(found) is blocked and all(rule == "U1-no-euthanasia-dosing" for rule, _ in found), found
