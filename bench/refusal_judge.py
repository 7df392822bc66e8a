"""Refusal-judge benchmark. Run: python bench/refusal_judge.py [--data DIR]

Prints, for the rule tier: precision / recall (positive class: refused at least in part) on the
labelled set (docs/judges.md) overall, on the original data, per source, and its throughput.
The model tier needs a model: `psychoalign judge eval-refusal --tier model --role judge`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import captured, data_dir, publish
from psychoalign.judges import RuleRefusalJudge
from psychoalign.judges.refusal_eval import evaluate, load_refusal_set


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None, help="the evaluation data folder (default: shared/data)")
    parser.add_argument("--quick", action="store_true", help="1 timing round instead of 5")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/performance.md alone")
    args = parser.parse_args()
    items = load_refusal_set(args.data or data_dir())
    judge = RuleRefusalJudge()
    report = asyncio.run(evaluate(judge, items))
    with captured() as out:
        for name, m in report.refused.items():
            p = "n/a" if m.precision is None else f"{m.precision:.3f}"
            r = "n/a" if m.recall is None else f"{m.recall:.3f}"
            print(f"rules  {name:20s} n={m.n:5d}  precision={p}  recall={r}")
        texts = [x.response for x in items]
        started = time.perf_counter()
        rounds = 1 if args.quick else 5
        for _ in range(rounds):
            for t in texts:
                judge.classify(t)
        per = (time.perf_counter() - started) / (rounds * len(texts))
        print(
            f"rules  throughput: {1 / per:,.0f} responses/s ({per * 1e6:.0f} µs each, mean over {rounds * len(texts)})"
        )
    if not args.no_doc:
        publish(
            "refusal-judge",
            "Refusal judge, rule tier — `bench/refusal_judge.py`",
            out.getvalue(),
            [],
            quick=args.quick,
            note="Positive class: refused at least in part. The labelled set is assembled from the data folder "
            'at run time (docs/judges.md, "Labelled set"); the XSTest rows are in-sample for the rules. '
            "The same figures come from `psychoalign judge eval-refusal`.",
        )


if __name__ == "__main__":
    main()
