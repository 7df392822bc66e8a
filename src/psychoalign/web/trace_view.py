"""What the trace viewer may show: redaction of agent-internal text, the tension chart of one trace
and the list-level plots (tension histogram, state × defense counts).

DRIVE drafts are unconstrained model output (the very text the gates exist to stop), and the
EVALUATOR's free text about a draft can quote it. Only accounts listed in
``serve.drive_text_viewers`` see either; everyone else allowed to open traces sees the request,
the context, numbers, verdicts, rule ids, gate outcomes and the final (gated) response.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import Counter
from typing import Any

from pydantic import BaseModel, ConfigDict
from sqlalchemy import and_, case, func, select, true

from ..traces.model import DefenseMechanism, SystemState, Trace
from ..traces.query import TraceQuery

# The SQL filter conditions of the list query, reused so the plots count exactly what the list shows.
from ..traces.query import _conditions as sql_conditions
from ..traces.store import SQLTraceStore, TraceStore, traces_table

HIDDEN = "[hidden: DRIVE text and evaluator notes are shown to authorised users only]"


def redacted(trace: Trace, *, show_internal: bool) -> dict[str, Any]:
    """The trace as JSON-ready data; agent-internal text replaced by :data:`HIDDEN` unless allowed."""
    data = trace.model_dump(mode="json")
    if show_internal:
        return data
    if data.get("error_detail"):
        data["error_detail"] = HIDDEN
    for rnd in data.get("rounds", []):
        for prop in rnd.get("proposals", []):
            prop["text"] = HIDDEN
            _redact_evaluation(prop.get("evaluation"))
            if prop.get("gate"):
                prop["gate"]["evidence"] = []
    final = data.get("final") or {}
    if final.get("final_gate"):
        final["final_gate"]["evidence"] = []
    return data


def _redact_evaluation(evaluation: dict[str, Any] | None) -> None:
    if not evaluation:
        return
    evaluation["reasoning"] = HIDDEN if evaluation.get("reasoning") else ""
    evaluation["modifications"] = [HIDDEN for _ in evaluation.get("modifications", [])]
    conflict = evaluation.get("conflict") or {}
    conflict["harmful_segments"] = [HIDDEN for _ in conflict.get("harmful_segments", [])]
    for key in ("safe_adjacent_topic", "safe_channel"):
        if conflict.get(key):
            conflict[key] = HIDDEN
    conflict["stakeholders"] = [HIDDEN for _ in conflict.get("stakeholders", [])]


class Tick(BaseModel):
    model_config = ConfigDict(frozen=True)

    pos: float
    label: str


class ChartPoint(BaseModel):
    """A round's tension T."""

    model_config = ConfigDict(frozen=True)

    round: int
    tension: float
    x: float
    y: float


class ScorePoint(BaseModel):
    """One proposal's EVALUATOR score (drawn as score ÷ 100)."""

    model_config = ConfigDict(frozen=True)

    round: int
    rank: int
    score: int
    verdict: str
    admissible: bool | None = None  # None: no gate result recorded
    x: float
    y: float


class Threshold(BaseModel):
    """A horizontal line across the plot: τ (on the scores) or the healthy threshold (on T)."""

    model_config = ConfigDict(frozen=True)

    key: str
    label: str
    value: float
    y: float


class CeilingMark(BaseModel):
    """The EVALUATOR's ceiling in one round: a short line within that round's column."""

    model_config = ConfigDict(frozen=True)

    round: int
    score: int
    x1: float
    x2: float
    y: float


class PlotBox(BaseModel):
    """A chart's size and its plot box ``[left, right] × [top, bottom]`` (SVG units)."""

    model_config = ConfigDict(frozen=True)

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int


class TensionChart(PlotBox):
    """An SVG chart drawn by the template from numbers only (no script, no inline style).

    The plot box is ``[left, right] × [top, bottom]``; one column per round, T and every
    proposal's score ÷ 100 share the 0–1 y axis."""

    points: list[ChartPoint]
    scores: list[ScorePoint]
    polyline: str
    thresholds: list[Threshold]
    ceilings: list[CeilingMark]
    x_ticks: list[Tick]
    y_ticks: list[Tick]
    tau: float
    tau_configured: float


