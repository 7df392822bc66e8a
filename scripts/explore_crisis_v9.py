"""Leave-one-file-out estimate of a crisis check's recall on a fresh file (development data only).

Run from the repo root (needs the evaluation data folder, shared/data, as the build does):

    .venv/bin/python scripts/explore_crisis_v9.py                  # the estimate (prints only)
    .venv/bin/python scripts/explore_crisis_v9.py --write FILE     # candidate E, trained on all six files

The crisis files ``bench/data/crisis_heldout.yaml`` .. ``crisis_heldout_v6.yaml`` (every one already
scored, now development data) are held out one at a time. For each, the candidates are trained on
the exemplars' folds 1-3, the project benign requests (as ``scripts/build_crisis_check.py`` reads
them) and the other five files' crisis and benign items, with the build's threshold rule (grouped
5-fold CV margins; at most 1 % of the benign requests and 10 % of the look-alikes fire) and v8's C
and gamma fixed; the held-out file's crisis items are "routed" when the check or the ``general``
framework's request checks fire, its benign items "fired" when the check fires. v8 is scored as
shipped. Candidates (MODEL_CARD.md, "A v9 candidate"): B, the head retrained with the files; D,
v8's head with the multilingual lexicon; C, B with the lexicon; E, C with a character n-gram model
as a second vote. The fixed development look-alike groups are scored by each candidate trained on
all six files. ``--write FILE`` skips the estimate and writes candidate E trained on all six files
as a crisis check JSON (``crisis-minilm-v9c``: no band floor), for
``bench/request_head.py --crisis --crisis-check FILE``. No randomness: the same files write the
same JSON.
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import sys
from pathlib import Path

import numpy as np
import yaml
from numpy.typing import NDArray
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.svm import SVC

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from crisis_dev import capped, embed_windows, kept_files, yaml_texts  # noqa: E402

from psychoalign.frameworks import load_framework  # noqa: E402
from psychoalign.models.classifier import load_weights  # noqa: E402
from psychoalign.models.crisis import (  # noqa: E402
    EXPLICIT_PHRASES,
    MEDICINE_GUARD,
    benign_requests,
    benign_requests_sha256,
    exemplars,
    exemplars_sha256,
)
from psychoalign.models.crisis_check import CrisisCheck, load_crisis_check  # noqa: E402
from psychoalign.models.crisis_phrases import MULTILINGUAL_PHRASES, says_self_harm  # noqa: E402
from psychoalign.models.heads import CharVote, Head, Kernel, minilm_encoder  # noqa: E402
from request_head import CRISIS_HELDOUTS, CRISIS_RULE, LOOKALIKES, MEDICINE_LOOKALIKES  # noqa: E402

#: The six files the candidate was built from (v1 to v6); later files are fresh for it and never read here.
TRAIN_FILES = CRISIS_HELDOUTS[:6]
#: The look-alike files its rule read (lookalike_heldout.yaml, v7 to v14: 537 look-alikes).
DEV_LOOKALIKES = LOOKALIKES[:9]

BENIGN_CAP = 0.01
LOOKALIKE_CAP = 0.10
FOLDS = 5


class Trained:
    """A head (RBF SVM on the embedding; optionally a char n-gram vote) with the build's threshold rule."""

    def __init__(
        self,
        x: NDArray[np.float64],
        texts: list[str],
        y: NDArray[np.bool_],
        is_benign: NDArray[np.bool_],
        groups: list[str],
        gamma: float,
        ngrams: bool,
    ) -> None:
        margins = np.zeros(len(y))
        nmargins = np.zeros(len(y))
        for fit, score in StratifiedGroupKFold(FOLDS).split(x, y, groups):
            margins[score] = (
                SVC(C=3.0, gamma=gamma, class_weight="balanced").fit(x[fit], y[fit]).decision_function(x[score])
            )
            if ngrams:
                vec, lr = self._ngram([texts[i] for i in fit], y[fit])
                nmargins[score] = lr.decision_function(vec.transform([texts[i] for i in score]))
        look = ~y & ~is_benign
        self.threshold = max(capped(margins[is_benign], BENIGN_CAP), capped(margins[look], LOOKALIKE_CAP))
        self.svm = SVC(C=3.0, gamma=gamma, class_weight="balanced").fit(x, y)
        self.ngram: tuple[TfidfVectorizer, LogisticRegression, float] | None = None
        if ngrams:
            nthreshold = max(capped(nmargins[is_benign], BENIGN_CAP), capped(nmargins[look], LOOKALIKE_CAP))
            vec, lr = self._ngram(texts, y)
            self.ngram = (vec, lr, nthreshold)

    @staticmethod
    def _ngram(texts: list[str], y: NDArray[np.bool_]) -> tuple[TfidfVectorizer, LogisticRegression]:
        vec = TfidfVectorizer(analyzer="char_wb", ngram_range=(2, 5), lowercase=True, sublinear_tf=True, min_df=2)
        lr = LogisticRegression(C=3.0, class_weight="balanced", max_iter=2000).fit(vec.fit_transform(texts), y)
        return vec, lr

    def fires(self, rows: list[NDArray[np.float32]], texts: list[str]) -> NDArray[np.bool_]:
        out = np.array([bool((self.svm.decision_function(r.astype(np.float64)) >= self.threshold).any()) for r in rows])
        if self.ngram is not None:
            vec, lr, t = self.ngram
            out |= lr.decision_function(vec.transform(texts)) >= t
        return out


