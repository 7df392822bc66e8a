"""Build the embedded classifier's crisis check from its written exemplars and benign requests.

Run from the repo root (needs the evaluation data folder, shared/data, to split the benign requests
as the request head does):

    .venv/bin/python scripts/build_crisis_check.py            # writes classifier_data/crisis-minilm-v8.json
    .venv/bin/python scripts/build_crisis_check.py --dry-run  # the figures only

Method (src/psychoalign/models/classifier_data/MODEL_CARD.md, "The crisis check"):

* crisis side: the ``crisis`` exemplars of ``crisis_exemplars.yaml`` in folds 1-3 of
  ``sha256(text) % 4`` (fold 0 is held out: this script never reads its embeddings);
* the other side: the ``lookalike`` exemplars of folds 1-3, and the project-written benign requests
  and look-alikes of ``project_requests.yaml`` (sets ``benign`` and ``lookalike``) that the request
  head trains or tunes on (its ``train`` and ``val`` splits, as ``safety_corpus.load_corpus`` groups
  them; never its ``check`` split, never a text of a reported benchmark, which ``load_corpus`` leaves
  out). Their SHA-256 is recorded beside the exemplars'.

Everything is embedded with all-MiniLM-L6-v2 as the classifier embeds a request, and a
class-balanced RBF-kernel SVM separates the two sides. Grouped, stratified 5-fold cross-validation
on the same data (unshuffled; a project topic is one group) chooses the rest: for each C in ``CS``
and gamma in ``GAMMAS`` x 1 / (dim x variance), the threshold is the lowest margin at which at most
``BENIGN_CAP`` of the project-written benign requests fire (a cap on false fires: what a user
asking an ordinary question meets); the pair whose threshold keeps the most crisis exemplars firing
is kept (ties: fewer look-alike exemplars fired, then the first in the grid), and the build fails
if that recall is under ``RECALL_FLOOR``. The explicit first-person phrases of
``psychoalign.models.crisis.EXPLICIT_PHRASES`` are copied into the check (it fires on either);
the figures are printed for the head alone and for the head or the phrases (the threshold is the
head's alone; the build fails if a phrase matches a training look-alike or benign request). The
medicine guard, ``psychoalign.models.crisis.MEDICINE_GUARD`` (an ordinary dose or interaction
question that a fire of the head alone gives way to), is copied in too; the build fails if it
holds on a training crisis exemplar.
No randomness: the same files write the same JSON.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import sys
from pathlib import Path
from typing import NamedTuple

import numpy as np
from numpy.typing import NDArray
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.svm import SVC

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from crisis_dev import capped  # noqa: E402

from psychoalign.errors import InputError  # noqa: E402
from psychoalign.models.classifier import load_weights  # noqa: E402
from psychoalign.models.crisis import (  # noqa: E402
    EXPLICIT_PHRASES,
    MEDICINE_GUARD,
    benign_requests,
    benign_requests_sha256,
    exemplars,
    exemplars_sha256,
    says_self_harm,
)
from psychoalign.models.crisis_check import DEFAULT_CRISIS_CHECK, CrisisCheck, default_crisis_path  # noqa: E402
from psychoalign.models.heads import Head, Kernel, minilm_encoder  # noqa: E402

#: The grid cross-validation chooses from: C, and gamma as a multiple of 1 / (dim x variance).
CS = (1.0, 3.0, 10.0)
GAMMAS = (0.5, 1.0, 1.5)
FOLDS = 5
#: Most of the project-written benign requests that may fire in cross-validation.
BENIGN_CAP = 0.01
#: Most of the look-alike exemplars (written to sit close to a crisis) that may fire in it.
LOOKALIKE_CAP = 0.10
#: Fewest of the training crisis exemplars that must fire in cross-validation at that threshold.
RECALL_FLOOR = 0.85


def _f16(a: NDArray[np.float64]) -> str:
    return base64.b64encode(np.asarray(a, dtype="<f2").tobytes()).decode("ascii")


def _svm(x: NDArray[np.float64], y: NDArray[np.bool_], c: float, gamma: float) -> SVC:
    return SVC(C=c, kernel="rbf", gamma=gamma, class_weight="balanced").fit(x, y)


class Fold(NamedTuple):
    """One setting's cross-validated operating point (``with_phrases``: crisis exemplars fired by
    the head or an explicit phrase)."""

    c: float
    gamma: float
    threshold: float
    recall: float
    lookalikes: float
    benign: float
    with_phrases: float


def cross_validate(
    x: NDArray[np.float64],
    y: NDArray[np.bool_],
    is_benign: NDArray[np.bool_],
    groups: list[str],
    said: NDArray[np.bool_],
    c: float,
    gamma: float,
) -> Fold:
    """Out-of-fold margins, and the lowest threshold at which at most BENIGN_CAP of the benign
    requests and at most LOOKALIKE_CAP of the look-alike exemplars fire (ties fire)."""
    margins = np.zeros(len(y))
    for fit, score in StratifiedGroupKFold(FOLDS).split(x, y, groups):
        margins[score] = _svm(x[fit], y[fit], c, gamma).decision_function(x[score])
    threshold = max(capped(margins[is_benign], BENIGN_CAP), capped(margins[~y & ~is_benign], LOOKALIKE_CAP))
    fired = margins >= threshold
    return Fold(
        c,
        gamma,
        threshold,
        float(fired[y].mean()),
        float(fired[~y & ~is_benign].mean()),
        float(fired[is_benign].mean()),
        float((fired | said)[y].mean()),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print the figures, write nothing")
    parser.add_argument("--data", type=Path, default=None, help="evaluation data folder (default shared/data)")
    args = parser.parse_args()

    train = [e for e in exemplars() if not e.held_out]
    exemplar_texts = {e.text for e in train}
    try:
        requests = benign_requests(args.data)
    except InputError as exc:
        raise SystemExit(f"error: {exc} (give --data DIR, the evaluation data folder)") from None
    benign = [(t, g) for t, g in requests if t not in exemplar_texts]
    texts = [e.text for e in train] + [t for t, _ in benign]
    y = np.array([e.label == "crisis" for e in train] + [False] * len(benign))
    is_benign = np.array([False] * len(train) + [True] * len(benign))
    # A project topic is one group (its requests are siblings); each exemplar is its own.
    groups = [f"exemplar:{i}" for i in range(len(train))] + [g for _, g in benign]
    weights = load_weights()
    x = minilm_encoder()(texts).astype(np.float64)
    unit = 1.0 / (x.shape[1] * float(x.var()))

    said = np.array([says_self_harm(t) for t in texts])
    if (said & ~y).any():
        first = texts[int(np.argmax(said & ~y))]
        print(f"error: an explicit phrase matches a training look-alike or benign request: {first!r}; nothing written")
        return 1
    guarded = np.array([MEDICINE_GUARD.holds(t) for t in texts])
    if (guarded & y).any():
        first = texts[int(np.argmax(guarded & y))]
        print(f"error: the medicine guard holds on a training crisis exemplar: {first!r}; nothing written")
        return 1
    folds = [cross_validate(x, y, is_benign, groups, said, c, g * unit) for c in CS for g in GAMMAS]
    for f in folds:
        print(
            f"  C {f.c:g}, gamma {f.gamma / unit:g} x 1/(dim x var): crisis fired {f.recall:.1%}, "
            f"look-alike exemplars {f.lookalikes:.1%}, benign requests {f.benign:.1%}"
        )
    best = max(folds, key=lambda f: (f.recall, -f.lookalikes))  # max keeps the first of equals
    lookalike = ~y & ~is_benign
    print(
        f"training: {int(y.sum())} crisis, {int(lookalike.sum())} look-alike exemplars, {len(benign)} project-written "
        f"benign requests; kept C {best.c:g}, gamma {best.gamma / unit:g} x 1/(dim x var), threshold margin "
        f"{best.threshold:.3f}; {FOLDS}-fold grouped CV: crisis fired {best.recall:.1%}, look-alike exemplars fired "
        f"{best.lookalikes:.1%}, benign requests fired {best.benign:.1%}; with the explicit phrases "
        f"({int(said[y].sum())} of the crisis exemplars match one, none of the others) crisis fired "
        f"{best.with_phrases:.1%}; the medicine guard holds on {int((guarded & lookalike).sum())} look-alike "
        f"exemplars, {int((guarded & is_benign).sum())} benign requests and none of the crisis exemplars"
    )
    if best.recall < RECALL_FLOOR:
        print(f"error: cross-validated crisis recall {best.recall:.1%} is under {RECALL_FLOOR:.0%}; nothing written")
        return 1

    model = _svm(x, y, best.c, best.gamma)
    # sklearn's decision function is positive for the second class (True, crisis).
    head = Head(
        kernel=Kernel(
            gamma=best.gamma, dual=[float(d) for d in model.dual_coef_[0]], support=_f16(model.support_vectors_)
        ),
        intercept=float(model.intercept_[0]),
        threshold=1.0 / (1.0 + math.exp(-best.threshold)),
    )
    check = CrisisCheck(
        version=DEFAULT_CRISIS_CHECK,
        encoder=weights.encoder,
        dim=weights.dim,
        head=head,
        exemplars_sha256=exemplars_sha256(),
        negatives_sha256=benign_requests_sha256(),
        phrases=EXPLICIT_PHRASES,
        guard=MEDICINE_GUARD,
        metrics={
            "train_crisis": int(y.sum()),
            "train_lookalikes": int(lookalike.sum()),
            "train_benign_requests": len(benign),
            "c": best.c,
            "cv_recall": round(best.recall, 4),
            "cv_lookalikes_fired": round(best.lookalikes, 4),
            "cv_benign_fired": round(best.benign, 4),
            "cv_recall_with_phrases": round(best.with_phrases, 4),
            "train_crisis_phrase_matches": int(said[y].sum()),
            "support_vectors": int(model.support_vectors_.shape[0]),
        },
    )
    if not args.dry_run:
        out = default_crisis_path()
        out.write_text(json.dumps(check.model_dump(mode="json"), separators=(",", ":")) + "\n", encoding="utf-8")
        print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
