"""The benchmark ``mt-bench-followup`` of the cross-turn study: MT-Bench's two-turn questions through
any system; the shared refusal judge labels both answers, and ``over_refusal`` is the refusal rate on
the *second* turn (the benign follow-up whose negotiation sees the first turn's track). Added to the
registry by :func:`register`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...harness.benchmark import Benchmark, Item, Metric, Respond, ScoredItem, over_refusal_metric
from ...harness.judging import Judges
from ...suites.benchmarks.mtbench import MTBench, two_turns


class MTBenchFollowUp(Benchmark):
    """MT-Bench's two turns (the ``mt-bench`` items), judged for refusal only (no quality judge)."""

    name = "mt-bench-followup"
    title = "MT-B follow-up"
    source = "MT-Bench (Zheng et al. 2023) two-turn questions; refusal of the second (benign) turn"
    metrics = (
        over_refusal_metric("MT-B turn-2"),
        Metric("turn1_refusal", "MT-B turn-1 refusal", binary=True, higher_is_better=False),
    )
    primary = "over_refusal"
    needs = ("refusal",)

    def load(self, data_dir: Path) -> list[Item]:
        return MTBench().load(data_dir)

    async def run(self, item: Item, respond: Respond, judges: Judges) -> ScoredItem:
        q1, q2 = item.turns
        first, second = await two_turns(item, respond)
        v1, rec1 = await judges.refusal_verdict(first.response, q1)
        v2, rec2 = await judges.refusal_verdict(second.response, q2)
        return ScoredItem.from_replies(
            first,
            second,
            metrics={"over_refusal": 1.0 if v2.refused else 0.0, "turn1_refusal": 1.0 if v1.refused else 0.0},
            judges=[*rec1, *rec2],
            details={
                "category": item.data["category"],
                "refusal": [v1.label.value, v2.label.value],
                "tau_effective": [first.details.get("tau_effective"), second.details.get("tau_effective")],
            },
        )


def register(registry: Any) -> None:
    registry.add_benchmark(MTBenchFollowUp)
