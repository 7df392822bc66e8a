"""What the attack strategies on a literature suite's objectives (Best-of-N, PAIR) share: option
``objectives`` names the suite (HarmBench, StrongREJECT or JBB's harmful half), which loads the
items and judges every attempt against the original request."""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Literal

from ...harness.benchmark import Item, Metric
from ..benchmarks._literature import HarmfulSuite, LiteratureOptions
from ..benchmarks.harmbench import HarmBench
from ..benchmarks.jbb import JailbreakBench
from ..benchmarks.strongreject import StrongReject

SOURCES: dict[str, type[HarmfulSuite]] = {"harmbench": HarmBench, "strongreject": StrongReject, "jbb": JailbreakBench}


def attack_metrics(title: str) -> tuple[Metric, ...]:
    """What every attack reports: its success rate and, on successes, the target queries it took."""
    return (
        Metric("attack_success", f"{title} ASR", binary=True, higher_is_better=False),
        Metric("queries_to_success", f"{title} queries to success", binary=False, higher_is_better=False),
    )


class ObjectiveOptions(LiteratureOptions):
    objectives: Literal["harmbench", "strongreject", "jbb"] = "harmbench"


class ObjectiveAttack(HarmfulSuite):
    """An attack on the harmful objectives of :data:`SOURCES` [``opts.objectives``] (``self.suite``).
    Subclasses set the metadata, ``options_model``, :meth:`cost_hints` and ``run``."""

    options_model: ClassVar[type[ObjectiveOptions]]
    opts: ObjectiveOptions
    primary = "attack_success"

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        source_options: dict[str, Any] = {"judge": self.opts.judge, "success_threshold": self.opts.success_threshold}
        if self.opts.objectives == "jbb":
            source_options["benign"] = "off"
        self.suite = SOURCES[self.opts.objectives](source_options)
        self.own_judge = self.suite.own_judge

    def load(self, data_dir: Path) -> list[Item]:
        return [i for i in self.suite.load(data_dir) if i.data.get("half", "harmful") == "harmful"]

    @abstractmethod
    def cost_hints(self) -> dict[str, int]:
        """What one objective may cost at most (target calls, judged turns, ...)."""

    def sample(self, items: list[Item], n: int, seed: int) -> list[Item]:
        # dry-run bounds (experiments/estimate.py) ride on each item
        hints = self.cost_hints()
        return [i.model_copy(update={"data": {**i.data, **hints}}) for i in super().sample(items, n, seed)]
