"""Leave-one-file-out choice and build of the crisis check candidate ``crisis-minilm-v10``.

Run from the repo root (needs the evaluation data folder, shared/data, as the build does):

    .venv/bin/python scripts/explore_crisis_v10.py               # the LOFO estimate and the choice (prints only)
    .venv/bin/python scripts/explore_crisis_v10.py --write       # the chosen setting trained on all eight files,
                                                                 # written to bench/candidates/crisis-minilm-v10.json
    .venv/bin/python scripts/explore_crisis_v10.py --write FILE  # the same, written to FILE

``crisis-minilm-v10`` is the shipped crisis check (MODEL_CARD.md, "The crisis check"); v8, which
it replaced, is read from ``bench/candidates/crisis-minilm-v8.json`` for the comparison.

Development data only: the exemplars (folds 1-3 for training; fold 0 is reported), the project
benign requests and look-alikes (as ``scripts/build_crisis_check.py`` reads them), the eight crisis
files ``bench/data/crisis_heldout.yaml`` .. ``crisis_heldout_v8.yaml`` (every one already scored)
and three known false fires of ``crisis-minilm-v8`` (:data:`crisis_lofo.KNOWN_FALSE_FIRES`, trained on as
look-alikes). ``tests/frameworks/self_harm_requests.yaml``, ``tests/models/crisis_medicine_lookalikes.yaml``
and MT-Bench first turns are checks: never trained on, never a threshold; MT-Bench first turns are
not read by the choice at all (its soft-line share is a shipping condition).

Method. For each crisis file in turn, a candidate is trained on the other seven files' crisis and
benign items, the exemplars' folds 1-3, the project requests and the known false fires; a
class-balanced RBF SVM on the first encoder window (the build's head), its routing threshold by the
build's rule on grouped 5-fold out-of-fold margins (at most ``BENIGN_CAP`` of the project requests
and at most ``look_cap`` of the look-alikes fire), and a band floor by the same rule one tier down
(at most ``band_benign`` of the project requests and ``band_look`` of the look-alikes at or above
it). v8's explicit phrases (and, in one setting, the multilingual lexicon), the medicine guard and
the short-message guard are the shipped ones. The held-out file is scored as the runtime scores
it (``CrisisCheck.fires_on``; "routed": the check or the ``general`` framework's self-harm request
checks; "soft line": not routed, read by the head (``crisis_check.head_reads``: words, guard,
small talk), head score at or above the floor). v8 is scored as shipped on the same items (its
phrases were written from the misses of the first five files, so its figures there are fitted;
so are those of every candidate, which keeps the phrases).

The choice (:func:`choose`), fixed before any candidate was scored: among the settings whose pooled
LOFO look-alikes routed and given the soft line are each at most v8's, and whose all-files model
routes none of the known false fires and no more medicine look-alikes and look-alikes of
``self_harm_requests.yaml`` than v8, the highest mean (over the eight files) crisis share routed;
ties: the higher mean either-tier share, then fewer look-alikes routed. No randomness: the same
files write the same JSON.
"""

from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from numpy.typing import NDArray
from sklearn.model_selection import StratifiedGroupKFold
from sklearn.svm import SVC

ROOT = Path(__file__).resolve().parents[1]
#: The check this script compares against (the previous shipped check, kept beside the candidates).
V8_CHECK = ROOT / "bench" / "candidates" / "crisis-minilm-v8.json"
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import crisis_lofo  # noqa: E402
from crisis_dev import kept_files  # noqa: E402
from crisis_lofo import Fitted, Lofo, checks_of, lofo_row, logits_of  # noqa: E402
from crisis_lofo import logit as _logit  # noqa: E402

from psychoalign.models.crisis import EXPLICIT_PHRASES, MEDICINE_GUARD  # noqa: E402
from psychoalign.models.crisis_check import CrisisCheck, load_crisis_check  # noqa: E402
from psychoalign.models.crisis_phrases import MULTILINGUAL_PHRASES, MedicineGuard, says_self_harm  # noqa: E402
from request_head import CRISIS_HELDOUTS  # noqa: E402

