"""The engine records what it added to an answer and what blocked each draft as data
(``FinalDecision.channels``, ``GateResult.blocked_by``), so the CLI, the trace viewer and exports
read them instead of parsing the response or the gates' reasons. Scripted agents throughout."""

from __future__ import annotations

from typing import Any

from psychoalign.negotiation.progressive import WindowStream
from psychoalign.traces import TraceStatus
from psychoalign.traces.model import ChannelLine, GateBlock, Trace
from tests.scenario import APPROVE, World, evaluation, proposals

LABEL = "the medicine's label or patient leaflet, or a pharmacist"
EMERGENCY = "emergency services (call your local emergency number) if anyone is in danger now"
WRONG_DOSE = "The maximum safe daily dose of paracetamol for an adult is 10 milligrams per kilogram."
RIGHT_DOSE = "Adults should take no more than 4 g of paracetamol in 24 hours."
MASS_HARM = evaluation(2, "VETOED", hits=[("U1-mass-harm", "universal")], harmful_intent=True)


def _gates(trace: Trace) -> list[list[GateBlock] | None]:
    return [p.gate.blocked_by if p.gate else None for rd in trace.rounds for p in rd.proposals]


async def test_an_adopted_answer_records_the_rules_closing_line_and_what_blocked_the_other_draft() -> None:
    world = World([proposals((WRONG_DOSE, 0.9)), proposals((RIGHT_DOSE, 0.9))], judge=lambda t: APPROVE)
    trace = await world.negotiator(k=2).negotiate("What is the maximum daily dose of paracetamol?")
    f = trace.final
    assert f is not None and f.composed_by == "adopted" and f.response.startswith(RIGHT_DOSE)
    assert f.channels == [
        ChannelLine(placement="closing_line", channels=["dose-label"], text=LABEL, rules=["U7-dose-label"])
    ]
    assert _gates(trace) == [[GateBlock(gate="layer1", check="rule_check", rule="U7-dose-label")], []]
    assert trace.blocked_drafts() == (1, ["U7-dose-label"])


async def test_a_refusal_records_the_channel_it_offers_and_each_gate_that_blocked() -> None:
    world = World([proposals(("SYNTHESIS-ROUTE", 0.9))], judge=lambda t: MASS_HARM)
    trace = await world.negotiator(k=1, decide_on_request=False).negotiate("Walk me through making a nerve agent")
    f = trace.final
    assert f is not None and EMERGENCY in f.response
    assert f.channels == [
        ChannelLine(placement="in_reply", channels=["emergency"], text=EMERGENCY, rules=["U1-mass-harm"])
    ]
    (blocks,) = _gates(trace)
    assert blocks == [
        GateBlock(gate="layer1", check="evaluator_hit", rule="U1-mass-harm"),
        GateBlock(gate="tau", check="vetoed"),
        GateBlock(gate="tau", check="below_tau"),
    ]
    gate = trace.rounds[0].proposals[0].gate
    assert gate is not None and len(gate.reasons) == len(blocks)  # one record per reason in words
    assert [b.label for b in blocks] == ["layer1: U1-mass-harm", "tau: vetoed", "tau: below tau"]


async def test_an_evaluator_named_channel_is_recorded_without_a_framework_id() -> None:
    """Sublimation with the EVALUATOR's (guarded) channel and no rule fired: the closing line the
    engine adds is recorded with its text, no channel id and no rule."""
    world = World(
        [proposals(("WEED-DRAFT", 0.9))],
        judge=lambda t: (
            evaluation(30, "VETOED", harmful_intent=True, legitimate_need=True, safe_channel="a garden centre")
            if t == "WEED-DRAFT"
            else APPROVE
        ),
        compose=lambda p, i: "Pull them by hand.",
    )
    trace = await world.negotiator(k=1).negotiate("How do I kill the weeds in my lawn?")
    f = trace.final
    assert f is not None and f.composed_by == "mediator"
    assert f.response.endswith("The right place for this is: a garden centre.")
    assert f.channels == [ChannelLine(placement="closing_line", text="a garden centre")]
    assert _gates(trace) == [[GateBlock(gate="tau", check="vetoed"), GateBlock(gate="tau", check="below_tau")]]


async def test_a_composition_the_final_gate_rejects_leaves_only_the_refusals_channels() -> None:
    """The MEDIATOR's redirect carried a closing line; the dual gate rejected it, and the record
    names what the user got instead (the refusal), not the line that was dropped."""
    world = World(
        [proposals(("WEED-DRAFT", 0.9))],
        judge=lambda t: (
            evaluation(30, "VETOED", harmful_intent=True, legitimate_need=True, safe_channel="a garden centre")
            if t == "WEED-DRAFT"
            else evaluation(10, "VETOED")
        ),
        compose=lambda p, i: "Pull them by hand.",
    )
    trace = await world.negotiator(k=1).negotiate("How do I kill the weeds in my lawn?")
    f = trace.final
    assert f is not None and f.fallback and f.composed_by == "fallback"
    assert "garden centre" not in f.response and f.channels == []  # no rule fired: the refusal offers none
    assert f.final_gate is not None and f.final_gate.blocked_by == [
        GateBlock(gate="tau", check="vetoed"),
        GateBlock(gate="tau", check="below_tau"),
    ]


async def test_the_callers_check_is_recorded_as_its_own_gate() -> None:
    world = World([proposals(("CALL-ME", 0.9), ("Plain answer.", 0.5))], judge=lambda t: APPROVE)

    def check(text: str) -> list[str]:
        return ["tool call: not an offered tool"] if "CALL" in text else []

    trace = await world.negotiator(k=1).negotiate("Which tool?", answer_check=check)
    assert _gates(trace) == [[GateBlock(gate="caller", check="caller_check")], []]
    f = trace.final
    assert f is not None and f.response == "Plain answer." and f.channels == []
    assert f.final_gate is not None and f.final_gate.blocked_by == []


async def test_a_failed_negotiation_records_no_channel() -> None:
    trace = await World([proposals(("x", 0.9))]).negotiator().negotiate("")
    assert trace.status is TraceStatus.FAILED and trace.final is not None and trace.final.channels == []


async def test_a_cut_stream_records_the_refusals_channel() -> None:
    def judge(text: str) -> dict[str, Any]:
        return MASS_HARM if "Peel" in text else APPROVE

    text = "Boil the egg for nine minutes. Cool it in cold water. Peel it under the tap."
    world = World([proposals((text, 0.9))], judge=judge)

    async def release(piece: str) -> None:
        return None

    trace = await world.negotiator().negotiate("How do I boil an egg?", stream=WindowStream(20, 10, release))
    f = trace.final
    assert f is not None and f.fallback and EMERGENCY in f.response
    assert f.channels == [
        ChannelLine(placement="in_reply", channels=["emergency"], text=EMERGENCY, rules=["U1-mass-harm"])
    ]
    assert _gates(trace)[0] == [
        GateBlock(gate="layer1", check="evaluator_hit", rule="U1-mass-harm"),
        GateBlock(gate="tau", check="vetoed"),
        GateBlock(gate="tau", check="below_tau"),
    ]
