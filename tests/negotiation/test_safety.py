"""Fail-closed behaviour, structural invariants (paper §2.4), and properties over arbitrary agent outputs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from psychoalign.agents import DriveTask, EvaluateTask
from psychoalign.config import Settings
from psychoalign.errors import ModelError
from psychoalign.frameworks import load_framework
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.negotiation import DefenseMechanism, NegotiationParams, Negotiator, SystemState
from psychoalign.negotiation.bus import ROUTES, MessageBus, RouteViolationError
from psychoalign.negotiation.defense import template
from psychoalign.traces import TraceStatus
from tests.scenario import APPROVE, World, evaluation, proposals

FAIL_TEXT = template("fail_closed")


def _assert_failed_closed(trace: Any, secret: str = "SECRET") -> None:
    assert trace.status is TraceStatus.FAILED
    assert trace.error
    assert trace.final is not None and trace.final.fallback
    assert trace.response == FAIL_TEXT
    assert secret not in trace.response


async def test_evaluator_unreachable_fails_closed() -> None:
    world = World([proposals(("SECRET drive text", 0.9))])
    models = world.models()

    def broken(request: ChatRequest) -> str:
        raise ModelError("evaluator endpoint down")

    spec = ModelSpec(backend="scripted", schema_retries=0, max_retries=0)
    models["evaluator"] = ChatModel(spec, ScriptedBackend(spec, fn=broken))
    trace = await Negotiator(Settings(), models=models).negotiate("Q")
    _assert_failed_closed(trace)
    assert "evaluator endpoint down" in (trace.error or "")
    assert trace.agents["drive"].calls == 1  # the DRIVE spoke; its text went nowhere


async def test_evaluator_schema_breaking_reply_fails_closed() -> None:
    world = World([proposals(("SECRET", 0.9))], judge=lambda t: {"score": 400, "verdict": "MAYBE"})
    trace = await world.negotiator().negotiate("Q")
    _assert_failed_closed(trace)
    assert "schema" in (trace.error or "")


async def test_drive_garbage_fails_closed() -> None:
    world = World([{"not": "proposals"}])
    trace = await world.negotiator().negotiate("Q")
    _assert_failed_closed(trace)


async def test_timeout_fails_closed() -> None:
    """The EVALUATOR never answers (it waits on an event nobody sets): whatever the machine's
    load, only the negotiation's own timeout can end it, and it fails closed."""
    world = World([proposals(("SECRET", 0.9))])
    models = world.models()
    never = asyncio.Event()

    class Hanging(ScriptedBackend):
        async def complete(self, request: ChatRequest) -> Any:
            await never.wait()
            raise AssertionError("unreachable")

    spec = ModelSpec(backend="scripted", schema_retries=0, max_retries=0)
    models["evaluator"] = ChatModel(spec, Hanging(spec, fn=lambda r: {}))
    negotiator = Negotiator(Settings(), params=NegotiationParams(timeout_s=0.1), models=models)
    trace = await negotiator.negotiate("Q")
    _assert_failed_closed(trace)
    assert "timeout" in (trace.error or "")


@pytest.mark.parametrize(
    ("request_text", "framework", "reason"),
    [
        ("", "general", "empty"),
        ("x" * 9000, "general", "over the limit"),
        ("ok", "no-such-framework", "unknown framework"),
    ],
)
async def test_bad_input_gives_failed_trace_with_reason(request_text: str, framework: str, reason: str) -> None:
    world = World([proposals(("SECRET", 0.9))])
    trace = await world.negotiator().negotiate(request_text, framework=framework)
    _assert_failed_closed(trace)
    assert reason in (trace.error or "")
    assert world.calls["drive"] == 0


async def test_malformed_framework_file_fails_with_line(tmp_path: Any) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "name: bad\nversion: '1.0'\ndescription: x\nuniversal:\n"
        "  - id: U1\n    text: a real rule\n    check:\n      patterns: ['(']\n"
    )
    world = World([proposals(("SECRET", 0.9))])
    trace = await world.negotiator().negotiate("Q", framework=str(bad))
    _assert_failed_closed(trace)
    assert f"{bad}:8" in (trace.error or "") or f"{bad}:7" in (trace.error or "")


