"""Compare request-head candidates on the validation split only (no held-out file, no benchmark).

Run from the repo root (needs the shared data; reuses train_classifier.py's embedding cache):

    .venv/bin/python scripts/explore_request_head.py [--cache FILE]

Each candidate is fitted on the train split of today's corpus (the retired held-out files
included, ``safety_corpus._retired``) and read on the *conversational* validation requests (the
set the shipped rule chooses on): AUC, and at two operating points (the balanced rule, and the
lowest threshold that still blocks as many unacceptable conversational validation requests as the
shipped head does at its own threshold) the share of look-alikes passed and harmful blocked.
Candidates: the shipped head as is; the RBF SVM grid refitted; the SVM with the look-alike and
retired examples weighted up; a small MLP (scikit-learn, fixed seed). Prints a table; writes
nothing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from sklearn.neural_network import MLPClassifier
from sklearn.svm import SVC

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "scripts"))

from train_classifier import CONVERSATIONAL, KERNEL_GRID, _embed_cached, _per_example  # noqa: E402

from psychoalign.models.classifier import load_weights  # noqa: E402
from psychoalign.models.heads import minilm_encoder  # noqa: E402
from psychoalign.models.safety_corpus import Example, auc, load_corpus, windows  # noqa: E402

LOOKALIKE_SOURCES = ("project-lookalike", "retired-lookalike")
HARMFUL_SOURCES = ("project-harmful", "retired-harmful", "retired-premise", "hh-harmful")


def design(exs: list[Example], emb: dict[str, Any]) -> tuple[NDArray[np.float32], list[int]]:
    rows, owner = [], []
    for i, ex in enumerate(exs):
        for w in windows(ex.text):
            rows.append(emb[w])
            owner.append(i)
    return np.stack(rows), owner


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cache", type=Path, default=Path("/tmp/psychoalign-train-embeddings.npz"))
    args = ap.parse_args()
    exs = [ex for ex in load_corpus(retired=True) if ex.kind == "request"]
    emb = _embed_cached(minilm_encoder(), sorted({w for ex in exs for w in windows(ex.text)}), args.cache)
    tr = [ex for ex in exs if ex.split == "train"]
    va = [ex for ex in exs if ex.split == "val"]
    x_tr, own_tr = design(tr, emb)
    x_va, own_va = design(va, emb)
    y_tr_ex = np.asarray([int(ex.acceptable) for ex in tr])
    y_tr = y_tr_ex[own_tr]
    y_va = np.asarray([int(ex.acceptable) for ex in va])
    sel = np.asarray([ex.source in CONVERSATIONAL for ex in va])
    look = np.asarray([ex.source in LOOKALIKE_SOURCES for ex in va])
    harm = np.asarray([ex.source in HARMFUL_SOURCES for ex in va])
    print(
        f"train {len(tr)} requests ({len(x_tr)} windows); conversational validation {int(sel.sum())} "
        f"({int(look.sum())} look-alikes, {int(harm.sum())} harmful or premise)"
    )
    shipped = load_weights().request
    p_old = _per_example(shipped.logits(x_va), own_va, len(va), "min")
    t_old = float(np.log(shipped.threshold / (1 - shipped.threshold)))
    old_blocked = float(np.mean(p_old[sel & (y_va == 0)] < t_old))

    def report(name: str, d: NDArray[np.float64], t_fixed: float | None = None) -> None:
        a = auc(y_va[sel], d[sel])
        cands = np.unique(d[sel])
        # balanced: maximise min(pass acceptable, block unacceptable) on conversational validation
        best_t, best_k = cands[0], -1.0
        keep_t = None
        for t in cands:
            tpr = float(np.mean(d[sel & (y_va == 1)] >= t))
            tnr = float(np.mean(d[sel & (y_va == 0)] < t))
            if min(tpr, tnr) > best_k:
                best_k, best_t = min(tpr, tnr), t
            if keep_t is None and tnr >= old_blocked - 1e-9:
                keep_t = t
        pts = [("bal", best_t), ("keep", keep_t if keep_t is not None else cands[-1])]
        if t_fixed is not None:
            pts = [("own", t_fixed)]
        cells = []
        for label, t in pts:
            lp = float(np.mean(d[look] >= t))
            hb = float(np.mean(d[harm] < t))
            ap_ = float(np.mean(d[sel & (y_va == 1)] >= t))
            ub = float(np.mean(d[sel & (y_va == 0)] < t))
            cells.append(f"{label}: look {lp:.3f} harm {hb:.3f} acc {ap_:.3f} unacc {ub:.3f}")
        print(f"{name:<34} AUC {a:.4f} | " + " | ".join(cells), flush=True)

    report("shipped v8 head (own threshold)", p_old, t_old)
    report("shipped v8 head", p_old)
    w_up = np.asarray([3.0 if ex.source in LOOKALIKE_SOURCES else 1.0 for ex in tr])[own_tr]
    for c, g in KERNEL_GRID:
        svm = SVC(C=c, kernel="rbf", gamma=g, class_weight="balanced").fit(x_tr, y_tr)
        report(f"svm C={c:g} g={g:g}", _per_example(svm.decision_function(x_va), own_va, len(va), "min"))
    for c, g in ((3.0, 1.4), (10.0, 1.4), (10.0, 1.0)):
        svm = SVC(C=c, kernel="rbf", gamma=g, class_weight="balanced").fit(x_tr, y_tr, sample_weight=w_up)
        report(f"svm look x3 C={c:g} g={g:g}", _per_example(svm.decision_function(x_va), own_va, len(va), "min"))
    for hidden in (128, 256):
        for alpha in (1e-3, 1e-2, 1e-1):
            mlp = MLPClassifier(
                hidden_layer_sizes=(hidden,), alpha=alpha, max_iter=300, early_stopping=False, random_state=0
            ).fit(x_tr, y_tr)
            p = mlp.predict_proba(x_va)[:, 1]
            d = np.log(np.clip(p, 1e-9, 1) / np.clip(1 - p, 1e-9, 1))
            report(f"mlp h={hidden} alpha={alpha:g}", _per_example(d, own_va, len(va), "min"))


if __name__ == "__main__":
    main()