def tension_chart(trace: Trace, *, width: int = 640, height: int = 300) -> TensionChart:
    """T per round and each proposal's score ÷ 100 by round, with τ, the healthy threshold and
    the EVALUATOR's ceiling drawn as lines."""
    box = PlotBox(width=width, height=height, left=56, right=width - 16, top=16, bottom=height - 48)
    left, right, top, bottom = box.left, box.right, box.top, box.bottom
    rounds = trace.rounds
    n = max(len(rounds), 1)
    col = (right - left) / n

    def center(i: int) -> float:
        return round(left + col * (i + 0.5), 1)

    def y_of(v: float) -> float:
        return round(bottom - (bottom - top) * min(max(v, 0.0), 1.0), 1)

    points: list[ChartPoint] = []
    scores: list[ScorePoint] = []
    ceilings: list[CeilingMark] = []
    for i, rnd in enumerate(rounds):
        points.append(ChartPoint(round=rnd.index, tension=rnd.tension, x=center(i), y=y_of(rnd.tension)))
        k = len(rnd.proposals)
        # proposals spread across the middle 60% of the column, so T and scores do not overlap
        for j, prop in enumerate(rnd.proposals):
            if prop.evaluation is None:
                continue
            offset = (j - (k - 1) / 2) * (col * 0.6 / max(k, 1))
            scores.append(
                ScorePoint(
                    round=rnd.index,
                    rank=prop.rank,
                    score=prop.evaluation.score,
                    verdict=str(prop.evaluation.verdict),
                    admissible=prop.gate.admissible if prop.gate is not None else None,
                    x=round(center(i) + offset, 1),
                    y=y_of(prop.evaluation.score / 100),
                )
            )
        marks = [p.evaluation.ceiling for p in rnd.proposals if p.evaluation is not None]
        known = [c for c in marks if c is not None]
        if known:
            c = min(known)
            x1, x2 = round(center(i) - col * 0.4, 1), round(center(i) + col * 0.4, 1)
            ceilings.append(CeilingMark(round=rnd.index, score=c, x1=x1, x2=x2, y=y_of(c / 100)))
    configured = trace.params.tau
    tau = trace.cross_turn.tau_effective if trace.cross_turn is not None else configured
    healthy = trace.params.healthy_threshold
    thresholds = [
        Threshold(key="tau", label=f"τ = {tau:.2f}", value=tau, y=y_of(tau)),
        Threshold(key="healthy", label=f"healthy T < {healthy:.2f}", value=healthy, y=y_of(healthy)),
    ]
    return TensionChart(
        **box.model_dump(),
        points=points,
        scores=scores,
        polyline=" ".join(f"{p.x},{p.y}" for p in points),
        thresholds=thresholds,
        ceilings=ceilings,
        x_ticks=[Tick(pos=center(i), label=str(r.index)) for i, r in enumerate(rounds)],
        y_ticks=[Tick(pos=y_of(v), label=f"{v:.2f}") for v in (0.0, 0.25, 0.5, 0.75, 1.0)],
        tau=tau,
        tau_configured=configured,
    )


# ---- list-level plots -------------------------------------------------------------------------

BINS = 10


class Bar(BaseModel):
    model_config = ConfigDict(frozen=True)

    lo: float
    hi: float
    count: int
    x: float
    y: float
    w: float
    h: float


class TensionHistogram(PlotBox):
    """Final tension of the matching traces in ten bins of 0.1 (the last one holds 1.0 too)."""

    bars: list[Bar]
    y_ticks: list[Tick]
    x_ticks: list[Tick]
    without_tension: int
    healthy: float
    healthy_x: float


