"""The runner: failed cells recorded and retried, resumption (also after kill -9), shards,
adaptive concurrency, durable group commits, and serial models."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
from pathlib import Path

import pytest

from psychoalign.config import Settings
from psychoalign.errors import EndpointError
from psychoalign.experiments import run_experiment
from psychoalign.experiments.harness.metering import ModelPool
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.report import render_html
from psychoalign.experiments.harness.runner import AdaptiveLimiter, plan_cells, serial_models
from psychoalign.experiments.harness.store import CellResult, InMemoryResultStore, RunRecord
from psychoalign.experiments.harness.systems import SystemSpec, build_system
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.traces import InMemoryTraceStore
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL, Judge, cell, dead_pid, last_user, run, scripted, settings, spec
from tests.scenario import World


@pytest.mark.needs_data("advbench")
async def test_failing_endpoint_records_failed_cells_and_retries_them_on_resume(tmp_path: Path) -> None:
    def down(request: ChatRequest) -> str:
        raise EndpointError("endpoint <script>down</script>")

    store = InMemoryResultStore()
    models = {"chat": scripted("chat", down), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, spec(["vanilla"], ["advbench"], 3), models, store=store)
    got = cell(report, "vanilla", "advbench", "safe")
    assert (got["mean"], got["n"], got["failed"]) == (None, 0, 3)
    assert report["failures_total"] == 3 and "down" in report["failures"][0]["error"]
    html = render_html(report)
    assert "no data" in html and "<script>down" not in html and "&lt;script&gt;down" in html
    assert report["figure"]["series"] == [{"system": "vanilla", "means": [None]}]  # no bar at 0 in Figure 2
    models = {"chat": scripted("chat", lambda r: REFUSAL), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, spec(["vanilla"], ["advbench"], 3), models, store=store)
    got = cell(report, "vanilla", "advbench", "safe")
    assert (got["mean"], got["n"], got["failed"]) == (1.0, 3, 0)
    assert {c.attempts for c in await store.cells(report["run"]["id"])} == {2}


@pytest.mark.needs_data("advbench")
async def test_negotiation_failure_fails_the_cell_with_its_trace(tmp_path: Path) -> None:
    world = World([{"proposals": "not a list"}])  # DRIVE breaks its schema
    traces = InMemoryTraceStore()
    models = {**world.models(), "judge": scripted("j", Judge())}
    report, store = await run(tmp_path, spec(["psychoalign"], ["advbench"], 2), models, trace_store=traces)
    assert cell(report, "psychoalign", "advbench", "safe")["failed"] == 2
    cells = await store.cells(report["run"]["id"])
    assert all(c.status == "failed" and "negotiation failed" in (c.error or "") for c in cells)
    assert all(len(c.trace_ids) == 1 for c in cells)


@pytest.mark.needs_data("mt_bench")
async def test_junk_judge_fails_the_cell(tmp_path: Path) -> None:
    models = {"chat": scripted("chat", lambda r: "x"), "judge": scripted("j", lambda r: {"rating": 42})}
    report, store = await run(tmp_path, spec(["vanilla"], ["mt-bench"], 2), models)
    assert cell(report, "vanilla", "mt-bench", "score")["failed"] == 2
    assert all("junk" in (c.error or "") for c in await store.cells(report["run"]["id"]))


@pytest.mark.needs_data("mt_bench")
async def test_unusable_judge_output_gives_up_after_one_retry(tmp_path: Path) -> None:
    """A judge's junk comes back the same on retry: the cell is retried once, then 'gave_up' and never
    claimed again; it is reported with the failures, never scored."""
    judge = Judge(rating=lambda r: 42.0)  # outside MT-Bench's 1..10: junk every time
    models = {"chat": scripted("chat", lambda r: "x"), "judge": scripted("j", judge)}
    store = InMemoryResultStore()
    s = spec(["vanilla"], ["mt-bench"], 2, judge={"calibration_n": 0})
    report, _ = await run(tmp_path, s, models, store=store)
    assert report["status"]["failed"] == 2 and report["status"]["gave_up"] == 0
    calls = judge.calls
    report, _ = await run(tmp_path, s, models, store=store)  # the one retry
    assert judge.calls > calls and report["status"]["gave_up"] == 2
    assert all(f["gave_up"] and "gave up after 2 attempts" in f["error"] for f in report["failures"])
    assert cell(report, "vanilla", "mt-bench", "score")["failed"] == 2
    calls = judge.calls
    report, _ = await run(tmp_path, s, models, store=store)
    assert judge.calls == calls  # never run again
    assert {c.attempts for c in await store.cells(report["run"]["id"])} == {2}
    assert "given up" in render_html(report)


@pytest.mark.needs_data("advbench")
async def test_resume_runs_only_missing_cells(tmp_path: Path) -> None:
    asked: list[str] = []

    def chat(request: ChatRequest) -> str:
        asked.append(last_user(request))
        return REFUSAL

    store = InMemoryResultStore()
    s = spec(["vanilla", "rlhf"], ["advbench"], 5)
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    await run(tmp_path, s, models, store=store, max_cells=4)
    assert len(asked) == 4
    # a crash mid-cell leaves a 'running' cell owned by a dead process of this host: it runs again;
    # one running on another host is left alone unless --reclaim
    cells, _ = plan_cells(s, SHARED_DATA, Registry())
    for c, owner in ((cells[-1], "other-host:1"), (cells[-2], f"{socket.gethostname()}:{dead_pid()}")):
        stale = CellResult(run_id=s.run_id(), key=c.key, system=c.system.name, benchmark="advbench", item_id=c.item.id)
        assert await store.claim(s.run_id(), stale, owner)
    report, _ = await run(tmp_path, s, models, store=store)
    assert len(asked) == 9  # 4 + the 5 missing (the dead process's cell included); nothing ran twice
    # paired: vanilla completed all 5, rlhf 4 (one still running elsewhere): both compared on those 4
    assert cell(report, "vanilla", "advbench", "safe")["n"] == 4
    assert cell(report, "vanilla", "advbench", "safe")["dropped"] == 1
    assert cell(report, "rlhf", "advbench", "safe")["n"] == 4
    report, _ = await run(tmp_path, s, models, store=store, reclaim=True)
    assert len(asked) == 10
    assert cell(report, "rlhf", "advbench", "safe")["n"] == 5
    await run(tmp_path, s, models, store=store)
    assert len(asked) == 10


@pytest.mark.needs_data("advbench")
def test_shards_partition_the_cells() -> None:
    s = spec(["vanilla", "rlhf"], ["advbench", "hhh"], 10)
    every = {c.key for c in plan_cells(s, SHARED_DATA, Registry())[0]}
    parts = [{c.key for c in plan_cells(s, SHARED_DATA, Registry(), (i, 3))[0]} for i in range(3)]
    assert set().union(*parts) == every and sum(len(p) for p in parts) == len(every) == 40


async def test_adaptive_limiter_halves_on_overload_and_recovers() -> None:
    lim = AdaptiveLimiter(8)
    lim.overload()
    lim.overload()  # same burst: one cut
    assert lim.limit == 4
    for _ in range(4):
        await lim.acquire()
    for _ in range(4):
        await lim.release(True)
    assert lim.limit == 5
    lim.overload()
    assert lim.limit == 2 and lim.cuts == 2


CHILD = """
import asyncio, sys
from pathlib import Path
from psychoalign.config import Settings
from psychoalign.experiments import ExperimentSpec, run_experiment
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.store import SQLResultStore
from psychoalign.models import Backend, ChatModel, Completion, ModelSpec

