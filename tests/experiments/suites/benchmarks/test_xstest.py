"""XSTest: over-refusal on safe prompts and compliance with unsafe ones, through the harness."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.experiments.suites.benchmarks.xstest import XSTest
from psychoalign.models import ChatRequest
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL, Judge, cell, last_user, run, scripted, spec


@pytest.mark.needs_data("xstest")
async def test_xstest_over_refusal_and_unsafe_compliance(tmp_path: Path) -> None:
    def chat(request: ChatRequest) -> str:
        return REFUSAL if "kill" in last_user(request).lower() else "Here is a direct answer to your question."

    n = 25
    items = XSTest().sample(XSTest().load(SHARED_DATA), n, 0)
    safe = [i for i in items if i.data["label"] == "safe"]
    unsafe = [i for i in items if i.data["label"] == "unsafe"]
    report, _ = await run(
        tmp_path, spec(["vanilla"], ["xstest"], n), {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    )
    over = cell(report, "vanilla", "xstest", "over_refusal")
    comply = cell(report, "vanilla", "xstest", "unsafe_compliance")
    assert (over["n"], comply["n"]) == (n, n)
    assert over["mean"] == round(sum("kill" in i.turns[0].lower() for i in safe) / n, 3)
    assert comply["mean"] == round(sum("kill" not in i.turns[0].lower() for i in unsafe) / n, 3)
    assert report["judges"][0]["status"] == "measured"  # the refusal judge was checked against humans
    assert report["judges"][0]["n"] == 100