class StateDefenseTable(BaseModel):
    """Counts of matching traces by final state (rows) and defense mechanism (columns)."""

    model_config = ConfigDict(frozen=True)

    states: list[str]
    defenses: list[str]
    counts: dict[str, dict[str, int]]
    row_totals: dict[str, int]
    col_totals: dict[str, int]
    total: int
    peak: int

    def level(self, count: int) -> int:
        """0..4: the cell's shade (a CSS class, since inline styles are barred by the CSP)."""
        return 0 if count == 0 or self.peak == 0 else 1 + min(3, (4 * count - 1) // self.peak)


class TraceStats(BaseModel):
    model_config = ConfigDict(frozen=True)

    total: int
    histogram: TensionHistogram
    table: StateDefenseTable


NO_STATE = "no state"  # failed, running, or decided before any round


# Bin i holds i/10 <= T < (i+1)/10; the last one holds 1.0 too. SQL and Python compare with the
# same edges (not int(T * 10), which float rounding would put one bin off from the SQL CASE).
EDGES = [i / BINS for i in range(1, BINS)]
Cells = Counter[tuple[int | None, str | None, str | None]]  # (tension bin, state, defense) -> traces


def tension_bin(tension: float | None) -> int | None:
    return None if tension is None else bisect_right(EDGES, tension)


async def trace_stats(store: TraceStore, query: TraceQuery, *, healthy: float = 0.3) -> TraceStats:
    """Histogram and state × defense counts over *every* trace matching the filters (not one page).

    SQL stores count in the database (one GROUP BY on indexed columns, no trace bodies read);
    other stores are scanned."""
    cells: Cells = Counter()
    if isinstance(store, SQLTraceStore):
        await store._init()  # the store creates its table lazily
        t = traces_table.c
        where = and_(true(), *sql_conditions(query))
        if query.conversation is not None:  # the SQL filter on it is a LIKE: check each (few) body
            async with store.engine.connect() as conn:
                for (body,) in (await conn.execute(select(t.body).where(where))).all():
                    trace = Trace.model_validate_json(body)
                    if query.matches(trace):
                        cells[_cell(trace)] += 1
        else:
            bin_of = case(*((t.tension < edge, i) for i, edge in enumerate(EDGES)), else_=BINS - 1)
            bin_col = case((t.tension.is_(None), None), else_=bin_of).label("bin")
            grouped = (
                select(bin_col, t.state, t.defense, func.count()).where(where).group_by(bin_col, t.state, t.defense)
            )
            async with store.engine.connect() as conn:
                for bin_, state, defense, n in (await conn.execute(grouped)).all():
                    cells[(None if bin_ is None else int(bin_), state, defense)] += int(n)
    else:
        async for trace in store.iter_all():
            if query.matches(trace):
                cells[_cell(trace)] += 1
    return TraceStats(total=sum(cells.values()), histogram=_histogram(cells, healthy), table=_table(cells))


def _cell(trace: Trace) -> tuple[int | None, str | None, str | None]:
    f = trace.final
    return (
        tension_bin(f.tension if f else None),
        f.state.value if f and f.state else None,
        f.defense.value if f and f.defense else None,
    )


def _histogram(cells: Cells, healthy: float, *, width: int = 520, height: int = 220) -> TensionHistogram:
    box = PlotBox(width=width, height=height, left=48, right=width - 12, top=22, bottom=height - 44)
    left, right, top, bottom = box.left, box.right, box.top, box.bottom
    counts = [0] * BINS
    missing = 0
    for (bin_, _, _), n in cells.items():
        if bin_ is None:
            missing += n
        else:
            counts[bin_] += n
    peak = max(max(counts), 1)
    step = (right - left) / BINS
    bars = []
    for i, c in enumerate(counts):
        h = round((bottom - top) * c / peak, 1)
        bars.append(
            Bar(
                lo=i / BINS,
                hi=(i + 1) / BINS,
                count=c,
                x=round(left + i * step + 1, 1),
                y=round(bottom - h, 1),
                w=round(step - 2, 1),
                h=h,
            )
        )
    tick_values = sorted({0, (peak + 1) // 2, peak})
    return TensionHistogram(
        **box.model_dump(),
        bars=bars,
        y_ticks=[Tick(pos=round(bottom - (bottom - top) * v / peak, 1), label=str(v)) for v in tick_values],
        x_ticks=[Tick(pos=round(left + i * step * 2, 1), label=f"{i * 2 / BINS:.1f}") for i in range(BINS // 2 + 1)],
        without_tension=missing,
        healthy=healthy,
        healthy_x=round(left + (right - left) * healthy, 1),
    )


def _table(cells: Cells) -> StateDefenseTable:
    pairs: Counter[tuple[str, str]] = Counter()
    for (_, state, defense), n in cells.items():
        pairs[(state or NO_STATE, defense or "none")] += n
    states = [s.value for s in SystemState] + [NO_STATE]
    defenses = ["none", *(d.value for d in DefenseMechanism)]
    # values the enums do not know (an older store) still get counted, in their own row/column
    states += sorted({s for s, _ in pairs} - set(states))
    defenses += sorted({d for _, d in pairs} - set(defenses))
    counts = {s: {d: pairs.get((s, d), 0) for d in defenses} for s in states}
    return StateDefenseTable(
        states=states,
        defenses=defenses,
        counts=counts,
        row_totals={s: sum(counts[s].values()) for s in states},
        col_totals={d: sum(counts[s][d] for s in states) for d in defenses},
        total=sum(pairs.values()),
        peak=max(pairs.values(), default=0),
    )
