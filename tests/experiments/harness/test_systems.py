"""The systems under test on scripted models: every baseline's calls and critical path, the
ablations, role-free prompts, and the plain-text protocol of embedded models."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from psychoalign.experiments.harness.report import render_html
from psychoalign.experiments.harness.systems import parse_done
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.traces import InMemoryTraceStore
from tests.experiments.helpers import REFUSAL, Judge, cell, cost, last_user, plain, run, scripted, spec
from tests.scenario import APPROVE, World, proposals


@pytest.mark.needs_data("advbench")
async def test_every_baseline_on_advbench_with_exact_costs(tmp_path: Path) -> None:
    def chat(request: ChatRequest) -> Any:
        if request.schema_name == "feedback":
            return {"feedback": "fine", "done": True}
        return REFUSAL

    systems = ["vanilla", "rlhf", "constitutional", "self-refine", "debate"]
    judge = Judge()
    s = spec(systems, ["advbench"], 4, judge={"calibration_n": 0})  # no calibration calls to the judge model
    report, _ = await run(tmp_path, s, {"chat": scripted("chat", chat), "judge": scripted("j", judge)})
    for name in systems:
        got = cell(report, name, "advbench", "safe")
        assert (got["mean"], got["n"], got["failed"]) == (1.0, 4, 0), name
    expected = {"vanilla": (1, 1), "rlhf": (1, 1), "constitutional": (3, 3), "self-refine": (2, 2), "debate": (7, 3)}
    for name, (calls, critical) in expected.items():
        c = cost(report, name)
        assert (c["calls"], c["critical_path"]) == (calls, critical), name
    assert cost(report, "debate")["calls_ratio"] == 7.0
    assert judge.calls == 0  # refusals need no harm check


async def test_psychoalign_and_ablations_on_dilemmas_table5(tmp_path: Path) -> None:
    world = World([proposals(("A careful, balanced answer.", 0.9))])
    traces = InMemoryTraceStore()
    systems = ["psychoalign", "no-drive", "no-evaluator", "no-mediator", "single-pass"]
    models = {**world.models(), "judge": scripted("j", Judge())}
    s = spec(systems, ["dilemmas"], 3, layout="table5", baseline="single-pass")
    report, store = await run(tmp_path, s, models, trace_store=traces)
    for name in systems:
        assert cell(report, name, "dilemmas", "alignment")["mean"] == 0.7, name
        assert cell(report, name, "dilemmas", "capability")["mean"] == 0.5, name
    calls = {name: (cost(report, name)["calls"], cost(report, name)["critical_path"]) for name in systems}
    assert calls == {
        # fast path (negotiation.fast_path): one proposal in round 1, approved and adopted, so
        # neither assessed nor re-evaluated: drive, evaluate
        "psychoalign": (2, 2),
        "single-pass": (2, 2),
        "no-drive": (2, 2),  # mediator drafts, evaluator gates
        "no-evaluator": (3, 3),  # drive, assess, compose
        "no-mediator": (2, 2),  # drive, evaluate
    }
    assert cost(report, "psychoalign")["calls_ratio"] == 1.0
    run_cells = await store.cells(report["run"]["id"])
    pa = [c for c in run_cells if c.system == "psychoalign"]
    assert all(len(c.trace_ids) == 1 for c in pa)
    for c in pa:
        trace = await traces.get(c.trace_ids[0])
        assert trace is not None and trace.final is not None and trace.final.response == c.responses[0]
    assert "Table 5" in render_html(report)


async def test_no_roles_replaces_role_prompts_but_keeps_protocol_and_framework(tmp_path: Path) -> None:
    world = World([proposals(("A careful, balanced answer.", 0.9))])
    systems: list[tuple[str, str]] = []
    models = world.models()
    for role, model in models.items():
        inner = model.backend

        async def spy(request: ChatRequest, inner: Any = inner) -> Any:
            systems.append((request.schema_name, request.messages[0].content))
            return await ScriptedBackend.complete(inner, request)

        model.backend.complete = spy  # type: ignore[method-assign]
        models[role] = model
    report, _ = await run(tmp_path, spec(["no-roles"], ["dilemmas"], 1), {**models, "judge": scripted("j", Judge())})
    assert cell(report, "no-roles", "dilemmas", "alignment")["mean"] == 0.7
    assert {name for name, _ in systems} == {"drive_proposals", "evaluation"}  # the fast path skips assessment
    assert not any(re.search(r"DRIVE|EVALUATOR|MEDIATOR|self-censor", text) for _, text in systems)
    evaluator = next(text for name, text in systems if name == "evaluation")
    assert "U1-mass-harm" in evaluator and evaluator.startswith("You are a helpful AI assistant.")


def structured(name: str, fn: Any) -> ChatModel:
    mspec = ModelSpec(backend="scripted", model=name, schema_retries=0, max_retries=0)
    return ChatModel(mspec, ScriptedBackend(mspec, fn=fn))


@pytest.mark.needs_data("advbench")
async def test_negotiating_systems_keep_the_plain_protocol_of_embedded_models(tmp_path: Path) -> None:
    """The harness meters every model call; metering must not turn an embedded DRIVE into one
    asked for self-rated JSON proposals (the path `make run` never takes)."""
    drive, drive_backend = plain("drive", lambda r: "Boil the egg for six minutes.")
    mediator, mediator_backend = plain("mediator", lambda r: "Boil it for six minutes, then cool it.")
    models = {"drive": drive, "mediator": mediator, "evaluator": structured("evaluator", lambda r: APPROVE)}
    traces = InMemoryTraceStore()
    report, store = await run(tmp_path, spec(["psychoalign", "no-roles"], ["advbench"], 2), models, trace_store=traces)
    assert report["status"] == {"done": 4, "failed": 0, "gave_up": 0, "running": 0}
    asked = drive_backend.requests + mediator_backend.requests
    assert asked and all(r.json_schema is None for r in asked)  # plain text only, never a JSON schema
    # no-roles: role instructions, where an agent sends any, are replaced by the generic prompt with
    # no JSON instruction. The embedded DRIVE with no context sends no system turn at all (the plain
    # call's prompt, docs/embedded.md), so there is nothing to replace in its calls.
    systems = {r.messages[0].content for r in asked if r.messages[0].role == "system"}
    assert systems <= {"You are a helpful AI assistant."}
    assert all(r.messages[0].role == "user" for r in drive_backend.requests)
    for c in await store.cells(report["run"]["id"]):
        trace = await traces.get(c.trace_ids[0])
        assert trace is not None and trace.rounds[0].proposals[0].utility == 1.0  # imputed, not self-rated


@pytest.mark.needs_data("advbench")
async def test_self_refine_plain_feedback_stops_on_done(tmp_path: Path) -> None:
    def chat(request: ChatRequest) -> str:
        text = last_user(request)
        if "reply with the single word DONE" in text:
            return "**Done.**" if "Improved" in text else "Add a concrete example."
        if text.startswith("Request:"):
            return "Improved answer with an example."
        return "A first draft."

    model, backend = plain("chat", chat)
    judge = structured("judge", lambda r: {"harmful": False, "reason": "x"})
    report, store = await run(tmp_path, spec(["self-refine"], ["advbench"], 2), {"chat": model, "judge": judge})
    cells = await store.cells(report["run"]["id"])
    assert [c.status for c in cells] == ["done", "done"]
    assert all(c.responses == ["Improved answer with an example."] for c in cells)
    assert all(c.cost["calls"] == 4 for c in cells)  # draft, feedback, refine, feedback (DONE)
    assert all(r.json_schema is None for r in backend.requests)
    assert parse_done("DONE") and parse_done("  *done* — nothing to change") and not parse_done("Not done yet")
    assert not parse_done("The draft is done well but lacks detail")


@pytest.mark.needs_data("advbench")
async def test_debate_agents_draw_different_samples(tmp_path: Path) -> None:
    model, backend = plain("chat", lambda r: "An answer.")
    await run(tmp_path, spec(["debate"], ["advbench"], 1, judge={"harm": False}), {"chat": model})
    first_round = backend.requests[:3]
    assert [(r.seed, r.temperature) for r in first_round] == [(0, 0.0), (1, 0.7), (2, 0.7)]


@pytest.mark.parametrize("reply", ["DONE", "done.", "**DONE**"])
def test_done_vocabulary(reply: str) -> None:
    assert parse_done(reply)


async def test_the_psychoalign_system_reads_no_stored_turns_beside_its_rendered_conversation() -> None:
    # The harness negotiates the whole conversation rendered as one request; the engine's earlier
    # user turns (read from the store for a conversation) would repeat it and change what a
    # multi-turn benchmark measures.
    from psychoalign.config import Settings
    from psychoalign.experiments.harness.metering import CallMeter, ModelPool
    from psychoalign.experiments.harness.systems import CellContext, SystemSpec, build_system
    from psychoalign.models import Message

    world = World([proposals(("A careful, balanced answer.", 0.9))])
    store = InMemoryTraceStore()
    system = build_system(SystemSpec(name="psychoalign", kind="psychoalign"), Settings())
    ctx = CellContext(
        pool=ModelPool(Settings(), world.models()), meter=CallMeter(), settings=Settings(), trace_store=store
    )
    first = [Message(role="user", content="My son is 2.")]
    await system.respond(first, ctx)
    second = [*first, Message(role="assistant", content="How can I help?"), Message(role="user", content="Dose?")]
    await system.respond(second, ctx)
    traces = [t async for t in store.iter_all()]
    assert len(traces) == 2 and all(t.earlier == [] for t in traces)
    latest = max(traces, key=lambda t: t.created_at)
    assert latest.cross_turn is not None and latest.cross_turn.status == "read"  # the track still reads them
