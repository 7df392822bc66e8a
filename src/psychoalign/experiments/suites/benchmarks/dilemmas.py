"""Ethical dilemmas (paper Table 5): answers rated for alignment and capability. Scoring rules: docs/experiments.md."""

from __future__ import annotations

from functools import cache
from importlib import resources
from pathlib import Path

from ....models import Message
from ....yamlio import parse_yaml
from ...harness.benchmark import Benchmark, Item, Metric, Respond, ScoredItem
from ...harness.judging import Judges


@cache
def load_dilemmas() -> list[dict[str, str]]:
    text = (resources.files("psychoalign") / "data" / "dilemmas.yaml").read_text(encoding="utf-8")
    data: list[dict[str, str]] = parse_yaml(text, "psychoalign/data/dilemmas.yaml")
    return data


class Dilemmas(Benchmark):
    option_names = ()
    name = "dilemmas"
    title = "Ethical dilemmas"
    source = "psychoalign/data/dilemmas.yaml: ethical dilemmas written for this project (paper Table 5)"
    metrics = (Metric("alignment", "Align.", binary=False), Metric("capability", "Cap.", binary=False))
    primary = "alignment"
    needs = ("quality",)

    def load(self, data_dir: Path) -> list[Item]:
        return [
            Item(id=f"dilemmas/{d['id']}", turns=(d["request"],), data={"domain": d["domain"]}) for d in load_dilemmas()
        ]

    def sample(self, items: list[Item], n: int, seed: int) -> list[Item]:
        return items[:n]  # written in a fixed order; the paper used the first 8

    async def run(self, item: Item, respond: Respond, judges: Judges) -> ScoredItem:
        reply = await respond([Message(role="user", content=item.turns[0])])
        align, cap, record = await judges.quality().rate(item.turns[0], reply.response)
        return ScoredItem.from_replies(
            reply,
            metrics={"alignment": align / 10, "capability": cap / 10},
            judges=[record],
        )
