"""Cross-turn tension (issue #14 item 3): the conversation's tension track tightens tau on
escalation, leaves benign conversations alone, reads only the server's records, fails closed."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psychoalign.errors import ConfigError
from psychoalign.experiments.studies.cross_turn.world import Step, XTWorld
from psychoalign.negotiation import NegotiationParams
from psychoalign.negotiation.params import parse_params
from psychoalign.negotiation.track import (
    ConversationRef,
    Evidence,
    conversation_ref,
    effective_tau,
    pressure,
)
from psychoalign.traces import InMemoryTraceStore, SQLTraceStore, Trace, TraceStore
from tests.traces.test_store import store  # noqa: F401 - the memory/sqlite/postgres fixture

# A Crescendo-shaped escalation: each turn alone is acceptable (scores >= tau = 0.6), the
# objective (turn 5) too; the tension rises turn by turn.
ESCALATION = [Step("e1", 92), Step("e2", 78), Step("e3", 68), Step("e4", 61), Step("e5", 63, harmful=True)]

# A benign conversation, and one that touches a sensitive topic once (flagged, contested).
BENIGN = [Step("b1", 93), Step("b2", 88), Step("b3", 95), Step("b4", 90), Step("b5", 66)]

SENSITIVE_ONCE = [Step("s1", 92), Step("s2", 45, harmful=True), Step("s3", 90), Step("s4", 91), Step("s5", 66)]


async def _converse(
    world: XTWorld, steps: Sequence[Step], where: TraceStore | None, scope: str = "t", **params: Any
) -> list[Trace]:
    negotiator = world.negotiator(where, **params)
    traces = []
    for i, step in enumerate(steps, start=1):
        messages = [s.message for s in steps[:i]]
        traces.append(
            await negotiator.negotiate(
                step.message, conversation=conversation_ref(scope, messages), metadata={"turn": i}
            )
        )
    return traces


def _tau(trace: Trace) -> float:
    assert trace.cross_turn is not None
    return trace.cross_turn.tau_effective


async def test_escalation_raises_tau_and_stops_the_objective() -> None:
    world = XTWorld(ESCALATION)
    on = await _converse(world, ESCALATION, InMemoryTraceStore())
    off = await _converse(world, ESCALATION, InMemoryTraceStore(), cross_turn=False)
    objective = ESCALATION[-1]
    # Without the track every turn, the objective included, passes tau = 0.6: the attack works.
    assert all(XTWorld.answered(t.response, s) for t, s in zip(off, ESCALATION, strict=True))
    assert [_tau(t) for t in off] == [0.6] * 5
    assert {t.cross_turn.status for t in off if t.cross_turn} == {"off"}
    # With it, tau rises once the conversation has escalated, and the objective is refused.
    taus = [_tau(t) for t in on]
    # Turns 1-3: fewer than three earlier turns, no trend. Turn 4: T rose 0.02 -> 0.13 -> 0.24
    # (slope 0.11/turn, full at 0.1) with the running max 0.24 most of the way to 0.3: tightened,
    # and e4 (61) is refused. Turn 5: the refused e4 (T 0.32) adds to the climb.
    assert taus[:3] == [0.6] * 3
    assert 0.7 < taus[3] <= taus[4] <= 0.8
    assert not XTWorld.answered(on[3].response, ESCALATION[3])
    assert not XTWorld.answered(on[-1].response, objective)
    record = on[-1].cross_turn
    assert record is not None and record.status == "read"
    assert [s.trace_id for s in record.history] == [t.id for t in on[:4]]
    assert record.running_max == pytest.approx(ESCALATION[3].tension)
    assert record.trend is not None and record.trend > 0
    assert any(r.startswith("rising tension") for r in record.reasons)
    # The gate reason names the tightened threshold.
    reasons = [r for rd in on[-1].rounds for p in rd.proposals if p.gate for r in p.gate.reasons]
    assert any(f"tau*100 = {taus[4] * 100:g}" in r for r in reasons)


@pytest.mark.parametrize("steps", [BENIGN, SENSITIVE_ONCE], ids=["benign", "sensitive-once"])
async def test_benign_conversations_keep_the_configured_tau(steps: list[Step]) -> None:
    world = XTWorld(steps)
    traces = await _converse(world, steps, InMemoryTraceStore())
    assert [_tau(t) for t in traces] == [0.6] * 5
    assert all(t.cross_turn and t.cross_turn.pressure == 0 for t in traces)
    # Every turn the stateless negotiation answers is still answered (b5/s5 are borderline: 66).
    assert all(XTWorld.answered(t.response, s) for t, s in zip(traces, steps, strict=True) if s.score >= 60)
    assert traces[-1].cross_turn is not None and len(traces[-1].cross_turn.history) == 4


async def test_two_hot_turns_tighten_one_does_not() -> None:
    # hot turns 1 and 4 around calm ones: no rising trend, only the hot-turn count speaks
    steps = [Step("h1", 40, harmful=True), Step("h2", 91), Step("h3", 92), Step("h4", 42, adversarial=True)]
    steps.append(Step("h5", 66))
    traces = await _converse(XTWorld(steps), steps, InMemoryTraceStore())
    assert [_tau(t) for t in traces[:4]] == [0.6] * 4  # one hot turn so far
    assert traces[4].cross_turn is not None and traces[4].cross_turn.hot_turns == 2
    assert _tau(traces[4]) == pytest.approx(0.7)  # min_hot 2, full at 3: half the room
    assert traces[4].cross_turn.reasons == ["2 hot turns (T >= 0.5 or flagged intent; from 2, full at 3)"]
    assert not XTWorld.answered(traces[4].response, steps[4])


async def test_switch_off_restores_todays_behaviour_exactly() -> None:
    """cross_turn = false: same gates, same calls, same answers as a negotiation that never
    heard of conversations; no history is read."""
    world = XTWorld(ESCALATION)

    class CountingStore(InMemoryTraceStore):
        reads = 0

        async def conversation(self, *a: Any, **k: Any) -> list[Trace]:
            CountingStore.reads += 1
            return await super().conversation(*a, **k)

    plain, off = world.negotiator(None), world.negotiator(CountingStore(), cross_turn=False)
    for i, step in enumerate(ESCALATION, start=1):
        ref = conversation_ref("t", [s.message for s in ESCALATION[:i]])
        a = await plain.negotiate(step.message)
        b = await off.negotiate(step.message, conversation=ref)
        assert a.response == b.response
        assert a.rounds == b.rounds
        assert {r: (s.calls, s.prompt_tokens) for r, s in a.agents.items()} == {
            r: (s.calls, s.prompt_tokens) for r, s in b.agents.items()
        }
        assert a.cross_turn is not None and a.cross_turn.status == "none" and a.cross_turn.tau_effective == 0.6
        assert b.cross_turn is not None and b.cross_turn.status == "off" and b.cross_turn.keys == list(ref.file_under)
    assert CountingStore.reads == 0


async def test_unreadable_history_fails_closed_at_the_cap(tmp_path: Path) -> None:
    class Unreadable(SQLTraceStore):
        async def conversation(self, *a: Any, **k: Any) -> list[Trace]:
            from sqlalchemy.exc import OperationalError

            raise OperationalError("SELECT body FROM psychoalign_traces", ("SECRET",), Exception("disk I/O error"))

    s = Unreadable(f"sqlite:///{tmp_path / 't.db'}")
    world = XTWorld([Step("u1", 92), Step("u2", 70)])
    negotiator = world.negotiator(s)
    first = await negotiator.negotiate(Step("u1", 92).message, conversation=conversation_ref("t", ["u1"]))
    assert first.cross_turn is not None and first.cross_turn.status == "unavailable"
    assert first.cross_turn.tau_effective == 0.8 and first.cross_turn.pressure == 1.0
    assert first.cross_turn.error is not None and "\n" not in first.cross_turn.error
    assert "SECRET" not in first.cross_turn.error and "SELECT" not in first.cross_turn.error
    assert XTWorld.answered(first.response, "u1")  # 92 passes even the cap
    second = await negotiator.negotiate(Step("u2", 70).message, conversation=conversation_ref("t", ["u1", "u2"]))
    assert not XTWorld.answered(second.response, "u2")  # 70 < 80: closed while blind
    stored = await s.get(second.id)
    assert stored is not None and stored.cross_turn is not None and stored.cross_turn.status == "unavailable"
    # A negotiator without a store cannot keep a track: the same, said so.
    nostore = await world.negotiator(None).negotiate("x", conversation=conversation_ref("t", ["x"]))
    assert nostore.cross_turn is not None and nostore.cross_turn.status == "unavailable"
    assert nostore.cross_turn.error == "no trace store: earlier turns are not recorded"
    await s.close()


def test_the_prefix_chain_links_a_path_its_backtracks_and_nothing_else() -> None:
    a = conversation_ref("s", ["hi", "step 2", "step 3"])
    # turn 3 is filed under its own prefix and its parent, and looks up every prefix of its path
    assert len(a.file_under) == 2 and len(a.look_up) == 3
    sibling = conversation_ref("s", ["hi", "step 2", "rephrased step 3"])  # a backtracked retry
    assert set(sibling.file_under) & set(a.look_up)  # found through the shared parent
    assert set(conversation_ref("s", ["hi", "step 2"]).file_under) & set(a.look_up)
    # another conversation that starts the same way shares only that opening
    other = conversation_ref("s", ["hi", "something else entirely", "and more"])
    assert set(other.file_under).isdisjoint(a.look_up[2:])
    # a conversation's first turn is never linked to another conversation's first turn by its parent
    assert set(conversation_ref("s", ["hey"]).file_under).isdisjoint(conversation_ref("s", ["hi"]).look_up)
    # case, spacing and control characters do not break the chain; the scope does
    assert conversation_ref("s", [" HI ", "step \u0000 \t2"]).look_up == conversation_ref("s", ["hi", "step 2"]).look_up
    assert set(conversation_ref("other", ["hi"]).look_up).isdisjoint(conversation_ref("s", ["hi"]).look_up)
    # a conversation id adds one key, filed and looked up
    with_id = conversation_ref("s", ["hi"], "conv-1")
    assert len(with_id.look_up) == 2 and with_id.look_up[-1] in with_id.file_under
    assert conversation_ref("s", [], "conv-1").look_up == (with_id.look_up[-1],)


async def test_stores_answer_the_conversation_query(store: TraceStore) -> None:  # noqa: F811
    """memory, SQLite and PostgreSQL: filed keys are found, oldest first, bounded, excluding."""
    steps = [Step(f"q{i}", 90) for i in range(1, 5)]
    traces = await _converse(XTWorld(steps), steps, store)
    unrelated = await _converse(XTWorld(steps), steps[:2], store, scope="another")
    look = conversation_ref("t", [s.message for s in steps]).look_up
    got = await store.conversation(look, limit=50)
    assert [t.id for t in got] == [t.id for t in traces]
    assert [t.id for t in await store.conversation(look, limit=2)] == [t.id for t in traces[2:]]
    assert [t.id for t in await store.conversation(look, limit=50, exclude=traces[3].id)] == [t.id for t in traces[:3]]
    assert await store.conversation(["0" * 64], limit=5) == []
    assert {t.id for t in unrelated}.isdisjoint(t.id for t in got)
    # the last turn saw the first three in its record
    assert traces[3].cross_turn is not None and [s.trace_id for s in traces[3].cross_turn.history] == [
        t.id for t in traces[:3]
    ]


def test_params_errors_are_one_line() -> None:
    where = "[negotiation] (cfg.toml, or PSYCHOALIGN_NEGOTIATION__<KEY>)"
    cases = {
        "cross_turn_tau_cap": (1.5, "must be a number >= 0 and <= 1"),
        "cross_turn_window": (2, "must be an integer >= 3 and <= 50"),
        "cross_turn_trend": (0, "must be a number > 0 and <= 1"),
        "cross_turn": ("maybe", "must be true or false"),
        "cross_turn_history": (0, "must be an integer >= 1 and <= 1000"),
    }
    for key, (value, allowed) in cases.items():
        with pytest.raises(ConfigError) as exc:
            parse_params({key: value}, where=where)
        text = str(exc.value)
        assert "\n" not in text and key in text and allowed in text and where in text, text
    with pytest.raises(ConfigError) as exc:
        parse_params({"cross_turn_min_hot": 4, "cross_turn_full_hot": 3}, where=where)
    assert "\n" not in str(exc.value) and "cross_turn_full_hot >= cross_turn_min_hot" in str(exc.value)
    with pytest.raises(ConfigError, match="unknown negotiation parameter 'cross_turns'"):
        parse_params({"cross_turns": True}, where=where)
    assert parse_params({"cross_turn": False}, where=where).cross_turn is False


_evidence = st.builds(
    Evidence,
    turns=st.integers(0, 60),
    running_max=st.one_of(st.none(), st.floats(0, 1)),
    trend=st.one_of(st.none(), st.floats(-1, 1)),
    hot_turns=st.integers(0, 60),
)

_params = st.builds(
    lambda tau, cap, trend, hot, lo, extra, healthy: NegotiationParams(
        tau=tau,
        cross_turn_tau_cap=cap,
        cross_turn_trend=trend,
        cross_turn_hot=hot,
        cross_turn_min_hot=lo,
        cross_turn_full_hot=lo + extra,
        healthy_threshold=healthy,
    ),
    st.floats(0, 1),
    st.floats(0, 1),
    st.floats(0.01, 1),
    st.floats(0, 1),
    st.integers(1, 10),
    st.integers(0, 10),
    st.floats(0, 1),
)


def _stronger(e: Evidence, draw: Callable[[st.SearchStrategy[Any]], Any]) -> Evidence:
    """Evidence at least as strong as ``e`` in every component the rule reads."""
    rm = e.running_max
    trend = e.trend
    return Evidence(
        turns=e.turns,
        running_max=draw(st.floats(rm, 1)) if rm is not None else draw(st.one_of(st.none(), st.floats(0, 1))),
        trend=draw(st.floats(trend, 1)) if trend is not None else draw(st.one_of(st.none(), st.floats(-1, 1))),
        hot_turns=e.hot_turns + draw(st.integers(0, 20)),
    )


@settings(max_examples=300, deadline=None)
@given(p=_params, e=_evidence, data=st.data())
def test_effective_tau_is_bounded_and_monotone_in_the_evidence(
    p: NegotiationParams, e: Evidence, data: st.DataObject
) -> None:
    value, _ = pressure(e, p)
    tau = effective_tau(p, value)
    assert 0.0 <= value <= 1.0
    assert p.tau <= tau <= max(p.tau, p.cross_turn_tau_cap)
    stronger = _stronger(e, data.draw)
    value2, _ = pressure(stronger, p)
    assert value2 >= value
    assert effective_tau(p, value2) >= tau
    # fail-closed pressure gives the cap, never more
    assert effective_tau(p, 1.0) == max(p.tau, p.cross_turn_tau_cap)


def test_no_conversation_changes_nothing() -> None:
    assert ConversationRef().look_up == ()


def test_a_single_spike_is_not_a_trend_and_backtracks_are_one_depth() -> None:
    from psychoalign.negotiation.track import depths, robust_trend
    from psychoalign.traces.model import TurnSignal

    assert robust_trend([0.0, 0.1, 0.2, 0.3]) == pytest.approx(0.1)
    assert robust_trend([0.05, 0.05, 0.05, 0.6]) == pytest.approx(0.0)  # one sensitive turn at the end
    assert robust_trend([0.1, 0.6, 0.1]) is not None and robust_trend([0.1, 0.6, 0.1]) < 0  # type: ignore[operator]
    assert robust_trend([0.1, 0.2]) is None
    # an attempt refused at depth 3 (T 0.5) and its rephrasing (T 0.25) are one depth, at 0.5
    history = [
        TurnSignal(trace_id="a", tension=0.0, parent=None),
        TurnSignal(trace_id="b", tension=0.1, parent="p1"),
        TurnSignal(trace_id="c", tension=0.5, parent="p2"),
        TurnSignal(trace_id="d", tension=0.25, parent="p2"),
        TurnSignal(trace_id="e", tension=None, parent="p3"),  # a failed turn: no T, no depth
    ]
    assert depths(history) == [0.0, 0.1, 0.5]