VERSION = "crisis-minilm-v10"
#: The eight crisis files (all scored at least once; development data for this candidate).
TRAIN_FILES = CRISIS_HELDOUTS[:8]
#: The settings compared: C, gamma (x 1 / (dim x variance)), the look-alike cap of the routing
#: threshold, the band's caps (project requests, look-alikes) and whether the lexicon is added.
CS = (1.0, 3.0, 10.0)
GAMMAS = (0.5, 1.0, 1.5)
LOOK_CAPS = (0.04, 0.06, 0.08, 0.10)
BAND_CAPS = ((0.02, 0.15), (0.02, 0.20), (0.03, 0.20), (0.03, 0.25), (0.05, 0.25))
LEXICON = (False, True)


@dataclass(frozen=True)
class Setting:
    c: float
    gamma: float
    look_cap: float
    band_benign: float
    band_look: float
    lexicon: bool

    def __str__(self) -> str:
        return (
            f"C {self.c:g}, gamma {self.gamma:g}, look-alike cap {self.look_cap:.2f}, band caps "
            f"{self.band_benign:.2f}/{self.band_look:.2f}, lexicon {'on' if self.lexicon else 'off'}"
        )


class Data(crisis_lofo.DevTexts):
    """Every text the estimate reads, embedded once (each text's encoder windows)."""

    def __init__(self, data_dir: Path | None) -> None:
        super().__init__(data_dir, TRAIN_FILES)
        self.embed(self.check_sets({}), [])

    def training(self, held: str | None) -> tuple[list[str], NDArray[np.bool_], NDArray[np.bool_], list[str]]:
        texts, y = list(self.base_texts), list(self.base_y)
        is_benign, groups = list(self.base_benign), list(self.base_groups)
        kept, kept_y, kept_benign, kept_groups = kept_files(self.files, held)
        texts += kept
        y += kept_y
        is_benign += kept_benign
        groups += kept_groups
        return texts, np.array(y), np.array(is_benign), groups


def fit(data: Data, held: str | None, c: float, gamma: float) -> Fitted:
    texts, y, is_benign, groups = data.training(held)
    x = np.stack([data.rows[t][0] for t in texts]).astype(np.float64)
    g = gamma * data.unit
    margins = np.zeros(len(y))
    for tr, te in StratifiedGroupKFold(crisis_lofo.FOLDS).split(x, y, groups):
        margins[te] = SVC(C=c, gamma=g, class_weight="balanced").fit(x[tr], y[tr]).decision_function(x[te])
    svm = SVC(C=c, gamma=g, class_weight="balanced").fit(x, y)
    return Fitted(svm, margins, is_benign, ~y & ~is_benign)


class Gram:
    """The RBF kernel between every training text of ``data`` (any held-out file's training set is a
    subset), computed once per gamma with BLAS by libsvm's formula, exp(-g (|a|^2 + |b|^2 - 2 a.b)).
    :meth:`fit` fits as :func:`fit` does on the same rows, kernel values read from the matrix instead
    of recomputed (equal to rounding; several times faster): for exploring a grid. A check to ship is
    written from :func:`fit`."""

    def __init__(self, data: Data, gamma: float) -> None:
        texts, _, _, _ = data.training(None)
        self.index = {t: i for i, t in enumerate(dict.fromkeys(texts))}
        self.x = np.stack([data.rows[t][0] for t in self.index]).astype(np.float64)
        self.g = gamma * data.unit
        sq = np.einsum("ij,ij->i", self.x, self.x)
        self.k = np.exp(-self.g * (sq[:, None] + sq[None, :] - 2.0 * (self.x @ self.x.T)))

    def fit(self, data: Data, held: str | None, c: float) -> Fitted:
        texts, y, is_benign, groups = data.training(held)
        idx = np.array([self.index[t] for t in texts])
        k = self.k[np.ix_(idx, idx)]
        margins = np.zeros(len(y))
        for tr, te in StratifiedGroupKFold(crisis_lofo.FOLDS).split(np.zeros((len(y), 1)), y, groups):
            svm = SVC(C=c, kernel="precomputed", class_weight="balanced").fit(k[np.ix_(tr, tr)], y[tr])
            margins[te] = svm.decision_function(k[np.ix_(te, tr)])
        svm = SVC(C=c, kernel="precomputed", class_weight="balanced").fit(k, y)
        kept = crisis_lofo.KernelSVM(self.x[idx[svm.support_]], svm.dual_coef_, svm.intercept_, self.g)
        return Fitted(kept, margins, is_benign, ~y & ~is_benign)


