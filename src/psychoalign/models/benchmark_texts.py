"""The texts of the benchmarks the experiment suites report, for keeping them out of training.

The embedded classifier is trained, calibrated and thresholded only on texts that no reported
benchmark contains, so a benchmark figure measured with it is out of sample. A training text is
dropped when, after normalising (casefold, whitespace folded), it equals a benchmark text, or it
contains a benchmark prompt of at least :data:`MIN_SUBSTRING_WORDS` words (a many-shot or
jailbreak-wrapped form of a benchmark behaviour). The files are those the benchmark suites in
``experiments/suites/benchmarks`` read from the data directory; the list is written out here
because the model layer does not import the experiments layer.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import InputError
from ..textio import read_text

#: A benchmark prompt this long or longer also excludes every training text that contains it.
MIN_SUBSTRING_WORDS = 5


def normalise(text: str) -> str:
    """Casefolded, whitespace folded to single spaces, stripped."""
    return " ".join(text.casefold().split())


def _read(path: Path) -> str:
    if not path.is_file():
        raise InputError(
            f"benchmark file {path} is missing, so benchmark texts cannot be kept out of training",
            hint="get the data with `psychoalign data fetch all --from URL` or set PSYCHOALIGN_DATA_DIR",
        )
    return read_text(path, what="benchmark file")


def _csv_column(path: Path, *columns: str) -> Iterator[str]:
    with io.StringIO(_read(path), newline="") as fh:
        for row in csv.DictReader(fh):
            for column in columns:
                yield row.get(column) or ""


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    for line in _read(path).split("\n"):
        if line.strip():
            yield json.loads(line)


def _hhh(data: Path) -> Iterator[str]:
    for part in ("harmless", "helpful", "honest", "other"):
        for ex in json.loads(_read(data / "hhh_alignment" / f"{part}.task.json"))["examples"]:
            yield str(ex["input"])
            yield from (str(answer) for answer in ex["target_scores"])


def _mt_bench(data: Path) -> Iterator[str]:
    for row in _jsonl(data / "mt_bench" / "question.jsonl"):
        yield from (str(turn) for turn in row["turns"])
    for row in _jsonl(data / "mt_bench" / "reference_answer_gpt-4.jsonl"):
        yield from (str(turn) for turn in row["choices"][0]["turns"])


def _realtoxicity(data: Path) -> Iterator[str]:
    for path in sorted((data / "realtoxicityprompts").glob("rtp_*.txt")):
        yield from _read(path).splitlines()


def benchmark_texts(data: Path) -> dict[str, frozenset[str]]:
    """Normalised texts of each reported benchmark: its prompts and the answers its items carry
    (HHH's candidate answers, MT-Bench's references, AdvBench's and JBB's targets).
    Raises :class:`InputError` naming the file when one is missing (fail closed)."""
    sources: dict[str, Iterator[str]] = {
        "AdvBench": _csv_column(data / "advbench" / "harmful_behaviors.csv", "goal", "target"),
        "HarmBench": _csv_column(data / "harmbench" / "harmbench_behaviors_text_all.csv", "Behavior"),
        "StrongREJECT": (
            text
            for name in ("strongreject_dataset.csv", "strongreject_small_dataset.csv")
            for text in _csv_column(data / "strongreject" / name, "forbidden_prompt")
        ),
        "JailbreakBench": _csv_column(data / "jailbreakbench" / "behaviors.csv", "Goal", "Target"),
        "XSTest": _csv_column(data / "xstest" / "xstest_prompts.csv", "prompt"),
        "MT-Bench": _mt_bench(data),
        "HHH": _hhh(data),
        "RealToxicityPrompts": _realtoxicity(data),
    }
    return {name: frozenset(t for t in map(normalise, texts) if t) for name, texts in sources.items()}


#: The benchmark-derived *answers* the shipped response head was trained on (AdvBench's harmful
#: strings, the many-shot file's HarmBench compliant answers, XSTest's model completions). They are
#: not in :func:`benchmark_texts` (so the shipped build stays reproducible); a build that trains its
#: response head with no benchmark text (``scripts/train_classifier.py --response-no-benchmarks``)
#: reads none of these files as training text and drops any response that repeats one of them.
BENCHMARK_ANSWER_FILES = {
    "AdvBench harmful strings": ("advbench/harmful_strings.csv",),
    "HarmBench answers": ("many_shot_jailbreaking/many_shot_examples_filtered.jsonl",),
    "XSTest completions": (
        "xstest/xstest_v2_completions_mistralinstruct.csv",
        "xstest/xstest_v2_completions_llama2orig.csv",
    ),
}


def benchmark_answers(data: Path) -> dict[str, frozenset[str]]:
    """Normalised answer texts of the benchmark-derived response sources
    (:data:`BENCHMARK_ANSWER_FILES`). Raises :class:`InputError` naming the file when one is
    missing (fail closed)."""
    out: dict[str, frozenset[str]] = {}
    for name, files in BENCHMARK_ANSWER_FILES.items():
        texts: list[str] = []
        for rel in files:
            path = data / rel
            if path.suffix == ".jsonl":
                texts += [str(row.get("assistant", "")) for row in _jsonl(path)]
            else:
                texts += list(_csv_column(path, "target" if "advbench" in rel else "completion"))
        out[name] = frozenset(t for t in map(normalise, texts) if t)
    return out


class BenchmarkIndex:
    """Every reported benchmark's normalised texts, indexed for the exact and substring checks."""

    def __init__(self, benchmarks: dict[str, frozenset[str]]) -> None:
        self.benchmarks = benchmarks
        # A prompt inside a text has its inner words as whole words of the text: index by the
        # second word so each text is compared with a few prompts, not with all of them.
        self._by_word: dict[str, list[tuple[str, str]]] = {}
        for name, texts in benchmarks.items():
            for prompt in sorted(texts):
                words = prompt.split(" ")
                if len(words) >= MIN_SUBSTRING_WORDS:
                    self._by_word.setdefault(words[1], []).append((name, prompt))

    def benchmarks_of(self, text: str) -> list[str]:
        """Every benchmark (in order) holding ``text`` or a long-enough prompt inside it; empty
        when the text is clean."""
        norm = normalise(text)
        hits = {name for name, texts in self.benchmarks.items() if norm in texts}
        hits.update(
            name
            for word in set(norm.split(" "))
            for name, prompt in self._by_word.get(word, ())
            if len(prompt) < len(norm) and prompt in norm
        )
        return [name for name in self.benchmarks if name in hits]
