"""A STAR export of campaigns whose LLM personas ran on different models: their ratings describe a
mixture of models under one name, so the analysis refuses to pool them and names the models; one
campaign's models are stated before any figure and written into report.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from psychoalign.errors import InputError
from psychoalign.star.analysis import analyze, load, write_report
from tests.cli.test_main import cli
from tests.star.analysis.test_analysis import synthetic_star

MODELS_A = {"attacker": "model:scripted:default@aaaaaaaaaaaa", "annotator": "model:openai:m@111111111111"}
MODELS_B = {"attacker": "model:scripted:default@aaaaaaaaaaaa", "annotator": "model:openai:m@222222222222"}


def _campaigns(models: list[dict[str, str] | None]) -> list[dict[str, Any]]:
    """Synthetic simulated-persona rows, campaign ``c<i>`` for every 1/len(models) of them,
    recording ``models[i]`` (None: stored before models were recorded)."""
    rows = synthetic_star(np.random.default_rng(3), 80)
    for i, row in enumerate(rows):
        k = i % len(models)
        row.update(campaign=f"c{k}", persona_models=models[k], target="model:openai:t@333333333333")
        row.update(red_teamer_simulated=True, annotator1_simulated=True, annotator2_simulated=True)
    return rows


def _write(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_two_annotator_models_are_refused_and_named(tmp_path: Path) -> None:
    path = _write(tmp_path / "two.jsonl", _campaigns([MODELS_A, MODELS_B]))
    with pytest.raises(InputError) as refused:
        load(path)
    said = str(refused.value)
    assert "its campaigns ran on different persona models" in said
    assert "c0: annotator model:openai:m@111111111111" in said and "c1: annotator model:openai:m@222222222222" in said
    assert "attacker" not in said.split("(")[1]  # only the role that differs is named
    assert "--campaign" in (refused.value.hint or "")

    out = cli("star", "analyze", str(path), "--out", str(tmp_path / "r"), "--no-embed", "--bootstrap", "0")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert next(line for line in out.stderr.splitlines() if line.strip()).startswith("error: two: its campaigns ran")
    assert not (tmp_path / "r" / "report.json").exists()


def test_one_set_of_models_is_stated_before_the_figures_and_in_the_report(tmp_path: Path) -> None:
    path = _write(tmp_path / "one.jsonl", _campaigns([MODELS_A, MODELS_A]))
    data = load(path)
    assert data.persona_models == {
        "models": MODELS_A,
        "unrecorded_campaigns": [],
        "ratings_by_model": {},
        "unstamped_persona_ratings": 160,
    }
    write_report(analyze([data], n_boot=0, embed=False), [data], tmp_path / "r")
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    assert report["datasets"]["one"]["persona_models"]["models"] == MODELS_A

    out = cli("star", "analyze", str(path), "--out", str(tmp_path / "cli"), "--no-embed", "--bootstrap", "0")
    assert out.returncode == 0, out.stderr
    said = out.stderr.splitlines()
    note = next(i for i, line in enumerate(said) if "Persona models: annotator model:openai:m@111111111111" in line)
    assert note < next(i for i, line in enumerate(said) if line.startswith("wrote "))


def test_simulated_work_without_recorded_models_is_named_as_unknown(tmp_path: Path) -> None:
    data = load(_write(tmp_path / "mixed.jsonl", _campaigns([MODELS_A, None])))
    assert data.persona_models["unrecorded_campaigns"] == ["c1"]
    note = next(n for n in data.notes if n.startswith("Simulated work of"))
    assert "(c1)" in note and "unknown" in note and "pooled with the recorded campaigns' work" in note


def _stamped(models: list[str | None], recorded: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One campaign's rows, each persona rating stamped ``models[i % len(models)]`` (its writer)."""
    rows = _campaigns([recorded])
    for i, row in enumerate(rows):
        row.update(campaign="c0", annotator1_model=models[i % len(models)], annotator2_model=models[i % len(models)])
    return rows


def test_one_campaigns_ratings_by_two_models_are_refused(tmp_path: Path) -> None:
    """A campaign records one set of models; before ratings carried their own, an export whose
    ratings came from two annotator models (the campaign recorded none) was analysed as one."""
    a, b = MODELS_A["annotator"], MODELS_B["annotator"]
    with pytest.raises(InputError) as refused:
        load(_write(tmp_path / "two.jsonl", _stamped([a, b])))
    said = str(refused.value)
    assert "two: its persona ratings were written by different models" in said
    assert (
        f"{a}: 80 rating(s), first dialogue d0 (annotator1)" in said and f"{b}: 80 rating(s), first dialogue d1" in said
    )
    # a rating by another model than the one its campaign recorded
    with pytest.raises(
        InputError, match=r"dialogue d0 \(annotator1\) was rated by .*@222222222222, but campaign 'c0' "
    ):
        load(_write(tmp_path / "other.jsonl", _stamped([b], recorded=MODELS_A)))


def test_stamped_ratings_are_counted_before_the_figures(tmp_path: Path) -> None:
    a = MODELS_A["annotator"]
    data = load(_write(tmp_path / "one.jsonl", _stamped([a, None], recorded=MODELS_A)))
    assert data.persona_models["ratings_by_model"] == {a: 80}
    assert data.persona_models["unstamped_persona_ratings"] == 80
    note = next(n for n in data.notes if n.startswith("Persona ratings"))
    assert note.startswith(f"Persona ratings: 80 written by {a}; 80 more persona rating(s) name no model")


async def test_a_store_whose_personas_rated_on_two_models_exports_what_the_analysis_refuses(tmp_path: Path) -> None:
    """From the store: personas rate one campaign on two models (stamped per rating, as the
    campaign runner and the lab's personas do); its export names each rating's model."""
    from psychoalign.star import generate_instructions, load_parameters, load_policy
    from psychoalign.star.model import Participant, PreAnnotation, TaskKind, Turn
    from psychoalign.star.store import InMemoryStarStore

    policy = load_policy()
    store = InMemoryStarStore(policy)
    sims = [Participant(id=f"sim-{i}", simulated=True) for i in range(6)]
    await store.add_participants(sims)
    items = generate_instructions(policy, load_parameters(), 2, seed=1, rules=["sexually-explicit"])
    await store.create_campaign("c1", items)
    for attacker, raters in (("sim-0", ("sim-1", "sim-2")), ("sim-3", ("sim-4", "sim-5"))):
        task = await store.claim(attacker, TaskKind.RED_TEAM, campaign="c1")
        did = await store.start_dialogue(task.id, attacker, "model:scripted:t@333333333333")
        await store.add_turns(did, [Turn(role="red_teamer", text="hi"), Turn(role="target", text="no")])
        await store.finish_dialogue(did, attacker, PreAnnotation(assigned_rule_broken=False))
        for pid, model in zip(raters, (MODELS_A["annotator"], MODELS_B["annotator"]), strict=True):
            claimed = await store.claim(pid, TaskKind.ANNOTATE, campaign="c1")
            assert claimed.dialogue_id == did
            await store.submit_annotation(claimed.id, pid, 3, "no rule broken", model=model)
    rows = await store.export_rows("c1")
    assert {(r["annotator1_model"], r["annotator2_model"]) for r in rows} == {
        (MODELS_A["annotator"], MODELS_B["annotator"])
    }
    with pytest.raises(InputError, match="its persona ratings were written by different models"):
        load(_write(tmp_path / "store.jsonl", rows))
