"""A wrong figure the framework states right (``correct_figures``; docs/negotiation.md, "A wrong
figure the framework states right"): when every draft of a round is blocked and one is blocked
only for stating a wrong figure that a checked fact states right, drafting stops there and the
user gets the draft with that sentence left out and the fact stated (or the fact alone when the
draft is all wrong figure), instead of paying for a redraw. Anything else about the draft, or a
figure the framework cannot state, is redrawn as before. Scripted agents only."""

from __future__ import annotations

from typing import Any

from psychoalign.traces.model import DefenseMechanism, Trace
from tests.scenario import APPROVE, World, evaluation, proposals

EGG = (
    "Put the egg in a pan of cold water. Water boils at 120 °C at sea level. "
    "Simmer for 7 minutes for a firm yolk, then cool it in cold water."
)
RIGHT_EGG = "Put the egg in boiling water and simmer it for 7 minutes for a firm yolk."
HEADACHE = (
    "Ibuprofen works well for most headaches. Take it with food to protect your stomach. "
    "Adults can take up to 8,000 mg a day. If headaches keep coming back, see your GP."
)
RIGHT_HEADACHE = "Ibuprofen works well for most headaches. Take it with food and follow the label."
FACT = "Water boils at 100 °C (212 °F) at sea level"


def drafts(*texts: str) -> list[dict[str, Any]]:
    """One round reply per text: the DRIVE writes ``texts[i]`` first in round i + 1 (and the
    round's other proposal, asked for only when the first is not accepted, is the next text)."""
    rounds = []
    for i, text in enumerate(texts):
        other = texts[min(i + 1, len(texts) - 1)]
        rounds.append(proposals((text, 0.9), (other, 0.8)))
    return rounds


async def negotiate(world: World, request: str, **params: Any) -> Trace:
    params.setdefault("fast_path", True)
    trace = await world.negotiator(k=2, n_proposals=2, **params).negotiate(request, framework="general")
    assert trace.final is not None, trace.error
    return trace


async def test_a_wrong_fact_in_a_sentence_of_its_own_is_corrected_without_a_redraw() -> None:
    world = World(drafts(EGG, RIGHT_EGG), compose=lambda p, i: p)
    trace = await negotiate(world, "How do I boil an egg?")
    f = trace.final
    assert f is not None
    assert world.calls["drive"] == 1  # no second draft was paid for
    assert world.calls["evaluator"] == 2  # the draft, then what was kept (the dual gate)
    assert [rd.exit for rd in trace.rounds] == ["corrected"] and len(trace.rounds[0].proposals) == 1
    assert f.defense is DefenseMechanism.REPRESSION and f.composed_by == "filtered"
    assert f.final_gate is not None and f.final_gate.admissible and not f.fallback
    assert "120 °C" not in f.response and f.response.startswith("Put the egg in a pan of cold water. Simmer")
    assert "I left out a sentence of this answer" in f.response and FACT in f.response
    assert trace.params.correct_figures is True


async def test_a_draft_that_is_all_wrong_figure_gets_the_fact_without_a_redraw() -> None:
    world = World(drafts("At sea level, water boils at 90 °C (194 °F).", "Water boils at 100 °C."))
    trace = await negotiate(world, "At what temperature does water boil?")
    f = trace.final
    assert f is not None and world.calls["drive"] == 1 and world.calls["evaluator"] == 1
    assert trace.rounds[-1].exit == "corrected"
    # framework text only: the figure channel's message, with the checked fact stated right
    assert f.composed_by == "template" and "90 °C" not in f.response
    assert "I can't give you the answer I drafted" in f.response and FACT in f.response


async def test_off_the_draft_is_redrawn_as_in_the_papers_protocol() -> None:
    world = World(drafts(EGG, RIGHT_EGG))
    trace = await negotiate(world, "How do I boil an egg?", correct_figures=False)
    f = trace.final
    assert f is not None and world.calls["drive"] == 2
    assert f.response.startswith(RIGHT_EGG) and "120 °C" not in f.response
    assert "corrected" not in [rd.exit for rd in trace.rounds]


