"""Fixtures shared by the boundary tests: one synthetic world with a planted relation, negotiated twice."""

from __future__ import annotations

import asyncio

import pytest

from psychoalign.config import Settings
from psychoalign.experiments.studies.boundary.negotiate import ItemOutcome
from psychoalign.experiments.studies.boundary.retest import run_retest, sampled_settings
from psychoalign.experiments.studies.boundary.synthetic import SyntheticWorld, synthetic_negotiator
from tests.experiments.studies.helpers import N_ITEMS


@pytest.fixture(scope="package")
def planted() -> tuple[SyntheticWorld, list[list[ItemOutcome]]]:
    """One synthetic world negotiated twice under sampling (temperature 1, seeds 1 and 2)."""
    world = SyntheticWorld(n_items=N_ITEMS, coupling=1.0, seed=3)
    settings = sampled_settings(Settings(), repeats=2, temperature=1.0, base_seed=1)

    async def go() -> list[list[ItemOutcome]]:
        return await run_retest(world.items(), [synthetic_negotiator(world, s) for s in settings], concurrency=8)

    return world, asyncio.run(go())
