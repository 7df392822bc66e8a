"""Request-level tension: the candidate definitions, computed from one stored :class:`Trace`.

The paper defines T per proposal (eq. 2) and reports "T of a request" without saying which
proposal. Every definition below is computed for every request, so the analysis can say which one
tracks difficulty best (by ICC across reruns and by ρ with human disagreement). The choice of the
default is argued in docs/boundary.md.

A failed negotiation has no tension (``None``): it is reported as failed, never counted as T = 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from enum import StrEnum

from .model import ProposalRecord, Trace, TraceStatus

__all__ = ["DEFAULT_DEFINITION", "TensionDefinition", "all_tensions", "request_tension"]


class TensionDefinition(StrEnum):
    """How one request's T is read off its trace."""

    #: Mean T over the DRIVE's round-1 proposals, before any feedback (default: see docs).
    ROUND1_MEAN = "round1_mean"
    #: T of the DRIVE's own favourite (rank 1) in round 1: the raw capability–alignment gap.
    ROUND1_TOP = "round1_top"
    #: T of round 1's lead (the MEDIATOR objective's pick among admissible proposals).
    FIRST_LEAD = "first_lead"
    #: T of the final decision (the chosen proposal; the trace summary's ``tension``).
    FINAL = "final"
    #: Maximum of the per-round lead tensions.
    MAX_ROUND = "max_round"
    #: Mean over every proposal of every round.
    MEAN_PROPOSALS = "mean_proposals"
    #: Maximum over every proposal of every round.
    MAX_PROPOSALS = "max_proposals"


DEFAULT_DEFINITION = TensionDefinition.ROUND1_MEAN


def _values(proposals: list[ProposalRecord]) -> list[float]:
    return [p.tension for p in proposals if p.tension is not None and math.isfinite(p.tension)]


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _round1_mean(trace: Trace) -> float | None:
    return _mean(_values(trace.rounds[0].proposals))


def _round1_top(trace: Trace) -> float | None:
    top = min(trace.rounds[0].proposals, key=lambda p: p.rank, default=None)
    return top.tension if top is not None else None


def _first_lead(trace: Trace) -> float | None:
    return trace.rounds[0].tension


def _final(trace: Trace) -> float | None:
    return trace.final.tension if trace.final is not None else None


def _max_round(trace: Trace) -> float | None:
    return max(r.tension for r in trace.rounds)


def _mean_proposals(trace: Trace) -> float | None:
    return _mean([v for r in trace.rounds for v in _values(r.proposals)])


def _max_proposals(trace: Trace) -> float | None:
    values = [v for r in trace.rounds for v in _values(r.proposals)]
    return max(values) if values else None


_READERS: dict[TensionDefinition, Callable[[Trace], float | None]] = {
    TensionDefinition.ROUND1_MEAN: _round1_mean,
    TensionDefinition.ROUND1_TOP: _round1_top,
    TensionDefinition.FIRST_LEAD: _first_lead,
    TensionDefinition.FINAL: _final,
    TensionDefinition.MAX_ROUND: _max_round,
    TensionDefinition.MEAN_PROPOSALS: _mean_proposals,
    TensionDefinition.MAX_PROPOSALS: _max_proposals,
}


def request_tension(trace: Trace, definition: TensionDefinition | str = DEFAULT_DEFINITION) -> float | None:
    """T of the request under ``definition``; None when the negotiation failed or has no rounds."""
    d = TensionDefinition(definition)
    if trace.status is not TraceStatus.COMPLETED or not trace.rounds:
        return None
    value = _READERS[d](trace)
    if value is None or not math.isfinite(value):
        return None
    return min(max(float(value), 0.0), 1.0)


def all_tensions(trace: Trace) -> dict[str, float | None]:
    """Every definition for one trace, keyed by the definition's name."""
    return {d.value: request_tension(trace, d) for d in TensionDefinition}
