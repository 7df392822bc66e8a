"""The embedded classifier's response head on held-out answers: correct safety answers passed, harmful
compliant answers blocked.

Run from the repository root (needs the evaluation data folder, shared/data, for the text check):

    python bench/response_head.py                       # both answers files, shipped weights
    python bench/response_head.py --file FILE --no-doc  # another answers file (repeatable)
    python bench/response_head.py --weights bench/candidates/evaluator-minilm-v12.json --no-doc
    python bench/response_head.py --probes --no-doc     # development: the outcome probes' drafts

An answers file (YAML) holds two lists of (request, answer) pairs::

    acceptable:    # correct, useful answers on safety-adjacent topics
      - request: "..."
        answer: "..."
    unacceptable:  # answers complying with something harmful
      - request: "..."
        answer: "..."

Before any figure the bench checks by text that no answer repeats a response the classifier is
trained on (the corpus's responses, with ``models/classifier_data/project_safety_answers.yaml`` and
``project_long_responses.yaml`` whichever weights are scored): the same text after normalisation, or
content words overlapping by Jaccard >= 0.5 (``bench/request_head.py``'s rule). It counts them (the
target is 0) and leaves them out of every figure; it also counts, as a report, the requests that repeat
a training request.

Figures, with 95 % Wilson intervals, per file and pooled (aggregates only, never the items):

* response head: acceptable answers passed (the head's P at or above its operating threshold, i.e.
  a score >= tau) and unacceptable answers blocked, on the answer alone;
* whole verdict: the same through :meth:`SafetyClassifier.evaluate` on the (request, answer) pair
  as the negotiation's EVALUATOR calls it (the request's and the answer's windows, the request
  head's ceiling, the general framework's deterministic checks and the crisis check): passed when
  the verdict is not VETOED.

``--probes`` (development data, never a held-out file) reads ``bench/data/outcome_probes4.yaml`` to
``outcome_probes9.yaml`` instead: each probe's right answer (``answer``) is an acceptable answer;
its plausible but wrong draft (``wrong``) is reported on its own (how many pass), since a wrong
safety tip is not a harmful compliance the head is trained to block. No doc then.

The section "Embedded default: response head on held-out answers" of docs/performance.md is
rewritten unless ``--no-doc``, ``--weights`` or ``--probes`` is given.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _util import Target, captured, data_dir, publish  # noqa: E402
from psychoalign.frameworks import load_framework  # noqa: E402
from psychoalign.models.classifier import VETO_BELOW, load_classifier  # noqa: E402
from psychoalign.models.crisis import exemplars  # noqa: E402
from psychoalign.models.safety_corpus import _long_responses, load_corpus  # noqa: E402
from request_head import rate, repeats  # noqa: E402

if TYPE_CHECKING:
    from psychoalign.frameworks import Framework
    from psychoalign.models.classifier import SafetyClassifier

#: The held-out answers files the default run reads (each written blind, before the build it scores).
ANSWERS = (ROOT / "bench" / "data" / "answers_heldout_v1.yaml", ROOT / "bench" / "data" / "answers_heldout_v2.yaml")
#: Development data for ``--probes``: the outcome probes' right answers and wrong drafts.
PROBE_FILES = tuple(ROOT / "bench" / "data" / f"outcome_probes{n}.yaml" for n in range(4, 10))
SIDES = ("acceptable", "unacceptable")


class Pair(BaseModel):
    """One (request, answer) pair of an answers file."""

    model_config = ConfigDict(extra="forbid")
    request: str = Field(min_length=1)
    answer: str = Field(min_length=1)


class AnswersFile(BaseModel):
    """An answers file: acceptable and unacceptable (request, answer) pairs."""

    model_config = ConfigDict(extra="forbid")
    acceptable: list[Pair]
    unacceptable: list[Pair]


def load_answers(path: Path) -> dict[str, list[Pair]]:
    """The two sides of the answers file at ``path``; a bad file is a one-line error naming it."""
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
        parsed = AnswersFile.model_validate(raw)
    except (OSError, yaml.YAMLError) as exc:
        raise SystemExit(f"error: cannot read {path}: {str(exc).splitlines()[0]} (give an answers YAML file)") from None
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "top level"
        raise SystemExit(
            f"error: {path}: {where}: {err['msg']} (the file maps acceptable and unacceptable to lists of "
            "{request, answer} strings)"
        ) from None
    return {
        side: [Pair(request=p.request.strip(), answer=p.answer.strip()) for p in getattr(parsed, side)]
        for side in SIDES
    }


def load_probe_drafts(paths: tuple[Path, ...] = PROBE_FILES) -> dict[str, list[Pair]]:
    """Development pairs from outcome probe files: right answers (``acceptable``), wrong drafts (``wrong``)."""
    out: dict[str, list[Pair]] = {"acceptable": [], "wrong": []}
    for path in paths:
        try:
            probes = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise SystemExit(f"error: cannot read {path}: {str(exc).splitlines()[0]} (restore it)") from None
        for probe in probes:
            for key, side in (("answer", "acceptable"), ("wrong", "wrong")):
                if key in probe:
                    out[side].append(Pair(request=str(probe["request"]), answer=str(probe[key])))
    return out


def training_texts(data: Path) -> tuple[list[str], list[str]]:
    """The corpus's (responses, requests), with the project-written safety answers and long responses
    (the candidates' response data) among the responses and the crisis check's training exemplars among
    the requests (the whole verdict runs that check)."""
    corpus = load_corpus(data, safety_answers=True)
    crisis = [e.text for e in exemplars() if not e.held_out]
    long = [ex.text for ex in _long_responses()]
    return [*(ex.text for ex in corpus if ex.kind == "response"), *long], [
        *(ex.text for ex in corpus if ex.kind == "request"),
        *crisis,
    ]


def verdict_passes(clf: SafetyClassifier, pairs: list[Pair], framework: Framework) -> list[bool]:
    """Whether the whole classifier's verdict on each (request, answer) pair lets it through (not
    VETOED), as the negotiation's EVALUATOR asks for it (the framework given, no earlier turns)."""
    return [clf.evaluate(p.request, p.answer, framework)["verdict"] != "VETOED" for p in pairs]


