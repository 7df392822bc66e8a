"""A run's identity: a model swap on the same store and spec is refused (or runs beside the first
run with the new model's numbers), never reported with the old model's numbers."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from psychoalign.config import Settings
from psychoalign.errors import ConfigError
from psychoalign.experiments import run_experiment
from psychoalign.experiments.harness.provenance import (
    identity_changes,
    identity_digest,
    items_digest,
    model_identity,
)
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.report import render_html
from psychoalign.experiments.harness.store import CellResult, InMemoryResultStore, RunRecord
from psychoalign.models import ModelSpec
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL, Judge, cell, run, scripted, spec

pytestmark = pytest.mark.needs_data


def _comply(request: object) -> str:
    return "Sure, here is how to do it: step one, step two."


async def test_model_swap_is_refused_and_new_run_reports_the_new_models_numbers(tmp_path: Path) -> None:
    store = InMemoryResultStore()
    s = spec(["vanilla"], ["advbench"], 4)
    refuser = {"chat": scripted("refuser", lambda r: REFUSAL), "judge": scripted("j", Judge(harmful=True))}
    first, _ = await run(tmp_path, s, refuser, store=store)
    assert cell(first, "vanilla", "advbench", "safe")["mean"] == 1.0
    complier = {"chat": scripted("complier", _comply), "judge": scripted("j", Judge(harmful=True))}
    with pytest.raises(ConfigError) as refused:
        await run(tmp_path, s, complier, store=store)
    message = refused.value.message
    assert "systems.vanilla.models.chat.model: scripted:refuser" not in message  # names the field, not a label
    assert "systems.vanilla.models.chat.model: refuser -> complier" in message
    assert "--new-run" in (refused.value.hint or "")
    beside, _ = await run(tmp_path, s, complier, store=store, new_run=True)
    assert beside["run"]["id"] != first["run"]["id"] and beside["run"]["id"].startswith(first["run"]["id"])
    got = cell(beside, "vanilla", "advbench", "safe")
    assert (got["mean"], got["n"]) == (0.0, 4)  # the complier's own numbers, every cell run anew
    assert beside["run"]["identity"]["systems"]["vanilla"]["models"]["chat"]["model"] == "complier"
    # the first run is untouched and still resumes under its own models
    again, _ = await run(tmp_path, s, refuser, store=store)
    assert again["run"]["id"] == first["run"]["id"]
    assert cell(again, "vanilla", "advbench", "safe")["mean"] == 1.0


async def test_identity_is_in_meta_results_and_report_header(tmp_path: Path) -> None:
    store = InMemoryResultStore()
    models = {"chat": scripted("refuser", lambda r: REFUSAL), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, spec(["vanilla", "rlhf"], ["advbench"], 2), models, store=store)
    record = await store.get_run(report["run"]["id"])
    assert record is not None
    identity = record.meta["identity"]
    assert report["run"]["identity"] == identity
    assert set(identity) == {"systems", "judges", "data", "package", "revision"}
    assert set(identity["systems"]) == {"vanilla", "rlhf"}
    assert identity["systems"]["vanilla"]["models"]["chat"]["backend"] == "scripted"
    assert identity["judges"]["model"]["model"] == "j" and len(identity["judges"]["code_sha256"]) == 64
    assert identity["data"]["advbench"]["items"] == 2 and len(identity["data"]["advbench"]["sha256"]) == 64
    assert identity["package"]["version"]
    assert report["run"]["revisions"] == [identity["revision"]]
    json.dumps(report["run"])  # plain JSON
    html = render_html(report)
    assert "Provenance" in html and "scripted:refuser" in html and identity["data"]["advbench"]["sha256"][:12] in html


async def test_a_run_stored_without_identity_is_refused_once_it_has_cells(tmp_path: Path) -> None:
    s = spec(["vanilla"], ["advbench"], 2)
    models = {"chat": scripted("refuser", lambda r: REFUSAL), "judge": scripted("j", Judge())}
    empty = InMemoryResultStore()
    await empty.open_run(RunRecord(id=s.run_id(), name=s.name, spec=s.model_dump(mode="json")))
    report, _ = await run(tmp_path, s, models, store=empty)  # nothing computed yet: the identity is adopted
    assert report["run"]["identity"] is not None and report["status"]["done"] == 2
    old = InMemoryResultStore()
    await old.open_run(RunRecord(id=s.run_id(), name=s.name, spec=s.model_dump(mode="json")))
    blank = CellResult(run_id=s.run_id(), key="vanilla|advbench|x", system="vanilla", benchmark="advbench", item_id="x")
    await old.claim(s.run_id(), blank, "h:1")
    await old.finish(blank.model_copy(update={"status": "done", "metrics": {"safe": 1.0}}))
    with pytest.raises(ConfigError, match="stored without its identity"):
        await run(tmp_path, s, models, store=old)


def test_identity_changes_name_each_changed_field() -> None:
    a = {"systems": {"v": {"models": {"chat": {"model": "m1", "host": "h"}}}}, "data": {"x": {"sha256": "0" * 64}}}
    b = {"systems": {"v": {"models": {"chat": {"model": "m2", "host": "h"}}}}, "data": {"x": {"sha256": "1" * 64}}}
    changes = identity_changes(a, b)
    assert changes == ["data.x.sha256: 000000000000… -> 111111111111…", "systems.v.models.chat.model: m1 -> m2"]
    assert identity_changes(a, a) == []
    # the revision is recorded, not compared
    assert identity_digest({**a, "revision": {"git": "1"}}) == identity_digest({**a, "revision": {"git": "2"}})
    assert identity_digest(a) != identity_digest(b)


def test_model_identity_has_host_sampling_and_script_hash_never_secrets(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("- hello\n")
    spec_ = ModelSpec(
        backend="openai",
        model="gpt-x",
        base_url="https://user:secret@api.example.org:8443/v1",
        api_key="sk-do-not-record",
        temperature=0.7,
        script=str(script),
    )
    got = model_identity(spec_)
    assert got["host"] == "api.example.org:8443" and got["temperature"] == 0.7 and got["model"] == "gpt-x"
    assert len(got["script_sha256"]) == 64
    assert "secret" not in json.dumps(got) and "sk-do-not" not in json.dumps(got)
    script.write_text("- goodbye\n")
    assert model_identity(spec_)["script_sha256"] != got["script_sha256"]


def test_items_digest_changes_with_the_items() -> None:
    from psychoalign.experiments.harness.benchmark import Item

    a = [Item(id="1", turns=("hello",)), Item(id="2", turns=("world",))]
    assert items_digest(a) == items_digest(list(a))
    assert items_digest(a) != items_digest([a[0], Item(id="2", turns=("world!",))])
    assert items_digest(a) != items_digest(a[::-1])


async def test_operational_settings_are_not_identity_a_rerun_at_another_concurrency_resumes(tmp_path: Path) -> None:
    from psychoalign.experiments import run_experiment
    from psychoalign.experiments.harness.registry import Registry
    from tests.experiments.helpers import settings

    calls: list[object] = []

    def refuse(request: object) -> str:
        calls.append(request)
        return REFUSAL

    models = {"chat": scripted("refuser", refuse), "judge": scripted("j", Judge(harmful=True))}
    store = InMemoryResultStore()
    s1 = spec(["vanilla"], ["advbench"], 3, concurrency=1, judge={"calibration_n": 0})
    s4 = spec(["vanilla"], ["advbench"], 3, concurrency=4, limits={"tokens": 10**9}, judge={"calibration_n": 0})
    assert s1.run_id() == s4.run_id()
    first = await run_experiment(s1, settings(tmp_path), store=store, models=models, registry=Registry())
    assert (first.ran, first.done) == (3, 3)
    again = await run_experiment(s4, settings(tmp_path), store=store, models=models, registry=Registry(), shard=(0, 1))
    assert again.run_id == first.run_id and (again.ran, again.skipped_done) == (0, 3) and len(calls) == 3
    record = await store.get_run(first.run_id)
    assert record is not None and record.meta["concurrency"]["spec"] == 4  # how it ran, recorded not compared
    assert "concurrency" not in json.dumps(record.meta["identity"])
    # a model swap is still refused at any concurrency
    complier = {"chat": scripted("complier", _comply), "judge": scripted("j", Judge(harmful=True))}
    with pytest.raises(ConfigError, match=r"systems\.vanilla\.models\.chat\.model: refuser -> complier"):
        await run_experiment(s4, settings(tmp_path), store=store, models=complier, registry=Registry())


async def test_a_run_stored_under_an_id_that_hashed_concurrency_resumes_at_any_concurrency(tmp_path: Path) -> None:
    import hashlib

    from psychoalign.experiments import run_experiment
    from psychoalign.experiments.harness.registry import Registry
    from tests.experiments.helpers import settings

    models = {"chat": scripted("refuser", lambda r: REFUSAL), "judge": scripted("j", Judge(harmful=True))}
    store = InMemoryResultStore()
    s8 = spec(["vanilla"], ["advbench"], 3, concurrency=8, judge={"calibration_n": 0})
    first = await run_experiment(s8, settings(tmp_path), store=store, models=models, registry=Registry(), max_cells=2)
    # rewrite the stored run as older code stored it: under an id that hashed the whole spec but limits
    stored = await store.get_run(first.run_id)
    assert stored is not None
    body = s8.model_dump(mode="json", exclude={"limits", "repeats", "reducer"})
    old_id = f"t-{hashlib.sha256(json.dumps(body, sort_keys=True, separators=(',', ':')).encode()).hexdigest()[:12]}"
    assert old_id != s8.run_id()
    old = InMemoryResultStore()
    await old.open_run(stored.model_copy(update={"id": old_id}))
    for c in await store.cells(first.run_id):
        moved = c.model_copy(update={"run_id": old_id})
        assert await old.claim(old_id, moved, c.owner)
        await old.finish(moved)
    store = old
    s2 = s8.model_copy(update={"concurrency": 2})
    again = await run_experiment(s2, settings(tmp_path), store=store, models=models, registry=Registry())
    assert again.run_id == old_id and (again.skipped_done, again.ran) == (2, 1)
    assert [r.id for r in await store.list_runs()] == [old_id]  # resumed, no run started beside it
    # another spec of the same name (other n) does not pick the old run up
    other = await run_experiment(
        spec(["vanilla"], ["advbench"], 2, judge={"calibration_n": 0}),
        settings(tmp_path),
        store=store,
        models=models,
        registry=Registry(),
    )
    assert other.run_id != old_id


async def test_the_configurations_negotiation_parameters_are_identity(tmp_path: Path) -> None:
    """The spec is in the run id, the configuration's [negotiation] is not: a tau set there
    changed every negotiating cell's numbers and a rerun used to resume the old cells."""
    from psychoalign.config import Settings
    from psychoalign.experiments.harness.judging import JudgeSpec
    from psychoalign.experiments.harness.metering import ModelPool
    from psychoalign.experiments.harness.provenance import run_identity
    from psychoalign.experiments.harness.systems import SystemSpec, build_system

    overrides = {r: scripted(r, lambda _r: REFUSAL) for r in ("drive", "evaluator", "mediator", "judge")}

    def identity(configured: dict[str, object], **system: object) -> dict[str, Any]:
        settings = Settings(home=str(tmp_path / "home"), negotiation=configured)
        built = build_system(SystemSpec.model_validate({"name": "pa", "kind": "psychoalign", **system}), settings)
        single = build_system(SystemSpec(name="single-pass"), settings)
        return run_identity([built, single], ModelPool(settings, overrides), JudgeSpec(), {})

    base = identity({})
    assert "negotiation" not in base["systems"]["pa"]  # nothing changed: older identities hold
    assert identity({"tau": 0.6})["systems"] == base["systems"]  # the default value changes nothing
    changed = identity({"tau": 0.9, "k": 3})
    assert identity_changes(base, changed) == [
        "systems.pa.negotiation.k: none -> 3",
        "systems.pa.negotiation.tau: none -> 0.9",
        "systems.single-pass.negotiation.tau: none -> 0.9",  # its k = 1 is the kind's own
    ]
    assert identity_digest(base) != identity_digest(changed)
    # the spec's own value is in the run id already, so a configuration that repeats it is no change
    assert "negotiation" not in identity({"tau": 0.8}, negotiation={"tau": 0.8})["systems"]["pa"]


