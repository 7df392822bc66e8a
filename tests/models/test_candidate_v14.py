"""The frozen response-head candidate ``bench/candidates/evaluator-minilm-v14.json`` (not shipped) and its
data: the response head trained and thresholded on no benchmark-derived text (``train_classifier.py
--only response --response-no-benchmarks``: project-written responses, short answers, safety answers
and long responses; no AdvBench harmful strings, HarmBench answers or XSTest completions), its threshold
balanced on the validation responses; the request and adversarial heads are the shipped ones. The long
responses (``classifier_data/project_long_responses.yaml``) are on both sides, distinct, the harmful ones
non-operational (placeholders), and fresh: none repeats a text of a bench file written before the
candidate was frozen. The shipped corpus does not read them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from bench.request_head import repeats

from psychoalign.models.classifier import load_weights
from psychoalign.models.safety_corpus import BENCHMARK_RESPONSE_SOURCES, _long_responses, _package_file
from tests.conftest import SHARED_DATA
from tests.models.test_short_answers import BENCH_DATA, held_texts

CANDIDATE = Path(__file__).parents[2] / "bench" / "candidates" / "evaluator-minilm-v14.json"
#: Bench files written after the candidate was frozen; no figure of the candidate was chosen on them.
WRITTEN_AFTER = ("answers_heldout_v2.yaml",)
#: A placeholder standing for a quantity, ingredient, tool, target or step the answer withholds.
PLACEHOLDER = re.compile(r"\[[A-Z0-9][A-Z0-9 /'&-]*\]")
#: Harmful answers with nothing to withhold (the harm is the advice itself: coercive control).
WITHOUT_PLACEHOLDER = ("Sure. To keep your girlfriend from seeing her friends,",)


def _answers() -> dict[str, list[str]]:
    data = yaml.safe_load(_package_file("project_long_responses.yaml").read_text(encoding="utf-8"))
    return {side: [str(t) for items in data[side].values() for t in items] for side in ("acceptable", "unacceptable")}


def test_the_long_responses_are_on_both_sides_distinct_and_the_harmful_ones_withhold_their_substance() -> None:
    sides = _answers()
    assert len(sides["acceptable"]) >= 140 and len(sides["unacceptable"]) >= 140
    every = [t for texts in sides.values() for t in texts]
    assert len({" ".join(t.casefold().split()) for t in every}) == len(every)
    bare = [t for t in sides["unacceptable"] if not PLACEHOLDER.search(t)]
    assert [t for t in bare if not t.startswith(WITHOUT_PLACEHOLDER)] == [] and len(bare) == len(WITHOUT_PLACEHOLDER)
    assert [t for t in sides["acceptable"] if PLACEHOLDER.search(t)] == []
    loaded = list(_long_responses())
    assert len(loaded) == len(every) and {ex.kind for ex in loaded} == {"response"}
    assert sum(ex.acceptable for ex in loaded) == len(sides["acceptable"])


def test_no_long_response_repeats_a_text_of_a_bench_file() -> None:
    held = [t for path in sorted(BENCH_DATA.glob("*.yaml")) if path.name not in WRITTEN_AFTER for t in held_texts(path)]
    assert len(held) > 500
    assert repeats([t for texts in _answers().values() for t in texts], held) == set()


def test_the_candidate_refits_only_the_response_head_with_no_benchmark_response() -> None:
    shipped, candidate = load_weights(), load_weights(str(CANDIDATE))
    assert candidate.label.startswith("evaluator-minilm-v14@") and shipped.label.startswith("evaluator-minilm-v8@")
    assert candidate.dim == shipped.dim and candidate.encoder == shipped.encoder
    assert candidate.request.model_dump() == shipped.request.model_dump()
    assert candidate.adversarial.model_dump() == shipped.adversarial.model_dump()
    assert candidate.response.model_dump() != shipped.response.model_dump()
    fit = candidate.training["fit"]
    assert fit["request"]["kept_from"] == shipped.label and fit["adversarial"]["kept_from"] == shipped.label
    assert fit["response"]["threshold_rule"] == "balanced"
    counts = candidate.training["counts"]
    sources = {key.removeprefix("response:") for key in counts if key.startswith("response:")}
    assert not [s for s in sources if s.startswith(BENCHMARK_RESPONSE_SOURCES)]
    # The shipped head trained on each benchmark answer source; the candidate on none.
    shipped_sources = {
        key.removeprefix("response:") for key in shipped.training["counts"] if key.startswith("response:")
    }
    assert {"advbench-strings", "harmbench", "xstest-completion-unsafe"} <= shipped_sources
    n = {side: sum(counts[f"response:project-long-{side}"].values()) for side in ("acceptable", "unacceptable")}
    assert n == {side: len(texts) for side, texts in _answers().items()}
    assert {"AdvBench harmful strings", "HarmBench answers", "XSTest completions"} <= set(
        candidate.training["benchmark_texts_excluded"]
    )
    assert not any("project-long" in key for key in shipped.training["counts"])


@pytest.mark.needs_data
def test_no_long_response_is_left_out_as_benchmark_text() -> None:
    from psychoalign.models.safety_corpus import load_corpus

    kept = [ex for ex in load_corpus(SHARED_DATA, response_no_benchmarks=True) if ex.source.startswith("project-long-")]
    assert len(kept) == sum(len(texts) for texts in _answers().values())
