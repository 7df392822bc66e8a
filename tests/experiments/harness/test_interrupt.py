"""A run interrupted (Ctrl-C: asyncio.run cancels the run's task) gives back the cells it holds,
so a resume started at once runs them instead of waiting out their leases or skipping them as
"running elsewhere"; what was stored stays, and the cell cut off mid-way runs once more, counted
once. Synchronised on the model's own signal that it is inside a cell: no timing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

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


class _HeldStore(SQLResultStore):
    """Says when the run asks for its first cells, and holds that claim until it is cancelled: the
    run is stored, and no cell of it is."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.asked = asyncio.Event()
        self.hold = True

    async def claim_many(self, *args: Any, **kwargs: Any) -> Any:
        if self.hold:
            self.asked.set()
            await asyncio.Event().wait()  # until the run's task is cancelled
        return await super().claim_many(*args, **kwargs)


@pytest.mark.needs_data("advbench")
async def test_a_run_interrupted_before_its_first_cell_is_marked_and_resumes_cleanly(tmp_path: Path) -> None:
    s = spec(["vanilla"], ["advbench"], 3, concurrency=1)
    models = {"chat": scripted("chat", lambda _: REFUSAL), "judge": scripted("j", Judge())}
    store = _HeldStore(f"sqlite+aiosqlite:///{tmp_path / 'results.sqlite'}")
    command = "psychoalign experiment run my.yaml"
    try:
        first = asyncio.create_task(
            run_experiment(
                s, settings(tmp_path), store=store, models=models, registry=Registry(), resume_command=command
            )
        )
        await store.asked.wait()
        first.cancel()
        with pytest.raises(asyncio.CancelledError):
            await first
        run = await store.get_run(s.run_id())
        assert run is not None and await store.cells(run.id) == []
        assert run.meta["interrupted"] == {"cells": 0, "done": 0, "command": command}

        store.hold = False
        summary = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry())
        assert (summary.run_id, summary.ran, summary.done) == (run.id, 3, 3)
        resumed = await store.get_run(run.id)
        assert resumed is not None and resumed.meta["interrupted"] is None  # resumed to its end
        assert [r.id for r in await store.list_runs()] == [run.id]  # the same run, not one beside it
    finally:
        await store.close()