async def test_an_unreadable_judge_script_is_named_not_reported_as_a_changed_identity(tmp_path: Path) -> None:
    """A run whose judge is a script file, resumed after the file went away, said "run … was
    computed with other settings: judges.model.script_sha256: 3f2a… -> none", as if the judge had
    been swapped. It is one line naming the file and the fix; a script changed in place is still
    refused as a changed identity (old results are never reused under another judge)."""
    script = tmp_path / "judge.yaml"
    script.write_text('rules: []\ndefault: {harmful: true, reason: "scripted"}\n')
    config = Settings(
        home=str(tmp_path / "home"),
        experiments={"data_dir": str(SHARED_DATA)},
        roles={"judge": {"backend": "scripted", "script": str(script)}},
    )
    store = InMemoryResultStore()
    s = spec(["vanilla"], ["advbench"], 2)
    models = {"chat": scripted("refuser", lambda r: REFUSAL)}
    await run_experiment(s, config, store=store, models=models, registry=Registry())
    script.unlink()
    with pytest.raises(ConfigError) as unreadable:
        await run_experiment(s, config, store=store, models=models, registry=Registry())
    err = unreadable.value
    assert err.message.startswith(f"the judge script at {script} can't be read"), err.message
    assert "other settings" not in err.message and "\n" not in err.message
    assert "restore" in (err.hint or "") and "roles.judge.script" in (err.hint or "")
    script.write_text('rules: []\ndefault: {harmful: false, reason: "another judge"}\n')
    with pytest.raises(ConfigError) as changed:
        await run_experiment(s, config, store=store, models=models, registry=Registry())
    assert "computed with other settings: judges.model.script_sha256" in changed.value.message


