"""Tension definitions, and the boundary / retest / H1 pipeline validated on synthetic worlds with a
planted relation (the real engine with scripted agents; see psychoalign.experiments.studies.boundary.synthetic)."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np
import pytest
from scipy import stats as sps

from psychoalign.config import Settings
from psychoalign.errors import InputError
from psychoalign.experiments.studies.boundary.h1 import H1Item, analyze_h1
from psychoalign.experiments.studies.boundary.negotiate import ItemOutcome, negotiate_items
from psychoalign.experiments.studies.boundary.retest import analyze_retest, check_sampling, run_retest, sampled_settings
from psychoalign.experiments.studies.boundary.run import analyze_boundary
from psychoalign.experiments.studies.boundary.synthetic import SyntheticWorld, synthetic_negotiator
from psychoalign.experiments.studies.boundary.tension import TensionDefinition, all_tensions, request_tension
from psychoalign.models import ModelSpec, ScriptedBackend
from psychoalign.models.client import ChatModel
from psychoalign.negotiation import NegotiationParams, Negotiator
from psychoalign.traces import TraceStatus

from .scenario import World, evaluation, proposals

N_ITEMS = 80


# -- tension definitions ---------------------------------------------------------------------------


async def test_every_tension_definition_reads_the_trace_as_documented() -> None:
    """Round 1: A (u_D 0.9, s 40, gated out) and B (0.6, 65, the lead); round 2: C (0.85, 90) accepted."""
    scores = {"A": 40, "B": 65, "C": 90}

    def judge(text: str) -> dict[str, Any]:
        return evaluation(scores.get(text, 95), "APPROVED" if scores.get(text, 95) >= 70 else "CONDITIONAL")

    world = World([proposals(("A", 0.9), ("B", 0.6)), proposals(("C", 0.85))], judge=judge)
    trace = await world.negotiator().negotiate("A contested request")
    assert trace.status is TraceStatus.COMPLETED and len(trace.rounds) == 2
    t_a, t_b, t_c = 0.5 / 0.9, 0.05 / 0.65, 0.05 / 0.9
    expected = {
        "round1_mean": (t_a + t_b) / 2,
        "round1_top": t_a,
        "first_lead": t_b,
        "final": t_c,
        "max_round": t_b,
        "mean_proposals": (t_a + t_b + t_c) / 3,
        "max_proposals": t_a,
    }
    assert all_tensions(trace) == pytest.approx(expected)
    assert set(expected) == {d.value for d in TensionDefinition}


async def test_a_failed_negotiation_has_no_tension() -> None:
    world = World([{"not": "a proposal list"}])
    trace = await world.negotiator().negotiate("anything")
    assert trace.status is TraceStatus.FAILED
    assert all(v is None for v in all_tensions(trace).values())
    with pytest.raises(ValueError):
        request_tension(trace, "nonsense")


# -- synthetic worlds ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def planted() -> tuple[SyntheticWorld, list[list[ItemOutcome]]]:
    """One synthetic world negotiated twice under sampling (temperature 1, seeds 1 and 2)."""
    world = SyntheticWorld(n_items=N_ITEMS, coupling=1.0, seed=3)
    settings = sampled_settings(Settings(), repeats=2, temperature=1.0, base_seed=1)

    async def go() -> list[list[ItemOutcome]]:
        return await run_retest(world.items(), [synthetic_negotiator(world, s) for s in settings], concurrency=8)

    return world, asyncio.run(go())


def _h1(
    world: SyntheticWorld, outcomes: list[ItemOutcome], counts_seed: int | None = None, **kw: Any
) -> dict[str, Any]:
    counts = world.counts(counts_seed)
    items = [H1Item(id=it.id, request=it.request, counts=tuple(c)) for it, c in zip(world.items(), counts, strict=True)]
    return analyze_h1(items, outcomes, scale=("safe", "unsafe"), positive=frozenset({1}), **kw)


def test_pipeline_recovers_the_planted_rho_within_its_ci(
    planted: tuple[SyntheticWorld, list[list[ItemOutcome]]],
) -> None:
    world, runs = planted
    assert all(o.status == "completed" for run in runs for o in run)
    report = _h1(world, runs[0], n_boot=1000, n_perm=1000)
    head = report["headline"]
    truth = world.population()["rho"]
    assert truth > 0.5  # the planted relation is strong, so "recovered" means something
    assert head["ci_low"] <= truth <= head["ci_high"]
    assert head["ci_low"] > 0.3 and head["p_permutation"] < 0.01
    # The T-bin view rises with T, and the top bin is clearly above the bottom one.
    bins = report["bins"]
    means = [b["outcome"]["mean"] for b in bins if b["n"]]
    assert means == sorted(means)
    assert bins[-1]["outcome"]["ci_low"] > bins[0]["outcome"]["ci_high"]
    assert report["counts"]["with_tension"] == N_ITEMS and report["counts"]["failed"] == 0
    assert set(report["definitions"]) == {d.value for d in TensionDefinition}
    assert report["points"][0]["trace_id"] == runs[0][0].trace_id


def test_pipeline_finds_rho_near_zero_when_none_is_planted(
    planted: tuple[SyntheticWorld, list[list[ItemOutcome]]],
) -> None:
    """The same negotiated items, rated by 30 independent annotation studies whose disagreement
    ignores difficulty: ρ averages ~0 and the 95 % CI covers 0 in most studies."""
    _, runs = planted
    null_world = SyntheticWorld(n_items=N_ITEMS, coupling=0.0, seed=3)
    rhos, covered = [], 0
    for k in range(30):
        head = _h1(null_world, runs[0], counts_seed=500 + k, n_boot=400, n_perm=200)["headline"]
        rhos.append(head["rho"])
        covered += head["ci_low"] <= 0.0 <= head["ci_high"]
    assert abs(float(np.mean(rhos))) < 0.06
    assert covered >= 25


def test_reverse_check_reports_the_majority_label_separately(
    planted: tuple[SyntheticWorld, list[list[ItemOutcome]]],
) -> None:
    world, runs = planted
    report = _h1(world, runs[0], n_boot=300, n_perm=200)
    rev = report["reverse_check"]
    auc = rev["auc_t_for_majority_unsafe"]
    if auc["computable"]:
        assert 0.0 <= auc["auc"] <= 1.0 and auc["n_unsafe"] + auc["n_safe"] <= N_ITEMS
    assert set(rev["rho_within_majority"]) == {"majority_safe", "majority_unsafe"}


def test_retest_icc_covers_the_planted_reliability(planted: tuple[SyntheticWorld, list[list[ItemOutcome]]]) -> None:
    world, runs = planted
    report = analyze_retest(runs)
    assert report["identical_runs"] is False and report["warning"] is None
    overall = report["definitions"]["round1_mean"]["overall"]
    truth = world.population()["icc2"]
    lo, hi = overall["icc2_ci"]
    assert lo <= truth <= hi
    assert overall["n_targets"] == N_ITEMS and overall["n_runs"] == 2
    assert set(report["definitions"]["round1_mean"]["per_domain"]) == {o.domain for o in runs[0]}
    assert report["ranking_by_icc2"]


def test_retest_refuses_the_trivially_perfect_setup() -> None:
    with pytest.raises(InputError, match="temperature 0"):
        sampled_settings(Settings(), repeats=3)  # default temperature is 0
    with pytest.raises(InputError, match="at least 2"):
        sampled_settings(Settings(), repeats=1, temperature=0.7)
    same_seed = Settings(defaults={"temperature": 0.7, "seed": 5})
    with pytest.raises(InputError, match="share a seed"):
        check_sampling([same_seed, same_seed])
    check_sampling([same_seed, Settings(defaults={"temperature": 0.7, "seed": None})])  # unseeded: fine


def test_identical_runs_are_flagged_even_when_the_setup_looked_sampled() -> None:
    """A backend that ignores temperature and seed: the runs are identical and the report says so."""
    world = SyntheticWorld(n_items=12, seed=4)
    settings = Settings(roles={"drive": {"temperature": 0.0}, "evaluator": {"temperature": 0.0}})

    async def go() -> list[list[ItemOutcome]]:
        return await run_retest(world.items(), [synthetic_negotiator(world, settings)] * 2)

    report = analyze_retest(asyncio.run(go()))
    assert report["identical_runs"] is True and "says nothing" in report["warning"]
    assert report["definitions"]["round1_mean"]["overall"]["icc2"] == pytest.approx(1.0)


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
    negotiator = Negotiator(Settings(), params=NegotiationParams(k=1), models=models)
    outcomes = await negotiate_items(negotiator, world.items(), concurrency=2)
    assert all(o.status == "failed" and o.t() is None for o in outcomes)
    with pytest.raises(InputError, match="none of the 6 negotiations"):
        analyze_boundary(outcomes)
    good = await negotiate_items(synthetic_negotiator(world), world.items()[:3])
    report = analyze_boundary([*good, *outcomes[3:]], n_boot=100)
    assert report["counts"] == {**report["counts"], "completed": 3, "failed": 3}
    assert len(report["counts"]["failures"]) == 3
