"""The frozen response-head candidate ``bench/candidates/evaluator-minilm-v12.json`` (not shipped) and its
data: the response head refitted with the project-written safety answers
(``classifier_data/project_safety_answers.yaml``, read only with ``train_classifier.py --safety-answers``),
its threshold by the ``keep-blocked`` rule; the request and adversarial heads are v8's (the base it was
refitted from, ``bench/candidates/evaluator-minilm-v8.json``). The
safety answers are on both sides, distinct, and fresh: none repeats a text of any file under bench/data
(the bench's rule, ``bench.request_head.repeats``), the outcome probes' drafts above all, which stay
development data. The shipped corpus does not read them."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bench.request_head import repeats

from psychoalign.models.classifier import load_weights
from psychoalign.models.safety_corpus import _package_file, _safety_answers
from tests.conftest import SHARED_DATA
from tests.helpers import V8_WEIGHTS
from tests.models.test_short_answers import BENCH_DATA, held_texts

CANDIDATE = Path(__file__).parents[2] / "bench" / "candidates" / "evaluator-minilm-v12.json"
#: Bench files written after the candidate and its safety answers were frozen; no figure of the
#: candidate is read on them (round 10's wrong burn draft shares its first half with a safety answer).
WRITTEN_AFTER = ("outcome_probes10.yaml",)


def _answers() -> dict[str, list[str]]:
    data = yaml.safe_load(_package_file("project_safety_answers.yaml").read_text(encoding="utf-8"))
    return {side: [str(t) for items in data[side].values() for t in items] for side in ("acceptable", "unacceptable")}


def test_the_safety_answers_are_on_both_sides_and_distinct() -> None:
    sides = _answers()
    assert len(sides["acceptable"]) >= 150 and len(sides["unacceptable"]) >= 100
    every = [t for texts in sides.values() for t in texts]
    assert len({" ".join(t.casefold().split()) for t in every}) == len(every)
    loaded = list(_safety_answers())
    assert len(loaded) == len(every) and {ex.kind for ex in loaded} == {"response"}
    assert sum(ex.acceptable for ex in loaded) == len(sides["acceptable"])


def test_no_safety_answer_repeats_a_text_of_any_bench_file() -> None:
    held = [t for path in sorted(BENCH_DATA.glob("*.yaml")) if path.name not in WRITTEN_AFTER for t in held_texts(path)]
    assert len(held) > 500
    assert repeats([t for texts in _answers().values() for t in texts], held) == set()


def test_the_candidate_refits_only_the_response_head_with_the_safety_answers() -> None:
    v8, candidate = load_weights(str(V8_WEIGHTS)), load_weights(str(CANDIDATE))
    assert candidate.label.startswith("evaluator-minilm-v12@") and v8.label.startswith("evaluator-minilm-v8@")
    assert candidate.dim == v8.dim and candidate.encoder == v8.encoder
    assert candidate.request.model_dump() == v8.request.model_dump()
    assert candidate.adversarial.model_dump() == v8.adversarial.model_dump()
    assert candidate.response.model_dump() != v8.response.model_dump()
    fit = candidate.training["fit"]
    assert fit["request"]["kept_from"] == v8.label and fit["adversarial"]["kept_from"] == v8.label
    assert fit["response"]["threshold_rule"] == "keep-blocked"
    counts = candidate.training["counts"]
    n = {side: sum(counts[f"response:project-safety-{side}"].values()) for side in ("acceptable", "unacceptable")}
    assert n == {side: len(texts) for side, texts in _answers().items()}
    assert not any("project-safety" in key for key in v8.training["counts"])


@pytest.mark.needs_data
def test_no_safety_answer_is_left_out_as_benchmark_text() -> None:
    from psychoalign.models.safety_corpus import load_corpus

    kept = [ex for ex in load_corpus(SHARED_DATA, safety_answers=True) if ex.source.startswith("project-safety-")]
    assert len(kept) == sum(len(texts) for texts in _answers().values())
