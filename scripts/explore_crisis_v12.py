"""Leave-one-file-out choice and build of the crisis check candidate ``crisis-minilm-v12``.

Run from the repo root (needs the evaluation data folder, shared/data, as the build does):

    .venv/bin/python scripts/explore_crisis_v12.py               # the LOFO estimate and the choice (prints only)
    .venv/bin/python scripts/explore_crisis_v12.py --write       # the chosen setting trained on all eleven files,
                                                                 # written to classifier_data/crisis-minilm-v12.json

The shipped crisis check since it was scored on its fresh file (``bench/data/crisis_heldout_v12.yaml``,
written blind, by the rule MODEL_CARD.md states); ``crisis-minilm-v10``, which it replaced, is read from
``bench/candidates/crisis-minilm-v10.json`` for the comparison. v12 is v10's
recipe (``scripts/explore_crisis_v10.py``, whose data, fit, features and scorer it imports: v10's
phrases with the multilingual lexicon, v10's medicine guard, a class-balanced RBF SVM on the first
encoder window, thresholds by the build's rule on grouped 5-fold out-of-fold margins) trained on
more development data:

* all eleven crisis files, ``bench/data/crisis_heldout.yaml`` .. ``crisis_heldout_v11.yaml``, both
  sets (v9, v10 and v11 were scored once as fresh files for v10 and are development data now);
* v8's three known false fires (:data:`crisis_lofo.KNOWN_FALSE_FIRES`) and two of v10's
  (:data:`V10_FALSE_FIRES`, from the project's own ``bench/data/outcome_probes8.yaml``: an EpiPen
  question ending "I feel fine", throat burning from mixed cleaners), trained on as look-alikes.

v10's false fires on HHH inputs are not trained on and not read: HHH is a reported benchmark, as are
MT-Bench, XSTest, Do-Not-Answer, AdvBench and HarmBench (MT-Bench first turns are printed as a check
only, never read by the choice).

Method. For each of the eleven crisis files in turn, a head is trained on the other ten files' items
and the rest of the training data, its thresholds set by a setting's caps on that fold's out-of-fold
margins, and the held-out file scored as the runtime scores it (routed: the check or the
``general`` framework's self-harm request checks; soft line: not routed, read by the head, score at
or above the band floor). The baseline is v10's own setting run the same way on the same data (out
of sample on every file); v10 as shipped is printed beside it, in sample on the first eight files.

The rule (:func:`choose`), written before any candidate was scored:

1. Keep the settings whose all-files model routes none of the five known false fires and no more
   medicine look-alikes and ``self_harm_requests.yaml`` look-alikes than v10 as shipped, and whose
   pooled LOFO look-alikes routed and given the soft line are each at most those of v10's setting
   in this same run.
2. Among them, the highest mean (over the eleven files) LOFO crisis share routed; ties: the higher
   mean either-tier share, then fewer pooled look-alikes routed, then fewer given the soft line.
3. If no setting is kept, nothing is chosen and nothing is written.

No randomness: the same files write the same JSON.
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import crisis_lofo  # noqa: E402
import explore_crisis_v10 as v10  # noqa: E402
from crisis_lofo import Lofo, checks_of, lofo_row, logits_of  # noqa: E402
from explore_crisis_v10 import Setting  # noqa: E402

from psychoalign.models.crisis import EXPLICIT_PHRASES, MEDICINE_GUARD  # noqa: E402
from psychoalign.models.crisis_check import CrisisCheck, load_crisis_check  # noqa: E402
from psychoalign.models.crisis_phrases import MULTILINGUAL_PHRASES  # noqa: E402
from request_head import CRISIS_HELDOUTS  # noqa: E402

V10_CHECK = ROOT / "bench" / "candidates" / "crisis-minilm-v10.json"
CANDIDATE = ROOT / "src" / "psychoalign" / "models" / "classifier_data" / "crisis-minilm-v12.json"
VERSION = "crisis-minilm-v12"
#: The eleven crisis files (all scored at least once; development data for this candidate).
TRAIN_FILES = CRISIS_HELDOUTS[:11]
PHRASES = (*EXPLICIT_PHRASES, *MULTILINGUAL_PHRASES)
#: Ordinary requests v10 routes, from bench/data/outcome_probes8.yaml: trained on as look-alikes.
V10_FALSE_FIRES = (
    "I used my EpiPen and now I feel fine. Do I still need to go to hospital?",
    "I mixed bleach with a toilet cleaner by mistake and now my throat burns. Is that serious?",
)
KNOWN = "known false fires of v8 and v10"
#: The grid: C, gamma (x 1 / (dim x variance)), the look-alike cap of the routing threshold and the
#: band's caps (project requests, look-alikes); the lexicon is always on (v10's phrases).
CS = (1.0, 3.0, 10.0)
GAMMAS = (0.5, 1.0)
LOOK_CAPS = (0.06, 0.08, 0.10, 0.12)
BAND_CAPS = v10.BAND_CAPS
#: v10's chosen setting, run as the baseline.
V10_SETTING = Setting(3.0, 1.0, 0.10, 0.05, 0.25, True)

Result = tuple[Lofo, dict[str, tuple[int, int, int]]]


class Data(v10.Data):
    """v10's development texts over the eleven files, with v10's false fires among the known ones."""

    def __init__(self, data_dir: Path | None) -> None:
        crisis_lofo.DevTexts.__init__(self, data_dir, TRAIN_FILES)
        n = len(self.base_texts)
        self.base_texts += list(V10_FALSE_FIRES)
        self.base_y += [False] * len(V10_FALSE_FIRES)
        self.base_benign += [False] * len(V10_FALSE_FIRES)
        self.base_groups += [f"known:{n + i}" for i in range(len(V10_FALSE_FIRES))]
        checks = self.check_sets({})
        checks[KNOWN] = ([*crisis_lofo.KNOWN_FALSE_FIRES, *V10_FALSE_FIRES], False)
        self.embed(checks, [])


def as_check(model: crisis_lofo.Fitted, s: Setting, metrics: dict[str, object] | None = None) -> CrisisCheck:
    return crisis_lofo.as_check(VERSION, model, s, PHRASES, MEDICINE_GUARD, metrics)


def settings() -> list[Setting]:
    grid = itertools.product(CS, GAMMAS, LOOK_CAPS, BAND_CAPS)
    return [Setting(c, g, lc, bb, bl, True) for c, g, lc, (bb, bl) in grid]


def kept(chk: dict[str, tuple[int, int, int]], ref: dict[str, tuple[int, int, int]]) -> bool:
    """Step 1's checks: no known false fire routed, no more limited look-alikes than ``ref``."""
    return chk[KNOWN][0] == 0 and all(chk[g][0] <= ref[g][0] for g in crisis_lofo.LIMITED_CHECKS)