def _f32(a: NDArray[np.float64]) -> str:
    return base64.b64encode(np.asarray(a, dtype="<f4").tobytes()).decode("ascii")


def write_candidate(model: Trained, out: Path, n_files: int) -> None:
    """Candidate E (the head, v8's phrases with the lexicon, v8's guard, the character vote) as JSON."""
    assert model.ngram is not None
    vec, lr, cut = model.ngram
    svm = model.svm
    weights = load_weights()
    terms = sorted(vec.vocabulary_, key=vec.vocabulary_.__getitem__)
    support = base64.b64encode(np.asarray(svm.support_vectors_, dtype="<f2").tobytes()).decode("ascii")
    check = CrisisCheck(
        version="crisis-minilm-v9c",
        encoder=weights.encoder,
        dim=weights.dim,
        head=Head(
            kernel=Kernel(gamma=float(svm._gamma), dual=[float(d) for d in svm.dual_coef_[0]], support=support),
            intercept=float(svm.intercept_[0]),
            threshold=1.0 / (1.0 + math.exp(-model.threshold)),
        ),
        exemplars_sha256=exemplars_sha256(),
        negatives_sha256=benign_requests_sha256(),
        phrases=(*EXPLICIT_PHRASES, *MULTILINGUAL_PHRASES),
        guard=MEDICINE_GUARD,
        vote=CharVote(
            terms=terms,
            idf=_f32(vec.idf_),
            coef=_f32(lr.coef_[0]),
            intercept=float(lr.intercept_[0]),
            threshold=cut,
        ),
        metrics={
            "candidate": "E of scripts/explore_crisis_v9.py, not shipped (MODEL_CARD.md, 'A v9 candidate')",
            "train_files": [p.name for p in TRAIN_FILES],
            "train_file_items": n_files,
            "support_vectors": int(svm.support_vectors_.shape[0]),
            "vote_ngrams": len(terms),
        },
    )
    out.write_text(json.dumps(check.model_dump(mode="json"), separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {out} ({check.label}): {len(terms)} n-grams, {svm.support_vectors_.shape[0]} support vectors")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", type=Path, default=None, help="write candidate E trained on all six files here")
    args = ap.parse_args()
    v8 = load_crisis_check()
    assert v8 is not None
    general = load_framework("general")
    train_ex = [e for e in exemplars() if not e.held_out]
    held_ex = [e for e in exemplars() if e.held_out]
    benign = [(t, g) for t, g in benign_requests() if t not in {e.text for e in train_ex}]
    files = {p.stem: (yaml_texts(p, "crisis"), yaml_texts(p, "benign")) for p in TRAIN_FILES}
    tests = yaml.safe_load((ROOT / "tests" / "frameworks" / "self_harm_requests.yaml").read_text(encoding="utf-8"))
    medicine = yaml.safe_load(MEDICINE_LOOKALIKES.read_text(encoding="utf-8")) or {}
    groups_dev = {
        "fold look-alikes": [e.text for e in held_ex if e.label == "lookalike"],
        "medicine look-alikes": [str(t) for v in medicine.values() for t in v],
        "look-alike files": [t for p in DEV_LOOKALIKES for t in yaml_texts(p, "lookalike")],
        "self_harm_requests look-alikes": [str(t) for t in tests["look_alikes"]],
    }
    every = list(
        dict.fromkeys(
            [e.text for e in train_ex]
            + [t for t, _ in benign]
            + [t for c, b in files.values() for t in c + b]
            + [t for ts in groups_dev.values() for t in ts]
        )
    )
    rows, x_all = embed_windows(every, minilm_encoder())
    first = {t: rows[t][0].astype(np.float64) for t in every}  # the build trains on the first window
    unit = 1.0 / (x_all.shape[1] * float(x_all[: len(every)].var()))
    rule = {t: CRISIS_RULE in general.universal_request_rules(t) for t in every}
    lexicon = {t: says_self_harm(t, MULTILINGUAL_PHRASES) for t in every}
    base = math.log(v8.head.threshold / (1 - v8.head.threshold))

    def v8_fires(ts: list[str], lex: bool) -> NDArray[np.bool_]:
        return np.array(
            [
                v8.says(t)
                or (lex and lexicon[t])
                or (float(v8.head.logits(rows[t]).max()) >= base and not v8.guarded(t))
                for t in ts
            ]
        )

    def train(held: str | None, ngrams: bool) -> Trained:
        texts = [e.text for e in train_ex] + [t for t, _ in benign]
        y = [e.label == "crisis" for e in train_ex] + [False] * len(benign)
        is_benign = [False] * len(train_ex) + [True] * len(benign)
        groups = [f"exemplar:{i}" for i in range(len(train_ex))] + [g for _, g in benign]
        kept, kept_y, kept_benign, kept_groups = kept_files(files, held)
        texts += kept
        y += kept_y
        is_benign += kept_benign
        groups += kept_groups
        x = np.stack([first[t] for t in texts])
        return Trained(x, texts, np.array(y), np.array(is_benign), groups, unit, ngrams)

    def cand_fires(model: Trained | None, ts: list[str], lex: bool) -> NDArray[np.bool_]:
        if model is None:
            return v8_fires(ts, lex)
        head = model.fires([rows[t] for t in ts], ts) & ~np.array([v8.guarded(t) for t in ts])
        return head | np.array([v8.says(t) or (lex and lexicon[t]) for t in ts])

    if args.write is not None:
        write_candidate(train(None, True), args.write, sum(len(c) + len(b) for c, b in files.values()))
        return 0
    names = {"v8": (False, False, False), "D": (False, True, False), "B": (True, False, False)}
    names |= {"C": (True, True, False), "E": (True, True, True)}
    totals = {n: [0, 0, 0, 0] for n in names}
    print("leave-one-file-out: crisis routed / benign fired")
    for held, (crisis, ben) in files.items():
        models = {False: train(held, False), True: train(held, True)}
        line = [f"  {held:<20} n {len(crisis)}/{len(ben)}"]
        for n, (retrain, lex, ng) in names.items():
            m = models[ng] if retrain else None
            routed = int((cand_fires(m, crisis, lex) | np.array([rule[t] for t in crisis])).sum())
            fired = int(cand_fires(m, ben, lex).sum())
            tot = totals[n]
            tot[0], tot[1], tot[2], tot[3] = tot[0] + routed, tot[1] + len(crisis), tot[2] + fired, tot[3] + len(ben)
            line.append(f"{n} {routed}/{fired}")
        print("  ".join(line))
    for n, (k, nk, f, nf) in totals.items():
        print(f"  pooled {n}: crisis routed {k} of {nk} ({k / nk:.1%}); benign fired {f} of {nf} ({f / nf:.1%})")
    print("development look-alike groups (candidates trained on all six files): fired")
    full = {False: train(None, False), True: train(None, True)}
    for group, ts in groups_dev.items():
        cells = []
        for n, (retrain, lex, ng) in names.items():
            k = int(cand_fires(full[ng] if retrain else None, ts, lex).sum())
            cells.append(f"{n} {k} ({k / len(ts):.1%})")
        print(f"  {group:<32} n {len(ts):<4} " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
