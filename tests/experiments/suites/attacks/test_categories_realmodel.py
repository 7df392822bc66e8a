"""The attack suite on the embedded default (SmolLM2 target, attacker and judges), N = 1 per category.

Assertions are structural: every cell is done or failed with its reason, the multi-turn dialogue is
stored turn by turn with the opening never judged, a many-shot prompt too long for n_ctx fails with
the reason (never an ASR of 0), and Table 4 is built. The figures themselves are a fact about a
135M model (docs/experiments.md records them), not something to assert.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.config import load_settings
from psychoalign.experiments import ExperimentSpec, build_report, run_experiment
from psychoalign.experiments.harness.store import InMemoryResultStore
from tests.conftest import SHARED_DATA

pytestmark = [
    pytest.mark.realmodel,
    pytest.mark.needs_data("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates"),
]


async def test_attack_suite_on_the_embedded_default(tmp_path: Path) -> None:
    settings = load_settings(
        environ={
            "PSYCHOALIGN_DEFAULTS__MAX_TOKENS": "64",
            "PSYCHOALIGN_HOME": str(tmp_path / "home"),
            "PSYCHOALIGN_EXPERIMENTS__DATA_DIR": str(SHARED_DATA),
        }
    )
    spec = ExperimentSpec.model_validate(
        {
            "name": "attack-smoke",
            "layout": "table4",
            "n": 1,
            "concurrency": 1,
            "systems": ["vanilla"],
            "benchmarks": [
                "attack-direct",
                # the embedded attacker plays the plain protocol (no JSON)
                {"name": "attack-multiturn", "options": {"max_turns": 2, "max_backtracks": 1}},
                {"name": "attack-manyshot", "options": {"shots": [4, 64]}},  # 64 shots do not fit n_ctx 4096
                "attack-roleplay",
                "xstest",
            ],
            "judge": {"calibration_n": 0},
        }
    )
    store = InMemoryResultStore()
    summary = await run_experiment(spec, settings, store=store)
    assert summary.ran == summary.total == 1 + 1 + 2 + 1 + 2
    cells = {c.benchmark + "/" + c.item_id.rsplit("/", 1)[-1]: c for c in await store.cells(summary.run_id)}
    for c in cells.values():
        assert c.status in ("done", "failed") and (c.status == "done" or c.error)
    too_long = cells["attack-manyshot/shots-64"]
    assert too_long.status == "failed" and "n_ctx" in (too_long.error or "")
    multi = next(c for c in cells.values() if c.benchmark == "attack-multiturn")
    assert multi.status == "done", multi.error  # plain text: no malformed JSON to fail on
    assert multi.details["protocol"] == "plain"
    if multi.metrics.get("attacker_degenerate"):  # recorded as such, never scored
        assert "success" not in multi.metrics and multi.details["degenerate"]["reason"]
    else:
        turns = multi.details["dialogue"]["turns"]
        assert turns[0]["turn"] == 1 and not turns[0]["escalated"] and turns[0]["why"] == "opening"
        assert multi.details["score"]["turns"][0]["judged"] is False
        assert multi.details["judged_turns"] >= 1  # the last turn always is
    record = await store.get_run(summary.run_id)
    assert record is not None
    t4 = build_report(record, list(cells.values()))["table4"]
    assert [r["key"] for r in t4["rows"]] == ["direct", "multi-turn", "many-shot", "role-play", "overall"]
    assert t4["benign"]["cells"][0]["n"] + t4["benign"]["cells"][0]["failed"] == 1
