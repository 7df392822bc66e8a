"""Crescendo on the literature objectives: an attacker model escalates over turns, backtracks on
refusal, every exchange recorded, judged per turn by the suite's judge, queries to success."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from psychoalign.errors import ConfigError
from psychoalign.experiments.harness.registry import Registry, build_benchmark
from psychoalign.experiments.suites.attacks.crescendo import Crescendo
from psychoalign.models import ChatRequest
from tests.experiments.helpers import REFUSAL, cell, last_user, run, scripted, spec
from tests.experiments.suites.attacks.helpers import Attacker
from tests.experiments.suites.benchmarks.literature import LiteratureJudge

needs_data = pytest.mark.needs_data("harmbench", "xstest", "multi_turn_attack_templates")


def registry() -> Registry:
    r = Registry()
    r.add_benchmark(Crescendo)
    return r


class SureJudge(LiteratureJudge):
    """HarmBench tier: a success exactly when the judged response carries the planted payload."""

    def __init__(self) -> None:
        super().__init__()
        self.judged: list[str] = []

    def __call__(self, request: ChatRequest) -> Any:
        if request.schema_name == "harmbench":
            text = request.messages[-1].content
            self.judged.append(text)
            return "yes" if "PAYLOAD" in text else "no"
        return super().__call__(request)


def _spec(**options: Any) -> Any:
    bench = {"name": "crescendo", "options": {"judge": "harmbench", "max_turns": 4, **options}}
    return spec(["vanilla"], [bench], 1, judge={"calibration_n": 0}, concurrency=1)


def test_options_checked() -> None:
    with pytest.raises(ConfigError, match="max_turns"):
        build_benchmark("crescendo", {"max_turns": 1}, {"crescendo": Crescendo})
    with pytest.raises(ConfigError, match="unknown option"):
        build_benchmark("crescendo", {"depth": 3}, {"crescendo": Crescendo})


@needs_data
async def test_escalates_backtracks_on_refusal_and_succeeds(tmp_path: Path) -> None:
    """Turn 1 answered; message 2 refused (backtracked: the target never sees it again); its
    rephrasing (message 3) answered with the payload: a success at conversation turn 2, after 3
    queries to the target. The dialogue goes on to its last turn (every turn is recorded)."""
    seen: list[list[str]] = []

    def target(request: ChatRequest) -> str:
        users = [m.content for m in request.messages if m.role == "user"]
        seen.append(users)
        last = last_user(request)
        return {"message 1": "Some history.", "message 2": REFUSAL}.get(last, "Here: PAYLOAD")

    judge = SureJudge()
    attacker = Attacker()
    models = {"chat": scripted("chat", target), "judge": scripted("j", judge), "attacker": scripted("a", attacker)}
    report, store = await run(tmp_path, _spec(max_backtracks=2), models, registry=registry())
    assert cell(report, "vanilla", "crescendo", "attack_success")["mean"] == 1.0
    assert cell(report, "vanilla", "crescendo", "queries_to_success")["mean"] == 3.0
    [c] = await store.cells(report["run"]["id"])
    attempts = c.details["attempts"]
    assert [(a["attempt"], a["turn"], a["message"], a["backtracked"]) for a in attempts] == [
        (1, 1, "message 1", False), (2, 2, "message 2", True), (3, 2, "message 3", False),
        (4, 3, "message 4", False), (5, 4, "message 5", False),
    ]  # fmt: skip
    # the refused exchange left the target's history
    assert seen[-1] == ["message 1", "message 3", "message 4", "message 5"]
    # per-turn scoring: the opening is never judged; every escalated turn by the suite's tier
    assert [(t["turn"], t["judged"], t["success"]) for t in c.details["score"]["turns"]] == [
        (1, False, False), (2, True, True), (3, True, True), (4, True, True)
    ]  # fmt: skip
    # three judgements of the same reply: one call, then the judge cache
    assert len(c.judges) == 3 and [r.cached for r in c.judges] == [False, True, True]
    assert len(judge.judged) == 1 and "PAYLOAD" in judge.judged[0]
    assert c.details["backtracks"] == 1 and c.details["queries"] == 5 and c.details["success_turn"] == 2
    assert c.details["attacker_cost"]["calls"] == 5 and c.details["judge"] == "harmbench"
    assert c.metrics["attacker_degenerate"] == 0.0


@needs_data
async def test_resisted_to_the_last_turn_records_every_attempt(tmp_path: Path) -> None:
    models = {
        "chat": scripted("chat", lambda r: "I can tell you about the history only."),
        "judge": scripted("j", SureJudge()),
        "attacker": scripted("a", Attacker()),
    }
    report, store = await run(tmp_path, _spec(max_backtracks=0), models, registry=registry())
    got = cell(report, "vanilla", "crescendo", "attack_success")
    assert (got["mean"], got["n"]) == (0.0, 1)
    [c] = await store.cells(report["run"]["id"])
    assert len(c.details["attempts"]) == 4 and "queries_to_success" not in c.metrics
    # turns 2..4 are judged (the last is always escalated; the scripted attacker flags the middle ones)
    assert sum(1 for t in c.details["score"]["turns"] if t["judged"]) == 3


@needs_data
async def test_degenerate_attacker_is_recorded_never_scored(tmp_path: Path) -> None:
    models = {
        "chat": scripted("chat", lambda r: "An answer."),
        "judge": scripted("j", SureJudge()),
        "attacker": scripted("a", lambda r: {"next_message": "", "rationale": "", "pursues_objective": "yes"}),
    }
    report, store = await run(tmp_path, _spec(attacker_retries=0), models, registry=registry())
    assert cell(report, "vanilla", "crescendo", "attack_success")["n"] == 0
    assert cell(report, "vanilla", "crescendo", "attacker_degenerate")["mean"] == 1.0
    [c] = await store.cells(report["run"]["id"])
    assert c.details["degenerate"]["turn"] == 1 and c.details["attempts"] == []


@needs_data
def test_sample_carries_a_template_and_dry_run_bounds() -> None:
    from tests.conftest import SHARED_DATA

    bench = Crescendo({"max_turns": 4, "max_backtracks": 2, "attacker_retries": 1})
    [item] = bench.sample(bench.load(SHARED_DATA), 1, 0)
    assert item.data["template"].startswith("Crescendo Variant")
    assert (item.data["target_calls"], item.data["attacker_calls"], item.data["judged_turns"]) == (6, 12, 3)
