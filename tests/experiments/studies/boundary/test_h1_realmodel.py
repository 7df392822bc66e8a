"""H1 on two real DICES items with the embedded model: the real path, offline, cheap."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from psychoalign.config import load_settings
from psychoalign.experiments.studies.boundary.h1 import load_h1_dataset, run_h1
from psychoalign.negotiation import NegotiationParams, Negotiator
from psychoalign.traces import SQLTraceStore
from tests.conftest import SHARED_DATA

pytestmark = pytest.mark.realmodel

DICES = SHARED_DATA / "dices_judgebench" / "dices_350_crowdsourced.json"


@pytest.mark.needs_data("dices_judgebench")
async def test_h1_smoke_on_two_dices_items(tmp_path: Path) -> None:
    store = SQLTraceStore(f"sqlite:///{tmp_path / 't.db'}")
    settings = load_settings(environ={"PSYCHOALIGN_DEFAULTS__MAX_TOKENS": "200"})
    negotiator = Negotiator(
        settings, params=NegotiationParams(k=1, n_proposals=1, decide_on_request=False), store=store
    )
    dataset = load_h1_dataset(DICES, limit=2, seed=0)
    try:
        report = await run_h1(dataset, negotiator, concurrency=1, n_boot=200, n_perm=200)
    finally:
        await negotiator.aclose()
    counts = report["counts"]
    assert counts["items"] == counts["negotiated"] == 2
    assert counts["with_tension"] + counts["failed"] == 2
    items = {it.id: it for it in dataset.items}
    for point in report["points"]:
        trace = await store.get(point["trace_id"])
        item = items[point["id"]]
        assert trace is not None and trace.request == item.request
        if item.context:  # the earlier turns reach the agents as the deployment context
            assert trace.context == item.context
        if point["status"] == "completed":
            assert point["tension"] is not None and 0.0 <= point["tension"] <= 1.0
        else:  # a failed negotiation is reported as failed, never as T = 0
            assert point["tension"] is None and trace.error
        assert point["disagreement"] is not None and math.isfinite(point["disagreement"])
    await store.close()
