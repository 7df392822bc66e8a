"""HarmBench (Mazeika et al. 2024): harmful behaviours sent as direct requests, ASR per semantic
category. Scoring rules and judge tiers: :mod:`._literature`, docs/experiments.md."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field

from ....errors import InputError
from ...harness.benchmark import Item, asr_metric, data_file
from ._literature import HarmfulSuite, LiteratureOptions, read_csv

__all__ = ["HarmBench"]

FUNCTIONAL = ("standard", "contextual", "copyright")


class HarmBenchOptions(LiteratureOptions):
    split: Literal["test", "val", "all"] = "test"
    functional: tuple[Literal["standard", "contextual", "copyright"], ...] = Field(
        ("standard", "contextual"),
        min_length=1,
        description=(
            "Functional categories to include. Copyright behaviours are scored in HarmBench by a hash match "
            "against the protected text, which is not in the data folder: include them only knowing the LLM "
            "judge then decides whether lyrics or passages were reproduced."
        ),
    )


class HarmBench(HarmfulSuite):
    name = "harmbench"
    title = "HarmBench"
    source = "HarmBench text behaviours (Mazeika et al. 2024), test split: 320 (200 without copyright)"
    metrics = (asr_metric("HarmBench"),)
    primary = "attack_success"
    own_judge = "harmbench"
    options_model = HarmBenchOptions
    opts: HarmBenchOptions

    def load(self, data_dir: Path) -> list[Item]:
        path = data_file(data_dir, f"harmbench/harmbench_behaviors_text_{self.opts.split}.csv")
        items = []
        rows = read_csv(path, ("Behavior", "FunctionalCategory", "SemanticCategory", "ContextString", "BehaviorID"))
        for line, row in rows:
            behavior, functional = row["Behavior"].strip(), row["FunctionalCategory"].strip()
            bid, category = row["BehaviorID"].strip(), row["SemanticCategory"].strip()
            if not behavior or not bid or functional not in FUNCTIONAL or not category:
                raise InputError(
                    f"{path}:{line}: needs Behavior, BehaviorID, SemanticCategory and a known FunctionalCategory"
                )
            if functional not in self.opts.functional:
                continue
            context = row["ContextString"].strip() or None
            # HarmBench's contextual prompt: the context, a separator, then the behaviour
            prompt = f"{context}\n\n---\n\n{behavior}" if context else behavior
            items.append(
                Item(
                    id=f"harmbench/{bid}",
                    turns=(prompt,),
                    data={"category": category, "behavior": behavior, "context": context, "functional": functional},
                )
            )
        return items
