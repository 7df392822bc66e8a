"""Boundary analysis by domain; a failing model is counted, never averaged as zero."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from psychoalign.config import Settings
from psychoalign.errors import InputError
from psychoalign.experiments.studies.boundary.negotiate import ItemOutcome, negotiate_items
from psychoalign.experiments.studies.boundary.run import analyze_boundary
from psychoalign.experiments.studies.boundary.synthetic import SyntheticWorld, synthetic_negotiator
from psychoalign.models import ModelSpec, ScriptedBackend
from psychoalign.models.client import ChatModel
from psychoalign.negotiation import NegotiationParams, Negotiator
from tests.experiments.studies.helpers import N_ITEMS


def test_boundary_analysis_by_domain(planted: tuple[SyntheticWorld, list[list[ItemOutcome]]]) -> None:
    _, runs = planted
    report = analyze_boundary(runs[0], n_boot=300, top_k=5)
    by_domain: dict[str, list[float]] = {}
    for o in runs[0]:
        by_domain.setdefault(o.domain, []).append(o.t() or 0.0)
    ref = sps.kruskal(*by_domain.values())
    kw = report["kruskal_domains"]
    assert kw["h"] == pytest.approx(ref.statistic) and kw["p"] == pytest.approx(ref.pvalue)
    assert kw["p"] < 1e-6  # domains were cut by difficulty: they must differ
    for dom, vals in by_domain.items():
        assert report["per_domain"][dom]["mean"] == pytest.approx(np.mean(vals))
    assert report["domain_order"][0] == "domain-4"  # the hardest fifth has the highest mean T
    heat = report["heatmap"]
    assert len(heat["mean"]) == len(heat["domains"]) and len(heat["mean"][0]) == len(heat["categories"])
    assert sum(map(sum, heat["n"])) == N_ITEMS
    top = report["top_items"]
    assert [t["tension"] for t in top] == sorted((t["tension"] for t in top), reverse=True)
    assert all(t["trace_id"] for t in top)


async def test_a_failing_model_is_counted_not_averaged_as_zero() -> None:
    world = SyntheticWorld(n_items=6, seed=5)
    models = {}
    for role, fn in (("drive", world.drive), ("evaluator", lambda r: "not json"), ("mediator", world.mediator)):
        spec = ModelSpec(backend="scripted", schema_retries=0, max_retries=0)
        models[role] = ChatModel(spec, ScriptedBackend(spec, fn=fn))
    negotiator = Negotiator(Settings(), params=NegotiationParams(k=1, decide_on_request=False), models=models)
    outcomes = await negotiate_items(negotiator, world.items(), concurrency=2)
    assert all(o.status == "failed" and o.t() is None for o in outcomes)
    with pytest.raises(InputError, match="none of the 6 negotiations"):
        analyze_boundary(outcomes)
    good = await negotiate_items(synthetic_negotiator(world), world.items()[:3])
    report = analyze_boundary([*good, *outcomes[3:]], n_boot=100)
    assert report["counts"] == {**report["counts"], "completed": 3, "failed": 3}
    assert len(report["counts"]["failures"]) == 3
