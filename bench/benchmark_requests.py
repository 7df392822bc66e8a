"""The embedded classifier's request head on the reported benchmarks' prompts (out of sample).

Run from the repository root (needs the evaluation data folder, shared/data):

    python bench/benchmark_requests.py                      # the shipped weights
    python bench/benchmark_requests.py --weights OLD.json   # another weights file, same sets

The training corpus holds no text of these benchmarks (``psychoalign.models.benchmark_texts``;
the bench re-checks it: ``in corpus`` counts the prompts that a train or validation text of the
corpus as it is loaded today equals or contains, 0 for each), so these rates are out of sample.
Weights trained before the exclusion saw AdvBench, HarmBench (the many-shot file's behaviours),
XSTest and MT-Bench: run them with ``--weights`` to see how much of their figures was memory.

Figures (request head at its operating threshold, 95 % Wilson intervals): harmful prompts blocked
(AdvBench goals, HarmBench standard behaviours, StrongREJECT, JailbreakBench harmful goals,
XSTest unsafe), benign prompts passed (XSTest safe, MT-Bench first turns), and the XSTest AUC
(safe vs unsafe). The section "Embedded classifier on benchmark prompts" of docs/performance.md
is rewritten unless ``--no-doc`` or ``--weights``.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

from _util import Target, captured, data_dir, publish  # noqa: E402
from psychoalign.models.benchmark_texts import normalise  # noqa: E402
from psychoalign.models.classifier import VETO_BELOW, load_classifier  # noqa: E402
from psychoalign.models.safety_corpus import auc, load_corpus  # noqa: E402
from psychoalign.textio import read_text  # noqa: E402
from request_head import wilson  # noqa: E402


def _rows(path: Path) -> list[dict[str, str]]:
    with io.StringIO(read_text(path, what="benchmark file"), newline="") as fh:
        return list(csv.DictReader(fh))


def sets(data: Path) -> dict[str, tuple[list[str], bool]]:
    """Benchmark name -> (prompts, acceptable): the prompts each suite sends (first turns)."""
    xstest = _rows(data / "xstest" / "xstest_prompts.csv")
    mt = [json.loads(x) for x in read_text(data / "mt_bench" / "question.jsonl").splitlines() if x.strip()]
    harmbench = _rows(data / "harmbench" / "harmbench_behaviors_text_all.csv")
    return {
        "AdvBench goals": ([r["goal"] for r in _rows(data / "advbench" / "harmful_behaviors.csv")], False),
        "HarmBench standard behaviours": (
            [r["Behavior"] for r in harmbench if r["FunctionalCategory"] == "standard"],
            False,
        ),
        "StrongREJECT": (
            [r["forbidden_prompt"] for r in _rows(data / "strongreject" / "strongreject_dataset.csv")],
            False,
        ),
        "JailbreakBench harmful": ([r["Goal"] for r in _rows(data / "jailbreakbench" / "behaviors.csv")], False),
        "XSTest unsafe": ([r["prompt"] for r in xstest if r["label"] != "safe"], False),
        "XSTest safe": ([r["prompt"] for r in xstest if r["label"] == "safe"], True),
        "MT-Bench first turns": ([str(q["turns"][0]) for q in mt], True),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=None, help="evaluation data folder (default shared/data)")
    ap.add_argument("--weights", type=Path, default=None, help="classifier weights JSON (default: the shipped ones)")
    ap.add_argument("--no-doc", action="store_true", help="print only; leave docs/performance.md alone")
    args = ap.parse_args()
    t0 = time.perf_counter()
    data = args.data or data_dir()
    targets: list[Target] = []
    with captured() as out:
        clf = load_classifier(args.weights)
        print(f"classifier {clf.weights.label}")
        training = {normalise(ex.text) for ex in load_corpus(data) if ex.split in ("train", "val")}
        scores: dict[str, list[float]] = {}
        print(f"  {'benchmark':<30} {'n':>4}  {'in corpus':>11}  {'rate':>15}  [95 % Wilson CI]")
        for name, (prompts, acceptable) in sets(data).items():
            norms = [normalise(p) for p in prompts]
            seen = sum(n in training or any(n in t for t in training) for n in norms)
            s = [float(x) for x in clf.scores(prompts, "request")]
            scores[name] = s
            k = sum((x * 100 >= VETO_BELOW) == acceptable for x in s)
            lo, hi = wilson(k, len(s))
            what = "passed" if acceptable else "blocked"
            print(
                f"  {name:<30} {len(s):>4}  {seen:>11}  {k / len(s) * 100:6.1f}% {what:<7}  "
                f"[{lo * 100:.0f}-{hi * 100:.0f} %]"
            )
            if args.weights is None:
                targets.append(Target(f"{name}: prompts in the shipped training corpus", str(seen), "0", seen == 0))
        safe, unsafe = scores["XSTest safe"], scores["XSTest unsafe"]
        print(f"  XSTest AUC (safe vs unsafe): {auc([1] * len(safe) + [0] * len(unsafe), safe + unsafe):.3f}")
    print(f"\ntotal {time.perf_counter() - t0:.0f}s")
    if not args.no_doc and args.weights is None:
        publish(
            "benchmark-requests",
            "Embedded classifier on benchmark prompts — `bench/benchmark_requests.py`",
            out.getvalue(),
            targets,
            quick=False,
            note="The request head of the shipped classifier on the prompts the benchmark suites send; no "
            "benchmark text is in its training or calibration data (`in corpus` counts prompts a training "
            "or validation text equals or contains), so the rates are out of sample.",
        )


if __name__ == "__main__":
    main()
