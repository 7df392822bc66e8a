"""One strict YAML loader: duplicate keys and tags are refused everywhere YAML is read."""

from __future__ import annotations

import re
from importlib import resources
from pathlib import Path

import pytest

from psychoalign.config import load_settings
from psychoalign.errors import ConfigError, InputError, PsychoAlignError
from psychoalign.experiments.harness.spec import load_spec, spec_from_text
from psychoalign.experiments.studies.boundary.corpus import load_corpus
from psychoalign.experiments.studies.defense_accuracy import load_items
from psychoalign.frameworks import load_framework
from psychoalign.models import ModelSpec, build_model
from psychoalign.star import load_parameters, load_policy
from psychoalign.star.analysis.data import load_mapping
from psychoalign.yamlio import MAX_YAML_CHARS, parse_yaml
from tests.cli.test_main import cli

# Two `universal:` blocks: safe_load kept only the second, silently dropping rule U1.
DUPLICATE_FRAMEWORK = """\
name: dup
version: '1.0'
description: two universal blocks
universal:
  - id: U1
    text: Never help with weapons of mass harm.
universal:
  - id: U2
    text: Never help with self-harm.
"""


def _one_line(message: str) -> str:
    assert "\n" not in message and "Traceback" not in message, message
    return message


@pytest.mark.parametrize(
    ("text", "line", "column", "key", "first"),
    [
        ("tau: 0.6\nk: 3\ntau: 0.1\n", 3, 1, "'tau'", 1),
        ("negotiation:\n  tau: 0.6\n  tau: 0.1\n", 3, 3, "'tau'", 2),
        ("rules:\n  - id: a\n    text: x\n    id: b\n", 4, 5, "'id'", 2),
        ("{a: 1, b: 2, a: 3}\n", 1, 14, "'a'", 1),
        ("1: one\n1.0: also one\n", 2, 1, "1.0", 1),  # equal keys once loaded
    ],
)
def test_duplicate_keys_are_refused_naming_file_line_column_and_key(
    text: str, line: int, column: int, key: str, first: int
) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "cfg.yaml")
    message = _one_line(str(info.value))
    assert message.startswith(f"cfg.yaml:{line}:{column}: duplicate key {key} (first at line {first})"), message
    assert "remove or merge" in message


def test_plain_yaml_and_merge_keys_keep_their_meaning() -> None:
    data = parse_yaml("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  x: 3\nlist: [1, 2]\n", "f.yaml")
    assert data == {"base": {"x": 1, "y": 2}, "use": {"x": 3, "y": 2}, "list": [1, 2]}
    assert parse_yaml("", "empty.yaml") is None


def test_tags_are_refused_not_constructed() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml("x: !!python/object/apply:os.system ['true']\n", "evil.yaml")
    message = _one_line(str(info.value))
    assert message.startswith("evil.yaml:1:4: invalid YAML") and "remove the tag" in message


def test_syntax_errors_are_one_line_with_line_and_column() -> None:
    with pytest.raises(InputError) as info:
        parse_yaml("a: [1, 2\nb: 3\n", "bad.yaml", error=InputError)
    assert re.match(r"bad\.yaml:\d+:\d+: invalid YAML: ", _one_line(str(info.value)))


def test_every_shipped_yaml_file_loads_strictly() -> None:
    root = Path(str(resources.files("psychoalign")))
    files = sorted([*root.rglob("*.yaml"), *root.rglob("*.yml")])
    assert len(files) >= 30  # frameworks, prompts, data, corpora, STAR builtins, classifier data
    for path in files:
        assert parse_yaml(path.read_text(encoding="utf-8"), str(path)) is not None, path


def test_a_framework_with_two_universal_blocks_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(DUPLICATE_FRAMEWORK)
    with pytest.raises(PsychoAlignError) as info:
        load_framework(path)
    assert _one_line(str(info.value)).startswith(f"{path}:7:1: duplicate key 'universal' (first at line 4)")
    out = cli("frameworks", "validate", str(path))
    assert out.returncode != 0
    assert f"{path}:7:1: duplicate key 'universal'" in out.stderr and "Traceback" not in out.stderr


