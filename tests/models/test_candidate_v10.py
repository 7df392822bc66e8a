"""The frozen request-head candidate ``bench/candidates/evaluator-minilm-v10.json`` (not shipped): a
request head refitted on the eleven development look-alike files, its unacceptable rows weighted,
offset and guard chosen by ``train_classifier.py --guard`` (the two-head rule, :attr:`Head.guard`:
the shipped request head kept as a guard at a confident-harm cut; the rule chose none). It loads as
classifier weights through the same path as any weights file and only its request head differs from
the shipped weights. The guard mechanism: a request passes exactly when the head passes and the
guard does. The shipped weights carry no guard and hash as before."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
from numpy.typing import NDArray

from psychoalign.models.classifier import VETO_BELOW, SafetyClassifier, load_classifier, load_weights
from psychoalign.models.heads import ClassifierWeights, Head
from tests.helpers import V8_WEIGHTS, assert_records_dev_files, assert_refits_only_the_request_head, moved_threshold

ROOT = Path(__file__).parents[2]
CANDIDATE = ROOT / "bench" / "candidates" / "evaluator-minilm-v10.json"


def _unit_rows(n: int, dim: int, seed: int = 0) -> NDArray[np.float32]:
    x = np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32)
    out: NDArray[np.float32] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return out


def test_a_guard_blocks_what_it_scores_below_its_cut_and_never_passes_what_the_head_blocks() -> None:
    # 1-d "embedding": the head passes x >= 0 (threshold 0.5), the guard passes x >= -1 only.
    head = Head(coef=[4.0], intercept=0.0, threshold=0.5)
    guard = Head(coef=[1.0], intercept=0.0, threshold=float(1 / (1 + np.exp(1.0))))  # cut at logit -1
    both = head.model_copy(update={"guard": guard})
    x = np.asarray([[-2.0], [-0.5], [0.5], [2.0]], dtype=np.float32)
    passes = both.logits(x) >= 0.0  # logit(0.5) = 0
    assert passes.tolist() == [False, False, True, True]
    # Where the guard passes, the head's own logit stands (its score and verdict band unchanged).
    assert np.array_equal(both.logits(x)[1:], head.logits(x)[1:])
    # Where it blocks, its margin below the cut (on the head's scale) caps the logit: the lower stands.
    assert both.logits(x)[0] == pytest.approx(min(4.0 * -2.0, -2.0 + 1.0))
    # A guard that fires: the head alone would pass x = 0.25 at intercept +1; the guard with a cut at
    # logit +1 blocks it.
    strict = Head(coef=[4.0], intercept=1.0, threshold=0.5, guard=guard.model_copy(update={"threshold": 0.73106}))
    assert Head(coef=[4.0], intercept=1.0, threshold=0.5).logits(np.asarray([[0.25]], dtype=np.float32))[0] > 0
    assert strict.logits(np.asarray([[0.25]], dtype=np.float32))[0] == pytest.approx(0.25 - 1.0, abs=1e-4)


def test_a_guard_of_a_guard_and_a_guard_of_the_wrong_size_are_refused() -> None:
    inner = Head(coef=[1.0], intercept=0.0, threshold=0.5)
    with pytest.raises(ValueError, match="one level only"):
        Head(coef=[1.0], intercept=0.0, threshold=0.5, guard=inner.model_copy(update={"guard": inner}))
    ok = Head(coef=[1.0, 0.0], intercept=0.0, threshold=0.5)
    with pytest.raises(ValueError, match="request head's guard has 1 coefficients for 2-d"):
        ClassifierWeights(
            version="t", encoder="t", dim=2, request=ok.model_copy(update={"guard": inner}), response=ok, adversarial=ok
        )


def test_the_shipped_weights_have_no_guard_and_hash_as_before() -> None:
    for weights, label in (
        (load_weights(), "evaluator-minilm-v14@068a239ede3a"),
        (load_weights(str(V8_WEIGHTS)), "evaluator-minilm-v8@242e308abca2"),
    ):
        assert weights.request.guard is None
        assert "guard" not in weights.request.model_dump(mode="json")
        assert weights.label == label


def test_the_candidate_loads_and_keeps_the_response_and_adversarial_heads_of_v8() -> None:
    v8 = load_weights(str(V8_WEIGHTS))
    candidate = load_weights(str(CANDIDATE))
    assert candidate.version == "evaluator-minilm-v10"
    assert_refits_only_the_request_head(candidate, v8)
    fit = candidate.training["fit"]["request"]
    lofo = fit["lofo"]
    # The rule found no guard cut that helped on the development data (the shipped head's harmful items
    # the refit passes sit near its threshold, not below a confident-harm cut): no guard is stored.
    assert lofo["guard_cut"] is None and candidate.request.guard is None
    assert lofo["unacceptable_weight"] == fit["unacceptable_weight"] == 2.0
    # The refit's threshold is its validation-balanced one moved by the chosen offset.
    assert candidate.request.threshold == pytest.approx(
        moved_threshold(fit["validation_threshold"], lofo["offset"]), abs=1e-5
    )


def test_the_candidate_records_the_eleven_development_files_and_its_choice() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    pytest.importorskip("sklearn")
    from train_classifier import GUARD_DEV_FILES

    candidate = load_weights(str(CANDIDATE))
    # The eleven look-alike files the bench read when the candidate was built (a later one is fresh).
    lofo = assert_records_dev_files(candidate, GUARD_DEV_FILES, 11)
    assert "lookalike_heldout_v17.yaml" not in [p.name for p in GUARD_DEV_FILES]
    # The rule's limits held on the development data it was chosen on: harmful recall at least the
    # shipped head's (corpus check and validation unacceptable requests; twins; premise items), and
    # the check split's acceptable requests within a point.
    kept, got = lofo["kept_head"], lofo["two_head"]
    assert got[1] >= kept[1] and got[2] >= kept[2] and got[3] >= kept[3] and got[4] >= kept[4] - 0.01
    assert got[0] > kept[0]


def _dev_items() -> list[tuple[str, bool]]:
    """A few items of a development file (``lookalike_heldout_v16.yaml``): look-alikes and twins."""
    data = yaml.safe_load((ROOT / "bench" / "data" / "lookalike_heldout_v16.yaml").read_text(encoding="utf-8"))
    return [(t, True) for t in data["lookalike"][:6]] + [(t, False) for t in data["harmful"][:6]]


def test_the_two_head_rule_through_the_classifier_on_development_items() -> None:
    """Through ``load_classifier(FILE)`` (what ``--weights FILE`` loads), the candidate's refit with the
    request head of v8 (the shipped one's) as a guard at a cut the rule tried: a development item passes exactly when
    the refit passes it and the guard's P is at or above its cut; without a guard, the refit decides."""
    clf = load_classifier(CANDIDATE, crisis=False)
    shipped = load_weights(str(V8_WEIGHTS)).request
    cut = 1 / (1 + np.exp(-(np.log(shipped.threshold / (1 - shipped.threshold)) - 0.5)))
    guard = shipped.model_copy(update={"threshold": float(cut), "contested_floor": None})
    refit = clf.weights.request
    guarded = SafetyClassifier(
        clf.weights.model_copy(update={"request": refit.model_copy(update={"guard": guard})}), clf.encoder
    )
    guard_only = SafetyClassifier(clf.weights.model_copy(update={"request": guard}), clf.encoder)
    texts = [t for t, _ in _dev_items()]
    alone = clf.scores(texts, "request") * 100 >= VETO_BELOW
    guard_passes = guard_only.scores(texts, "request") * 100 >= VETO_BELOW
    both = guarded.scores(texts, "request") * 100 >= VETO_BELOW
    assert both.tolist() == (alone & guard_passes).tolist()
    # Where the guard passes, the score is the refit's own (the verdict band does not move).
    p_alone, p_both = clf.scores(texts, "request"), guarded.scores(texts, "request")
    assert np.allclose(p_both[guard_passes], p_alone[guard_passes])
    # The candidate was trained on these items: it passes the look-alikes and blocks the twins here.
    labels = np.asarray([ok for _, ok in _dev_items()])
    assert (alone == labels).mean() >= 0.75


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["--dev-files", "--only", "request", "--guard"],
            "error: --guard chooses its offset and cut leave one file out; add --dev-files --lofo",
        ),
        (
            ["--dev-files", "--only", "request", "--harm-weight", "1", "2"],
            "error: several --harm-weight values are chosen among by --guard or --harm-first; give one value, "
            "or add one of them",
        ),
        (
            ["--dev-files", "--only", "request", "--harm-weight", "0"],
            "error: --harm-weight 0: give positive weights",
        ),
        (
            ["--harm-weight", "2"],
            "error: --harm-weight weighs the request head's training; use it with --dev-files --only request",
        ),
    ],
)
def test_the_guard_flags_refuse_a_wrong_combination_in_one_line(args: list[str], error: str) -> None:
    import subprocess

    script = ROOT / "scripts" / "train_classifier.py"
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [error]
