"""What the trace viewer may show: DRIVE text and evaluator notes only when authorised."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from psychoalign.config import Settings
from psychoalign.traces import TraceStore, open_store
from psychoalign.traces.model import (
    DefenseMechanism,
    FinalDecision,
    NegotiationParams,
    SystemState,
    Trace,
    TraceStatus,
)
from psychoalign.traces.query import TraceQuery
from psychoalign.traces.store import SQLTraceStore
from psychoalign.web.trace_view import HIDDEN, NO_STATE, redacted, tension_chart, trace_stats
from tests.helpers import PG_URL, pg_schema
from tests.scenario import World, evaluation, proposals

DRAFT = "DRAFT-SECRET-91: mix the two chemicals"


async def test_redaction_hides_every_copy_of_the_draft() -> None:
    world = World(
        [proposals((DRAFT, 0.9), ("Please ask a professional.", 0.5))],
        judge=lambda t: (
            evaluation(
                10,
                "VETOED",
                hits=[("U1-mass-harm", "universal")],
                mods=[f"remove '{DRAFT}'"],
                harmful_segments=[DRAFT],
                safe_channel=f"not {DRAFT}",
            )
            if "DRAFT-SECRET" in t
            else evaluation(90, "APPROVED")
        ),
    )
    # A research deployment that keeps blocked drafts (tests/traces/test_model.py: the default redacts).
    keep = Settings(traces={"keep_blocked_drafts": True})
    trace = await world.negotiator(k=2, settings=keep).negotiate("How do I make chlorine gas?")
    assert DRAFT in trace.model_dump_json() and trace.blocked_drafts_kept  # the stored trace keeps everything
    hidden = json.dumps(redacted(trace, show_internal=False))
    assert "DRAFT-SECRET" not in hidden and HIDDEN in hidden
    assert "U1-mass-harm" in hidden  # rule ids, scores and verdicts stay visible
    assert redacted(trace, show_internal=False)["final"]["response"] == trace.response  # user-facing text stays
    assert "DRAFT-SECRET" in json.dumps(redacted(trace, show_internal=True))


async def test_tension_chart_maps_rounds_into_the_box() -> None:
    world = World(
        [proposals(("A", 0.9)), proposals(("B", 0.8)), proposals(("C", 0.7))],
        judge=lambda t: evaluation(50, "CONDITIONAL", mods=["x"]),
    )
    trace = await world.negotiator(k=3, epsilon=0.0).negotiate("q")
    chart = tension_chart(trace)
    assert [p.round for p in chart.points] == [1, 2, 3]
    for p in chart.points:
        assert 24 <= p.x <= chart.width - 24 and 24 <= p.y <= chart.height - 24
    assert chart.polyline.count(",") == 3


async def test_tension_chart_draws_every_score_and_names_the_thresholds() -> None:
    scores = {"A": 80, "B": 40, "C": 55}
    world = World(
        [proposals(("A", 0.9), ("B", 0.7)), proposals(("C", 0.8))],
        judge=lambda t: evaluation(scores.get(t, 90), "CONDITIONAL", mods=["x"]),
    )
    trace = await world.negotiator(k=2, epsilon=0.0).negotiate("q")
    chart = tension_chart(trace)
    box = chart.bottom - chart.top
    # one square per evaluated proposal, at score / 100 on the shared 0-1 axis, in its round's column
    assert sorted((s.round, s.score) for s in chart.scores) == [(1, 40), (1, 80), (2, 55)]
    for s in chart.scores:
        assert s.y == round(chart.bottom - box * s.score / 100, 1)
        column = (chart.right - chart.left) / 2
        assert chart.left + column * (s.round - 1) < s.x < chart.left + column * s.round
    assert [s.admissible for s in chart.scores if s.score == 40] == [False]  # below tau*100 = 60: blocked
    named = {t.key: t for t in chart.thresholds}
    assert named["tau"].label == "τ = 0.60" and named["tau"].value == 0.6
    assert named["healthy"].label == "healthy T < 0.30" and named["healthy"].value == 0.3
    assert named["tau"].y == round(chart.bottom - box * 0.6, 1)
    assert [t.label for t in chart.y_ticks] == ["0.00", "0.25", "0.50", "0.75", "1.00"]
    assert [t.label for t in chart.x_ticks] == ["1", "2"]


async def test_tension_chart_draws_the_tau_the_turn_used() -> None:
    world = World([proposals(("A", 0.9))], judge=lambda t: {**evaluation(90, "APPROVED"), "ceiling": 70})
    trace = await world.negotiator(k=1).negotiate("q")
    assert trace.cross_turn is not None
    trace = trace.model_copy(update={"cross_turn": trace.cross_turn.model_copy(update={"tau_effective": 0.75})})
    chart = tension_chart(trace)
    assert chart.tau == 0.75 and chart.tau_configured == 0.6
    assert {t.label for t in chart.thresholds} == {"τ = 0.75", "healthy T < 0.30"}
    assert [(c.round, c.score) for c in chart.ceilings] == [(1, 70)]


def _trace(tension: float | None, state: SystemState | None, defense: DefenseMechanism | None, **meta: str) -> Trace:
    final = (
        None
        if tension is None
        else FinalDecision(response="ok", composed_by="adopted", tension=tension, state=state, defense=defense)
    )
    status = TraceStatus.FAILED if final is None else TraceStatus.COMPLETED
    return Trace(request="r", params=NegotiationParams(), status=status, final=final, metadata=meta)


H, N, D = SystemState.HEALTHY_EQUILIBRIUM, SystemState.NEGOTIATED_EQUILIBRIUM, SystemState.DRIVE_DOMINANT
KNOWN = [
    _trace(0.0, H, None),
    _trace(0.05, H, None, conversation_id="c1"),
    _trace(0.29, H, DefenseMechanism.REPRESSION),
    _trace(0.55, N, DefenseMechanism.SUBLIMATION, conversation_id="c1"),
    _trace(0.55, D, DefenseMechanism.RATIONALIZATION),
    _trace(1.0, D, DefenseMechanism.RATIONALIZATION),
    _trace(None, None, None),
]


@pytest.fixture(params=["memory", "sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def empty_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[TraceStore]:
    """Every store kind: the SQL ones count in the database, the in-memory one in Python."""
    if request.param == "memory":
        yield open_store(None)
    elif request.param == "sqlite":
        store = open_store(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
        yield store
        await store.close()
    else:
        async with pg_schema("tv") as connect_args:
            pg = SQLTraceStore(PG_URL, connect_args=connect_args)
            yield pg
            await pg.close()


async def _fill(store: TraceStore, traces: list[Trace]) -> TraceStore:
    for trace in traces:
        await store.start(trace)
        await store.finish(trace)
    return store


async def test_trace_stats_count_every_matching_trace(empty_store: TraceStore) -> None:
    known_store = await _fill(empty_store, KNOWN)
    stats = await trace_stats(known_store, TraceQuery(limit=1), healthy=0.3)  # the page size does not matter
    assert stats.total == 7
    bins = {round(b.lo, 1): b.count for b in stats.histogram.bars}
    assert bins == {0.0: 2, 0.1: 0, 0.2: 1, 0.3: 0, 0.4: 0, 0.5: 2, 0.6: 0, 0.7: 0, 0.8: 0, 0.9: 1}  # 1.0 in the last
    assert stats.histogram.without_tension == 1
    h = stats.histogram
    assert h.healthy_x == round(h.left + (h.right - h.left) * 0.3, 1)
    tallest = max(h.bars, key=lambda b: b.count)
    assert tallest.y == h.top and tallest.h == h.bottom - h.top
    table = stats.table
    assert table.counts["healthy_equilibrium"] == {**dict.fromkeys(table.defenses, 0), "none": 2, "repression": 1}
    assert table.counts["drive_dominant"]["rationalization"] == 2
    assert table.counts[NO_STATE]["none"] == 1
    assert table.row_totals["healthy_equilibrium"] == 3 and table.col_totals["rationalization"] == 2
    assert table.total == 7 and table.peak == 2
    assert [table.level(c) for c in (0, 1, 2)] == [0, 2, 4]


async def test_trace_stats_follow_the_filters(empty_store: TraceStore) -> None:
    known_store = await _fill(empty_store, KNOWN)
    high = await trace_stats(known_store, TraceQuery(tension_min=0.5))
    assert high.total == 3 and high.histogram.without_tension == 0
    assert {round(b.lo, 1): b.count for b in high.histogram.bars if b.count} == {0.5: 2, 0.9: 1}
    conv = await trace_stats(known_store, TraceQuery(conversation="c1"))
    assert conv.total == 2
    assert conv.table.counts["negotiated_equilibrium"]["sublimation"] == 1
    assert conv.table.counts["healthy_equilibrium"]["none"] == 1


async def test_tension_on_a_bin_edge_counts_in_the_upper_bin(empty_store: TraceStore) -> None:
    # 0.0, 0.1, ... 1.0: each on an edge (0.3 and 0.7 are not exact in binary)
    store = await _fill(empty_store, [_trace(i / 10, H, None) for i in range(11)])
    stats = await trace_stats(store, TraceQuery())
    assert [b.count for b in stats.histogram.bars] == [1] * 9 + [2]  # the last bin holds 1.0 too