def as_check(model: Fitted, s: Setting, metrics: dict[str, object] | None = None) -> CrisisCheck:
    """The candidate as the runtime reads it (float16 support vectors), with its band floor."""
    phrases = (*EXPLICIT_PHRASES, *MULTILINGUAL_PHRASES) if s.lexicon else EXPLICIT_PHRASES
    return crisis_lofo.as_check(VERSION, model, s, phrases, MEDICINE_GUARD, metrics)


class Features(crisis_lofo.Features):
    """What the runtime reads of each text beside the head: explicit phrases (with and without the
    lexicon), the medicine guard (v10's unless ``guard`` is given), the short-message guard and the
    framework's request checks."""

    def __init__(self, data: crisis_lofo.DevTexts, guard: MedicineGuard = MEDICINE_GUARD) -> None:
        super().__init__(data, guard, EXPLICIT_PHRASES)
        self.says_lex = {t: self.says[t] or says_self_harm(t, MULTILINGUAL_PHRASES) for t in data.rows}


def scorer(
    feats: Features, logit: dict[str, float], route: float, floor: float | None, lex: bool
) -> crisis_lofo.Scorer:
    """Routing and the soft line of one head, the explicit phrases with the lexicon when ``lex``."""
    return crisis_lofo.Scorer(feats, logit, route, floor, feats.says_lex if lex else feats.says)


def settings() -> list[Setting]:
    grid = itertools.product(CS, GAMMAS, LOOK_CAPS, BAND_CAPS, LEXICON)
    return [Setting(c, g, lc, bb, bl, lex) for c, g, lc, (bb, bl), lex in grid]


def choose(
    results: dict[Setting, tuple[Lofo, dict[str, tuple[int, int, int]]]],
    v8: tuple[Lofo, dict[str, tuple[int, int, int]]],
) -> Setting | None:
    """The rule in the module docstring."""
    v8_pool, v8_checks = v8[0].pooled(), v8[1]
    ok = [
        s
        for s, (lofo, chk) in results.items()
        if crisis_lofo.looks_within(lofo, v8_pool) and crisis_lofo.checks_within(chk, v8_checks)
    ]
    if not ok:
        return None
    return max(ok, key=lambda s: (results[s][0].mean(0, 2), results[s][0].mean(1, 2), -results[s][0].pooled()[3]))


