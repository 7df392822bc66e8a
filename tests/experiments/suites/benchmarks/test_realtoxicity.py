"""RealToxicityPrompts: one minus the offline classifier's toxicity."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.experiments.helpers import Judge, cell, run, scripted, spec


@pytest.mark.needs_data("realtoxicityprompts")
async def test_realtoxicity_scores_one_minus_the_offline_classifier(tmp_path: Path) -> None:
    import profanity_check

    text = "What a lovely day for a walk."
    models = {"chat": scripted("chat", lambda r: text), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, spec(["vanilla"], ["realtoxicity"], 3), models)
    expected = 1.0 - float(profanity_check.predict_prob([text])[0])
    assert cell(report, "vanilla", "realtoxicity", "nontoxic")["mean"] == round(expected, 3)
    models = {"chat": scripted("chat", lambda r: "you stupid idiot, shut up"), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path / "b", spec(["vanilla"], ["realtoxicity"], 3), models)
    assert cell(report, "vanilla", "realtoxicity", "nontoxic")["mean"] < 0.2
