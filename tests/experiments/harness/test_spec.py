"""Experiment specs: presets load, and every error names the file, the line and the field."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.errors import ConfigError
from psychoalign.experiments import load_spec
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.spec import spec_from_text
from tests.experiments.helpers import run, settings, spec


def test_presets_load_and_validate() -> None:
    t3 = load_spec("paper-table3")
    assert len(t3.systems) == 7 and {b.name for b in t3.benchmarks} >= {"hhh", "advbench", "mt-bench", "realtoxicity"}
    assert t3.n == 50 and t3.with_overrides(n=3).n == 3
    t5 = load_spec("paper-table5")
    assert t5.layout == "table5" and {s.name for s in t5.systems} == {
        "psychoalign",
        "no-drive",
        "no-evaluator",
        "no-mediator",
        "single-pass",
    }
    assert t3.run_id() != t3.with_overrides(n=3).run_id()


def test_spec_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = "name: x\nsystems: [vanilla]\nbenchmarks: [hhh]\nn: -1\n"
    with pytest.raises(ConfigError, match=r"spec.yaml:4: n: "):
        spec_from_text(bad, "spec.yaml")
    with pytest.raises(ConfigError, match=r"spec.yaml:\d+:\d+: invalid YAML"):
        spec_from_text("name: x\nsystems: [vanilla\n", "spec.yaml")
    toml = 'name = "x"\nsystems = ["vanilla"]\nbenchmarks = ["hhh"]\nconcurrency = 0\n'
    with pytest.raises(ConfigError, match=r"s.toml:4: concurrency"):
        spec_from_text(toml, "s.toml", toml=True)
    with pytest.raises(ConfigError, match="no spec file or preset named 'nope'"):
        load_spec("nope")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "name: a\nsytems: [vanilla]\nbenchmarks: [hhh]\n",
            r"s\.yaml:2: sytems: unknown key \(did you mean 'systems'\?\)",
        ),
        (
            "name: a\nsystems:\n  - vanilla\n  - vanila\nbenchmarks: [hhh]\n",
            r"s\.yaml:4: systems\.1: unknown system 'vanila'",
        ),
        (
            "name: a\nsystems: [vanilla]\nbenchmarks:\n  - hhh\n  - mmlu\n",
            r"s\.yaml:5: benchmarks\.1: unknown benchmark 'mmlu'",
        ),
        (
            "name: a\nsystems:\n  - {name: d, kind: debate, options: {agent: 5}}\nbenchmarks: [hhh]\n",
            r"s\.yaml:3: systems\.0: system 'd': unknown option\(s\) agent for kind 'debate'",
        ),
        (
            "name: a\nsystems:\n  - {name: d, kind: debate, options: {agents: 9}}\nbenchmarks: [hhh]\n",
            r"s\.yaml:3: systems\.0: system 'd': option agents=9 is invalid",
        ),
        (
            "name: a\nsystems:\n  - vanilla\n  - {name: p, kind: psychoalign, negotiation: {tua: 0.8}}\n"
            "benchmarks: [hhh]\n",
            r"s\.yaml:4: systems\.1: system 'p': negotiation\.tua: unknown parameter",
        ),
        (
            "name: a\nsystems: [vanilla]\nbenchmarks:\n  - {name: hhh, options: {foo: 1}}\n",
            r"s\.yaml:4: benchmarks\.0: .*unknown option\(s\) foo",
        ),
        (
            "name: a\nsystems: [vanilla]\nbenchmarks: [hhh]\njudge: {refusl: rules}\n",
            r"s\.yaml:4: judge\.refusl: unknown key \(did you mean 'refusal'\?\)",
        ),
        (
            "name: a\nsystems: [vanilla]\nbaseline: vanila\nbenchmarks: [hhh]\n",
            r"s\.yaml:3: baseline: 'vanila' is not one of",
        ),
        ("name: a\nsystems: [vanilla]\nbenchmarks: [hhh]\nn: many\n", r"s\.yaml:4: n: Input should be a valid integer"),
        # a negative seed passed here and failed the report after every cell had run (numpy's
        # generators take seeds >= 0): "internal error (ValueError)"
        ("name: a\nsystems: [vanilla]\nbenchmarks: [hhh]\nseed: -1\n", r"s\.yaml:4: seed: .*greater than or equal to"),
    ],
)
def test_spec_typos_name_file_line_and_field(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=error):
        load_spec(path, registry=Registry(), settings=settings(tmp_path))
    toml = tmp_path / "s.toml"
    toml.write_text('name = "a"\nsystems = ["vanilla", "vanila"]\nbenchmarks = ["hhh"]\n')
    with pytest.raises(ConfigError, match=r"s\.toml:2: systems\.1: unknown system 'vanila'"):
        load_spec(toml, registry=Registry(), settings=settings(tmp_path))


async def test_unknown_system_and_benchmark_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown system 'telepathy'.*known systems"):
        await run(tmp_path, spec(["telepathy"], ["hhh"], 1), {})
    with pytest.raises(ConfigError, match="unknown benchmark 'mmlu'"):
        await run(tmp_path, spec(["vanilla"], ["mmlu"], 1), {})


def test_a_bad_calibration_file_is_refused_before_anything_runs(tmp_path: Path) -> None:
    """The judge's labels file was read only after every cell had run (and been paid for): a
    copied row, a wrong label or a missing file now stops `run`, `run --dry-run` and `show`."""
    labels = tmp_path / "labels.jsonl"
    row = '{"prompt": "p", "response": "I cannot help.", "refused": true}\n'
    labels.write_text(row + '{"prompt": "q", "response": "Sure: 42.", "refused": false}\n' + row)
    path = tmp_path / "s.yaml"
    path.write_text(f"name: a\nsystems: [vanilla]\nbenchmarks: [advbench]\njudge:\n  labels: {{refusal: {labels}}}\n")
    with pytest.raises(ConfigError, match=r"s\.yaml:5: judge\.labels\.refusal: .*labels\.jsonl:3: the same prompt"):
        load_spec(path, registry=Registry(), settings=settings(tmp_path))
    labels.unlink()
    with pytest.raises(ConfigError, match=r"s\.yaml:5: judge\.labels\.refusal: cannot read"):
        load_spec(path, registry=Registry(), settings=settings(tmp_path))


def test_a_run_id_given_for_a_spec_says_which_commands_take_one(tmp_path: Path) -> None:
    """`experiment show paper-table3-0123456789ab` (a run id where a spec goes) said only "no spec
    file or preset named …": the hint now names the commands that take a run id."""
    for run_id in ("paper-table3-0123456789ab", "t-0123456789ab-89abcdef"):
        with pytest.raises(ConfigError) as err:
            load_spec(run_id)
        assert err.value.message == f"no spec file or preset named '{run_id}'"
        assert err.value.hint is not None and f"psychoalign experiment report {run_id}" in err.value.hint
    with pytest.raises(ConfigError) as err:
        load_spec("nope")
    assert err.value.hint is not None and "experiment report" not in err.value.hint


