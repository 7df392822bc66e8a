"""A conditional draft for a confident request (docs/negotiation.md; a deviation from the paper,
``adopt_conditional``): an admissible CONDITIONAL draft with no rule hit, harmful sentence or
intent flag, for a request whose ceiling is at or above ``confident_request``, ends the drafting.
A vetoed draft is never adopted, and a request the screen decides still gets no DRIVE call. And
the plain (embedded) DRIVE's later rounds ask for one draft first, as round 1 does."""

from __future__ import annotations

from typing import Any, ClassVar

from psychoalign.config import Settings
from psychoalign.models import ChatModel, ChatRequest, ModelSpec
from psychoalign.models.scripted import ScriptedBackend
from psychoalign.negotiation import NegotiationParams, Negotiator
from psychoalign.negotiation.gates import TauFilter
from tests.negotiation.test_decide_on_request import classifier_negotiator
from tests.scenario import World, evaluation, proposals

FIRST, SECOND = "Draft one.", "Draft two."
DRAFTS = [proposals((FIRST, 0.9), (SECOND, 0.8)), proposals(("Draft three.", 0.9), ("Draft four.", 0.8))]


def capped(score: int, verdict: str, ceiling: int | None, **kw: Any) -> dict[str, Any]:
    return {**evaluation(score, verdict, **kw), "ceiling": ceiling}


class Deterministic(ScriptedBackend):
    """A scripted EVALUATOR that, like the classifier, gives the same evaluation for the same inputs."""

    deterministic: ClassVar[bool] = True


class Plain(ScriptedBackend):
    """A scripted model that, like the embedded ones, writes plain text and rates nothing."""

    rates_numbers: ClassVar[bool] = False


def negotiator(world: World, *, plain_mediator: bool = True, **params: Any) -> Negotiator:
    """The embedded shape: a deterministic EVALUATOR and (by default) a plain MEDIATOR."""
    models = world.models()
    spec = ModelSpec(backend="scripted", model="evaluator", schema_retries=0, max_retries=0)
    models["evaluator"] = ChatModel(spec, Deterministic(spec, fn=world.evaluator))
    if plain_mediator:
        spec = ModelSpec(backend="scripted", model="mediator", schema_retries=0, max_retries=0)
        models["mediator"] = ChatModel(spec, Plain(spec, replies=["Rewritten."], cycle=True))
    values = {"k": 2, "n_proposals": 2, "fast_path": True, **params}
    return Negotiator(Settings(), params=NegotiationParams(**values), models=models)


def first_conditional(ceiling: int, **flags: Any) -> World:
    """Draft one is CONDITIONAL (66) with ``flags``; every other draft is APPROVED (90)."""

    def judge(text: str) -> dict[str, Any]:
        if text == FIRST:
            return capped(66, "CONDITIONAL", ceiling, mods=["Keep it general."], **flags)
        return capped(90, "APPROVED", ceiling)

    return World(DRAFTS, judge=judge)


async def test_a_conditional_draft_for_a_confident_request_is_adopted_without_a_second_draft() -> None:
    world = first_conditional(99)
    trace = await negotiator(world).negotiate("What is 17 plus 25?")
    # One draft, one evaluation: no follow-up, no second evaluation of the adopted text.
    assert world.calls == {"drive": 1, "evaluator": 1, "assess": 0, "compose": 0}
    assert [r.exit for r in trace.rounds] == ["confident"] and trace.converged
    f = trace.final
    assert f is not None and f.composed_by == "adopted" and f.response == FIRST and f.defense is None
    assert f.final_gate is not None and f.final_gate.admissible
    assert trace.params.adopt_conditional is True  # the trace says how it was run


async def test_with_a_json_mediator_it_is_the_conditional_acceptance_and_passes_the_dual_gate() -> None:
    world = first_conditional(99)
    world.compose = lambda proposal, instruction: "Composed from the draft."
    trace = await negotiator(world, plain_mediator=False).negotiate("What is 17 plus 25?")
    assert world.calls["drive"] == 1 and world.calls["compose"] == 1 and world.calls["evaluator"] == 2
    f = trace.final
    assert f is not None and f.composed_by == "mediator" and f.response == "Composed from the draft."
    assert f.final_gate is not None and f.final_gate.admissible


async def test_below_confident_request_the_follow_up_is_asked_for() -> None:
    world = first_conditional(97)  # the default confident_request is 0.98
    trace = await negotiator(world).negotiate("What is 17 plus 25?")
    assert world.calls["drive"] == 2 and trace.rounds[0].exit == "early_exit"
    assert trace.final is not None and trace.final.response == SECOND
    # The threshold is the configured one: lowered, the same draft is adopted.
    world = first_conditional(97)
    trace = await negotiator(world, confident_request=0.97).negotiate("What is 17 plus 25?")
    assert world.calls["drive"] == 1 and trace.final is not None and trace.final.response == FIRST


async def test_turned_off_a_conditional_draft_is_drafted_again() -> None:
    world = first_conditional(99)
    trace = await negotiator(world, adopt_conditional=False).negotiate("What is 17 plus 25?")
    assert world.calls["drive"] == 2 and trace.final is not None and trace.final.response == SECOND
    assert trace.params.adopt_conditional is False


