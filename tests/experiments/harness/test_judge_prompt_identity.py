"""The packaged prompts the judge models are asked with are part of a run's identity: an edited
judge prompt is another judge, so resuming a run after the edit is refused (its stored cells and
calibrations were judged with the old prompt); a run stored before the prompts were hashed still
resumes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from psychoalign.errors import ConfigError
from psychoalign.experiments import run_experiment
from psychoalign.experiments.harness import provenance
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.store import InMemoryResultStore
from tests.experiments.helpers import REFUSAL, Judge, OwnXSTest, scripted, settings, spec


async def test_an_edited_judge_prompt_is_another_judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shipped = provenance.judge_prompt_files()
    assert {p.name for p in shipped} >= {"judge_refusal.yaml", "judge_literature.yaml", "judge_benchmarks.yaml"}
    copies = tmp_path / "prompts"
    copies.mkdir()
    for path in shipped:
        shutil.copy(path, copies / path.name)
    monkeypatch.setattr(provenance, "judge_prompt_files", lambda: sorted(copies.glob("judge_*.yaml")))

    registry = Registry()
    registry.add_benchmark(OwnXSTest)
    models = {"chat": scripted("refuser", lambda r: REFUSAL), "judge": scripted("j", Judge())}
    s = spec(["vanilla"], ["own-xstest"], 4, judge={"calibration_n": 0})
    store = InMemoryResultStore()
    kw = {"store": store, "models": models, "registry": registry}
    first = await run_experiment(s, settings(tmp_path), **kw)
    assert (await run_experiment(s, settings(tmp_path), **kw)).ran == 0  # unchanged: resumes, nothing run again

    edited = copies / "judge_literature.yaml"
    edited.write_text(edited.read_text(encoding="utf-8") + "\n# a reworded criterion\n", encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        await run_experiment(s, settings(tmp_path), **kw)
    assert refused.value.message.startswith(f"run {first.run_id} was computed with other settings: ")
    assert "judges.prompts_sha256" in refused.value.message and "--new-run" in (refused.value.hint or "")

    # a run stored before the judge prompts were hashed resumes (and is stored with them from now on)
    record = await store.get_run(first.run_id)
    assert record is not None
    identity = record.meta["identity"]
    old = {**identity, "judges": {k: v for k, v in identity["judges"].items() if k != "prompts_sha256"}}
    await store.set_meta(first.run_id, "identity", old)
    again = await run_experiment(s, settings(tmp_path), **kw)
    assert again.run_id == first.run_id and again.ran == 0
    record = await store.get_run(first.run_id)
    assert record is not None and "prompts_sha256" in record.meta["identity"]["judges"]