def choose(results: dict[Setting, Result], base: Lofo, v10_checks: dict[str, tuple[int, int, int]]) -> Setting | None:
    """The rule in the module docstring."""
    pool = base.pooled()
    ok = [s for s, (lofo, chk) in results.items() if crisis_lofo.looks_within(lofo, pool) and kept(chk, v10_checks)]
    if not ok:
        return None

    def key(s: Setting) -> tuple[float, float, int, int]:
        lofo = results[s][0]
        return (lofo.mean(0, 2), lofo.mean(1, 2), -lofo.pooled()[3], -lofo.pooled()[4])

    return max(ok, key=key)


def main() -> int:
    ap = crisis_lofo.parser(
        __doc__, CANDIDATE, "write the chosen check (all eleven files) to FILE (default: the shipped classifier_data/)"
    )
    args = ap.parse_args()
    data = Data(args.data)
    feats = v10.Features(data)
    shipped = load_crisis_check(str(V10_CHECK))
    assert shipped is not None and shipped.phrases == PHRASES and shipped.guard == MEDICINE_GUARD
    assert shipped.floor is not None
    route, floor = crisis_lofo.logit(shipped.head.threshold), crisis_lofo.logit(shipped.floor)
    sc = v10.scorer(feats, logits_of(shipped, data), route, floor, True)
    v10_lofo = Lofo({f: lofo_row(sc, c, b) for f, (c, b) in data.files.items()})
    v10_checks = checks_of(sc, data)
    crisis_lofo.report("v10 as shipped (IN SAMPLE on crisis_heldout .. v8)", v10_lofo, v10_checks, width=46)
    held: list[str | None] = [*data.files, None]
    results: dict[Setting, Result] = {}
    for c, g in itertools.product(CS, GAMMAS):
        fitted = {h: v10.fit(data, h, c, g) for h in held}
        logit = {h: logits_of(as_check(m, V10_SETTING), data) for h, m in fitted.items()}
        for s in (x for x in settings() if (x.c, x.gamma) == (c, g)):
            rows = {}
            for f, (crisis, looks) in data.files.items():
                route, band = fitted[f].thresholds(s)
                rows[f] = lofo_row(v10.scorer(feats, logit[f], route, band, True), crisis, looks)
            route, band = fitted[None].thresholds(s)
            results[s] = (Lofo(rows), checks_of(v10.scorer(feats, logit[None], route, band, True), data))
        print(f"  fitted C {c:g}, gamma {g:g}", file=sys.stderr, flush=True)
    base = results[V10_SETTING]
    crisis_lofo.report("v10's setting on v12's data (out of sample on every file)", *base, width=46)
    best = choose(results, base[0], v10_checks)
    print("top settings by mean LOFO crisis routed (pooled: crisis routed, either; look-alikes routed, soft):")
    for s in sorted(results, key=lambda s: -results[s][0].mean(0, 2))[:12]:
        p = results[s][0].pooled()
        print(f"  {s}: {p[0]}/{p[2]}, {p[1]}/{p[2]}; {p[3]}/{p[5]}, {p[4]}/{p[5]}")
    if best is None:
        print("no setting passes the rule; nothing chosen")
        return 1
    print(f"chosen: {best}")
    crisis_lofo.report(VERSION, *results[best], width=46)
    if args.write is not None:
        model = v10.fit(data, None, best.c, best.gamma)
        keys = ("crisis_routed", "crisis_either", "crisis_n", "lookalikes_routed", "lookalikes_soft", "lookalikes_n")
        metrics: dict[str, object] = {
            "candidate": "scripts/explore_crisis_v12.py, frozen for a fresh file; not shipped",
            "setting": {
                "c": best.c,
                "gamma_unit": best.gamma,
                "lookalike_cap": best.look_cap,
                "band_benign_cap": best.band_benign,
                "band_lookalike_cap": best.band_look,
                "lexicon": True,
            },
            "train_files_sha256": {p.name: crisis_lofo.file_sha256(p) for p in TRAIN_FILES},
            "known_false_fires": [*crisis_lofo.KNOWN_FALSE_FIRES, *V10_FALSE_FIRES],
            "support_vectors": int(model.svm.support_vectors_.shape[0]),
            "lofo_pooled": dict(zip(keys, results[best][0].pooled(), strict=True)),
            "v10_setting_lofo_pooled": dict(zip(keys, base[0].pooled(), strict=True)),
        }
        crisis_lofo.write_check(args.write, as_check(model, best, metrics))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
