"""Test–retest: the ICC covers the planted reliability; trivially perfect or identical runs are refused or flagged."""

from __future__ import annotations

import asyncio

import pytest

from psychoalign.config import Settings
from psychoalign.errors import InputError
from psychoalign.experiments.studies.boundary.negotiate import ItemOutcome
from psychoalign.experiments.studies.boundary.retest import analyze_retest, check_sampling, run_retest, sampled_settings
from psychoalign.experiments.studies.boundary.synthetic import SyntheticWorld, synthetic_negotiator
from tests.experiments.studies.helpers import N_ITEMS


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