def head_passes(clf: SafetyClassifier, pairs: list[Pair]) -> list[bool]:
    """Whether the response head alone passes each answer (score >= tau)."""
    return [bool(p * 100 >= VETO_BELOW) for p in clf.scores([p.answer for p in pairs], "response")]


def report(
    clf: SafetyClassifier, sets: dict[str, list[Pair]], framework: Framework, label: str, targets: list[Target]
) -> None:
    """Print the head's and the whole verdict's rates on ``sets`` (``acceptable`` passed, ``unacceptable``
    blocked, ``wrong`` passed: reported), each line's name after ``label`` (an indent)."""
    for side, pairs in sets.items():
        if not pairs:
            continue
        for how, flags in (
            ("response head", head_passes(clf, pairs)),
            ("whole verdict", verdict_passes(clf, pairs, framework)),
        ):
            if side == "unacceptable":
                rate(f"{label}unacceptable blocked, {how}", flags.count(False), len(flags), "blocked", None, targets)
            else:
                rate(f"{label}{side} passed, {how}", flags.count(True), len(flags), "passed", None, targets)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--file",
        type=Path,
        action="append",
        default=None,
        help="answers file (repeatable; default: bench/data/answers_heldout_v1.yaml and _v2.yaml)",
    )
    ap.add_argument(
        "--weights", type=Path, default=None, help="classifier weights JSON (default: the shipped ones); no doc"
    )
    ap.add_argument("--data", type=Path, default=None, help="evaluation data folder (default shared/data)")
    ap.add_argument("--no-doc", action="store_true", help="print only; leave docs/performance.md alone")
    ap.add_argument("--probes", action="store_true", help="development: the outcome probes' drafts instead; no doc")
    args = ap.parse_args(argv)
    if args.probes and args.file:
        raise SystemExit("error: --probes reads the outcome probe files; give --probes or --file, not both")
    if args.weights is not None and not args.weights.is_file():
        raise SystemExit(f"error: --weights {args.weights}: no such file (give a classifier weights .json)")
    files: list[Path] = args.file or list(ANSWERS)
    if not args.probes:
        for path in files:
            if not path.is_file():
                raise SystemExit(
                    f"error: {path}: no such answers file (give --file FILE, or --probes for the development drafts)"
                )
    t0 = time.perf_counter()
    per_file = (
        {"outcome_probes4-9.yaml": load_probe_drafts()} if args.probes else {p.name: load_answers(p) for p in files}
    )
    targets: list[Target] = []
    with captured() as out:
        responses, requests = training_texts(args.data or data_dir())
        clf = load_classifier(args.weights)
        framework = load_framework("general")
        kept: dict[str, dict[str, list[Pair]]] = {}
        n_repeat = 0
        for name, sets in per_file.items():
            repeated = {side: repeats([p.answer for p in pairs], responses) for side, pairs in sets.items()}
            n_file = sum(len(v) for v in repeated.values())
            n_req = sum(len(repeats([p.request for p in pairs], requests)) for pairs in sets.values())
            print(
                f"{name}: answers repeating a training response: {n_file} (must be 0; left out of the figures); "
                f"requests repeating a training request: {n_req} (reported)"
            )
            n_repeat += n_file
            kept[name] = {side: [p for p in pairs if p.answer not in repeated[side]] for side, pairs in sets.items()}
        targets.append(Target("held-out answers absent from training", str(n_repeat), "0", n_repeat == 0))
        counts = ", ".join(f"{len(v)} {k}" for k, v in next(iter(kept.values())).items()) if len(kept) == 1 else ""
        print(f"classifier {clf.weights.label}; framework general" + (f"; {counts}" if counts else ""))
        print(f"  {'set':<48} {'n':>3}  {'rate':>7}           {'target':<18} [95 % Wilson CI]")
        pooled: dict[str, list[Pair]] = {}
        for sets in kept.values():
            for side, pairs in sets.items():
                pooled.setdefault(side, []).extend(pairs)
        print("all files:" if len(kept) > 1 else f"{next(iter(kept))}:")
        report(clf, pooled, framework, "", targets)
        if len(kept) > 1:
            for name, sets in kept.items():
                print(f"{name}:")
                report(clf, sets, framework, "  ", targets)
    print(f"\ntotal {time.perf_counter() - t0:.0f}s")
    if args.no_doc or args.weights is not None or args.probes:
        return
    publish(
        "response-head",
        "Embedded default: response head on held-out answers — `bench/response_head.py`",
        out.getvalue(),
        targets,
        quick=False,
        note="Hand-written held-out answers (`bench/data/answers_heldout_v1.yaml`, "
        "`bench/data/answers_heldout_v2.yaml`, each written blind): correct, useful answers on safety-adjacent "
        "topics (acceptable) and answers complying with something harmful (unacceptable), each with its request; "
        "never trained on. `answers_heldout_v2.yaml` is the shipped response head's fresh file; "
        "`answers_heldout_v1.yaml` was read while it was built (nothing was chosen on it). The response head "
        "judges the answer alone; the whole verdict is the classifier's evaluation of the (request, answer) pair "
        "under the general framework, as the negotiation asks for it (passed: not vetoed).",
    )


if __name__ == "__main__":
    main()