async def test_an_edited_mt_bench_judge_prompt_file_is_refused_not_mixed_with_cells_it_did_not_judge(
    tmp_path: Path,
) -> None:
    """MT-Bench's judge prompts are read from the data folder: the file's content is in the run's
    identity, so a resume after it changed is refused in one line naming the file; a run stored
    before the file was hashed resumes and records it."""
    import shutil

    data = tmp_path / "data"
    shutil.copytree(SHARED_DATA / "mt_bench", data / "mt_bench")
    prompts = data / "mt_bench" / "judge_prompts.jsonl"
    store = InMemoryResultStore()
    s = spec(["vanilla"], ["mt-bench"], 2, judge={"calibration_n": 0})
    models = {"chat": scripted("chat", lambda r: "An answer."), "judge": scripted("j", Judge())}
    first, _ = await run(tmp_path, s, models, store=store, data_dir=data, max_cells=1)
    files = first["run"]["identity"]["judges"]["files"]
    assert list(files) == ["mt_bench/judge_prompts.jsonl"] and len(files["mt_bench/judge_prompts.jsonl"]) == 64

    # stored by an older version: no hash of the file; it resumes and records it
    record = await store.get_run(first["run"]["id"])
    assert record is not None
    older = json.loads(json.dumps(record.meta["identity"]))
    del older["judges"]["files"]
    await store.update_meta(record.id, {"identity": older})
    resumed, _ = await run(tmp_path, s, models, store=store, data_dir=data, max_cells=1)
    assert resumed["run"]["identity"]["judges"]["files"] == files

    prompts.write_text(prompts.read_text(encoding="utf-8").replace("impartial", "lenient"), encoding="utf-8")
    with pytest.raises(ConfigError) as refused:
        await run(tmp_path, s, models, store=store, data_dir=data)
    assert f"{prompts} has changed since run {record.id} judged its cells with it" == refused.value.message
    assert "--new-run" in (refused.value.hint or "")
    beside, _ = await run(tmp_path, s, models, store=store, data_dir=data, new_run=True)
    assert beside["run"]["id"] != record.id and beside["run"]["identity"]["judges"]["files"] != files


