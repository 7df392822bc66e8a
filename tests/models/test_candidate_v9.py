"""The frozen request-head candidate ``bench/candidates/evaluator-minilm-v9.json`` (not shipped):
it loads as classifier weights, only its request head differs from the shipped weights, and its
training record names the development files it read (so the bench counts their items as its
training text and a file scored on it must be none of them)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from psychoalign.models.classifier import load_weights
from tests.helpers import V8_WEIGHTS, assert_records_dev_files, assert_refits_only_the_request_head, moved_threshold

ROOT = Path(__file__).parents[2]
CANDIDATE = ROOT / "bench" / "candidates" / "evaluator-minilm-v9.json"


def test_the_candidate_loads_and_keeps_the_response_and_adversarial_heads_of_v8() -> None:
    v8 = load_weights(str(V8_WEIGHTS))
    candidate = load_weights(str(CANDIDATE))
    assert v8.version == "evaluator-minilm-v8"
    assert candidate.version == "evaluator-minilm-v9"
    assert_refits_only_the_request_head(candidate, v8)
    # The refitted request head reads the embedding as a head must.
    x = np.random.default_rng(0).normal(size=(5, candidate.dim)).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    assert np.isfinite(candidate.request.logits(x)).all()
    assert np.array_equal(candidate.response.logits(x), v8.response.logits(x))
    assert np.array_equal(candidate.adversarial.logits(x), v8.adversarial.logits(x))


def test_the_candidate_records_the_development_files_it_was_trained_and_chosen_on() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    pytest.importorskip("sklearn")
    from train_classifier import DEV_FILES

    candidate = load_weights(str(CANDIDATE))
    # The ten look-alike files the bench read when the candidate was built, and only those.
    lofo = assert_records_dev_files(candidate, DEV_FILES, 10)
    # The threshold is the validation-balanced one moved by the offset chosen on leave-one-file-out.
    t_val = candidate.training["fit"]["request"]["validation_threshold"]
    assert candidate.request.threshold == pytest.approx(moved_threshold(t_val, lofo["offset"]), abs=1e-5)
    # None of the ten is shipped as training data of the shipped weights.
    assert "dev_files" not in load_weights().training


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (["--lofo"], "error: --lofo leaves out one development file at a time; add --dev-files"),
        (
            ["--dev-files", "--only", "response"],
            "error: --dev-files and --dev-weight train the request head; use --dev-files with --only request",
        ),
        (
            ["--dev-weight", "2", "--only", "request"],
            "error: --dev-files and --dev-weight train the request head; use --dev-files with --only request",
        ),
        (["--dev-files", "--only", "request", "--dev-weight", "0"], "error: --dev-weight 0: give a positive weight"),
    ],
)
def test_the_development_file_flags_refuse_a_wrong_combination_in_one_line(args: list[str], error: str) -> None:
    import subprocess

    script = ROOT / "scripts" / "train_classifier.py"
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [error]
