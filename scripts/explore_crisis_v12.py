"""Leave-one-file-out choice and build of the crisis check candidate ``crisis-minilm-v12``.

Run from the repo root (needs the evaluation data folder, shared/data, as the build does):

    .venv/bin/python scripts/explore_crisis_v12.py               # the LOFO estimate and the choice (prints only)
    .venv/bin/python scripts/explore_crisis_v12.py --write       # the chosen setting trained on all eleven files,
                                                                 # written to bench/candidates/crisis-minilm-v12.json

The shipped crisis check from its fresh file (``bench/data/crisis_heldout_v12.yaml``, written blind,
scored by the rule MODEL_CARD.md states) until ``crisis-minilm-v13`` replaced it; kept in
``bench/candidates/crisis-minilm-v12.json`` for comparison, as ``crisis-minilm-v10``, which it
replaced, is read from ``bench/candidates/crisis-minilm-v10.json``. v12 is v10's
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

import functools
import hashlib
import itertools
import multiprocessing
import pickle
import sys
from dataclasses import dataclass, field
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
from psychoalign.models.crisis_phrases import MULTILINGUAL_PHRASES, MedicineGuard  # noqa: E402
from request_head import CRISIS_HELDOUTS  # noqa: E402

V10_CHECK = ROOT / "bench" / "candidates" / "crisis-minilm-v10.json"
CANDIDATE = ROOT / "bench" / "candidates" / "crisis-minilm-v12.json"
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


@dataclass(frozen=True)
class Recipe:
    """What a build of this kind varies: the candidate's name, files, guard and output, and the check
    it is compared with (``baseline_check``, scored as shipped, with its own guard) and whose setting
    and guard are run leave-one-file-out as the baseline of the rule. v12's is :data:`V12`;
    ``scripts/explore_crisis_v13.py`` passes its own."""

    version: str
    train_files: tuple[Path, ...]
    guard: MedicineGuard
    out: Path
    baseline: str  # the baseline's name in the report and the metrics ("v10")
    baseline_check: Path
    baseline_setting: Setting
    baseline_guard: MedicineGuard
    candidate_note: str
    files_word: str  # "eleven"
    extra_metrics: dict[str, object] = field(default_factory=dict)


V12 = Recipe(
    version=VERSION,
    train_files=TRAIN_FILES,
    guard=MEDICINE_GUARD,
    out=CANDIDATE,
    baseline="v10",
    baseline_check=V10_CHECK,
    baseline_setting=V10_SETTING,
    baseline_guard=MEDICINE_GUARD,
    candidate_note="scripts/explore_crisis_v12.py, frozen for a fresh file; not shipped",
    files_word="eleven",
)


class Data(v10.Data):
    """v10's development texts over ``train_files`` (v12's: the eleven files), with v10's false fires
    among the known ones."""

    def __init__(self, data_dir: Path | None, train_files: tuple[Path, ...] = TRAIN_FILES) -> None:
        crisis_lofo.DevTexts.__init__(self, data_dir, train_files)
        n = len(self.base_texts)
        self.base_texts += list(V10_FALSE_FIRES)
        self.base_y += [False] * len(V10_FALSE_FIRES)
        self.base_benign += [False] * len(V10_FALSE_FIRES)
        self.base_groups += [f"known:{n + i}" for i in range(len(V10_FALSE_FIRES))]
        checks = self.check_sets({})
        checks[KNOWN] = ([*crisis_lofo.KNOWN_FALSE_FIRES, *V10_FALSE_FIRES], False)
        self.embed(checks, [])


def as_check(
    model: crisis_lofo.Fitted, s: Setting, metrics: dict[str, object] | None = None, recipe: Recipe = V12
) -> CrisisCheck:
    return crisis_lofo.as_check(recipe.version, model, s, PHRASES, recipe.guard, metrics)


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


def scored(
    data: Data,
    fitted: dict[str | None, crisis_lofo.Fitted],
    logit: dict[str | None, dict[str, float]],
    s: Setting,
    feats: v10.Features,
) -> Result:
    """Setting ``s`` on one (C, gamma)'s fits: each file scored by the fit without it, and the
    all-files fit's checks (``feats``: the guard and phrases the runtime would read)."""
    rows = {}
    for f, (crisis, looks) in data.files.items():
        route, band = fitted[f].thresholds(s)
        rows[f] = lofo_row(v10.scorer(feats, logit[f], route, band, True), crisis, looks)
    route, band = fitted[None].thresholds(s)
    return Lofo(rows), checks_of(v10.scorer(feats, logit[None], route, band, True), data)