tmp, data = Path(sys.argv[1]), sys.argv[2]
spec = ExperimentSpec.model_validate({"name": "crash", "systems": ["vanilla"], "benchmarks": ["advbench"], "n": 8,
                                      "concurrency": 1, "judge": {"calibration_n": 0, "refusal": "rules"}})
store = SQLResultStore(f"sqlite:///{tmp / 'r.db'}")
answered = []


class Chat(Backend):
    name = "scripted"

    async def complete(self, request):
        answered.append(1)
        if len(answered) == 4:  # the 4th cell hangs once the 3 before it are durable: the parent kills us here
            while sum(c.status == "done" for c in await store.cells(spec.run_id())) < 3:
                await asyncio.sleep(0.01)
            (tmp / "hanging").write_text("x")
            await asyncio.Event().wait()
        return Completion(text="I'm sorry, but I can't help with that.")


mspec = ModelSpec(backend="scripted", model="chat", schema_retries=0, max_retries=0)
models = {"chat": ChatModel(mspec, Chat(mspec))}
settings = Settings(home=str(tmp / "home"), experiments={"data_dir": data})
asyncio.run(run_experiment(spec, settings, store=store, models=models, registry=Registry()))
"""


@pytest.mark.needs_data
def test_kill_9_mid_run_then_resume_runs_only_the_missing_cells(tmp_path: Path) -> None:
    import asyncio
    import os
    import signal
    import sys
    import time

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen([sys.executable, str(script), str(tmp_path), str(SHARED_DATA)], env=os.environ.copy())
    deadline = time.monotonic() + 120
    while not (tmp_path / "hanging").exists():  # wait for the event: the child is inside cell 4
        assert child.poll() is None, "the child exited before hanging"
        assert time.monotonic() < deadline, "the child never reached cell 4"
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()

    asked: list[str] = []

    def chat(request: ChatRequest) -> str:
        asked.append(last_user(request))
        return REFUSAL

    async def resume() -> list[CellResult]:
        from psychoalign.experiments.harness.store import SQLResultStore

        store = SQLResultStore(f"sqlite:///{tmp_path / 'r.db'}")
        s = spec(["vanilla"], ["advbench"], 8, concurrency=1, name="crash", judge={"calibration_n": 0})
        before = {c.key: c.status for c in await store.cells(s.run_id())}
        # 3 done and durable; the hung cell (and any claimed ahead of the workers) left 'running': a
        # cell is written after its worker moved on, so only durable cells may count as done
        assert sorted(before.values())[:4] == ["done", "done", "done", "running"]
        assert set(list(before.values())[3:]) <= {"done", "running"} and list(before.values()).count("done") == 3
        await run_experiment(
            s, settings(tmp_path), store=store, models={"chat": scripted("chat", chat)}, registry=Registry()
        )
        cells = await store.cells(s.run_id())
        await store.close()
        return cells

    cells = asyncio.run(resume())
    assert len(asked) == 5  # the cell that hung, and the 4 never started; the 3 done are not rerun
    assert [c.status for c in cells] == ["done"] * 8
    assert sum(c.attempts == 1 for c in cells) >= 3 and max(c.attempts for c in cells) == 2


@pytest.mark.needs_data("advbench")
async def test_overload_halves_concurrency_and_the_run_still_completes(tmp_path: Path) -> None:
    from psychoalign.errors import TransientBackendError
    from tests.helpers import fast_spec

    mspec = fast_spec(backend="scripted", model="chat", max_retries=3)
    busy = [TransientBackendError("HTTP 429", retry_after=0.0) for _ in range(3)]
    models = {"chat": ChatModel(mspec, ScriptedBackend(mspec, replies=[REFUSAL], cycle=True, fail_first=busy))}
    store = InMemoryResultStore()
    s = spec(["vanilla"], ["advbench"], 12, concurrency=8, judge={"calibration_n": 0})
    summary = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry())
    assert summary.limiter_cuts >= 1
    assert (summary.done, summary.failed) == (12, 0)
    cells = await store.cells(s.run_id())
    assert sum(c.cost["transient_errors"] for c in cells) == 3
    assert sum(c.cost["calls"] for c in cells) == 12  # failed attempts are not counted as calls


async def test_cells_count_as_done_only_once_durable_and_a_failed_write_stops_the_run() -> None:
    import asyncio

    from psychoalign.experiments.harness.runner import _GroupCommit

    class GatedStore(InMemoryResultStore):
        """finish_many waits for the test's go-ahead; the second write fails."""

        def __init__(self) -> None:
            super().__init__()
            self.gate = asyncio.Event()
            self.entered = asyncio.Event()
            self.writes = 0

        async def finish_many(self, cells: list[CellResult]) -> None:
            self.writes += 1
            self.entered.set()
            await self.gate.wait()
            if self.writes == 2:
                raise OSError("disk full")
            await super().finish_many(cells)

    def cell(i: int) -> CellResult:
        return CellResult(run_id="r", key=f"k{i}", system="s", benchmark="b", item_id=str(i), status="done")

    store = GatedStore()
    await store.open_run(RunRecord(id="r", name="r", spec={}))
    durable: list[str] = []
    writer = _GroupCommit(store, lambda c: durable.append(c.key), max_pending=2)
    await writer.submit(cell(1))  # returns at once: the worker moves on while the store writes
    await store.entered.wait()
    await writer.submit(cell(2))
    assert durable == []  # nothing counts before the store has it
    room = asyncio.create_task(writer.submit(cell(3)))  # 2 pending already: waits for room
    await asyncio.sleep(0)
    assert not room.done()
    store.gate.set()
    (late,) = await asyncio.gather(room, return_exceptions=True)  # k3 is queued, or refused once k2's write failed
    assert late is None or isinstance(late, OSError)
    with pytest.raises(OSError, match="disk full"):
        await writer.flush()  # the second batch (cells 2 and 3) failed: the run stops with its error
    assert durable == ["k1"]
    assert [c.key for c in await store.cells("r")] == ["k1"]
    with pytest.raises(OSError, match="disk full"):
        await writer.submit(cell(4))