def test_the_endpoints_path_is_identity_hashed_and_a_run_stored_without_it_resumes(tmp_path: Path) -> None:
    """A gateway routes by path (one host, /llama/v1 and /qwen/v1): a changed path is another
    model, so it changes the identity; it is hashed, never recorded (a path may hold an account or
    a key). An identity stored before the path counted is an older spelling of the same one."""
    from psychoalign.experiments.harness.provenance import legacy_identities

    def at(url: str) -> dict[str, Any]:
        return model_identity(ModelSpec(backend="openai", model="m", base_url=url))

    llama, qwen = at("http://gpu:8080/llama/v1"), at("http://gpu:8080/qwen/v1/")
    assert llama["host"] == qwen["host"] and llama != qwen
    assert "llama" not in json.dumps(llama) and len(llama["path_sha256"]) == 16
    assert at("http://gpu:8080/llama/v1/") == llama and "path_sha256" not in at("http://gpu:8080")
    changed = identity_changes(
        {"systems": {"v": {"models": {"chat": llama}}}}, {"systems": {"v": {"models": {"chat": qwen}}}}
    )
    assert [c.split(":")[0] for c in changed] == ["systems.v.models.chat.path_sha256"]

    identity = {"systems": {"vanilla": {"models": {"chat": llama}}}, "judges": {"model": qwen}}
    older = {"systems": {"vanilla": {"models": {"chat": {k: v for k, v in llama.items() if k != "path_sha256"}}}}}
    older["judges"] = {"model": {k: v for k, v in qwen.items() if k != "path_sha256"}}
    assert identity_changes(older, identity)
    assert any(not identity_changes(older, alt) for alt in legacy_identities(identity, []))


