"""A run interrupted (Ctrl-C: asyncio.run cancels the run's task) gives back the cells it holds,
so a resume started at once runs them instead of waiting out their leases or skipping them as
"running elsewhere"; what was stored stays, and the cell cut off mid-way runs once more, counted
once. Synchronised on the model's own signal that it is inside a cell: no timing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from psychoalign.experiments import run_experiment
from psychoalign.experiments.harness import runner
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.store import SQLResultStore
from psychoalign.models import ChatRequest
from tests.experiments.helpers import REFUSAL, Judge, last_user, scripted, settings, spec


@pytest.mark.needs_data("advbench")
async def test_an_interrupted_run_gives_back_its_cells_and_a_resume_runs_them_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[str] = []
    inside = asyncio.Event()  # the third cell's model call has started
    never = asyncio.Event()  # ... and hangs there until the run is interrupted

    async def chat(request: ChatRequest) -> str:
        asked.append(last_user(request))
        if len(asked) == 3:
            inside.set()
            await never.wait()
        return REFUSAL

    s = spec(["vanilla"], ["advbench"], 5, concurrency=1)
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    store = SQLResultStore(f"sqlite+aiosqlite:///{tmp_path / 'results.sqlite'}")
    try:
        # an owner this host cannot check (another machine, another container): only its
        # leases, or its giving the cells back, free them
        monkeypatch.setattr(runner, "current_owner", lambda: "lost-host:1")
        first = asyncio.create_task(
            run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry())
        )
        await inside.wait()
        first.cancel()  # what asyncio.run does on Ctrl-C
        with pytest.raises(asyncio.CancelledError):
            await first
        stored = {c.key: c for c in await store.cells(s.run_id())}
        assert [c.status for c in stored.values()] == ["done", "done"]  # nothing stored is lost
        assert all(c.owner == "lost-host:1" for c in stored.values())

        monkeypatch.undo()
        summary = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry())
        assert (summary.busy_elsewhere, summary.skipped_done, summary.ran, summary.done) == (0, 2, 3, 3)
        cells = await store.cells(s.run_id())
        assert [c.status for c in cells] == ["done"] * 5
        assert {c.key: c for c in cells if c.key in stored} == stored  # the stored cells, as they were
        assert all(c.attempts == 1 for c in cells)  # the cut-off cell: a first claim, given back
        assert len(asked) == 6 and len(set(asked)) == 5  # the interrupted item asked once more
    finally:
        await store.close()
