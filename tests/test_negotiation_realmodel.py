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
    assert trace.models["evaluator"].startswith("classifier:evaluator-minilm-v2@")
    stored = await store.get(trace.id)
    assert stored is not None and stored.model_dump() == trace.model_dump()
    await store.close()