def test_config_file_duplicates_are_refused_yaml_and_toml(tmp_path: Path) -> None:
    yml = tmp_path / "p.yaml"
    yml.write_text("negotiation:\n  tau: 0.6\nroles:\n  drive: {backend: scripted}\nnegotiation:\n  tau: 0.1\n")
    with pytest.raises(ConfigError) as info:
        load_settings(yml, environ={})
    assert _one_line(str(info.value)).startswith(f"{yml}:5:1: duplicate key 'negotiation' (first at line 1)")
    # tomllib refuses a key defined twice; the error stays one line naming the file and line.
    toml = tmp_path / "p.toml"
    toml.write_text("[negotiation]\ntau = 0.6\ntau = 0.1\n")
    with pytest.raises(ConfigError) as info:
        load_settings(toml, environ={})
    message = _one_line(str(info.value))
    assert message.startswith(f"{toml}:3:10: invalid TOML: Cannot overwrite a value ")
    out = cli("config", "show", "--config", str(toml))
    assert out.returncode == 2 and "invalid TOML" in out.stderr and "Traceback" not in out.stderr
    assert len([ln for ln in out.stderr.splitlines() if ln.strip()]) == 1, out.stderr


def test_each_reader_refuses_duplicates(tmp_path: Path) -> None:
    """Experiment specs, STAR policies and parameter spaces, scripted replies, item sets,
    corpora and rating mappings: all go through the strict loader."""
    dup = "name: x\nname: y\n"
    spec = tmp_path / "spec.yaml"
    spec.write_text(dup)
    script = tmp_path / "script.yaml"
    script.write_text("rules:\n  - {match: a, reply: b}\nrules: []\n")
    mapping = tmp_path / "mapping.yaml"
    mapping.write_text("item_col: id\nitem_col: item\n")
    items = tmp_path / "items.yaml"
    items.write_text("items:\n  - id: a\n    id: b\n")
    corpus = tmp_path / "corpus.yaml"
    corpus.write_text("name: c\nitems: []\nname: d\n")
    readers = [
        (lambda: spec_from_text(dup, str(spec)), f"{spec}:2:1: duplicate key 'name'"),
        (lambda: load_policy(spec), f"{spec}:2:1: duplicate key 'name'"),
        (lambda: load_parameters(spec), f"{spec}:2:1: duplicate key 'name'"),
        (
            lambda: build_model(ModelSpec(backend="scripted", script=str(script))),
            f"{script}:3:1: duplicate key 'rules'",
        ),
        (lambda: load_mapping(mapping), f"{mapping}:2:1: duplicate key 'item_col'"),
        (lambda: load_items(items), f"{items}:3:5: duplicate key 'id'"),
        (lambda: load_corpus(corpus), f"{corpus}:3:1: duplicate key 'name'"),
    ]
    for read, expected in readers:
        with pytest.raises(PsychoAlignError) as info:
            read()
        assert _one_line(str(info.value)).startswith(expected), (expected, str(info.value))


def _alias_bomb(levels: int, merge: bool = False) -> str:
    """Nine aliases of nine aliases of ...: 9**levels values once expanded (merge keys: mappings)."""
    if merge:
        lines = ["l0: &l0 {a: lol, b: lol, c: lol, d: lol, e: lol, f: lol, g: lol, h: lol, i: lol}"]
        lines += [f"l{n}: &l{n} {{<<: [{', '.join([f'*l{n - 1}'] * 9)}]}}" for n in range(1, levels)]
    else:
        lines = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
        lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("merge", [False, True])
def test_an_alias_bomb_is_refused_before_it_is_built(merge: bool) -> None:
    # 9**9 values expanded: validating, dumping or reporting the loaded data would take gigabytes.
    # Nine levels with merge keys would blow up inside PyYAML itself (it copies merged keys).
    text = _alias_bomb(6 if merge else 9, merge)
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "bomb.yaml")
    message = _one_line(str(info.value))
    assert re.match(r"bomb\.yaml:\d+:\d+: aliases expand the value here to more than 100,000 values", message)
    assert "refer to an anchor (*name) fewer times" in message


def test_aliases_that_add_a_bounded_amount_still_load() -> None:
    text = _alias_bomb(5)  # 9**5 = 59,049 values once expanded: under the bound
    data = parse_yaml(text, "ok.yaml")
    assert len(data["l4"]) == 9 and data["l4"][0][0][0][0] == ["lol"] * 9


def test_a_recursive_alias_is_refused() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml("a: &a [1, *a]\n", "rec.yaml")
    assert _one_line(str(info.value)).startswith("rec.yaml:1:4: recursive alias")