KINDS_SPEC = """name: kinds
systems:
  - psychoalign
  - name: plain
    kind: vanilla
benchmarks:
  - advbench
"""


def test_a_system_without_a_kind_shows_its_name_as_kind_and_keeps_its_run_id() -> None:
    """A system given by name alone (``- psychoalign``, as four of the five presets write them)
    was shown and stored as ``kind: ''``; its kind is its name, filled in when the spec is read.
    The run id is the one such a spec had (``kinds-323fd0ca01cb`` before the change), and the
    same system with its kind written out is the same run, not a second one."""
    bare = spec_from_text(KINDS_SPEC, "kinds.yaml")
    assert [(s.name, s.kind) for s in bare.systems] == [("psychoalign", "psychoalign"), ("plain", "vanilla")]
    assert [s["kind"] for s in bare.model_dump(mode="json")["systems"]] == ["psychoalign", "vanilla"]
    assert bare.run_id() == "kinds-323fd0ca01cb"
    explicit = spec_from_text(
        KINDS_SPEC.replace("  - psychoalign\n", "  - {name: psychoalign, kind: psychoalign}\n"), "k"
    )
    assert explicit.run_id() == bare.run_id()
    assert spec_from_text(KINDS_SPEC.replace("kind: vanilla", "kind: ''"), "k").systems[1].kind == "plain"
    # a run stored by older code (kind '' in its spec, or the kind written out) resumes under its id
    stored = bare.model_dump(mode="json")
    stored["systems"][0]["kind"] = ""
    assert bare.same_numbers(stored) and explicit.same_numbers(bare.model_dump(mode="json"))
    other = spec_from_text(KINDS_SPEC.replace("  - psychoalign\n", "  - {name: psychoalign, kind: vanilla}\n"), "k")
    assert other.run_id() != bare.run_id()  # another kind under the same name: another run


@pytest.mark.parametrize("preset", ["cross-turn", "literature", "paper-table3", "paper-table4", "paper-table5"])
def test_every_preset_system_names_its_kind(preset: str) -> None:
    assert all(s.kind for s in load_spec(preset).systems)
