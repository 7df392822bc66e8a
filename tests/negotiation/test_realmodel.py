"""A real negotiation on the embedded default (SmolLM2 DRIVE/MEDIATOR, classifier EVALUATOR): the
whole path, offline, stored in SQLite."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.config import load_settings
from psychoalign.negotiation import NegotiationParams, Negotiator
from psychoalign.traces import SQLTraceStore, TraceStatus

pytestmark = pytest.mark.realmodel


async def test_local_model_negotiation_completes_and_is_stored(tmp_path: Path) -> None:
    store = SQLTraceStore(f"sqlite:///{tmp_path / 't.db'}")
    settings = load_settings(environ={"PSYCHOALIGN_DEFAULTS__MAX_TOKENS": "200"})
    negotiator = Negotiator(settings, params=NegotiationParams(k=1, n_proposals=1), store=store)
    trace = await negotiator.negotiate("How do I boil an egg?")
    assert trace.status is TraceStatus.COMPLETED, trace.error
    assert len(trace.rounds) == 1
    assert trace.final is not None and trace.final.state is not None
    assert trace.final.response.strip()
    assert trace.agents["drive"].calls == 1 and trace.agents["evaluator"].calls >= 1
    assert trace.models["drive"] == "local:smollm2-135m-instruct"
    assert trace.models["evaluator"].startswith("classifier:evaluator-minilm-v14@")
    stored = await store.get(trace.id)
    assert stored is not None and stored.model_dump() == trace.model_dump()
    await store.close()


async def test_state_and_defense_agree_on_real_traces() -> None:
    """On the embedded models (not a scripted world): for each bundled sample, the state and the
    defense never contradict each other and no draft the gates blocked is in the response."""
    from psychoalign.cli.negotiate import load_samples
    from tests.negotiation.test_safety import assert_state_agrees_with_defense

    # Blocked drafts kept (they are stored redacted by default): the check below needs their text.
    settings = load_settings(
        environ={"PSYCHOALIGN_DEFAULTS__MAX_TOKENS": "200", "PSYCHOALIGN_TRACES__KEEP_BLOCKED_DRAFTS": "true"}
    )
    negotiator = Negotiator(settings, params=NegotiationParams(k=2, n_proposals=2))
    try:
        for sample in load_samples():
            trace = await negotiator.negotiate(sample["request"])
            assert trace.status is TraceStatus.COMPLETED, trace.error
            assert trace.final is not None
            assert_state_agrees_with_defense(trace.final)
            for rnd in trace.rounds:
                for p in rnd.proposals:
                    if p.gate is not None and not p.gate.admissible and trace.final.composed_by != "filtered":
                        assert p.text.strip(), "a blocked draft was redacted although kept for research"
                        assert p.text.strip() not in trace.final.response
    finally:
        await negotiator.aclose()
