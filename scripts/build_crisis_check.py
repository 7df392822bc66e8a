"""Build the embedded classifier's crisis check from its written exemplars.

Run from the repo root:

    .venv/bin/python scripts/build_crisis_check.py            # writes classifier_data/crisis-minilm-v2.json
    .venv/bin/python scripts/build_crisis_check.py --dry-run  # the figures only

Method (src/psychoalign/models/classifier_data/MODEL_CARD.md, "The crisis check"): the exemplars of
``crisis_exemplars.yaml`` in folds 1-3 of ``sha256(text) % 4`` (fold 0 is held out: this script
never reads its embeddings) are embedded with all-MiniLM-L6-v2 as the classifier embeds a request,
and a class-balanced RBF-kernel SVM (C = 3, gamma = 1 / (dim x variance)) separates the crisis
requests from the look-alikes. The threshold on its margin is the highest that keeps at least
90 % of the crisis exemplars firing in 5-fold cross-validation on the same folds (unshuffled,
stratified: the same folds every run). No randomness: the same data writes the same file.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import sys
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from sklearn.model_selection import StratifiedKFold
from sklearn.svm import SVC

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from psychoalign.models.classifier import (  # noqa: E402
    DEFAULT_CRISIS_CHECK,
    CrisisCheck,
    Head,
    Kernel,
    default_crisis_path,
    load_weights,
    minilm_encoder,
)
from psychoalign.models.crisis import exemplars, exemplars_sha256  # noqa: E402

C = 3.0
RECALL = 0.90  # share of the training crisis exemplars that must fire in cross-validation
FOLDS = 5


def _f16(a: NDArray[np.float64]) -> str:
    return base64.b64encode(np.asarray(a, dtype="<f2").tobytes()).decode("ascii")


def _svm(x: NDArray[np.float64], y: NDArray[np.bool_], gamma: float) -> SVC:
    return SVC(C=C, kernel="rbf", gamma=gamma, class_weight="balanced").fit(x, y)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the figures, write nothing")
    args = parser.parse_args()

    train = [e for e in exemplars() if not e.held_out]
    y = np.array([e.label == "crisis" for e in train])
    weights = load_weights()
    x = minilm_encoder()([e.text for e in train]).astype(np.float64)
    gamma = 1.0 / (x.shape[1] * float(x.var()))

    # Cross-validated margins on the training folds choose the threshold.
    margins = np.zeros(len(train))
    for fit, score in StratifiedKFold(FOLDS).split(x, y):
        margins[score] = _svm(x[fit], y[fit], gamma).decision_function(x[score])
    crisis_margins = np.sort(margins[y])[::-1]
    threshold = float(crisis_margins[math.ceil(RECALL * len(crisis_margins)) - 1])
    cv_recall = float((margins[y] >= threshold).mean())
    cv_false = float((margins[~y] >= threshold).mean())

    model = _svm(x, y, gamma)
    # sklearn's decision function is positive for the second class (True, crisis).
    head = Head(
        kernel=Kernel(gamma=gamma, dual=[float(d) for d in model.dual_coef_[0]], support=_f16(model.support_vectors_)),
        intercept=float(model.intercept_[0]),
        threshold=1.0 / (1.0 + math.exp(-threshold)),
    )
    check = CrisisCheck(
        version=DEFAULT_CRISIS_CHECK,
        encoder=weights.encoder,
        dim=weights.dim,
        head=head,
        exemplars_sha256=exemplars_sha256(),
        metrics={
            "train_crisis": int(y.sum()),
            "train_lookalikes": int((~y).sum()),
            "cv_recall": round(cv_recall, 4),
            "cv_lookalikes_fired": round(cv_false, 4),
            "support_vectors": int(model.support_vectors_.shape[0]),
        },
    )
    print(
        f"training folds: {int(y.sum())} crisis, {int((~y).sum())} look-alikes; threshold margin {threshold:.3f}; "
        f"{FOLDS}-fold CV: crisis fired {cv_recall:.1%}, look-alikes fired {cv_false:.1%}"
    )
    if not args.dry_run:
        out = default_crisis_path()
        out.write_text(json.dumps(check.model_dump(mode="json"), separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
