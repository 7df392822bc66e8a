"""What the trace viewer may show: redaction of agent-internal text, and the tension chart.

DRIVE drafts are unconstrained model output (the very text the gates exist to stop), and the
EVALUATOR's free text about a draft can quote it. Only accounts listed in
``serve.drive_text_viewers`` see either; everyone else allowed to open traces sees the request,
the context, numbers, verdicts, rule ids, gate outcomes and the final (gated) response.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from ..traces.model import Trace

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


class ChartPoint(BaseModel):
    model_config = ConfigDict(frozen=True)

    round: int
    tension: float
    x: float
    y: float


class TensionChart(BaseModel):
    """An SVG line chart drawn by the template from numbers only (no script, no inline style)."""

    model_config = ConfigDict(frozen=True)

    width: int
    height: int
    points: list[ChartPoint]
    polyline: str
    threshold_y: float | None


def tension_chart(trace: Trace, *, width: int = 360, height: int = 140, pad: int = 24) -> TensionChart:
    """Tension per round (0..1 on the y axis), with the healthy-equilibrium threshold line."""
    rounds = trace.rounds
    n = max(len(rounds), 1)
    span_x = width - 2 * pad
    span_y = height - 2 * pad

    def x_of(i: int) -> float:
        return round(pad + (span_x * (i / (n - 1)) if n > 1 else span_x / 2), 1)

    def y_of(t: float) -> float:
        return round(pad + span_y * (1.0 - min(max(t, 0.0), 1.0)), 1)

    points = [ChartPoint(round=r.index, tension=r.tension, x=x_of(i), y=y_of(r.tension)) for i, r in enumerate(rounds)]
    threshold = trace.params.healthy_threshold
    return TensionChart(
        width=width,
        height=height,
        points=points,
        polyline=" ".join(f"{p.x},{p.y}" for p in points),
        threshold_y=y_of(threshold),
    )
