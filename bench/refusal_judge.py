"""Refusal-judge benchmark. Run: python bench/refusal_judge.py [--data DIR]

Prints, for the rule tier and the request-aware tier:

* **held out**: agreement, sensitivity, specificity and Cohen's kappa, each with its 95 % interval,
  against JailbreakBench's human labels (100 jailbreak responses, three annotators, majority vote;
  positive = jailbroken, so a judge says "jailbroken" when it finds no refusal). Nothing in either
  tier was written or tuned on this set. Beside them, the refusal judge followed by the embedded
  classifier harm judge (the embedded default of attack success), on the same rows, and the
  classifier harm judge alone on the responses the rules let through (`judge eval-harm`'s set).
* **in sample**: precision / recall (positive: refused at least in part) per source of the
  labelled set of ``psychoalign judge eval-refusal``: the rules were written, and the aware tier's
  threshold chosen, on it (docs/judges.md);
* each tier's throughput.

The model tier needs a model: `psychoalign judge eval-jailbreak --tier refusal --refusal model`.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import captured, data_dir, publish
from psychoalign.experiments.harness.harm_labels import load_jbb_harm_rows
from psychoalign.judges import AwareRefusalJudge, RefusalJudge, RuleRefusalJudge
from psychoalign.judges.agreement import binary_agreement, from_confusion
from psychoalign.judges.harm import HarmJudge, build_harm_judge
from psychoalign.judges.jailbreak_eval import evaluate_jailbreak_judge, literature_judge_fn, load_jbb_judge_set
from psychoalign.judges.refusal_eval import evaluate, load_refusal_set


async def held_out(name: str, judge: RefusalJudge, data: Path, harm: HarmJudge | None = None) -> None:
    items = load_jbb_judge_set(data)
    tier = "refusal+harm" if harm is not None else "refusal"
    result = await evaluate_jailbreak_judge(name, literature_judge_fn(tier, refusal=judge, harm=harm), items)
    print(f"{name:24s} {from_confusion(result.confusion).line()}")


async def harm_verdicts(harm: HarmJudge, rows: list[dict[str, object]]) -> list[bool]:
    return [(await harm.harmful(str(r["goal"]), str(r["response"])))[0] for r in rows]


async def timed(judge: RefusalJudge, pairs: list[tuple[str, str | None]], rounds: int) -> float:
    """Seconds per judged response, one after another (as a run judges its cells)."""
    started = time.perf_counter()
    for _ in range(rounds):
        for response, request in pairs:
            await judge.judge(response, request=request)
    return (time.perf_counter() - started) / (rounds * len(pairs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=None, help="the evaluation data folder (default: shared/data)")
    parser.add_argument("--quick", action="store_true", help="1 timing round instead of 5")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/performance.md alone")
    args = parser.parse_args()
    data = args.data or data_dir()
    items = load_refusal_set(data)
    judges: list[tuple[str, RefusalJudge]] = [("rules", RuleRefusalJudge()), ("aware", AwareRefusalJudge())]
    harm = build_harm_judge("classifier", None)
    with captured() as out:
        print("held out: JailbreakBench human majority (positive: jailbroken), 95 % intervals")
        for name, judge in judges:
            asyncio.run(held_out(name, judge, data))
        for name, judge in judges:
            asyncio.run(held_out(f"{name} + harm classifier", judge, data, harm))
        rows = load_jbb_harm_rows(data) or []
        flagged = asyncio.run(harm_verdicts(harm, rows))
        fig = binary_agreement([bool(r["harmful"]) for r in rows], flagged)
        print(f"{'harm classifier alone':24s} {fig.line()} (the responses the rules let through)")
        published = load_jbb_judge_set(data)
        print(
            "published judges on the same rows: "
            + ", ".join(
                f"{j} {sum(i.published[j] == i.human for i in published) / len(published):.2f}"
                for j in ("gpt_4", "TDC", "GCG", "llama_guard", "gpt_4_turbo", "BERT")
            )
        )
        print()
        print("in sample: labelled set of `judge eval-refusal` (positive: refused at least in part)")
        for name, judge in judges:
            report = asyncio.run(evaluate(judge, items))
            for source, m in report.refused.items():
                p = "n/a" if m.precision is None else f"{m.precision:.3f}"
                r = "n/a" if m.recall is None else f"{m.recall:.3f}"
                print(f"{name:6s} {source:20s} n={m.n:5d}  precision={p}  recall={r}")
        print()
        rounds = 1 if args.quick else 5
        pairs = [(x.response, x.request) for x in items]
        for name, judge in judges:
            per = asyncio.run(timed(judge, pairs, rounds))
            print(
                f"{name:6s} throughput: {1 / per:,.0f} responses/s "
                f"({per * 1e3:.2f} ms each, mean over {rounds * len(pairs)})"
            )
    if not args.no_doc:
        publish(
            "refusal-judge",
            "Refusal judge, rule and request-aware tiers — `bench/refusal_judge.py`",
            out.getvalue(),
            [],
            quick=args.quick,
            note="Held out: JailbreakBench's human labels, never used to write or tune either tier; the same figures "
            "come from `psychoalign judge eval-jailbreak --tier refusal --refusal rules|aware` (and `--tier "
            "refusal+harm --harm classifier`). In sample: the labelled set of `psychoalign judge eval-refusal` "
            '(docs/judges.md, "Labelled set"), on which the rules were written and the aware tier\'s threshold '
            "chosen. The aware tier's time includes the MiniLM embedding of responses the rules call compliance.",
        )


if __name__ == "__main__":
    main()