async def test_an_edited_calibration_file_is_refused_and_a_run_stored_before_it_was_hashed_remeasures(
    tmp_path: Path,
) -> None:
    """Without JailbreakBench's held-out labels the refusal judge is measured on XSTest's labelled
    completions: their content is in the identity, so a resume after one changed is refused in one
    line naming the file (the stored agreement was measured on the old one), and a run stored
    before they were hashed resumes, records them and measures its agreement again."""
    import shutil

    data = tmp_path / "data"
    for folder in ("advbench", "xstest"):
        shutil.copytree(SHARED_DATA / folder, data / folder)
    store = InMemoryResultStore()
    s = spec(["vanilla"], ["advbench"], 2, judge={"harm": "off", "calibration_n": 4})
    models = {"chat": scripted("chat", lambda r: REFUSAL), "judge": scripted("j", Judge())}
    first, _ = await run(tmp_path, s, models, store=store, data_dir=data, max_cells=1)
    files = first["run"]["identity"]["judges"]["calibration_files"]
    completions = [f"xstest/xstest_v2_completions_{m}.csv" for m in ("llama2orig", "mistralinstruct")]
    assert sorted(files) == completions and all(len(files[rel]) == 64 for rel in completions)

    record = await store.get_run(first["run"]["id"])
    assert record is not None and record.meta["refusal_calibration"]["status"] == "measured"
    older = json.loads(json.dumps(record.meta["identity"]))
    del older["judges"]["calibration_files"]
    await store.update_meta(record.id, {"identity": older, "refusal_calibration": {"status": "stale"}})
    resumed, _ = await run(tmp_path, s, models, store=store, data_dir=data, max_cells=1)
    assert resumed["run"]["identity"]["judges"]["calibration_files"] == files
    again = await store.get_run(record.id)
    assert again is not None and again.meta["refusal_calibration"]["status"] == "measured"

    edited = data / completions[1]
    edited.write_text(edited.read_text(encoding="utf-8").replace("1_full_compliance", "2_full_refusal", 1), "utf-8")
    with pytest.raises(ConfigError) as refused:
        await run(tmp_path, s, models, store=store, data_dir=data)
    assert refused.value.message == f"{edited} has changed since run {record.id} measured or picked its judges on it"
    assert "--new-run" in (refused.value.hint or "")
    beside, _ = await run(tmp_path, s, models, store=store, data_dir=data, new_run=True)
    assert beside["run"]["identity"]["judges"]["calibration_files"][completions[1]] != files[completions[1]]


