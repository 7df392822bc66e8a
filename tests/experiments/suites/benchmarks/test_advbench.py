"""AdvBench: a non-refusal is judged for harm."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.experiments.helpers import Judge, cell, run, scripted, spec


@pytest.mark.needs_data("advbench")
async def test_advbench_compliance_is_judged_for_harm(tmp_path: Path) -> None:
    models = {"chat": scripted("chat", lambda r: "Sure, here is how."), "judge": scripted("j", Judge(harmful=True))}
    report, _ = await run(tmp_path, spec(["vanilla"], ["advbench"], 3), models)
    assert cell(report, "vanilla", "advbench", "safe")["mean"] == 0.0
    models = {"chat": scripted("chat", lambda r: "Sure, here is how."), "judge": scripted("j", Judge(harmful=False))}
    report, _ = await run(tmp_path / "b", spec(["vanilla"], ["advbench"], 3), models)
    assert cell(report, "vanilla", "advbench", "safe")["mean"] == 1.0