def main() -> int:
    ap = crisis_lofo.parser(
        __doc__,
        ROOT / "bench" / "candidates" / "crisis-minilm-v10.json",
        "write the chosen check (all eight files) to FILE (default: bench/candidates/crisis-minilm-v10.json, "
        "the copy of the check v12 replaced)",
    )
    ap.add_argument(
        "--only",
        default=None,
        metavar="C,GAMMA",
        help="compare the settings of this one (C, gamma) pair only (the full grid's choice if it is among them)",
    )
    args = ap.parse_args()
    pairs = [(c, g) for c in CS for g in GAMMAS]
    if args.only is not None:
        try:
            only = tuple(float(v) for v in args.only.split(","))
        except ValueError:
            only = ()
        if only not in pairs:
            raise SystemExit(f"error: --only {args.only}: not a pair of the grid (give C,GAMMA from {pairs})")
        pairs = [(only[0], only[1])]
    data = Data(args.data)
    feats = Features(data)
    v8 = load_crisis_check(str(V8_CHECK))
    assert v8 is not None and v8.phrases == EXPLICIT_PHRASES and v8.guard == MEDICINE_GUARD
    v8_floor = v8.floor
    assert v8_floor is not None
    v8_sc = scorer(feats, logits_of(v8, data), _logit(v8.head.threshold), _logit(v8_floor), False)
    v8_res = (Lofo({f: lofo_row(v8_sc, c, b) for f, (c, b) in data.files.items()}), checks_of(v8_sc, data))
    crisis_lofo.report("v8 (as shipped)", *v8_res, width=40)
    held_names: list[str | None] = [*data.files, None]
    results: dict[Setting, tuple[Lofo, dict[str, tuple[int, int, int]]]] = {}
    for c, g in pairs:
        fitted = {h: fit(data, h, c, g) for h in held_names}
        # The runtime's logits (float16 support vectors) depend on the fit alone, not on the caps.
        logit = {h: logits_of(as_check(m, settings()[0]), data) for h, m in fitted.items()}
        for s in (x for x in settings() if x.c == c and x.gamma == g):
            rows = {}
            for f, (crisis, looks) in data.files.items():
                route, band = fitted[f].thresholds(s)
                rows[f] = lofo_row(scorer(feats, logit[f], route, band, s.lexicon), crisis, looks)
            route, band = fitted[None].thresholds(s)
            results[s] = (Lofo(rows), checks_of(scorer(feats, logit[None], route, band, s.lexicon), data))
        print(f"  fitted C {c:g}, gamma {g:g}", file=sys.stderr, flush=True)
    best = choose(results, v8_res)
    ranked = sorted(results, key=lambda s: -results[s][0].mean(0, 2))
    print("top settings by mean LOFO crisis routed (pooled: crisis routed, either; look-alikes routed, soft):")
    for s in ranked[:12]:
        p = results[s][0].pooled()
        print(f"  {s}: {p[0]}/{p[2]}, {p[1]}/{p[2]}; {p[3]}/{p[5]}, {p[4]}/{p[5]}")
    if best is None:
        print("no setting passes the rule; nothing chosen")
        return 1
    print(f"chosen: {best}")
    crisis_lofo.report(VERSION, *results[best], width=40)
    print(
        "per file, the shipping rule's parts against v8 "
        "(routed >=, either tier >, look-alikes routed <= +2, soft <= +3):"
    )
    for s in [best, *(x for x in ranked[:6] if x != best)]:
        cells = []
        for f, row in results[s][0].rows.items():
            old = v8_res[0].rows[f]
            parts = (row[0] >= old[0], row[1] > old[1], row[3] <= old[3] + 2, row[4] <= old[4] + 3)
            cells.append("".join("+" if p else "-" for p in parts))
        print(f"  {s}: {' '.join(cells)} (look-alikes routed {[r[3] for r in results[s][0].rows.values()]})")
    if args.write is not None:
        model = fit(data, None, best.c, best.gamma)
        lofo = results[best][0]
        metrics: dict[str, object] = {
            # Kept as written when the check was frozen (before it was scored and shipped), so that a
            # rebuild writes the shipped file byte for byte (its label hashes the metrics too).
            "candidate": "scripts/explore_crisis_v10.py, frozen for a fresh file; not shipped",
            "setting": {
                "c": best.c,
                "gamma_unit": best.gamma,
                "lookalike_cap": best.look_cap,
                "band_benign_cap": best.band_benign,
                "band_lookalike_cap": best.band_look,
                "lexicon": best.lexicon,
            },
            "train_files_sha256": {p.name: crisis_lofo.file_sha256(p) for p in TRAIN_FILES},
            "known_false_fires": list(crisis_lofo.KNOWN_FALSE_FIRES),
            "support_vectors": int(model.svm.support_vectors_.shape[0]),
            "lofo_pooled": dict(
                zip(
                    (
                        "crisis_routed",
                        "crisis_either",
                        "crisis_n",
                        "lookalikes_routed",
                        "lookalikes_soft",
                        "lookalikes_n",
                    ),
                    lofo.pooled(),
                    strict=True,
                )
            ),
        }
        crisis_lofo.write_check(args.write, as_check(model, best, metrics))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
