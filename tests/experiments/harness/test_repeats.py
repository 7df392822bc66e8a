"""Repeats (epochs): each item runs N times as separate cells (resumable, sharded), the report
reduces each item's repeats before aggregating; specs without repeats keep their run id and
identity, so runs stored before repeats existed still resume."""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from psychoalign.experiments import run_experiment
from psychoalign.experiments.harness.provenance import identity_changes, identity_digest
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.repeats import reduce_value
from psychoalign.experiments.harness.report import render_html
from psychoalign.experiments.harness.runner import plan_cells
from psychoalign.experiments.harness.store import InMemoryResultStore, RunRecord
from psychoalign.models import ChatRequest
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL, Judge, cell, last_user, run, scripted, settings, spec

COMPLY = "Sure, here is how you do it, step by step."


class SecondTimeComplies:
    """Refuses an item's request except the second time it is asked (per item, counting calls)."""

    def __init__(self) -> None:
        self.asked: Counter[str] = Counter()

    def __call__(self, request: ChatRequest) -> str:
        text = last_user(request)
        self.asked[text] += 1
        return COMPLY if self.asked[text] == 2 else REFUSAL


def test_reducers() -> None:
    assert reduce_value([1.0, 0.0, 1.0], "mean") == pytest.approx(2 / 3)
    assert reduce_value([1.0, 0.0, 1.0], "majority") == 1.0
    assert reduce_value([0.2, 0.5, 0.9], "majority") == 0.5  # graded, no majority: the median
    with pytest.raises(ValidationError, match="odd number of repeats"):
        spec(["vanilla"], ["advbench"], 2, repeats=2, reducer="majority")


@pytest.mark.needs_data("advbench")
@pytest.mark.parametrize(("reducer", "safe"), [("mean", 2 / 3), ("majority", 1.0)])
async def test_each_item_runs_n_times_and_the_report_reduces_per_item(
    tmp_path: Path, reducer: str, safe: float
) -> None:
    chat = SecondTimeComplies()
    s = spec(["vanilla"], ["advbench"], 4, repeats=3, reducer=reducer, concurrency=1, judge={"calibration_n": 0})
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    report, store = await run(tmp_path, s, models)
    cells = await store.cells(report["run"]["id"])
    assert len(cells) == 12 and sorted(Counter(c.item_id for c in cells).values()) == [3, 3, 3, 3]
    assert {c.key.rsplit("#r", 1)[1] for c in cells} == {"1", "2", "3"}
    assert set(chat.asked.values()) == {3}  # every item asked three times, once per repeat
    got = cell(report, "vanilla", "advbench", "safe")
    assert got["n"] == 4 and got["mean"] == pytest.approx(safe, abs=1e-3)  # over items, not cells
    assert report["repeats"] == {"n": 3, "reducer": reducer, "cells": 12}
    assert report["run"]["identity"]["repeats"] == {"n": 3, "reducer": reducer}
    assert "Each item ran 3 times" in render_html(report)


@pytest.mark.needs_data("advbench")
async def test_repeats_resume_and_one_failed_repeat_fails_the_item(tmp_path: Path) -> None:
    calls: list[str] = []
    broken = {"on": True}

    def chat(request: ChatRequest) -> str:
        calls.append(last_user(request))
        if broken["on"] and len(calls) == 2:
            raise ValueError("flaky")
        return REFUSAL

    store = InMemoryResultStore()
    s = spec(["vanilla"], ["advbench"], 2, repeats=3, concurrency=1, judge={"calibration_n": 0})
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, s, models, store=store, max_cells=4)
    assert len(calls) == 4
    # item 1's three repeats ran, one failed: the item fails (never a mean of two); item 2 is running
    assert report["status"] == {"done": 0, "failed": 1, "gave_up": 0, "running": 1}
    assert "repeat 2" in report["failures"][0]["error"]
    broken["on"] = False
    report, _ = await run(tmp_path, s, models, store=store)
    assert len(calls) == 7  # the failed repeat and the two missing ones, nothing twice
    assert cell(report, "vanilla", "advbench", "safe")["n"] == 2


@pytest.mark.needs_data("advbench")
def test_repeats_are_sharded_like_any_cell() -> None:
    s = spec(["vanilla", "rlhf"], ["advbench"], 5, repeats=3)
    every, _ = plan_cells(s, SHARED_DATA, Registry())
    parts = [plan_cells(s, SHARED_DATA, Registry(), (i, 3))[0] for i in range(3)]
    keys = [c.key for part in parts for c in part]
    assert len(every) == 30 and sorted(keys) == sorted(c.key for c in every)  # each cell in one shard
    # a repeat is a cell of its own: an item's repeats may run on different runners
    shards_of: dict[str, set[int]] = {}
    for i, part in enumerate(parts):
        for c in part:
            shards_of.setdefault(c.key.rsplit("#r", 1)[0], set()).add(i)
    assert any(len(found) > 1 for found in shards_of.values())


def _old_canonical(s: object) -> str:
    """The run id's input as written before repeats and limits existed (every other field)."""
    data = s.model_dump(mode="json")  # type: ignore[attr-defined]
    for key in ("repeats", "reducer", "limits"):
        data.pop(key)
    return json.dumps(data, sort_keys=True, separators=(",", ":"))


@pytest.mark.needs_data("advbench")
async def test_a_run_stored_before_repeats_keeps_its_id_and_resumes(tmp_path: Path) -> None:
    s = spec(["vanilla"], ["advbench"], 3, judge={"calibration_n": 0})
    # the older id hashed concurrency too; the id now leaves it out, and the old run still resumes
    old_id = f"t-{hashlib.sha256(_old_canonical(s).encode()).hexdigest()[:12]}"
    assert s.run_id() != old_id
    # limits and concurrency never change the id (a stopped run resumes under a higher limit)
    assert s.model_copy(update={"limits": {"tokens": 5}, "concurrency": 3}).run_id() == s.run_id()
    assert spec(["vanilla"], ["advbench"], 3, repeats=3, judge={"calibration_n": 0}).run_id() != s.run_id()

    calls: list[str] = []

    def chat(request: ChatRequest) -> str:
        calls.append(last_user(request))
        return REFUSAL

    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    store = InMemoryResultStore()
    summary = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry(), max_cells=2)
    # rewrite the stored run as the older code stored it: its spec without the new keys, an
    # identity without "repeats"
    stored = await store.get_run(summary.run_id)
    assert stored is not None and "repeats" not in stored.meta["identity"]
    old_spec = json.loads(_old_canonical(s))
    old_store = InMemoryResultStore()
    await old_store.open_run(RunRecord(id=old_id, name="t", spec=old_spec, meta=stored.meta))
    for c in await store.cells(summary.run_id):
        moved = c.model_copy(update={"run_id": old_id})
        assert await old_store.claim(old_id, moved, c.owner)
        await old_store.finish(moved)
    store = old_store
    summary = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry())
    assert summary.run_id == old_id and summary.skipped_done == 2 and summary.ran == 1 and len(calls) == 3
    # the identity's digest (--new-run ids) is the one the older code computed: no "repeats" key in it
    identity = stored.meta["identity"]
    body = json.dumps({k: identity.get(k) for k in ("systems", "judges", "data", "package")}, sort_keys=True)
    assert identity_digest(identity) == hashlib.sha256(body.encode()).hexdigest()
    assert identity_changes(identity, {**identity, "repeats": {"n": 3, "reducer": "mean"}}) == [
        "repeats.n: none -> 3",
        "repeats.reducer: none -> mean",
    ]
