"""The fast path's score ceiling: an EVALUATOR that knows the best score any answer to a request
can get (the classifier backend) saves the drafts that could not change the outcome. And the
plain (embedded) DRIVE's one redraw of a draft that declines."""

from __future__ import annotations

from typing import Any, ClassVar

from psychoalign.agents.agents import DriveAgent
from psychoalign.agents.messages import DriveTask
from psychoalign.agents.schemas import Evaluation
from psychoalign.config import Settings
from psychoalign.models import ChatModel, ModelSpec
from psychoalign.models.scripted import ScriptedBackend
from psychoalign.negotiation import DefenseMechanism, NegotiationParams, Negotiator, SystemState
from tests.scenario import World, evaluation, proposals

TWO_ROUNDS = [
    proposals(("Draft one.", 0.9), ("Draft two.", 0.8)),
    proposals(("Draft three.", 0.9), ("Draft four.", 0.8)),
]


def capped(score: int, verdict: str, ceiling: int | None, **kw: Any) -> dict[str, Any]:
    return {**evaluation(score, verdict, **kw), "ceiling": ceiling}


async def test_a_ceiling_below_tau_ends_proposing_after_one_draft() -> None:
    world = World(TWO_ROUNDS, judge=lambda text: capped(20, "VETOED", 40, harmful_intent=True, legitimate_need=False))
    trace = await world.negotiator(k=3, n_proposals=3, fast_path=True).negotiate("Harmful request")
    # No draft can pass tau = 0.6 when the best possible score is 40: one DRIVE call, one evaluation.
    assert world.calls == {"drive": 1, "evaluator": 1, "assess": 0, "compose": 0}
    assert [r.exit for r in trace.rounds] == ["ceiling"]
    f = trace.final
    assert f is not None and not trace.converged
    assert f.state is SystemState.DEADLOCK
    assert f.defense is DefenseMechanism.RATIONALIZATION and f.composed_by == "template"


async def test_an_admissible_draft_at_the_ceiling_is_a_conditional_acceptance() -> None:
    world = World(
        TWO_ROUNDS,
        judge=lambda text: capped(66, "CONDITIONAL", 66, mods=["Keep it general."]),
        compose=lambda proposal, instruction: "General answer.",
    )
    trace = await world.negotiator(k=2, n_proposals=2, fast_path=True).negotiate("Contested request")
    # Drafts cannot score above 66: the first one is as good as any; the MEDIATOR applies the
    # modification and the composed text is evaluated again (the dual gate is untouched).
    assert world.calls == {"drive": 1, "evaluator": 2, "assess": 0, "compose": 1}
    assert [r.exit for r in trace.rounds] == ["ceiling"] and trace.converged
    f = trace.final
    assert f is not None and f.defense is None and f.composed_by == "mediator"
    assert f.response == "General answer."
    assert f.final_gate is not None and f.final_gate.admissible


async def test_a_draft_below_the_ceiling_still_gets_its_follow_ups() -> None:
    def judge(text: str) -> dict[str, Any]:
        return capped(30, "VETOED", 90) if text == "Draft one." else capped(90, "APPROVED", 90)

    world = World(TWO_ROUNDS, judge=judge)
    trace = await world.negotiator(k=2, n_proposals=2, fast_path=True).negotiate("Request")
    assert world.calls["drive"] == 2 and trace.rounds[0].exit == "early_exit"
    assert trace.final is not None and trace.final.response == "Draft two."


async def test_the_ceiling_is_ignored_without_the_fast_path() -> None:
    world = World(TWO_ROUNDS, judge=lambda text: capped(20, "VETOED", 40))
    trace = await world.negotiator(k=2, n_proposals=2, fast_path=False).negotiate("Harmful request")
    assert len(trace.rounds) == 2 and world.calls["drive"] == 2 and world.calls["evaluator"] == 4


async def test_an_evaluation_without_a_ceiling_changes_nothing() -> None:
    world = World(TWO_ROUNDS, judge=lambda text: evaluation(20, "VETOED"))
    trace = await world.negotiator(k=2, n_proposals=2, fast_path=True).negotiate("Harmful request")
    assert len(trace.rounds) == 2 and world.calls["drive"] == 3  # 1 + the follow-up, then round 2


def test_the_ceiling_is_not_asked_of_models_and_junk_is_dropped() -> None:
    assert "ceiling" not in str(Evaluation.model_json_schema())
    base = evaluation(50, "VETOED")
    for junk in (500, -1, "high", True, 12.5):
        assert Evaluation.model_validate({**base, "ceiling": junk}).ceiling is None
    assert Evaluation.model_validate({**base, "ceiling": 40}).ceiling == 40


class PlainScripted(ScriptedBackend):
    """A scripted model that, like the embedded ones, is not asked for numbers."""

    rates_numbers: ClassVar[bool] = False


async def test_a_plain_drive_draft_that_declines_is_drawn_again_once() -> None:
    spec = ModelSpec(backend="scripted")
    replies = ["I'm sorry, but I can't help with that.", "Boil it for six minutes, then cool it."]
    backend = PlainScripted(spec, replies=replies)
    reply = await DriveAgent(ChatModel(spec, backend)).propose(DriveTask(request="Egg?", context="c", n=1))
    assert [p.text for p in reply.output.proposals] == ["Boil it for six minutes, then cool it."]
    assert len(backend.requests) == 2 and backend.requests[1].temperature == 0.8  # sampled, another seed
    # Only once: a model that keeps declining gives its second draft (the EVALUATOR judges it).
    stubborn = PlainScripted(spec, replies=["I can't help with that."], cycle=True)
    again = await DriveAgent(ChatModel(spec, stubborn)).propose(DriveTask(request="Egg?", context="c", n=1))
    assert len(stubborn.requests) == 2 and again.output.proposals[0].text == "I can't help with that."