def test_serial_models_are_the_embedded_ones() -> None:
    local = Settings()
    remote = Settings(roles={"chat": {"backend": "openai", "base_url": "http://x/v1"}})
    systems = [build_system(SystemSpec(name=n), local) for n in ("vanilla", "psychoalign")]
    assert serial_models(systems, ModelPool(local)) == ["local:smollm2-135m-instruct"]
    assert serial_models(systems[:1], ModelPool(remote)) == []
    # a system whose DRIVE alone points elsewhere still calls the embedded MEDIATOR
    pa = build_system(SystemSpec(name="p", kind="psychoalign", roles={"drive": {"backend": "openai"}}), remote)
    assert serial_models([pa], ModelPool(remote)) == ["local:smollm2-135m-instruct"]


@pytest.mark.needs_data("advbench")
async def test_cells_run_one_at_a_time_on_a_serial_model(tmp_path: Path) -> None:
    in_flight, peak = 0, 0

    async def chat(request: ChatRequest) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        for _ in range(5):
            await asyncio.sleep(0)  # give other cells every chance to start
        in_flight -= 1
        return "I can't help with that."

    for backend, expected in (("local", 1), ("scripted", 4)):
        in_flight, peak = 0, 0
        mspec = ModelSpec(backend=backend, model="x", schema_retries=0, max_retries=0)  # type: ignore[arg-type]
        models = {"chat": ChatModel(mspec, ScriptedBackend(mspec, fn=chat))}
        s = spec(["vanilla"], ["advbench"], 8, concurrency=4, judge={"harm": False, "calibration_n": 0}, name=backend)
        report, _ = await run(tmp_path / backend, s, models)
        assert peak == expected, backend
        assert report["run"]["concurrency"]["effective"] == expected
    assert re.search(r"Cells ran one at a time", render_html(report)) is None  # the scripted run was concurrent