# -- structural invariants ------------------------------------------------------------------------
async def test_bus_refuses_drive_to_evaluator_and_any_unlisted_route() -> None:
    world = World([proposals(("x", 0.9))])
    negotiator = world.negotiator()
    bus = MessageBus(negotiator.transport)
    fw = load_framework("general").model_dump(mode="json")
    task = EvaluateTask(request="r", context="c", proposal="p", framework=fw)
    with pytest.raises(RouteViolationError):
        await bus.send("drive", "evaluator", task)
    with pytest.raises(RouteViolationError):
        await bus.send("evaluator", "drive", DriveTask(request="r", context="c"))
    with pytest.raises(RouteViolationError):
        await bus.send("mediator", "evaluator", DriveTask(request="r", context="c"))  # wrong task kind
    assert world.calls["evaluator"] == 0 and world.calls["drive"] == 0
    # Only the MEDIATOR ever sends.
    assert {sender for sender, _ in ROUTES} == {"mediator"}


async def test_agents_hold_no_reference_to_each_other_or_the_bus() -> None:
    negotiator = World([proposals(("x", 0.9))]).negotiator()
    transport = negotiator.transport
    for agent in (transport._drive, transport._evaluator, transport._mediator):  # type: ignore[attr-defined]
        assert set(vars(agent)) == {"model"}


async def test_evaluator_sees_one_proposal_and_mediator_sees_only_admissible() -> None:
    texts = ("ALPHA good answer", "BRAVO vetoed answer", "CHARLIE fine answer")
    world = World(
        [proposals((texts[0], 0.9), (texts[1], 0.95), (texts[2], 0.5))],
        judge=lambda t: evaluation(10, "VETOED") if t.startswith("BRAVO") else evaluation(75, "CONDITIONAL"),
    )
    negotiator = world.negotiator(k=1)
    await negotiator.negotiate("Q")
    for req in negotiator._models["evaluator"].backend.requests:  # type: ignore[attr-defined]
        last = req.messages[-1].content
        assert sum(t in last for t in texts) <= 1
    for req in negotiator._models["mediator"].backend.requests:  # type: ignore[attr-defined]
        assert all("BRAVO" not in m.content for m in req.messages)


# -- properties over arbitrary agent outputs ---------------------------------------------------------
verdicts = st.sampled_from(["APPROVED", "CONDITIONAL", "VETOED"])
evals = st.fixed_dictionaries(
    {
        "score": st.integers(0, 100),
        "verdict": verdicts,
        "universal": st.booleans(),
        "adversarial": st.booleans(),
        "harmful": st.booleans(),
        "need": st.booleans(),
        "segment": st.booleans(),
        "third": st.booleans(),
        "adjacent": st.booleans(),
    }
)
round_strategy = st.lists(st.tuples(st.floats(0, 1), evals), min_size=1, max_size=3)


