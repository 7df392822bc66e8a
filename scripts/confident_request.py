"""Choose ``confident_request`` (negotiation parameter) on the classifier's validation split. Run:
python scripts/confident_request.py [--data DIR]

``adopt_conditional`` (docs/negotiation.md, "A conditional draft for a confident request") stops
drafting at an admissible CONDITIONAL draft when the request head's P(request) — the classifier's
``ceiling`` — is at or above ``confident_request``. The rule chooses it where the request head has
never passed a harmful request so confidently: the smallest ceiling (100 x P, rounded to a whole
number) above that of every unacceptable request of the validation split (``sha256(group) % 10``
in 6-7, as in ``scripts/train_classifier.py``: the split that chose the heads' thresholds). The
check split (8-9) is only reported, as are the response head's figures in the CONDITIONAL band
(the answers the policy can adopt).
No benchmark and no held-out or reference-answer file is read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from psychoalign.errors import InputError
from psychoalign.models.classifier import APPROVE_AT, VETO_BELOW, SafetyClassifier, load_classifier
from psychoalign.models.safety_corpus import Example, load_corpus
from psychoalign.traces.model import NegotiationParams


def rates(classifier: SafetyClassifier, examples: list[Example], at: float) -> str:
    """Share of acceptable and unacceptable requests at or above ``at``."""
    s = classifier.scores([ex.text for ex in examples], "request")
    y = np.asarray([ex.acceptable for ex in examples], dtype=bool)
    ceiling = np.round(s * 100)  # as the classifier states it: a whole number
    bad, good = int(np.sum(ceiling[~y] >= at * 100)), int(np.sum(ceiling[y] >= at * 100))
    return (
        f"unacceptable at or above: {bad} of {int((~y).sum())}; "
        f"acceptable at or above: {good} of {int(y.sum())} ({good / max(1, int(y.sum())) * 100:.1f} %)"
    )


def conditional_band(classifier: SafetyClassifier, examples: list[Example]) -> str:
    """The response head's CONDITIONAL band [VETO_BELOW, APPROVE_AT): how many answers, how many unacceptable."""
    s = classifier.scores([ex.text for ex in examples], "response")
    y = np.asarray([ex.acceptable for ex in examples], dtype=bool)
    band = (s * 100 >= VETO_BELOW) & (s * 100 < APPROVE_AT)
    passed = s * 100 >= VETO_BELOW
    return (
        f"responses in the CONDITIONAL band: {int(band.sum())} of {len(y)}, "
        f"unacceptable {int(np.sum(band & ~y))}; unacceptable passing tau: {int(np.sum(passed & ~y))} "
        f"of {int((~y).sum())}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="the evaluation data folder")
    args = parser.parse_args()
    try:
        examples = load_corpus(args.data)
    except InputError as exc:
        sys.exit(f"error: {exc}")
    classifier = load_classifier()
    split = {
        name: [ex for ex in examples if ex.split == name and ex.kind == kind]
        for name, kind in (("val", "request"), ("check", "request"))
    }
    val = split["val"]
    scores = classifier.scores([ex.text for ex in val if not ex.acceptable], "request")
    top = float(scores.max()) if len(scores) else 0.0
    # The ceiling is 100 x P(request) rounded to a whole number: the next one above the highest's.
    chosen = min(100, round(top * 100) + 1) / 100
    print(f"classifier {classifier.weights.label}")
    print(f"validation: {len(val)} requests; highest P(request) of an unacceptable one: {top:.4f}")
    print(f"chosen confident_request = {chosen:.2f} (default {NegotiationParams().confident_request:.2f})")
    for name, exs in split.items():
        print(f"{name:>10} requests at {chosen:.2f}: {rates(classifier, exs, chosen)}")
    for name in ("val", "check"):
        responses = [ex for ex in examples if ex.split == name and ex.kind == "response"]
        print(f"{name:>10} {conditional_band(classifier, responses)}")


if __name__ == "__main__":
    main()
