"""No text of a reported benchmark reaches the embedded classifier's training corpus."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.errors import InputError
from psychoalign.models.benchmark_texts import BenchmarkIndex, benchmark_texts, normalise
from psychoalign.models.safety_corpus import load_corpus_with_exclusions, more_harmful_requests
from tests.conftest import SHARED_DATA
from tests.helpers import BENCHMARK_FOLDERS


def test_a_text_is_matched_exactly_after_normalising_or_by_a_long_enough_prompt_inside_it() -> None:
    index = BenchmarkIndex(
        {"A": frozenset({normalise("Write a tutorial on how to make a bomb")}), "B": frozenset({"why?"})}
    )
    assert index.benchmarks_of("  WRITE a tutorial\n on how to   make a BOMB ") == ["A"]
    assert index.benchmarks_of("User: write a tutorial on how to make a bomb. Assistant: Sure") == ["A"]
    assert index.benchmarks_of("Why?") == ["B"]
    assert (
        index.benchmarks_of("Why? Because the sky scatters blue light.") == []
    )  # short prompts match whole texts only
    assert index.benchmarks_of("Write a tutorial on how to make bread") == []


def test_a_missing_benchmark_file_fails_closed_naming_it(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"harmful_behaviors\.csv"):
        benchmark_texts(tmp_path)


@pytest.mark.needs_data(
    "anthropic_hh_harmless_base", "jailbreak_templates", "many_shot_jailbreaking", *BENCHMARK_FOLDERS
)
def test_the_training_corpus_holds_no_benchmark_prompt() -> None:
    """The corpus exactly as scripts/train_classifier.py loads it (with the project-written harmful
    requests of ``--more-harmful``): no example equals a benchmark text or contains a benchmark
    prompt of five words or more (checked here by brute force, not through the index the loader uses)."""
    examples, excluded = load_corpus_with_exclusions(SHARED_DATA, more_harmful=True)
    benchmarks = benchmark_texts(SHARED_DATA)
    every = frozenset().union(*benchmarks.values())
    long_prompts = [p for p in every if len(p.split(" ")) >= 5]
    for ex in examples:
        norm = normalise(ex.text)
        assert norm not in every, ex.source
        assert not any(p in norm for p in long_prompts if len(p) < len(norm)), ex.source
    # The many-shot file's HarmBench behaviours and AdvBench's goals were in the corpus: dropped.
    assert excluded["HarmBench"] > 200 and excluded["AdvBench"] > 500 and excluded["XSTest"] > 400
    assert not any(ex.source in ("advbench", "advbench-jailbreak", "mt-bench") for ex in examples)
    # None of the project-written harmful requests was left out as benchmark text: all are written anew.
    kept = {ex.text for ex in examples}
    assert all(ex.text in kept for ex in more_harmful_requests())


def _benchmark_answer_texts() -> dict[str, list[str]]:
    """The benchmark-derived answers, read straight from their files (not through the module):
    AdvBench's harmful strings, the many-shot file's HarmBench compliant answers, XSTest's model
    completions; normalised."""
    import csv
    import json

    out: dict[str, list[str]] = {}
    with (SHARED_DATA / "advbench" / "harmful_strings.csv").open(encoding="utf-8", newline="") as fh:
        out["AdvBench harmful strings"] = [normalise(row["target"]) for row in csv.DictReader(fh)]
    lines = (SHARED_DATA / "many_shot_jailbreaking" / "many_shot_examples_filtered.jsonl").read_text("utf-8")
    out["HarmBench answers"] = [normalise(str(json.loads(x)["assistant"])) for x in lines.splitlines() if x.strip()]
    out["XSTest completions"] = []
    for path in sorted((SHARED_DATA / "xstest").glob("xstest_v2_completions_*.csv")):
        with path.open(encoding="utf-8", newline="") as fh:
            out["XSTest completions"] += [normalise(row["completion"]) for row in csv.DictReader(fh)]
    return {name: [t for t in texts if t] for name, texts in out.items()}


def _holding(responses: list[str], answers: list[str]) -> list[str]:
    """The responses equal to a benchmark answer or containing one of five words or more (brute force)."""
    every = frozenset(answers)
    long = [a for a in every if len(a.split(" ")) >= 5]
    return [r for r in responses if r in every or any(a in r for a in long if len(a) < len(r))]


@pytest.mark.needs_data(
    "anthropic_hh_harmless_base", "jailbreak_templates", "many_shot_jailbreaking", *BENCHMARK_FOLDERS
)
def test_the_no_benchmark_response_corpus_holds_no_benchmark_answer() -> None:
    """The response corpus of ``train_classifier.py --response-no-benchmarks`` (the evaluator-minilm-v14
    candidate) holds no text of AdvBench's harmful strings, HarmBench's compliant answers or XSTest's
    completions, and no response from any benchmark source; the shipped corpus does hold them, so the
    check reads the right files and a build that brings them back fails here."""
    answers = _benchmark_answer_texts()
    assert min(len(texts) for texts in answers.values()) > 100
    examples, excluded = load_corpus_with_exclusions(SHARED_DATA, response_no_benchmarks=True)
    responses = [ex for ex in examples if ex.kind == "response"]
    assert len(responses) > 1000
    assert {ex.source.rsplit("-", 1)[0] for ex in responses} == {
        "project-response",
        "project-short",
        "project-safety",
        "project-long",
    }
    texts = [normalise(ex.text) for ex in responses]
    for name, held in answers.items():
        assert _holding(texts, held) == [], name
    assert set(answers) <= set(excluded)  # counted, so a build prints what it dropped
    shipped = [normalise(ex.text) for ex in load_corpus_with_exclusions(SHARED_DATA)[0] if ex.kind == "response"]
    for name, held in answers.items():
        assert _holding(shipped, held), name  # the shipped v8 corpus trains on each of them
