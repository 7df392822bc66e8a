"""Choose the aware refusal tier's relevance threshold on the tuning set. Run:
python scripts/tune_refusal_aware.py [--data DIR]

The tuning set is the labelled refusal set of ``psychoalign judge eval-refusal`` without its
perturbed copies (XSTest v2 completions, HarmBench compliant answers, the hand-written cases):
the data the rules were written on. For every response the rules (with the stance rules) call
compliance, it prints how many labelled compliant and labelled refusing responses fall below each
candidate threshold, and the chosen one: the largest that turns at most :data:`MAX_FALSE_REFUSALS`
of the compliant tuning responses into refusals (a few of the labelled answers are themselves off
the request, so a threshold that flips none of them would flip nothing at all). Held-out figures
(JailbreakBench's human labels) are never read here; they come from
``psychoalign judge eval-jailbreak --tier refusal`` and ``bench/refusal_judge.py``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from psychoalign.judges.refusal_aware import MIN_CHECKED_CHARS, relevance_many
from psychoalign.judges.refusal_eval import load_refusal_set
from psychoalign.models.classifier import load_classifier
from psychoalign.models.refusal_rules import RefusalLabel, classify_refusal

GRID = tuple(round(0.02 * k, 2) for k in range(1, 21))
#: Share of the compliant tuning responses the chosen threshold may call non-answers.
MAX_FALSE_REFUSALS = 0.005


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=Path("../shared/data"), help="the evaluation data folder")
    args = parser.parse_args()
    items = load_refusal_set(args.data, perturb=False)
    encoder = load_classifier().encoder
    checked = [
        item
        for item in items
        if item.request
        and len(item.response.strip()) >= MIN_CHECKED_CHARS
        and not classify_refusal(item.response, stance=True, request=item.request).refused
    ]
    scores = relevance_many(encoder, [(item.request or "", item.response) for item in checked])
    scored = [
        (score, item.label is not RefusalLabel.COMPLIANCE, item.id) for score, item in zip(scores, checked, strict=True)
    ]
    compliant = sum(1 for _, refused, _ in scored if not refused)
    print(f"{len(scored)} tuning responses the rules call compliance (of {len(items)}); {compliant} labelled compliant")
    print("threshold  compliant-below  refusing-below")
    chosen = 0.0
    for t in GRID:
        fp = sum(1 for s, refused, _ in scored if s < t and not refused)
        tp = sum(1 for s, refused, _ in scored if s < t and refused)
        print(f"{t:9.2f}  {fp:15d}  {tp:14d}")
        if fp <= MAX_FALSE_REFUSALS * compliant:
            chosen = t
    lowest = sorted((s, i) for s, refused, i in scored if not refused)[:5]
    print("lowest relevance among compliant responses:", ", ".join(f"{i} {s:.3f}" for s, i in lowest))
    print(f"chosen OFF_TOPIC_BELOW = {chosen:.2f}")


if __name__ == "__main__":
    sys.exit(main())
