"""Per-run limits: tokens, cost, time (an injected clock) and failed cells stop a run cleanly,
say why in one line and in the run's meta and report; a rerun with a higher limit goes on where
it stopped. Everything is counted on cells and calls, never on wall time."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from psychoalign.errors import EndpointError, InputError
from psychoalign.experiments.harness.limits import merge_limits
from psychoalign.experiments.harness.spec import RunLimits
from psychoalign.experiments.harness.store import InMemoryResultStore
from psychoalign.models import ChatRequest
from tests.experiments.helpers import REFUSAL, Judge, run, scripted, spec

N = 10


def _spec(**limits: Any) -> Any:
    return spec(["vanilla"], ["advbench"], N, concurrency=1, judge={"calibration_n": 0}, limits=limits)


class Chat:
    """Counts calls; ``fail`` makes every call an endpoint error; ``tick`` runs after each call."""

    def __init__(self, tick: Any = None) -> None:
        self.calls = 0
        self.fail = False
        self.tick = tick

    def __call__(self, request: ChatRequest) -> str:
        self.calls += 1
        if self.tick is not None:
            self.tick()
        if self.fail:
            raise EndpointError("endpoint down")
        return REFUSAL


def test_limits_are_checked_and_flags_win_over_the_spec() -> None:
    with pytest.raises(ValidationError, match="whole number"):
        RunLimits(errors=2.5)
    with pytest.raises(ValidationError):
        RunLimits(tokens=0)
    merged = merge_limits(RunLimits(tokens=10, errors=3), {"tokens": 20, "cost_usd": None})
    assert (merged.tokens, merged.errors, merged.cost_usd) == (20, 3, None)

    from psychoalign.cli.experiment import _with_limits

    s = _spec(tokens=10)
    assert _with_limits(s, max_tokens=None, max_cost=None, max_time=None, max_errors=None).limits.tokens == 10
    assert _with_limits(s, max_tokens=99, max_cost=None, max_time=None, max_errors=None).limits.tokens == 99
    with pytest.raises(InputError, match="--max-errors"):
        _with_limits(s, max_tokens=None, max_cost=None, max_time=None, max_errors=1.5)


@pytest.mark.needs_data("advbench")
async def test_token_limit_stops_the_run_and_a_higher_limit_resumes_it(tmp_path: Path) -> None:
    chat = Chat()
    store = InMemoryResultStore()
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, _spec(tokens=1), models, store=store)
    ran = chat.calls
    assert ran == 1  # one cell at a time: the first reaches it, no other starts
    # the cells claimed with it and never started are given back: none is left 'running'
    assert report["status"] == {"done": 1, "failed": 0, "gave_up": 0, "running": 0}
    assert len(await store.cells(report["run"]["id"])) == 1
    stopped = report["run"]["stopped"]
    assert stopped["limit"] == "tokens" and stopped["reason"].startswith("token limit reached: ")
    assert "--max-tokens" in stopped["reason"] and "\n" not in stopped["reason"]
    # the same limit again: nothing runs, the same reason
    report, _ = await run(tmp_path, _spec(tokens=1), models, store=store)
    assert chat.calls == ran and report["run"]["stopped"]["limit"] == "tokens"
    # a higher limit: the run goes on from where it stopped and completes; nothing ran twice
    report, _ = await run(tmp_path, _spec(tokens=1_000_000), models, store=store)
    assert chat.calls == N and report["status"]["done"] == N and report["run"]["stopped"] is None
    assert report["run"]["id"] == _spec().run_id()  # limits are not part of the run's id


@pytest.mark.needs_data("advbench")
async def test_cost_limit_counts_every_call(tmp_path: Path) -> None:
    # the scripted backend has no price: a zero cost never reaches a positive limit
    chat = Chat()
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, _spec(cost_usd=0.01), models)
    assert chat.calls == N and report["run"]["stopped"] is None


@pytest.mark.needs_data("advbench")
async def test_time_limit_reads_the_injected_clock(tmp_path: Path) -> None:
    now = [0.0]

    def tick() -> None:
        now[0] += 10.0  # each call to the system takes ten seconds on this clock

    chat = Chat(tick)
    store = InMemoryResultStore()
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, _spec(time_s=25), models, store=store, clock=lambda: now[0])
    assert chat.calls == 3 and report["run"]["stopped"]["limit"] == "time_s"  # at 10, 20, 30 s
    assert "time limit reached" in report["run"]["stopped"]["reason"]
    stored = await store.get_run(report["run"]["id"])
    assert stored is not None and stored.meta["elapsed_s"] >= 25
    # time counts across invocations: 25 s more is reached again before the run completes
    ran = chat.calls
    more = _spec(time_s=stored.meta["elapsed_s"] + 15)
    report, _ = await run(tmp_path, more, models, store=store, clock=lambda: now[0])
    assert chat.calls == ran + 2 and report["run"]["stopped"]["limit"] == "time_s"
    report, _ = await run(tmp_path, _spec(time_s=1000), models, store=store, clock=lambda: now[0])
    assert chat.calls == N and report["run"]["stopped"] is None


@pytest.mark.needs_data("advbench")
@pytest.mark.parametrize(("errors", "cap"), [(2, 2), (0.5, 5)])
async def test_error_threshold_count_or_fraction(tmp_path: Path, errors: float, cap: int) -> None:
    chat = Chat()
    chat.fail = True
    store = InMemoryResultStore()
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, _spec(errors=errors), models, store=store)
    assert chat.calls == cap
    stopped = report["run"]["stopped"]
    assert stopped["limit"] == "errors" and f"the threshold is {cap}" in stopped["reason"]
    assert report["status"]["failed"] == chat.calls
    # the endpoint is back: a rerun retries the failed cells and completes
    chat.fail = False
    report, _ = await run(tmp_path, _spec(errors=errors), models, store=store)
    assert report["status"]["done"] == N and report["run"]["stopped"] is None


class HangsOnce:
    """Answers every request but the second, which waits on an event nobody sets: a model that
    never answers. ``asked`` counts the requests."""

    def __init__(self) -> None:
        self.asked = 0
        self.never = asyncio.Event()

    async def __call__(self, request: ChatRequest) -> str:
        self.asked += 1
        if self.asked == 2:
            await self.never.wait()
        return REFUSAL


@pytest.mark.needs_data("advbench")
async def test_a_hung_cell_is_cut_off_by_the_sample_time_limit_and_the_run_completes(tmp_path: Path) -> None:
    chat = HangsOnce()
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    report, store = await run(tmp_path, _spec(sample_time_s=0.05), models)
    assert report["status"] == {"done": N - 1, "failed": 1, "gave_up": 0, "running": 0}
    (failed,) = [c for c in await store.cells(report["run"]["id"]) if c.status == "failed"]
    assert failed.error is not None and failed.error.startswith("limit: time: the cell ran past 0.05 s")
    assert "--sample-time" in failed.error and not chat.never.is_set()
    assert report["run"]["stopped"] is None


@pytest.mark.needs_data("advbench")
async def test_a_cell_past_its_sample_limit_counts_toward_the_error_threshold(tmp_path: Path) -> None:
    chat = HangsOnce()
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, _spec(sample_time_s=0.05, errors=1), models)
    assert chat.asked == 2  # the hung cell failed by its limit; the threshold of 1 stopped the run
    assert report["status"]["failed"] == 1 and report["run"]["stopped"]["limit"] == "errors"


@pytest.mark.needs_data("advbench")
async def test_sample_token_limit_fails_the_cell_that_passes_it(tmp_path: Path) -> None:
    chat = Chat()
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    # every request is longer than 3 words (the scripted backend counts words as tokens)
    report, store = await run(tmp_path, _spec(sample_tokens=3), models)
    cells = await store.cells(report["run"]["id"])
    assert len(cells) == N and all(c.status == "failed" for c in cells)
    assert all((c.error or "").startswith("limit: tokens: the cell's model calls used ") for c in cells)
    # a budget the cells fit: every cell done on the rerun (same run: limits are not its identity)
    report, _ = await run(tmp_path, _spec(sample_tokens=1_000_000), models, store=store)
    assert report["status"]["done"] == N


def test_sample_limit_flags_win_over_the_spec() -> None:
    from psychoalign.cli.experiment import _with_limits

    none = {"max_tokens": None, "max_cost": None, "max_time": None, "max_errors": None}
    s = _spec(sample_time_s=5)
    got = _with_limits(s, **none, sample_tokens=100, sample_time=None).limits
    assert (got.sample_tokens, got.sample_time_s) == (100, 5)
    with pytest.raises(InputError, match="--sample-time"):
        _with_limits(s, **none, sample_tokens=None, sample_time=0.0)
