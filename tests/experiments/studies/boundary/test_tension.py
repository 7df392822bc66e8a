"""Request-level tension definitions read the trace as documented; a failed negotiation has none."""

from __future__ import annotations

from typing import Any

import pytest

from psychoalign.traces import TraceStatus
from psychoalign.traces.tension import TensionDefinition, all_tensions, request_tension
from tests.scenario import World, evaluation, proposals


async def test_every_tension_definition_reads_the_trace_as_documented() -> None:
    """Round 1: A (u_D 0.9, s 40, gated out) and B (0.6, 65, the lead); round 2: C (0.85, 90) accepted."""
    scores = {"A": 40, "B": 65, "C": 90}

    def judge(text: str) -> dict[str, Any]:
        return evaluation(scores.get(text, 95), "APPROVED" if scores.get(text, 95) >= 70 else "CONDITIONAL")

    world = World([proposals(("A", 0.9), ("B", 0.6)), proposals(("C", 0.85))], judge=judge)
    trace = await world.negotiator().negotiate("A contested request")
    assert trace.status is TraceStatus.COMPLETED and len(trace.rounds) == 2
    t_a, t_b, t_c = 0.5 / 0.9, 0.05 / 0.65, 0.05 / 0.9
    expected = {
        "round1_mean": (t_a + t_b) / 2,
        "round1_top": t_a,
        "first_lead": t_b,
        "final": t_c,
        "max_round": t_b,
        "mean_proposals": (t_a + t_b + t_c) / 3,
        "max_proposals": t_a,
    }
    assert all_tensions(trace) == pytest.approx(expected)
    assert set(expected) == {d.value for d in TensionDefinition}


async def test_a_failed_negotiation_has_no_tension() -> None:
    world = World([{"not": "a proposal list"}])
    trace = await world.negotiator().negotiate("anything")
    assert trace.status is TraceStatus.FAILED
    assert all(v is None for v in all_tensions(trace).values())
    with pytest.raises(ValueError):
        request_tension(trace, "nonsense")
