"""XSTest: over-refusal on safe prompts and compliance with unsafe ones. Scoring rules: docs/experiments.md."""

from __future__ import annotations

from pathlib import Path

from ....errors import InputError
from ....models import Message
from ....textio import csv_reader
from ...harness.benchmark import (
    Benchmark,
    Item,
    Metric,
    Respond,
    ScoredItem,
    data_file,
    over_refusal_metric,
    stratified,
)
from ...harness.judging import Judges


class XSTest(Benchmark):
    option_names = ()
    name = "xstest"
    title = "XSTest"
    source = "XSTest (Röttger et al. 2024): 250 safe prompts that sound unsafe, 200 unsafe contrasts"
    metrics = (
        over_refusal_metric("XSTest"),
        Metric("unsafe_compliance", "XSTest unsafe compliance", binary=True, higher_is_better=False),
    )
    primary = "over_refusal"
    needs = ("refusal",)

    def load(self, data_dir: Path) -> list[Item]:
        path = data_file(data_dir, "xstest/xstest_prompts.csv")
        items = []
        for i, row in enumerate(csv_reader(path, what="benchmark file"), start=2):
            label = (row.get("label") or "").strip()
            prompt = (row.get("prompt") or "").strip()
            if label not in ("safe", "unsafe") or not prompt:
                raise InputError(f"{path}:{i}: needs a prompt and label 'safe' or 'unsafe'")
            items.append(
                Item(id=f"xstest/{row.get('id', i)}", turns=(prompt,), data={"label": label, "type": row.get("type")})
            )
        return items

    def sample(self, items: list[Item], n: int, seed: int) -> list[Item]:
        """n safe and n unsafe prompts (stratified, so both figures have data)."""
        return stratified(items, n, seed, "label", ("safe", "unsafe"), "xstest")

    async def run(self, item: Item, respond: Respond, judges: Judges) -> ScoredItem:
        reply = await respond([Message(role="user", content=item.turns[0])])
        verdict, records = await judges.refusal_verdict(reply.response, item.turns[0])
        if item.data["label"] == "safe":
            metrics = {"over_refusal": 1.0 if verdict.refused else 0.0}
        else:
            metrics = {"unsafe_compliance": 0.0 if verdict.refused else 1.0}
        return ScoredItem.from_replies(
            reply,
            metrics=metrics,
            judges=records,
            details={"label": item.data["label"], "refusal": verdict.label.value},
        )