async def test_a_wrong_figure_the_framework_cannot_state_is_redrawn() -> None:
    # the dose table knows 8,000 mg a day is wrong but states no right figure for it: a redraw
    world = World(drafts(HEADACHE, RIGHT_HEADACHE))
    trace = await negotiate(world, "What can I take for a headache?")
    f = trace.final
    assert f is not None and world.calls["drive"] == 2
    assert f.response.startswith(RIGHT_HEADACHE) and "8,000" not in f.response


def _judge_flags(**flags: Any):  # type: ignore[no-untyped-def]
    """An EVALUATOR that approves the right draft and flags the wrong one with ``flags``."""

    def judge(text: str) -> dict[str, Any]:
        return evaluation(20, "VETOED", **flags) if "120 °C" in text else APPROVE

    return judge


async def test_a_draft_blocked_for_anything_else_as_well_is_redrawn() -> None:
    cases: list[dict[str, Any]] = [
        {"hits": [("U4-malware", "universal")]},  # another universal rule named
        {"adversarial_intent": True},  # a manipulation attempt
        {"harmful_intent": True},  # harmful intent apart from the figure
        {"third_party_harm": True, "stakeholders": ["neighbours"]},
        {"harmful_segments": ["Simmer for 7 minutes for a firm yolk, then cool it in cold water."]},
    ]
    for flags in cases:
        world = World(drafts(EGG, RIGHT_EGG), judge=_judge_flags(**flags))
        trace = await negotiate(world, "How do I boil an egg?")
        assert world.calls["drive"] == 2, flags
        assert "corrected" not in [rd.exit for rd in trace.rounds], flags
        assert trace.final is not None and "120 °C" not in trace.final.response


async def test_without_the_dual_gate_nothing_is_corrected() -> None:
    world = World(drafts(EGG, RIGHT_EGG))
    trace = await negotiate(world, "How do I boil an egg?", final_gate=False)
    assert world.calls["drive"] == 2 and "corrected" not in [rd.exit for rd in trace.rounds]


async def test_a_callers_check_that_blocks_the_draft_is_a_fault_of_its_own() -> None:
    world = World(drafts(EGG, RIGHT_EGG))
    negotiator = world.negotiator(k=2, n_proposals=2, fast_path=True)

    def check(text: str) -> list[str]:
        return ["tool-call"] if "egg" in text.lower() and "120" in text else []

    trace = await negotiator.negotiate("How do I boil an egg?", framework="general", answer_check=check)
    assert world.calls["drive"] == 2 and "corrected" not in [rd.exit for rd in trace.rounds]


async def test_what_is_kept_still_passes_the_dual_gate_or_gives_way_to_the_refusal() -> None:
    def judge(text: str) -> dict[str, Any]:
        kept = text.startswith("Put the egg in a pan of cold water. Simmer")
        return evaluation(10, "VETOED") if kept else APPROVE

    world = World(drafts(EGG, RIGHT_EGG), judge=judge)
    trace = await negotiate(world, "How do I boil an egg?")
    f = trace.final
    assert f is not None and world.calls["drive"] == 1 and trace.rounds[-1].exit == "corrected"
    assert f.fallback and "Simmer" not in f.response and "120 °C" not in f.response


async def test_without_the_fast_path_the_round_with_the_wrong_figure_is_the_last() -> None:
    # both proposals of round 1 are asked for at once; neither passes; no second round is drafted
    blocked = "Water boils at 50 °C."
    world = World(drafts(EGG, blocked, RIGHT_EGG))
    trace = await negotiate(world, "How do I boil an egg?", fast_path=False)
    assert world.calls["drive"] == 1 and [rd.exit for rd in trace.rounds] == ["corrected"]
    assert trace.final is not None and "50 °C" not in trace.final.response and FACT in trace.final.response


async def test_an_admissible_draft_in_the_round_is_chosen_over_a_correction() -> None:
    world = World(drafts(EGG, RIGHT_EGG))
    trace = await negotiate(world, "How do I boil an egg?", fast_path=False)
    f = trace.final
    assert f is not None and "corrected" not in [rd.exit for rd in trace.rounds]
    assert f.response.startswith(RIGHT_EGG) and "120 °C" not in f.response
