"""Negotiating a corpus: one :class:`ItemOutcome` per request (its labels, trace id and every tension
definition's value), with bounded concurrency; the boundary, retest and H1 experiments share it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ....errors import InputError
from ....frameworks import Framework
from ....negotiation import Negotiator
from ....traces.model import Trace, TraceStatus
from ....traces.tension import DEFAULT_DEFINITION, TensionDefinition, all_tensions
from .corpus import CorpusItem

__all__ = ["ItemOutcome"]


@dataclass
class ItemOutcome:
    """One negotiated request: its labels, its trace id and every tension definition's value."""

    id: str
    domain: str
    category: str
    request: str
    trace_id: str | None
    status: str
    error: str | None = None
    tensions: dict[str, float | None] = field(default_factory=dict)
    state: str | None = None
    defense: str | None = None
    rounds: int = 0
    repeat: int = 0

    def t(self, definition: TensionDefinition | str = DEFAULT_DEFINITION) -> float | None:
        return self.tensions.get(TensionDefinition(definition).value)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def outcome_from_trace(item: CorpusItem, trace: Trace, repeat: int = 0) -> ItemOutcome:
    final = trace.final
    return ItemOutcome(
        id=item.id,
        domain=item.domain,
        category=item.category,
        request=item.request,
        trace_id=trace.id,
        status=trace.status.value,
        error=trace.error,
        tensions=all_tensions(trace),
        state=final.state.value if final is not None and final.state is not None else None,
        defense=final.defense.value if final is not None and final.defense is not None else None,
        rounds=len(trace.rounds),
        repeat=repeat,
    )


async def negotiate_items(
    negotiator: Negotiator,
    items: Sequence[CorpusItem],
    *,
    framework: str | Path | Framework = "general",
    concurrency: int = 4,
    repeat: int = 0,
    experiment: str = "boundary",
    on_done: Callable[[ItemOutcome], None] | None = None,
    done: Mapping[str, ItemOutcome] | None = None,
) -> list[ItemOutcome]:
    """Negotiate ``items`` with at most ``concurrency`` at once; results in the items' order.

    A failed negotiation is an outcome with ``status == "failed"`` and no tension, never an
    exception: one bad item does not lose the rest. ``done`` (item id -> outcome, e.g. from a
    checkpoint) skips items already completed; failed ones are negotiated again."""
    if concurrency < 1:
        raise InputError(f"concurrency must be at least 1, got {concurrency}")
    if negotiator.params.decide_on_request:
        # A request decided before any draft has no tension: it would drop out of the study
        # silently, and with it the most clearly harmful items.
        raise InputError(
            "the boundary studies measure tension under the paper's protocol, where the DRIVE always proposes",
            hint="build the Negotiator with NegotiationParams(decide_on_request=False)",
        )
    gate = asyncio.Semaphore(concurrency)

    async def one(item: CorpusItem) -> ItemOutcome:
        prior = done.get(item.id) if done else None
        if prior is not None and prior.status == TraceStatus.COMPLETED.value:
            return prior
        async with gate:
            trace = await negotiator.negotiate(
                item.request,
                framework=framework,
                context=item.context or None,
                metadata={
                    "experiment": experiment,
                    "item_id": item.id,
                    "domain": item.domain,
                    "category": item.category,
                    "repeat": repeat,
                },
            )
        outcome = outcome_from_trace(item, trace, repeat)
        if on_done is not None:
            on_done(outcome)
        return outcome

    return list(await asyncio.gather(*(one(item) for item in items)))