class DeterministicScripted(ScriptedBackend):
    """A scripted EVALUATOR that, like the classifier, gives the same evaluation for the same inputs."""

    deterministic: ClassVar[bool] = True


def _conditional_band(evaluator: type[ScriptedBackend]) -> tuple[World, Negotiator]:
    """A draft at the ceiling in the CONDITIONAL band, an embedded (plain) MEDIATOR: adopted verbatim."""
    world = World([proposals(("The heart pumps blood.", 1.0))], judge=lambda t: capped(62, "CONDITIONAL", 62))
    models = world.models()
    spec = ModelSpec(backend="scripted", model="mediator", schema_retries=0, max_retries=0)
    models["mediator"] = ChatModel(spec, PlainScripted(spec, replies=["Rewritten."], cycle=True))
    spec = ModelSpec(backend="scripted", model="evaluator", schema_retries=0, max_retries=0)
    models["evaluator"] = ChatModel(spec, evaluator(spec, fn=world.evaluator))
    params = NegotiationParams(k=2, n_proposals=2, fast_path=True)
    return world, Negotiator(Settings(), params=params, models=models)


async def test_a_deterministic_evaluator_does_not_judge_an_adopted_draft_twice() -> None:
    world, negotiator = _conditional_band(DeterministicScripted)
    trace = await negotiator.negotiate("What organ pumps blood?")
    f = trace.final
    assert f is not None and f.composed_by == "adopted" and f.response == "The heart pumps blood."
    # One draft, one evaluation: the final gate's Layer-1 checks ran, the EVALUATOR was not asked again.
    assert world.calls == {"drive": 1, "evaluator": 1, "assess": 0, "compose": 0}
    assert f.final_gate is not None and f.final_gate.admissible and f.final_gate.tau_passed


async def test_a_sampling_evaluator_still_judges_an_adopted_conditional_draft_again() -> None:
    world, negotiator = _conditional_band(ScriptedBackend)
    trace = await negotiator.negotiate("What organ pumps blood?")
    assert trace.final is not None and trace.final.composed_by == "adopted"
    assert world.calls == {"drive": 1, "evaluator": 2, "assess": 0, "compose": 0}


async def test_a_deterministic_evaluator_still_judges_changed_text() -> None:
    """Text the EVALUATOR has not seen (a JSON MEDIATOR's composition) passes the dual gate as before."""
    world = World(
        [proposals(("Draft.", 0.9))],
        judge=lambda t: (
            capped(62, "CONDITIONAL", 62, mods=["Keep it general."]) if t == "Draft." else evaluation(5, "VETOED")
        ),
        compose=lambda p, i: "Composed.",
    )
    models = world.models()
    spec = ModelSpec(backend="scripted", model="evaluator", schema_retries=0, max_retries=0)
    models["evaluator"] = ChatModel(spec, DeterministicScripted(spec, fn=world.evaluator))
    negotiator = Negotiator(Settings(), params=NegotiationParams(k=1, n_proposals=1, fast_path=True), models=models)
    trace = await negotiator.negotiate("Request")
    f = trace.final
    assert world.calls["evaluator"] == 2 and f is not None and f.fallback and "Composed." not in f.response


def _plain_drive_world(drive: ScriptedBackend) -> Negotiator:
    """A DRIVE on ``drive``, an EVALUATOR approving every draft, a plain MEDIATOR."""
    world = World([proposals(("unused", 1.0))], judge=lambda text: evaluation(95, "APPROVED"))
    models = world.models()
    models["drive"] = ChatModel(drive.spec, drive)
    spec = ModelSpec(backend="scripted", model="mediator", schema_retries=0, max_retries=0)
    models["mediator"] = ChatModel(spec, PlainScripted(spec, replies=["Rewritten."], cycle=True))
    return Negotiator(Settings(), params=NegotiationParams(k=2, n_proposals=2, fast_path=True), models=models)


async def test_a_plain_drive_with_nothing_beyond_the_deployment_context_gets_what_a_plain_call_gets() -> None:
    # The framework's own deployment context only would displace the model's default system turn:
    # the embedded DRIVE is sent the request alone, so its draft is what a plain call writes.
    spec = ModelSpec(backend="scripted", model="drive")
    drive = PlainScripted(spec, replies=["Canberra is the capital of Australia."], cycle=True)
    negotiator = _plain_drive_world(drive)
    trace = await negotiator.negotiate("What is the capital of Australia?")
    assert trace.final is not None and trace.final.response == "Canberra is the capital of Australia."
    assert trace.context  # the trace keeps the deployment context the negotiation ran under
    assert [(m.role, m.content) for m in drive.requests[0].messages] == [("user", "What is the capital of Australia?")]
    # A context beyond it (the application's instructions, a conversation so far) is its system turn.
    context = f"{trace.context}\n\nInstructions from the application:\nAnswer in one sentence."
    await negotiator.negotiate("What is the capital of Australia?", context=context)
    assert [(m.role, m.content) for m in drive.requests[1].messages] == [
        ("system", context),
        ("user", "What is the capital of Australia?"),
    ]


async def test_a_drive_asked_for_ratings_still_gets_the_deployment_context() -> None:
    # LLM DRIVEs (rates_numbers) keep the paper's prompt: the instruction and the context C.
    spec = ModelSpec(backend="scripted", model="drive")
    drive = ScriptedBackend(spec, replies=[proposals(("Canberra.", 0.9))], cycle=True)
    trace = await _plain_drive_world(drive).negotiate("What is the capital of Australia?")
    prompt = "\n".join(m.content for m in drive.requests[0].messages)
    assert trace.context and trace.context in prompt and "self-censor" in prompt