def _eval_dict(e: dict[str, Any], text: str) -> dict[str, Any]:
    return evaluation(
        e["score"],
        e["verdict"],
        hits=[("U1-mass-harm", "universal")] if e["universal"] else [],
        adversarial_intent=e["adversarial"],
        harmful_intent=e["harmful"],
        legitimate_need=e["need"],
        harmful_segments=[text.split(". ")[0] + "."] if e["segment"] else [],
        third_party_harm=e["third"],
        stakeholders=["others"] if e["third"] else [],
        safe_adjacent_topic="a safe topic" if e["adjacent"] else "",
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    rounds=st.lists(round_strategy, min_size=1, max_size=4),
    k=st.integers(1, 4),
    tau=st.sampled_from([0.0, 0.3, 0.6, 0.9]),
    final_score=st.integers(0, 100),
    final_verdict=verdicts,
    final_gate=st.booleans(),
    fast_path=st.booleans(),
)
def test_no_inadmissible_proposal_ever_reaches_the_user(
    rounds: list[list[tuple[float, dict[str, Any]]]],
    k: int,
    tau: float,
    final_score: int,
    final_verdict: str,
    final_gate: bool,
    fast_path: bool,
) -> None:
    """Over arbitrary agent outputs, with the dual gate and the fast path on or off: no blocked
    proposal reaches the user; with ``final_gate = false`` nothing the MEDIATOR writes does either
    (no check would read it), only admissible proposals and templates."""
    table: dict[str, dict[str, Any]] = {}
    drive_rounds = []
    for r, items in enumerate(rounds):
        props = []
        for i, (u, e) in enumerate(items):
            text = f"P{r}x{i} first part. P{r}x{i} second part."
            table[text] = e
            props.append((text, u))
        drive_rounds.append(proposals(*props))

    def judge(text: str) -> dict[str, Any]:
        if text in table:
            return _eval_dict(table[text], text)
        return evaluation(final_score, final_verdict)  # the dual-gate evaluation of the final text

    # A worst-case MEDIATOR: it copies whatever proposal it is shown into the final response.
    world = World(drive_rounds, judge=judge, compose=lambda p, i: f"MEDIATOR-WROTE {p}")
    # Each scripted round holds all its proposals; the fast path asks for one and then the rest.
    n = min(len(items) for items in rounds)
    # Blocked drafts are kept in the trace: the test reads their text back from it.
    keep = Settings(traces={"keep_blocked_drafts": True})
    negotiator = world.negotiator(
        k=k, tau=tau, final_gate=final_gate, fast_path=fast_path, n_proposals=n, settings=keep
    )
    trace = asyncio.run(negotiator.negotiate("Q"))
    assert trace.status is TraceStatus.COMPLETED
    assert len(trace.rounds) <= k
    assert trace.final is not None
    response = trace.final.response
    for rd in trace.rounds:
        assert 0.0 <= rd.tension <= 1.0
        for p in rd.proposals:
            assert p.tension is not None and 0.0 <= p.tension <= 1.0
            e = p.evaluation
            assert e is not None
            bad = e.score < tau * 100 or e.verdict.value == "VETOED" or any(h.layer == "universal" for h in e.rule_hits)
            if bad:
                tag = p.text.split(" ")[0]
                if trace.final.composed_by == "filtered" and e.conflict.harmful_segments:
                    # Repression may keep the unflagged sentences of a blocked draft, never the
                    # flagged one, and only after the filtered text passed the dual gate.
                    assert p.text.split(". ")[0] + "." not in response
                else:
                    assert tag not in response, (tag, response)
    assert trace.final.tension is None or 0.0 <= trace.final.tension <= 1.0
    assert_state_agrees_with_defense(trace.final)
    if not final_gate:
        assert world.calls["compose"] == 0 and "MEDIATOR-WROTE" not in response
        assert trace.final.composed_by in ("adopted", "filtered", "template", "fallback")
    elif trace.final.composed_by not in ("template", "fallback") and not (
        fast_path and trace.final.composed_by == "adopted"
    ):
        # Model-written text reached the user only because it passed the dual gate.
        gate = trace.final.final_gate
        assert gate is not None and gate.admissible
        seen = judge(response)
        assert seen["score"] >= tau * 100 and seen["verdict"] != "VETOED" and not seen["rule_hits"]


def assert_state_agrees_with_defense(f: Any) -> None:
    """State and defense never contradict each other (docs/negotiation.md, decision table)."""
    d, state = DefenseMechanism, SystemState
    if f.chosen_rank is None:  # nothing admissible: the negotiation cannot have converged
        assert f.state is state.DEADLOCK and f.defense is not None
    if f.state in (state.HEALTHY_EQUILIBRIUM, state.NEGOTIATED_EQUILIBRIUM):
        assert f.defense in (None, d.REPRESSION, d.PROJECTION), (f.state, f.defense)
    if f.defense in (d.REACTION_FORMATION, d.DISPLACEMENT, d.RATIONALIZATION):
        assert f.state in (state.DEADLOCK, state.DRIVE_DOMINANT), (f.state, f.defense)
    if f.state is state.DEADLOCK:
        assert f.defense is not None


def test_scripted_approve_is_valid() -> None:
    assert APPROVE["verdict"] == "APPROVED"


def test_task_bits_are_the_bits_of_the_whole_task_json() -> None:
    """The bus counts an EVALUATOR task's bits without encoding its framework each time: the
    count is the UTF-8 size of the task's JSON all the same (non-ASCII text included), also when
    the same payload comes again and for a payload equal to it but not the same object."""
    from psychoalign.agents.messages import EvaluateBatchTask
    from psychoalign.negotiation.bus import _bits, _task_bits

    payload = load_framework("general").payload()
    copy = {**payload, "name": "général ✓"}
    tasks: list[Any] = [
        EvaluateTask(request="Wie koche ich ein Ei? ü", context="c", proposal="Sieben Minuten. ✓", framework=payload),
        EvaluateTask(request="r", context="", proposal="p", framework=copy),
        EvaluateBatchTask(request="r", context="c", proposals=["a", "b ü"], framework=payload),
        EvaluateTask(request="r", context="c", proposal="p", framework={}),
        DriveTask(request="r", context="c", n=2),
    ]
    for task in tasks * 2:
        assert _task_bits(task) == _bits(task.model_dump_json())