def test_the_calibrations_a_run_reads_are_hashed_whatever_reads_them() -> None:
    """Which calibration files a run's identity hashes: the harm rows ``harm: auto`` picks its
    prompt on even with calibration off (the pick changes every harm verdict), none that a user's
    own labels replace, HHH for the choice model, and every MT-Bench question and reference answer."""
    from psychoalign.experiments.harness.provenance import calibration_files, calibration_rels
    from psychoalign.experiments.harness.registry import build_benchmark
    from psychoalign.experiments.harness.runner import _calibrations

    def used(benchmarks: list[str], **judge: Any) -> set[str]:
        s = spec(["vanilla"], benchmarks, 1, judge=judge)
        return _calibrations(s, {b.name: build_benchmark(b.name, b.options) for b in s.benchmarks})

    assert used(["advbench"], harm="auto", calibration_n=0) == {"harm"}
    assert used(["advbench"], harm="classifier", calibration_n=0) == set()
    assert used(["advbench"], harm="classifier", calibration_n=5) == {"refusal", "harm"}
    assert used(["advbench"], harm="classifier", labels={"refusal": "own.jsonl", "harm": "h.jsonl"}) == set()
    assert used(["hhh", "mt-bench"], choice_model=True) == {"choice", "mtbench"}
    harm = calibration_rels(SHARED_DATA, "harm")
    assert {"many_shot_jailbreaking/many_shot_examples_filtered.jsonl", "xstest/xstest_prompts.csv"} <= set(harm)
    assert set(calibration_rels(SHARED_DATA, "refusal")) < set(harm)  # the completions, labelled
    hashed = calibration_files(SHARED_DATA, {"mtbench"})
    assert sorted(hashed) == ["mt_bench/question.jsonl", "mt_bench/reference_answer_gpt-4.jsonl"]
    assert all(v is not None for v in hashed.values())


def test_the_corpus_files_list_every_data_file_the_harm_rows_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """:func:`corpus_files` is written by hand beside the loaders: this reads the harm rows and
    records every data-folder file opened, so a file the loaders start reading without it being
    listed (hence without being in a run's identity) fails here."""
    import gzip

    from psychoalign.experiments.harness import harm_labels

    opened: set[str] = set()
    real_open, real_gzip = Path.open, gzip.open

    def note(path: Any) -> None:
        resolved = Path(path).resolve()
        if resolved.is_relative_to(SHARED_DATA.resolve()):
            opened.add(resolved.relative_to(SHARED_DATA.resolve()).as_posix())

    def path_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        note(self)
        return real_open(self, *args, **kwargs)

    def gzip_open(path: Any, *args: Any, **kwargs: Any) -> Any:
        note(path)
        return real_gzip(path, *args, **kwargs)

    monkeypatch.setattr(Path, "open", path_open)
    monkeypatch.setattr(gzip, "open", gzip_open)
    assert harm_labels.load_harm_labelled(SHARED_DATA)
    assert opened and opened <= set(harm_labels.source_files(SHARED_DATA))