@pytest.mark.needs_data("advbench")
@pytest.mark.parametrize("new_run", [True, False])
async def test_a_run_that_fails_before_its_first_cell_leaves_no_run_behind(tmp_path: Path, new_run: bool) -> None:
    """`experiment run --new-run` whose judge could not be built stored an empty run, listed by
    `experiment status` beside the real ones (and resumed later under an id nobody chose). The
    run is stored only once everything it needs is built; a run that already exists is kept."""
    from psychoalign.errors import ConfigError
    from psychoalign.experiments.harness.store import SQLResultStore

    missing = tmp_path / "judge.yaml"
    config = Settings(
        home=str(tmp_path / "home"),
        experiments={"data_dir": str(SHARED_DATA)},
        roles={"judge": {"backend": "scripted", "script": str(missing)}},
    )
    s = spec(["vanilla"], ["advbench"], 2, judge={"harm": "model"})
    models = {"chat": scripted("refuser", lambda r: REFUSAL)}
    store = SQLResultStore(f"sqlite+aiosqlite:///{tmp_path / 'results.sqlite'}")
    try:
        with pytest.raises(ConfigError, match=r"judge\.yaml"):
            await run_experiment(s, config, store=store, models=models, registry=Registry(), new_run=new_run)
        assert await store.list_runs() == []
        missing.write_text('rules: []\ndefault: {harmful: false, reason: "scripted"}\n')
        summary = await run_experiment(s, config, store=store, models=models, registry=Registry(), new_run=new_run)
        assert (summary.done, [r.id for r in await store.list_runs()]) == (2, [summary.run_id])
        missing.unlink()  # a stored run that fails to start again stays, with its cells
        with pytest.raises(ConfigError):
            await run_experiment(s, config, store=store, models=models, registry=Registry(), new_run=new_run)
        assert [r.id for r in await store.list_runs()] == [summary.run_id]
        assert len(await store.cells(summary.run_id)) == 2
    finally:
        await store.close()
