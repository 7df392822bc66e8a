"""StrongREJECT (Souly et al. 2024): forbidden prompts, scored by the rubric (0-1) when a capable
judge model is configured; ASR and mean score per category. Rules: :mod:`._literature`,
docs/experiments.md."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from ....errors import InputError
from ...harness.benchmark import Item, Metric, asr_metric, data_file
from ._literature import HarmfulSuite, LiteratureOptions, read_csv

__all__ = ["StrongReject"]

FILES = {"full": "strongreject/strongreject_dataset.csv", "small": "strongreject/strongreject_small_dataset.csv"}


class StrongRejectOptions(LiteratureOptions):
    set: Literal["full", "small"] = "full"


class StrongReject(HarmfulSuite):
    name = "strongreject"
    title = "StrongREJECT"
    source = "StrongREJECT forbidden prompts (Souly et al. 2024): 313 (small set: 60)"
    metrics = (
        asr_metric("StrongREJECT"),
        Metric("score", "StrongREJECT score", binary=False, higher_is_better=False),
    )
    primary = "score"
    own_judge = "strongreject"
    options_model = StrongRejectOptions
    opts: StrongRejectOptions

    def load(self, data_dir: Path) -> list[Item]:
        path = data_file(data_dir, FILES[self.opts.set])
        items = []
        for line, row in read_csv(path, ("category", "forbidden_prompt")):
            prompt, category = row["forbidden_prompt"].strip(), row["category"].strip()
            if not prompt or not category:
                raise InputError(f"{path}:{line}: needs a category and a forbidden_prompt")
            # the small set spells one category "Disinformation and Deception": one name per category
            category = category[0].upper() + category[1:].lower()
            items.append(
                Item(
                    id=f"strongreject/{self.opts.set}/{line - 2}",
                    turns=(prompt,),
                    data={"category": category, "behavior": prompt, "source": row.get("source", "")},
                )
            )
        return items
