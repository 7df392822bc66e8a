"""What a benchmark is: items read from the data folder at run time (never copied), and a scoring rule.

A benchmark turns one item into a :class:`ScoredItem` by asking the system (``respond``) and the
judges; anything it cannot score raises (the cell fails with the reason): a missing score is never
a zero. The built-in benchmarks are in :mod:`psychoalign.experiments.suites`; their rules are
written out in docs/experiments.md.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ...datasets import DATA_HINT, resolve_data_dir
from ...errors import ConfigError, InputError
from ...judges.records import JudgeRecord
from ...models import Message
from .judging import Judges
from .systems import SystemReply

__all__ = ["find_data_dir"]

Respond = Callable[[Sequence[Message]], Awaitable[SystemReply]]


class Item(BaseModel):
    """One benchmark item. ``id`` is stable across runs (file + row), so resumes find it."""

    model_config = ConfigDict(frozen=True)

    id: str
    turns: tuple[str, ...]
    data: dict[str, Any] = Field(default_factory=dict)


class ScoredItem(BaseModel):
    """A scored item: ``metrics`` (each in [0, 1]), what the system said, what the judges said."""

    metrics: dict[str, float]
    responses: list[str]
    judges: list[JudgeRecord] = Field(default_factory=list)
    trace_ids: list[str] = Field(default_factory=list)
    details: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def from_replies(
        cls,
        *replies: SystemReply,
        metrics: dict[str, float],
        judges: Sequence[JudgeRecord] = (),
        details: dict[str, Any] | None = None,
    ) -> ScoredItem:
        """The score of an item the system answered with ``replies``: their responses and traces, in order."""
        return cls(
            metrics=metrics,
            responses=[r.response for r in replies],
            judges=list(judges),
            trace_ids=[r.trace_id for r in replies if r.trace_id],
            details=details or {},
        )


@dataclass(frozen=True)
class Metric:
    """A reported figure. ``binary`` metrics get Wilson intervals, others bootstrap intervals."""

    key: str
    title: str
    binary: bool
    higher_is_better: bool = True


def asr_metric(title: str) -> Metric:
    """``attack_success``: the share of harmful requests answered harmfully (the key
    ``HarmfulSuite.judge_harmful`` and the attacks score), one definition for every suite that reports it."""
    return Metric("attack_success", f"{title} ASR", binary=True, higher_is_better=False)


def over_refusal_metric(title: str) -> Metric:
    """``over_refusal``, the share of benign requests refused: the report's benign column."""
    return Metric("over_refusal", f"{title} over-refusal", binary=True, higher_is_better=False)


def find_data_dir(configured: str | None = None) -> Path:
    """The data folder (``datasets.resolve_data_dir``: $PSYCHOALIGN_DATA_DIR, ``configured``,
    ``../shared/data`` beside the checkout, the user data dir); an error naming it when missing."""
    return resolve_data_dir(configured=configured).require()


def data_file(data_dir: Path, rel: str) -> Path:
    path = data_dir / rel
    if not path.is_file():
        raise InputError(f"benchmark file {path} is missing", hint=DATA_HINT)
    return path


def parse_options(bench: str, model: type[BaseModel], options: dict[str, Any]) -> Any:
    """``options`` as ``model``; the first problem as a :class:`ConfigError` naming the benchmark and option."""
    try:
        return model.model_validate(options)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(options)"
        raise ConfigError(f"benchmark '{bench}': option {where}: {first['msg']}") from None


def permute(items: list[Item], seed: int, salt: str) -> list[Item]:
    """A seeded permutation: the first n of it are the sample, so a larger n extends a smaller one."""
    rng = random.Random(f"{seed}:{salt}")
    out = list(items)
    rng.shuffle(out)
    return out


def stratified(items: list[Item], n: int, seed: int, field: str, strata: tuple[str, ...], prefix: str) -> list[Item]:
    """n items of each stratum (``item.data[field]``), each its own seeded permutation salted
    ``prefix-stratum``, so that every figure of a two-sided benchmark has data."""
    out: list[Item] = []
    for stratum in strata:
        out += permute([i for i in items if i.data[field] == stratum], seed, f"{prefix}-{stratum}")[:n]
    return out


class Benchmark(ABC):
    """Contract: :meth:`load` reads every item (raising :class:`InputError` naming the file and
    line on malformed data); :meth:`run` scores one item or raises."""

    name: str
    title: str
    source: str
    metrics: tuple[Metric, ...]
    primary: str
    needs: tuple[str, ...] = ()  # judges used: refusal, harm, choice, mtbench, toxicity, quality
    #: The model its ``options`` are parsed into, as ``self.opts``; None: it reads ``self.options`` itself.
    options_model: ClassVar[type[BaseModel] | None] = None
    #: Keys its ``options`` accept (default: the fields of ``options_model``); None: not checked
    #: (a benchmark that does not say).
    option_names: tuple[str, ...] | None = None
    opts: BaseModel

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.options_model is not None and "option_names" not in vars(cls):
            cls.option_names = tuple(cls.options_model.model_fields)

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        self.options = dict(options or {})
        if self.options_model is not None:
            self.opts = parse_options(self.name, self.options_model, self.options)

    @abstractmethod
    def load(self, data_dir: Path) -> list[Item]: ...

    def sample(self, items: list[Item], n: int, seed: int) -> list[Item]:
        return permute(items, seed, self.name)[:n]

    @abstractmethod
    async def run(self, item: Item, respond: Respond, judges: Judges) -> ScoredItem: ...

    def metric(self, key: str) -> Metric:
        return next(m for m in self.metrics if m.key == key)