def pair_results(
    recipe: Recipe,
    data: Data,
    feats: v10.Features,
    base_feats: v10.Features,
    cache: Path | None,
    gram: bool,
    cg: tuple[float, float],
) -> tuple[dict[Setting, Result], Result | None]:
    """Every setting of one (C, gamma) scored leave-one-file-out (``feats``), and the baseline's
    setting under the baseline's guard (``base_feats``) when it has this (C, gamma); kept in (and
    read back from) ``cache`` under a name that hashes the recipe and its files' bytes."""
    c, g = cg
    saved = None
    if cache is not None:
        key = hashlib.sha256(repr((recipe, gram, [crisis_lofo.file_sha256(p) for p in recipe.train_files])).encode())
        saved = cache / f"{recipe.version}-C{c:g}-g{g:g}-{key.hexdigest()[:12]}.pkl"
        if saved.is_file():
            print(f"  read C {c:g}, gamma {g:g} from {saved}", file=sys.stderr, flush=True)
            got: tuple[dict[Setting, Result], Result | None] = pickle.loads(saved.read_bytes())
            return got
    bs = recipe.baseline_setting
    held: list[str | None] = [*data.files, None]
    if gram:
        kernel = v10.Gram(data, g)
        fitted = {h: kernel.fit(data, h, c) for h in held}
    else:
        fitted = {h: v10.fit(data, h, c, g) for h in held}
    logit = {h: logits_of(as_check(m, bs, recipe=recipe), data) for h, m in fitted.items()}
    results = {s: scored(data, fitted, logit, s, feats) for s in settings() if (s.c, s.gamma) == (c, g)}
    base = None
    if (bs.c, bs.gamma) == (c, g):
        base = results[bs] if base_feats is feats else scored(data, fitted, logit, bs, base_feats)
    print(f"  fitted C {c:g}, gamma {g:g}", file=sys.stderr, flush=True)
    if saved is not None:
        saved.parent.mkdir(parents=True, exist_ok=True)
        saved.write_bytes(pickle.dumps((results, base)))
    return results, base


