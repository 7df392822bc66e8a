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
