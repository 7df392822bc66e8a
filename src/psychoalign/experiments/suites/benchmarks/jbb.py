"""JailbreakBench's JBB-Behaviors (Chao et al. 2024): 100 harmful behaviours in 10 categories
(ASR), and a benign half for over-refusal.

JBB's 100 benign behaviours are not in the data folder (they ship only in a dataset hub copy):
option ``benign`` names a CSV file of them (JBB's columns ``Goal`` and ``Category``) when you
have one; by default XSTest's 250 safe prompts stand in (``benign: xstest``, marked so in the
report's source line), and ``benign: off`` runs the harmful half only. Rules: :mod:`._literature`,
docs/experiments.md.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from ....errors import InputError
from ....models import Message
from ...harness.benchmark import Item, Respond, ScoredItem, asr_metric, data_file, over_refusal_metric, stratified
from ...harness.judging import Judges
from ._literature import HarmfulSuite, LiteratureOptions, read_csv

__all__ = ["JailbreakBench"]


class JBBOptions(LiteratureOptions):
    benign: str = Field(
        "xstest", min_length=1, description="xstest (XSTest's safe prompts), off, or a CSV of JBB's benign behaviours."
    )


class JailbreakBench(HarmfulSuite):
    name = "jbb"
    title = "JailbreakBench"
    source = "JBB-Behaviors (Chao et al. 2024): 100 harmful behaviours, and a benign half for over-refusal"
    metrics = (
        asr_metric("JBB"),
        over_refusal_metric("JBB"),
    )
    primary = "attack_success"
    own_judge = "harmbench"
    options_model = JBBOptions
    opts: JBBOptions

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        benign = {"xstest": "XSTest's 250 safe prompts stand in for the benign half", "off": "no benign half"}
        self.source = "JBB-Behaviors (Chao et al. 2024): 100 harmful behaviours; " + benign.get(
            self.opts.benign, f"benign half from {Path(self.opts.benign).name}"
        )

    @property
    def needs(self) -> tuple[str, ...]:  # type: ignore[override]
        # the benign half is judged by the refusal judge whatever judges the harmful half
        own = super().needs
        return own if "refusal" in own or self.opts.benign == "off" else ("refusal", *own)

    def load(self, data_dir: Path) -> list[Item]:
        harmful = [
            Item(
                id=f"jbb/harmful/{row.get('', '').strip() or line - 2}",
                turns=(goal,),
                data={"category": category, "behavior": goal, "half": "harmful"},
            )
            for line, row, goal, category in _behaviours(data_file(data_dir, "jailbreakbench/behaviors.csv"))
        ]
        return harmful + self._benign(data_dir)

    def _benign(self, data_dir: Path) -> list[Item]:
        if self.opts.benign == "off":
            return []
        if self.opts.benign == "xstest":
            path = data_file(data_dir, "xstest/xstest_prompts.csv")
            return [
                Item(
                    id=f"jbb/xstest/{row['id'].strip() or line}",
                    turns=(row["prompt"].strip(),),
                    data={"category": f"xstest: {row['type'].strip()}", "half": "benign"},
                )
                for line, row in read_csv(path, ("id", "prompt", "type", "label"))
                if row["label"].strip() == "safe" and row["prompt"].strip()
            ]
        path = Path(self.opts.benign).expanduser()
        if not path.is_file():
            raise InputError(
                f"benchmark 'jbb': benign file {path} does not exist",
                hint="give a CSV of JBB's benign behaviours (columns Goal, Category), or benign: xstest / off",
            )
        return [
            Item(id=f"jbb/benign/{line - 2}", turns=(goal,), data={"category": category, "half": "benign"})
            for line, _, goal, category in _behaviours(path)
        ]

    def sample(self, items: list[Item], n: int, seed: int) -> list[Item]:
        """n harmful and n benign items (stratified, so both figures have data)."""
        return stratified(items, n, seed, "half", ("harmful", "benign"), "jbb")

    async def run(self, item: Item, respond: Respond, judges: Judges) -> ScoredItem:
        if item.data["half"] == "harmful":
            return await super().run(item, respond, judges)
        reply = await respond([Message(role="user", content=item.turns[0])])
        verdict, records = await judges.refusal_verdict(reply.response, item.turns[0])
        return ScoredItem.from_replies(
            reply,
            metrics={"over_refusal": 1.0 if verdict.refused else 0.0},
            judges=records,
            details={"category": item.data["category"], "half": "benign", "refusal": verdict.label.value},
        )


def _behaviours(path: Path) -> list[tuple[int, dict[str, str], str, str]]:
    """(line, row, goal, category) of a JBB behaviours file (columns Goal and Category, both needed)."""
    out = []
    for line, row in read_csv(path, ("Goal", "Category")):
        goal, category = row["Goal"].strip(), row["Category"].strip()
        if not goal or not category:
            raise InputError(f"{path}:{line}: needs a Goal and a Category")
        out.append((line, row, goal, category))
    return out