def explore(
    recipe: Recipe,
    data_dir: Path | None,
    write: Path | None,
    jobs: int = 1,
    cache: Path | None = None,
    only: list[tuple[float, float]] | None = None,
    gram: bool = False,
) -> int:
    """The LOFO estimate, the choice and (``write``) the chosen check trained on every file of
    ``recipe``; ``jobs`` worker processes fit the (C, gamma) pairs (the same figures as one),
    ``cache`` keeps each pair's results, ``only`` restricts the grid to those pairs, ``gram`` fits the
    grid on a precomputed kernel (:class:`explore_crisis_v10.Gram`; the written check is fit as always)."""
    b = recipe.baseline
    data = Data(data_dir, recipe.train_files)
    feats = v10.Features(data, recipe.guard)
    base_feats = feats if recipe.baseline_guard == recipe.guard else v10.Features(data, recipe.baseline_guard)
    shipped = load_crisis_check(str(recipe.baseline_check))
    assert shipped is not None and shipped.phrases == PHRASES and shipped.guard == recipe.baseline_guard
    assert shipped.floor is not None
    route, floor = crisis_lofo.logit(shipped.head.threshold), crisis_lofo.logit(shipped.floor)
    sc = v10.scorer(base_feats, logits_of(shipped, data), route, floor, True)
    shipped_lofo = Lofo({f: lofo_row(sc, c, b_) for f, (c, b_) in data.files.items()})
    shipped_checks = checks_of(sc, data)
    own = shipped.metrics.get("train_files_sha256") or {}
    trained = sum(p.name in own for p in recipe.train_files)
    name = f"{b} as shipped (IN SAMPLE on the {trained} of these files it trained on)"
    crisis_lofo.report(name, shipped_lofo, shipped_checks, width=46)
    results: dict[Setting, Result] = {}
    base: Result | None = None
    bs = recipe.baseline_setting
    pair = functools.partial(pair_results, recipe, data, feats, base_feats, cache, gram)
    # the baseline's pair first (with --only, the pairs given; the choice is then over those only)
    pairs = sorted(only or itertools.product(CS, GAMMAS), key=lambda cg: cg != (bs.c, bs.gamma))
    if (bs.c, bs.gamma) not in pairs:
        raise SystemExit(f"error: --only: the baseline's pair {bs.c:g},{bs.gamma:g} must be among the pairs")
    if jobs > 1:  # the same fits in worker processes (forked: the embeddings are shared, not re-read)
        with multiprocessing.get_context("fork").Pool(min(jobs, len(pairs))) as pool:
            done = pool.map(pair, pairs, chunksize=1)
    else:
        done = [pair(cg) for cg in pairs]
    for part, part_base in done:
        results.update(part)
        base = part_base if part_base is not None else base
    assert base is not None
    crisis_lofo.report(f"{b}'s setting on {recipe.version}'s data (out of sample on every file)", *base, width=46)
    if base_feats is not feats:  # the baseline's setting under this recipe's guard: what the guard alone changes
        crisis_lofo.report(f"{b}'s setting with {recipe.version}'s guard", *results[bs], width=46)
    best = choose(results, base[0], shipped_checks)
    print("top settings by mean LOFO crisis routed (pooled: crisis routed, either; look-alikes routed, soft):")
    for s in sorted(results, key=lambda s: -results[s][0].mean(0, 2))[:12]:
        p = results[s][0].pooled()
        print(f"  {s}: {p[0]}/{p[2]}, {p[1]}/{p[2]}; {p[3]}/{p[5]}, {p[4]}/{p[5]}")
    if best is None:
        print("no setting passes the rule; nothing chosen")
        return 1
    print(f"chosen: {best}")
    crisis_lofo.report(recipe.version, *results[best], width=46)
    if write is not None:
        model = v10.fit(data, None, best.c, best.gamma)
        if gram:  # the explored all-files fit against the one written: the same thresholds, or say so
            exact, fast = model.thresholds(best), v10.Gram(data, best.gamma).fit(data, None, best.c).thresholds(best)
            print(f"thresholds (route, band margins): written fit {exact}, explored on the Gram matrix {fast}")
        keys = ("crisis_routed", "crisis_either", "crisis_n", "lookalikes_routed", "lookalikes_soft", "lookalikes_n")
        metrics: dict[str, object] = {
            "candidate": recipe.candidate_note,
            "setting": {
                "c": best.c,
                "gamma_unit": best.gamma,
                "lookalike_cap": best.look_cap,
                "band_benign_cap": best.band_benign,
                "band_lookalike_cap": best.band_look,
                "lexicon": True,
            },
            "train_files_sha256": {p.name: crisis_lofo.file_sha256(p) for p in recipe.train_files},
            "known_false_fires": [*crisis_lofo.KNOWN_FALSE_FIRES, *V10_FALSE_FIRES],
            "support_vectors": int(model.svm.support_vectors_.shape[0]),
            "lofo_pooled": dict(zip(keys, results[best][0].pooled(), strict=True)),
            f"{b}_setting_lofo_pooled": dict(zip(keys, base[0].pooled(), strict=True)),
            **recipe.extra_metrics,
        }
        crisis_lofo.write_check(write, as_check(model, best, metrics, recipe))
    return 0


def main() -> int:
    ap = crisis_lofo.parser(
        __doc__,
        CANDIDATE,
        f"write the chosen check (all {V12.files_word} files) to FILE (default: bench/candidates/, the copy of "
        "the check v13 replaced)",
    )
    crisis_lofo.add_jobs(ap)
    args = ap.parse_args()
    only = crisis_lofo.only_pairs(ap, args.only, CS, GAMMAS)
    return explore(V12, args.data, args.write, args.jobs, args.cache, only, args.gram)


if __name__ == "__main__":
    raise SystemExit(main())
