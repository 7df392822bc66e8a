"""What the trace viewer may show: DRIVE text and evaluator notes only when authorised."""

from __future__ import annotations

import json

from psychoalign.config import Settings
from psychoalign.web.trace_view import HIDDEN, redacted, tension_chart
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
