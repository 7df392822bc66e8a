"""A run's identity stays put when nothing that changes its numbers changed, and moves when
anything did: the framework's hash ignores a field the format gained with a default (runs stored
under the older hash still resume), and the held-out labels the judges are measured on are
hashed, so a relabelled file never leaves the stored agreement in place."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from psychoalign.errors import ConfigError
from psychoalign.experiments import run_experiment
from psychoalign.experiments.harness.provenance import HELD_OUT_LABELS, framework_identity
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.store import InMemoryResultStore
from psychoalign.frameworks import Framework, load_framework
from tests.experiments.helpers import REFUSAL, Judge, OwnXSTest, scripted, settings, spec
from tests.scenario import World, proposals


def _old_sha(dumped: Any) -> str:
    """The framework hash identities were stored with before: the whole dump, keys sorted."""
    return hashlib.sha256(json.dumps(dumped, sort_keys=True).encode()).hexdigest()


def _without(dumped: Any, names: set[str]) -> Any:
    """``dumped`` without the keys ``names`` wherever they hold their default (None or empty): the
    dump of a framework format that did not have those fields yet."""
    if isinstance(dumped, dict):
        return {k: _without(v, names) for k, v in dumped.items() if not (k in names and v in (None, [], ()))}
    if isinstance(dumped, list):
        return [_without(v, names) for v in dumped]
    return dumped


class _Grown(Framework):
    """The framework format with one more field, at a default (as a release may add one)."""

    escalation_contact: str = ""


def test_framework_identity_ignores_a_new_default_field_and_follows_every_set_value() -> None:
    fw = load_framework("general")
    grown = _Grown.model_validate(fw.model_dump())
    # the old scheme moved every identity when the format grew
    assert _old_sha(grown.model_dump(mode="json")) != _old_sha(fw.model_dump(mode="json"))
    assert framework_identity(grown) == framework_identity(fw)
    base = framework_identity(fw)["sha256"]
    assert framework_identity(_Grown.model_validate({**fw.model_dump(), "escalation_contact": "x"}))["sha256"] != base

    data = fw.model_dump(mode="json")
    rule = data["universal"][0]
    edits: list[dict[str, Any]] = [
        {"description": data["description"] + "."},
        {"deployment_context": "a school"},
        {"version": "9.9"},
        {"universal": [{**rule, "text": rule["text"] + " Always."}, *data["universal"][1:]]},
        {"universal": [{**rule, "check": {"patterns": ["\\bnew\\b"]}}, *data["universal"][1:]]},
        {"safe_channels": [{**c, "message": c["message"] + " Now."} for c in data["safe_channels"]]},
        {"contextual": [*data["contextual"], {"id": "extra", "text": "Be brief."}]},
    ]
    seen = {base}
    for edit in (e for e in edits if e):
        got = framework_identity(Framework.model_validate({**data, **edit}))["sha256"]
        assert got not in seen, edit
        seen.add(got)


def _plain_framework() -> Framework:
    """The general framework without semantic checks and dose limits (fields the format gained
    later, so a run stored before them hashed a dump without them)."""
    data = load_framework("general").model_dump(mode="json")
    for layer in ("universal", "contextual", "aspirational"):
        for rule in data[layer]:
            rule["semantic_check"] = None
            for key in ("check", "request_check"):
                if rule[key] is not None:
                    rule[key]["doses"] = []
    return Framework.model_validate(data)


def _write_framework(path: Path, fw: Framework) -> None:
    path.write_text(yaml.safe_dump(fw.model_dump(mode="json"), sort_keys=False, allow_unicode=True), encoding="utf-8")


@pytest.mark.parametrize("dropped", [set(), {"doses"}, {"semantic_check", "doses"}])
async def test_a_run_stored_under_the_old_framework_hash_resumes_and_a_changed_framework_is_refused(
    tmp_path: Path, dropped: set[str]
) -> None:
    """``dropped``: fields the framework format had not yet when the run was stored."""
    fw_path = tmp_path / "fw.yaml"
    fw = _plain_framework()
    _write_framework(fw_path, fw)
    world = World([proposals(("A careful, balanced answer.", 0.9))])
    models = {**world.models(), "judge": scripted("j", Judge())}
    s = spec([{"name": "pa", "kind": "psychoalign", "framework": str(fw_path)}], ["dilemmas"], 2)
    store = InMemoryResultStore()
    first = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry(), max_cells=1)
    assert (first.ran, first.done) == (1, 1)
    record = await store.get_run(first.run_id)
    assert record is not None
    current = record.meta["identity"]
    assert current["systems"]["pa"]["framework"]["sha256"] == fw.sha256
    # the stored run as older code wrote it: the framework hashed by its whole dump
    old = json.loads(json.dumps(current))
    old_sha = _old_sha(_without(fw.model_dump(mode="json"), dropped))
    assert old_sha != fw.sha256
    old["systems"]["pa"]["framework"]["sha256"] = old_sha
    await store.set_meta(first.run_id, "identity", old)

    again = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry())
    assert again.run_id == first.run_id and (again.skipped_done, again.ran) == (1, 1)
    record = await store.get_run(first.run_id)
    assert record is not None and record.meta["identity"]["systems"]["pa"]["framework"]["sha256"] == fw.sha256

    # a value the user set changed: refused, whichever way the stored identity spelled the hash
    await store.set_meta(first.run_id, "identity", old)
    _write_framework(fw_path, fw.model_copy(update={"description": fw.description + " Edited."}))
    with pytest.raises(ConfigError, match=r"systems\.pa\.framework\.sha256"):
        await run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry())


async def test_new_run_beside_a_run_stored_under_the_old_framework_hash_resumes_it(tmp_path: Path) -> None:
    fw_path = tmp_path / "fw.yaml"
    _write_framework(fw_path, _plain_framework())
    world = World([proposals(("A careful, balanced answer.", 0.9))])
    models = {**world.models(), "judge": scripted("j", Judge())}
    s = spec([{"name": "pa", "kind": "psychoalign", "framework": str(fw_path)}], ["dilemmas"], 2)
    store = InMemoryResultStore()
    kw: dict[str, Any] = {"store": store, "models": models, "registry": Registry(), "new_run": True}
    first = await run_experiment(s, settings(tmp_path), max_cells=1, **kw)
    record = await store.get_run(first.run_id)
    assert record is not None
    from psychoalign.experiments.harness.provenance import identity_digest

    # move it to the id older code gave it: the suffix hashes the identity with the old framework hash
    old = json.loads(json.dumps(record.meta["identity"]))
    old["systems"]["pa"]["framework"]["sha256"] = _old_sha(
        _without(_plain_framework().model_dump(mode="json"), {"doses"})
    )
    old_id = f"{s.run_id()}-{identity_digest(old)[:8]}"
    assert old_id != first.run_id
    moved = InMemoryResultStore()
    await moved.open_run(record.model_copy(update={"id": old_id, "meta": {**record.meta, "identity": old}}))
    for c in await store.cells(first.run_id):
        copy = c.model_copy(update={"run_id": old_id})
        assert await moved.claim(old_id, copy, c.owner)
        await moved.finish(copy)
    again = await run_experiment(s, settings(tmp_path), **{**kw, "store": moved})
    assert again.run_id == old_id and (again.skipped_done, again.ran) == (1, 1)
    assert [r.id for r in await moved.list_runs()] == [old_id]  # resumed, no run started beside it


# -- held-out labels ---------------------------------------------------------------------------


def _registry() -> Registry:
    r = Registry()
    r.add_benchmark(OwnXSTest)
    return r


_COLUMNS = ["", "goal", "prompt", "target_response", "human1", "human2", "human3", "human_majority"]
_JUDGES = ["TDC", "GCG", "BERT", "llama_guard", "gpt_4_turbo", "gpt_4"]


def _write_labels(data: Path, jailbroken: list[bool]) -> Path:
    """A judge comparison file (JailbreakBench's columns): a refusal and a compliance per pair of rows."""
    path = data / HELD_OUT_LABELS[0]
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", newline="", encoding="utf-8") as fh:
        out = csv.writer(fh)
        out.writerow(_COLUMNS + _JUDGES)
        for i, broken in enumerate(jailbroken):
            response = "Sure, here is how: first, gather the parts." if i % 2 else REFUSAL
            label = str(int(broken))
            out.writerow([i, f"goal {i}", f"prompt {i}", response, label, label, label, label] + ["0"] * 6)
    return path


async def test_changed_held_out_labels_refuse_the_resume_naming_the_file_and_the_fix(tmp_path: Path) -> None:
    data = tmp_path / "data"
    labels = _write_labels(data, [False, True, False, True])  # the rules agree with every label
    models = {"chat": scripted("refuser", lambda r: REFUSAL), "judge": scripted("j", Judge())}
    s = spec(["vanilla"], ["own-xstest"], 2, judge={"calibration_n": 4})
    store = InMemoryResultStore()
    kw: dict[str, Any] = {"store": store, "models": models, "registry": _registry(), "data_dir": data}
    first = await run_experiment(s, settings(tmp_path), **kw)
    record = await store.get_run(first.run_id)
    assert record is not None
    digest = hashlib.sha256(labels.read_bytes()).hexdigest()
    assert record.meta["identity"]["judges"]["held_out_labels"] == {HELD_OUT_LABELS[0]: digest}
    assert record.meta["refusal_calibration"]["agreement"] == 1.0

    # unchanged: resumes, nothing run again
    same = await run_experiment(s, settings(tmp_path), **kw)
    assert same.run_id == first.run_id and same.ran == 0

    _write_labels(data, [True, True, False, True])  # one refusal relabelled jailbroken
    with pytest.raises(ConfigError) as refused:
        await run_experiment(s, settings(tmp_path), **kw)
    message, hint = refused.value.message, refused.value.hint or ""
    assert message == f"{labels} has changed since run {first.run_id} measured its judges on it"
    assert "\n" not in message and "restore the file" in hint and "--new-run" in hint

    beside = await run_experiment(s, settings(tmp_path), new_run=True, **kw)
    assert beside.run_id != first.run_id and beside.ran == 4
    record = await store.get_run(beside.run_id)
    assert record is not None and record.meta["refusal_calibration"]["agreement"] == 0.75  # the new labels

    labels.unlink()
    with pytest.raises(ConfigError, match=r"classifier_comparison\.csv is missing since run"):
        await run_experiment(s, settings(tmp_path), **kw)


async def test_a_run_stored_without_held_out_labels_resumes_and_measures_its_judges_again(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _write_labels(data, [False, True, False, True])
    models = {"chat": scripted("refuser", lambda r: REFUSAL), "judge": scripted("j", Judge())}
    s = spec(["vanilla"], ["own-xstest"], 2, judge={"calibration_n": 4})
    store = InMemoryResultStore()
    kw: dict[str, Any] = {"store": store, "models": models, "registry": _registry(), "data_dir": data}
    first = await run_experiment(s, settings(tmp_path), max_cells=2, **kw)
    record = await store.get_run(first.run_id)
    assert record is not None
    # as older code stored it: no held-out labels in the identity, an agreement of unknown labels
    old = json.loads(json.dumps(record.meta["identity"]))
    del old["judges"]["held_out_labels"]
    stale = {"status": "measured", "agreement": 0.123, "n": 4, "reference": "older labels"}
    await store.update_meta(first.run_id, {"identity": old, "refusal_calibration": stale})
    again = await run_experiment(s, settings(tmp_path), **kw)
    assert again.run_id == first.run_id and (again.skipped_done, again.ran) == (2, 2)
    record = await store.get_run(first.run_id)
    assert record is not None
    assert record.meta["identity"]["judges"]["held_out_labels"][HELD_OUT_LABELS[0]] is not None
    assert record.meta["refusal_calibration"]["agreement"] == 1.0  # measured again, on the labels named


async def test_a_run_that_measures_no_judge_on_held_out_labels_does_not_hash_them(tmp_path: Path) -> None:
    data = tmp_path / "data"
    _write_labels(data, [False, True])
    models = {"chat": scripted("refuser", lambda r: REFUSAL), "judge": scripted("j", Judge())}
    s = spec(["vanilla"], ["own-xstest"], 2, judge={"calibration_n": 0})
    store = InMemoryResultStore()
    first = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=_registry(), data_dir=data)
    record = await store.get_run(first.run_id)
    assert record is not None and "held_out_labels" not in record.meta["identity"]["judges"]
    _write_labels(data, [True, True])  # changes nothing this run read
    again = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=_registry(), data_dir=data)
    assert again.run_id == first.run_id and again.ran == 0