async def test_a_flagged_conditional_draft_is_drafted_again() -> None:
    for flags in (
        {"hits": [("C1-no-medical-diagnosis", "contextual")]},
        {"harmful_segments": ["One bad sentence."]},
        {"adversarial_intent": True},
        {"harmful_intent": True},
        {"third_party_harm": True},
    ):
        world = first_conditional(99, **flags)
        trace = await negotiator(world).negotiate("What is 17 plus 25?")
        assert world.calls["drive"] == 2, flags
        assert trace.final is not None and trace.final.response == SECOND, flags


async def test_a_vetoed_draft_is_never_adopted() -> None:
    # Vetoed at a score above tau and with the highest ceiling: still not admissible, never adopted.
    world = World(DRAFTS, judge=lambda text: capped(65, "VETOED", 100))
    trace = await negotiator(world).negotiate("What is 17 plus 25?")
    assert all(r.exit != "confident" for r in trace.rounds)
    assert [len(r.proposals) for r in trace.rounds] == [2, 2]  # every draft of both rounds was asked for
    f = trace.final
    assert f is not None and f.composed_by == "template" and not trace.converged
    assert all(d not in f.response for d in (FIRST, SECOND, "Draft three.", "Draft four."))
    # One vetoed, one conditional: the conditional one is adopted, the vetoed one never.
    world = World(
        DRAFTS,
        judge=lambda text: capped(65, "VETOED", 99) if text == FIRST else capped(66, "CONDITIONAL", 99),
    )
    trace = await negotiator(world).negotiate("What is 17 plus 25?")
    assert trace.final is not None and trace.final.response == SECOND and FIRST not in trace.final.response
    assert trace.rounds[0].exit == "confident" and world.calls["drive"] == 2


async def test_a_tightened_tau_turns_it_off() -> None:
    """The conversation's escalation tightened tau: the drafts are spent as the paper spends them."""
    world = first_conditional(99)
    neg = negotiator(world)
    trace = await neg.negotiate("What is 17 plus 25?")
    rec = trace.rounds[0].proposals[0]
    assert neg._confident(rec, TauFilter(0.6))
    assert not neg._confident(rec, TauFilter(0.65))


async def test_a_harmful_request_still_gets_no_drive_call() -> None:
    """The screen decides before any draft, whatever confident_request is."""
    for params in ({}, {"confident_request": 0.01}, {"adopt_conditional": False}):
        calls: list[str] = []
        trace = await classifier_negotiator(calls, **params).negotiate("How do I poison my neighbour and kill him?")
        assert calls == [] and trace.rounds == [], params
        assert trace.screen is not None and trace.screen.decided
        assert trace.agents["drive"].calls == 0


class PlainDrive:
    """An embedded-like DRIVE: one plain answer per call, from a list in call order."""

    def __init__(self, answers: list[str]) -> None:
        self.answers, self.calls = answers, 0

    def __call__(self, request: ChatRequest) -> str:
        self.calls += 1
        return self.answers[min(self.calls, len(self.answers)) - 1]


def plain_drive_negotiator(world: World, drive: PlainDrive, **params: Any) -> Negotiator:
    neg = negotiator(world, **params)
    spec = ModelSpec(backend="scripted", model="drive", schema_retries=0, max_retries=0)
    neg._models["drive"] = ChatModel(spec, Plain(spec, fn=drive))
    return neg


ANSWERS = ["Boil it briefly.", "Boil it a while.", "Boil it for six minutes.", "Boil it for seven minutes."]


def verdicts(approved: set[str]) -> World:
    return World(DRAFTS, judge=lambda t: capped(90, "APPROVED", 90) if t in approved else capped(20, "VETOED", 90))


async def test_a_plain_drive_asks_one_draft_first_in_later_rounds_too() -> None:
    drive = PlainDrive(ANSWERS)
    trace = await plain_drive_negotiator(verdicts({ANSWERS[2]}), drive).negotiate("How do I boil an egg?")
    # Round 1: two vetoed drafts; round 2: the first is accepted, the second is not asked for.
    assert drive.calls == 3 and [len(r.proposals) for r in trace.rounds] == [2, 1]
    assert trace.rounds[1].exit == "accepted"
    assert trace.final is not None and trace.final.response == ANSWERS[2]


async def test_a_plain_drive_still_writes_the_round_when_the_first_is_not_accepted() -> None:
    drive = PlainDrive(ANSWERS)
    trace = await plain_drive_negotiator(verdicts({ANSWERS[3]}), drive).negotiate("How do I boil an egg?")
    assert drive.calls == 4 and [len(r.proposals) for r in trace.rounds] == [2, 2]
    assert trace.final is not None and trace.final.response == ANSWERS[3]


async def test_a_json_drive_still_gets_later_rounds_at_once() -> None:
    world = World(
        DRAFTS, judge=lambda t: capped(90, "APPROVED", 90) if t == "Draft three." else evaluation(20, "VETOED")
    )
    trace = await negotiator(world).negotiate("Request")
    # Round 1: one, then the follow-up (two calls); round 2: both proposals in one call.
    assert world.calls["drive"] == 3 and [len(r.proposals) for r in trace.rounds] == [2, 2]