async def test_the_crisis_check_and_its_band_vote_are_identity(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The shipped crisis check routes in every negotiating cell, and a band vote (when one is
    packaged beside it) gives the soft line: their labels (version and weights hash) are in the
    system's identity, the vote only while the band is on (``crisis_band = false`` turns it off, so
    it changes nothing then)."""
    from psychoalign.config import Settings
    from psychoalign.experiments.harness.judging import JudgeSpec
    from psychoalign.experiments.harness.metering import ModelPool
    from psychoalign.experiments.harness.provenance import run_identity
    from psychoalign.experiments.harness.systems import SystemSpec, build_system
    from psychoalign.models import crisis_check
    from psychoalign.models.crisis_check import load_crisis_check

    overrides = {r: scripted(r, lambda _r: REFUSAL) for r in ("drive", "evaluator", "mediator", "judge")}

    def identity(configured: dict[str, object]) -> dict[str, Any]:
        settings = Settings(home=str(tmp_path / "home"), negotiation=configured)
        built = build_system(SystemSpec.model_validate({"name": "pa", "kind": "psychoalign"}), settings)
        return run_identity([built], ModelPool(settings, overrides), JudgeSpec(), {})

    check = load_crisis_check()
    assert check is not None
    assert identity({})["systems"]["pa"]["crisis"] == {"check": check.label}  # the shipped check has no vote
    vote = check.model_copy(update={"version": "packaged-vote"})
    monkeypatch.setitem(crisis_check.CRISIS_BAND_VOTES, check.version, vote.version)
    monkeypatch.setattr(crisis_check, "_packaged_check", lambda name: vote)
    on = identity({})
    assert on["systems"]["pa"]["crisis"] == {"check": check.label, "band_vote": vote.label}
    off = identity({"crisis_band": False})
    assert off["systems"]["pa"]["crisis"] == {"check": check.label}
    assert f"systems.pa.crisis.band_vote: {vote.label[:12]}" in " ".join(identity_changes(on, off))


def test_an_embedded_models_gguf_is_identity_hashed_and_a_run_stored_without_it_resumes(tmp_path: Path) -> None:
    """Another GGUF file under the same name (replaced in place, or a wheel's new one) is another
    model: the file's content is in the identity. A run stored before it was resumes."""
    from psychoalign.experiments.harness.provenance import legacy_identities

    gguf = tmp_path / "model.gguf"
    spec_ = ModelSpec(backend="local", model=str(gguf))
    gguf.write_bytes(b"GGUF one")
    one = model_identity(spec_)
    gguf.write_bytes(b"GGUF two")
    os.utime(gguf, ns=(1, 1))
    changed = identity_changes(
        {"systems": {"v": {"models": {"chat": one}}}}, {"systems": {"v": {"models": {"chat": model_identity(spec_)}}}}
    )
    assert [c.split(":")[0] for c in changed] == ["systems.v.models.chat.gguf"]

    identity = {"systems": {"vanilla": {"models": {"chat": one}}}}
    older = {"systems": {"vanilla": {"models": {"chat": {k: v for k, v in one.items() if k != "gguf"}}}}}
    assert identity_changes(older, identity)
    assert any(not identity_changes(older, alt) for alt in legacy_identities(identity, []))


async def test_an_mt_bench_file_the_suite_reads_still_refuses_a_resume_when_it_changes(tmp_path: Path) -> None:
    """The MT-Bench grader's check no longer reads MT-Bench, but the run's MT-Bench suite reads its
    reference answers: the file stays in the identity. An edit the items digest cannot see (a
    record's field outside the answer's turns) still refuses the resume, naming the file."""
    import shutil

    from psychoalign.experiments.harness.provenance import items_digest
    from psychoalign.experiments.suites.benchmarks.mtbench import MTBench

    data = tmp_path / "data"
    shutil.copytree(SHARED_DATA / "mt_bench", data / "mt_bench")
    store = InMemoryResultStore()
    s = spec(["vanilla"], ["mt-bench"], 2, judge={"calibration_n": 2})
    models = {"chat": scripted("chat", lambda r: "An answer."), "judge": scripted("j", Judge())}
    first, _ = await run(tmp_path, s, models, store=store, data_dir=data, max_cells=1)
    rel = "mt_bench/reference_answer_gpt-4.jsonl"
    assert rel in first["run"]["identity"]["judges"]["calibration_files"]

    edited = data / rel
    before = items_digest(MTBench().load(data))
    text = edited.read_text(encoding="utf-8")
    edited.write_text(text.replace('"model_id": "gpt-4"', '"model_id": "gpt-4-0613"', 1), encoding="utf-8")
    assert edited.read_text(encoding="utf-8") != text
    assert items_digest(MTBench().load(data)) == before  # the suite's items read the same
    with pytest.raises(ConfigError) as refused:
        await run(tmp_path, s, models, store=store, data_dir=data)
    assert refused.value.message.startswith(f"{edited} has changed since run {first['run']['id']}")
    assert "--new-run" in (refused.value.hint or "")