def test_an_alias_bomb_in_a_framework_file_is_one_line_at_the_cli(tmp_path: Path) -> None:
    framework = tmp_path / "fw.yaml"
    framework.write_text(_alias_bomb(9) + "name: bomb\nversion: '1'\ndescription: x\nsafe_channels: *l8\n")
    out = cli("frameworks", "validate", str(framework))
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert f"{framework}:" in out.stderr and "alias bomb" in out.stderr


def test_a_tab_and_an_oversized_file_get_their_own_fix() -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml("\ufeffdefaults:\n\tbackend: scripted\n", "tab.yaml")
    assert _one_line(str(info.value)).startswith("tab.yaml:2:1: invalid YAML: a tab") and "spaces" in str(info.value)
    with pytest.raises(ConfigError) as info:
        parse_yaml("# padding\n" * (4 * 1024 * 1024), "big.yaml")
    assert _one_line(str(info.value)).startswith("big.yaml: 40 MB of YAML, more than the 32 MB read")


def test_each_reader_refuses_a_file_that_is_not_utf8(tmp_path: Path) -> None:
    """A Latin-1 file is one line naming the file, the byte and the fix, from every YAML reader
    (the experiment spec and item-set readers crashed with UnicodeDecodeError)."""
    latin = tmp_path / "latin.yaml"
    latin.write_bytes(b"name: caf\xe9\n")
    script = tmp_path / "script.yaml"
    script.write_bytes(b"default: caf\xe9\n")
    readers = [
        lambda: load_settings(latin, environ={}),
        lambda: load_framework(latin),
        lambda: load_policy(latin),
        lambda: load_parameters(latin),
        lambda: load_items(latin),
        lambda: load_corpus(latin),
        lambda: load_mapping(latin),
        lambda: build_model(ModelSpec(backend="scripted", script=str(script))),
    ]
    for read in readers:
        with pytest.raises(PsychoAlignError) as info:
            read()
        message = _one_line(str(info.value))
        assert "latin.yaml" in message or "script.yaml" in message, message
        assert "0xe9" in message or "UTF-8" in message or "utf-8" in message, message
    out = cli("experiment", "show", str(latin))
    assert out.returncode == 2 and "Traceback" not in out.stderr and "internal error" not in out.stderr
    assert f"spec file {latin} is not UTF-8 text (byte 0xe9 at offset 9)" in out.stderr, out.stderr


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # PyYAML's context (what it was reading, and the line where that began) is kept
        (
            "a: 1\n---\nb: 2\n",
            "multi.yaml:2:1: invalid YAML: expected a single document in the stream (begun at line 1), but found",
        ),
        ('a: "unterminated\n', "multi.yaml:2:1: invalid YAML: while scanning a quoted scalar (begun at line 1), "),
        # a control character is named with its line and column (libyaml counts bytes: é is two)
        ("name: é\nd: 'a\x01b'\n", "multi.yaml:2:6: invalid YAML: control character #x0001 is not allowed"),
        ("\x00binary", "multi.yaml:1:1: invalid YAML: control character #x0000 is not allowed"),
    ],
)
def test_syntax_errors_keep_their_context_and_position(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_yaml(text, "multi.yaml")
    message = _one_line(str(info.value))
    assert message.startswith(expected), message
    assert "<unicode string>" not in message


def test_a_file_over_the_bound_is_refused_before_it_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Config, framework, policy, campaign and spec files: their size is checked before reading."""
    from psychoalign import textio

    big = tmp_path / "big.yaml"
    with big.open("wb") as fh:  # sparse: 40 MB on paper, nothing on disk
        fh.truncate(40 * 2**20)
    read: list[Path] = []
    original = Path.read_bytes

    def read_bytes(self: Path) -> bytes:
        read.append(self)
        return original(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    readers = [
        lambda: load_settings(big, environ={}),
        lambda: load_framework(big),
        lambda: load_policy(big),
        lambda: load_spec(str(big)),
    ]
    for load in readers:
        with pytest.raises(PsychoAlignError) as info:
            load()
        assert _one_line(str(info.value)).endswith(f"{big} is 40 MB, more than the 32 MB read (split the file)"), str(
            info.value
        )
    assert big not in read
    small = tmp_path / "small.yaml"
    small.write_text("a: 1\n")
    assert textio.read_text(small, max_bytes=MAX_YAML_CHARS) == "a: 1\n"  # under the bound: read as before
