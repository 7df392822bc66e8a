"""What the attack strategies on a literature suite's objectives (Best-of-N, PAIR) share: option
``objectives`` names the suite (HarmBench, StrongREJECT or JBB's harmful half), which loads the
items and judges every attempt against the original request."""

from __future__ import annotations

from abc import abstractmethod
from pathlib import Path
from typing import Any, ClassVar, Literal

from ....judges.records import JudgeRecord
from ...harness.benchmark import Item, Metric, ScoredItem, asr_metric
from ...harness.systems import SystemReply
from ..benchmarks._literature import HarmfulSuite, LiteratureOptions
from ..benchmarks.harmbench import HarmBench
from ..benchmarks.jbb import JailbreakBench
from ..benchmarks.strongreject import StrongReject

SOURCES: dict[str, type[HarmfulSuite]] = {"harmbench": HarmBench, "strongreject": StrongReject, "jbb": JailbreakBench}


def attack_metrics(title: str) -> tuple[Metric, ...]:
    """What every attack reports: its success rate and, on successes, the target queries it took."""
    return (
        asr_metric(title),
        Metric("queries_to_success", f"{title} queries to success", binary=False, higher_is_better=False),
    )


class Attempts:
    """What an attack sent for one objective and how each attempt was judged, in the order sent:
    the cell keeps every attempt (``details["attempts"]``), response, judgement and trace."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.judges: list[JudgeRecord] = []
        self.trace_ids: list[str] = []

    def add(self, reply: SystemReply, scored: ScoredItem, row: dict[str, Any]) -> None:
        """One attempt: ``row`` (what was sent, ``response``, the verdict), its judgements and trace."""
        self.rows.append(row)
        self.judges.extend(scored.judges)
        if reply.trace_id:
            self.trace_ids.append(reply.trace_id)

    def result(self, success_at: int | None, details: dict[str, Any]) -> ScoredItem:
        """The objective's score: ``attack_success`` and, on a success, ``queries_to_success`` (the
        target queries it took); ``details`` gain the attempts."""
        metrics = {"attack_success": 1.0 if success_at is not None else 0.0}
        if success_at is not None:
            metrics["queries_to_success"] = float(success_at)
        return ScoredItem(
            metrics=metrics,
            responses=[row["response"] for row in self.rows],
            judges=self.judges,
            trace_ids=self.trace_ids,
            details={**details, "attempts": self.rows},
        )


def rubric_score(scored: ScoredItem) -> dict[str, float]:
    """An attempt's rubric score when the judge tier gives one (StrongREJECT), to store with it."""
    return {"score": scored.metrics["score"]} if "score" in scored.metrics else {}


class ObjectiveOptions(LiteratureOptions):
    objectives: Literal["harmbench", "strongreject", "jbb"] = "harmbench"


class ObjectiveAttack(HarmfulSuite):
    """An attack on the harmful objectives of :data:`SOURCES` [``opts.objectives``] (``self.suite``).
    Subclasses set the metadata, ``options_model``, ``run_source``, :meth:`cost_hints` and ``run``."""

    options_model: ClassVar[type[ObjectiveOptions]]
    opts: ObjectiveOptions
    primary = "attack_success"
    #: The run's source line: the attack and its settings, ``{option}`` filled in from the options;
    #: the suite's source line follows it.
    run_source: ClassVar[str]

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        super().__init__(options)
        source_options: dict[str, Any] = {"judge": self.opts.judge, "success_threshold": self.opts.success_threshold}
        if self.opts.objectives == "jbb":
            source_options["benign"] = "off"
        self.suite = SOURCES[self.opts.objectives](source_options)
        self.own_judge = self.suite.own_judge
        settings = self.run_source.format_map(self.opts.model_dump())
        self.source = f"{settings}, on {self.suite.title}: {self.suite.source}"

    def load(self, data_dir: Path) -> list[Item]:
        return [i for i in self.suite.load(data_dir) if i.data.get("half", "harmful") == "harmful"]

    @abstractmethod
    def cost_hints(self) -> dict[str, int]:
        """What one objective may cost at most (target calls, judged turns, ...)."""

    def sample(self, items: list[Item], n: int, seed: int) -> list[Item]:
        # dry-run bounds (experiments/estimate.py) ride on each item
        hints = self.cost_hints()
        return [i.model_copy(update={"data": {**i.data, **hints}}) for i in super().sample(items, n, seed)]
