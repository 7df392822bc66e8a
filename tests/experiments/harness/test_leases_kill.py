"""Two runners on one PostgreSQL store, one killed with SIGKILL mid-cell on "another machine":
while its lease runs, the survivor leaves its cell alone; once it has lapsed, the survivor
finishes the run; nothing is lost or duplicated. The lease's lapse is a controlled clock (the
survivor's store reads time an hour ahead), and the kill waits for the victim's own signal that
it is inside the cell: nothing here depends on timing."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from psychoalign.config import Settings
from psychoalign.experiments import ExperimentSpec, run_experiment
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.store import SQLResultStore
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
from tests.conftest import ROOT, SHARED_DATA
from tests.helpers import PG_URL, pg_schema

SPEC = {"name": "killed", "systems": ["vanilla"], "benchmarks": ["xstest"], "n": 3, "concurrency": 1}
REFUSAL = "I'm sorry, but I can't help with that."

# The victim: owner "lost-host:1" (a machine this host cannot check), hangs in its third cell
# after saying so in the marker file.
VICTIM = """
import asyncio, json, sys, time
from pathlib import Path
from psychoalign.config import Settings
from psychoalign.experiments import ExperimentSpec, run_experiment
from psychoalign.experiments.harness import runner
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.store import SQLResultStore
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend

url, connect_args, spec, data, home, marker = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], *sys.argv[4:7]
runner.current_owner = lambda: "lost-host:1"
calls = []

def chat(request):
    calls.append(1)
    if len(calls) == 3:
        Path(marker).write_text("in the cell")
        time.sleep(3600)  # hangs here until killed
    return "I'm sorry, but I can't help with that."

async def main():
    store = SQLResultStore(url, connect_args=connect_args)
    mspec = ModelSpec(backend="scripted", model="chat")
    await run_experiment(
        ExperimentSpec.model_validate(json.loads(spec)), Settings(home=home, experiments={"data_dir": data}),
        store=store, models={"chat": ChatModel(mspec, ScriptedBackend(mspec, fn=chat))}, registry=Registry(),
    )

asyncio.run(main())
"""


@pytest.mark.postgres
@pytest.mark.skipif(not (SHARED_DATA / "xstest").is_dir(), reason="../shared/data (XSTest) is not beside the repo")
async def test_a_killed_runner_s_cells_are_finished_by_the_other_once_its_lease_lapses(tmp_path: Path) -> None:
    spec = ExperimentSpec.model_validate(SPEC)
    settings = Settings(home=str(tmp_path / "home"), experiments={"data_dir": str(SHARED_DATA)})
    asked: list[str] = []

    def chat(request: object) -> str:
        asked.append(request.messages[-1].content)  # type: ignore[attr-defined]
        return REFUSAL

    mspec = ModelSpec(backend="scripted", model="chat")
    async with pg_schema("kill") as connect_args:
        marker = tmp_path / "marker"
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", "")}
        victim = await asyncio.create_subprocess_exec(
            sys.executable, "-c", VICTIM, PG_URL, json.dumps(connect_args), json.dumps(SPEC), str(SHARED_DATA),
            str(tmp_path / "victim-home"), str(marker), env=env,
        )  # fmt: skip
        try:
            while not marker.exists():  # the victim's signal; the bound only guards a broken victim
                assert victim.returncode is None, "the victim exited before reaching its third cell"
                await asyncio.sleep(0.05)
        finally:
            victim.send_signal(signal.SIGKILL)
            await victim.wait()

        # While the lease runs (real time), the survivor must leave the victim's cell alone
        store = SQLResultStore(PG_URL, connect_args=connect_args)
        first = await run_experiment(
            spec, settings, store=store, models={"chat": ChatModel(mspec, ScriptedBackend(mspec, fn=chat))},
            registry=Registry(),
        )  # fmt: skip
        cells = {c.key: c for c in await store.cells(spec.run_id())}
        held = [c for c in cells.values() if c.status == "running"]
        # the victim had claimed a batch: the cell it hung in and the ones queued behind it
        assert first.ran == 0 and first.busy_elsewhere == len(held) >= 1
        assert {c.owner for c in held} == {"lost-host:1"}
        await store.close()

        # An hour later (the survivor's clock), the lease has lapsed: the survivor takes it over
        later = SQLResultStore(PG_URL, connect_args=connect_args, clock=lambda: datetime.now(UTC) + timedelta(hours=1))
        second = await run_experiment(
            spec, settings, store=later, models={"chat": ChatModel(mspec, ScriptedBackend(mspec, fn=chat))},
            registry=Registry(),
        )  # fmt: skip
        assert second.busy_elsewhere == 0 and second.ran == len(held)
        cells = {c.key: c for c in await later.cells(spec.run_id())}
        await later.close()
    assert len(cells) == 6 and all(c.status == "done" for c in cells.values())  # nothing lost, no duplicate rows
    assert all(cells[c.key].attempts == 2 for c in held)  # each of the victim's cells ran again, once
    assert len(asked) == len(set(asked))  # the survivor asked no prompt twice
