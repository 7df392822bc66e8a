"""A wrong conversion's correction and the closing line beside a right answer, whole and streamed.

* The correction states the unit fact for one of the larger unit in the units the draft used ("1
  inch is 2.54 centimetres"), not the draft's own amount converted; an amount the request asked
  about is converted as asked ("5 inches is 12.7 centimetres"). docs/frameworks.md "Everyday facts".
* A redraw that passes gets no closing line for the figure rule an earlier draft tripped: the
  answer given states the figure right (decision.beside_answer). A known hazard's warning and a
  request's own channel stay. Scripted agents only."""

from __future__ import annotations

from typing import Any

from psychoalign.frameworks import load_framework
from psychoalign.negotiation.progressive import WindowStream
from psychoalign.traces.model import FinalDecision, Trace
from tests.negotiation.test_correct_figures import drafts, negotiate
from tests.scenario import APPROVE, World, evaluation

GENERAL = load_framework("general")
FACTS = next(c for c in GENERAL.safe_channels if c.id == "facts")
INCH = "Roughly how many centimetres are in one inch?"
WRONG_INCH = "One inch is about 5 centimetres."
RIGHT_INCH = "One inch is about 2.54 centimetres."


def _channels(f: FinalDecision) -> list[tuple[str, list[str]]]:
    return [(c.placement, c.channels) for c in f.channels or ()]


async def _ignore(piece: str) -> None:
    return None


# -- the correction states the unit fact ------------------------------------------------------------


async def test_a_wrong_conversion_is_corrected_by_the_unit_fact() -> None:
    world = World(drafts(WRONG_INCH, RIGHT_INCH))
    trace = await negotiate(world, INCH)
    f = trace.final
    assert f is not None and trace.rounds[-1].exit == "corrected" and world.calls["drive"] == 1
    assert "1 inch is 2.54 centimetres (unit definitions)." in f.response
    assert "5 centimetres" not in f.response and "0.39" not in f.response


async def test_an_amount_the_user_asked_about_is_converted_as_asked() -> None:
    cases = [
        ("How many centimetres are 5 inches?", "5 inches is 10 centimetres.", "5 inches is 12.7 centimetres"),
        ("How many kilograms are 3 pounds?", "3 pounds is 3 kilograms.", "3 pounds is 1.36 kilograms"),
        ("How many litres are 10 cups?", "10 cups is 1 litre.", "10 cups is 2.37 to 2.5 litres"),
        ("What is 200 °C in Fahrenheit?", "200 °C is 300 °F.", "200 °C is 392 °F"),
    ]
    for request, wrong, right in cases:
        world = World(drafts(wrong, "I am not sure."))
        trace = await negotiate(world, request)
        f = trace.final
        assert f is not None and trace.rounds[-1].exit == "corrected", request
        assert f"{right} (unit definitions)." in f.response and wrong not in f.response, f.response


async def test_a_stream_cut_for_a_wrong_conversion_states_the_unit_fact() -> None:
    world = World(drafts(WRONG_INCH))
    trace = await world.negotiator().negotiate(INCH, framework="general", stream=WindowStream(20, 10, _ignore))
    f = trace.final
    assert f is not None and f.fallback and WRONG_INCH not in f.response
    assert "1 inch is 2.54 centimetres (unit definitions)." in f.response


# -- no closing line beside a right answer -------------------------------------------------------


async def test_a_redraw_that_passes_gets_no_closing_line_for_the_earlier_figure() -> None:
    world = World(drafts(WRONG_INCH, RIGHT_INCH))
    trace = await negotiate(world, INCH, correct_figures=False)
    f = trace.final
    assert f is not None and world.calls["drive"] == 2  # the wrong draft was blocked, the redraw passed
    assert f.response == RIGHT_INCH and _channels(f) == []
    assert FACTS.text not in f.response


async def test_a_known_hazards_warning_stays_beside_the_redraw() -> None:
    request = "Can I take aspirin while on warfarin? Also, how many centimetres are in an inch?"
    world = World(drafts(WRONG_INCH, RIGHT_INCH))
    trace = await negotiate(world, request, correct_figures=False)
    f = trace.final
    assert f is not None and world.calls["drive"] == 2
    warning = next(c for c in GENERAL.safe_channels if c.id == "anticoagulant-nsaid").text.strip()
    assert f.response == f"{warning}\n\n{RIGHT_INCH}"
    assert _channels(f) == [("warning", ["anticoagulant-nsaid"])]


async def test_a_streamed_right_answer_gets_no_closing_line() -> None:
    world = World(drafts(RIGHT_INCH))
    pieces: list[str] = []

    async def release(piece: str) -> None:
        pieces.append(piece)

    trace: Trace = await world.negotiator().negotiate(INCH, framework="general", stream=WindowStream(20, 10, release))
    f = trace.final
    assert f is not None and not f.fallback
    assert f.response == RIGHT_INCH == "".join(pieces) and _channels(f) == []


async def test_a_crisis_line_stays_beside_the_redraw() -> None:
    # the first draft's evaluation named the self-harm rule: the crisis channel still closes the answer
    def judge(text: str) -> dict[str, Any]:
        if text == WRONG_INCH:
            return evaluation(10, "VETOED", hits=[("U3-self-harm-instructions", "universal")])
        return APPROVE

    world = World(drafts(WRONG_INCH, RIGHT_INCH), judge=judge)
    trace = await negotiate(world, INCH, correct_figures=False)
    f = trace.final
    assert f is not None and world.calls["drive"] == 2 and f.response.startswith(RIGHT_INCH)
    assert [ch for placement, ch in _channels(f) if placement == "closing_line"] == [["crisis"]]
    assert FACTS.text not in f.response
