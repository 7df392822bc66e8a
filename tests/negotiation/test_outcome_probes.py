"""Replays of what the embedded default sent users where the system was at fault (a wrong dose
approved, a pet given a human painkiller's dose, a stereotype premise answered, the reviewer's
feedback written back): scripted agents that write and approve the same text, and properties of
what the user receives (outcome_probes.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from psychoalign.agents.scaffolding import scaffolding_echo
from tests.scenario import APPROVE, World, proposals

PROBES: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parent / "outcome_probes.yaml").read_text("utf-8"))
NEGOTIATED = [p for p in PROBES if "scaffolding" not in p["expect"]]
ECHOED = [p for p in PROBES if "scaffolding" in p["expect"]]


@pytest.mark.parametrize("probe", NEGOTIATED, ids=lambda p: p["request"][:40])
async def test_what_the_embedded_model_sent_no_longer_reaches_the_user(probe: dict[str, Any]) -> None:
    sent, expect = probe["sent"], probe["expect"]
    # the classifier approved it: so does the scripted EVALUATOR, and the MEDIATOR keeps it
    world = World([proposals((sent, 0.9))], judge=lambda t: APPROVE, compose=lambda p, i: p)
    framework = probe.get("framework", "general")
    trace = await world.negotiator(k=2).negotiate(probe["request"], earlier=probe.get("earlier"), framework=framework)
    f = trace.final
    assert f is not None
    if expect.get("passes"):  # a right answer: it reaches the user, no gate blocked it
        assert sent in f.response and world.calls["drive"] >= 1
        assert all(p.gate is not None and p.gate.admissible for r in trace.rounds for p in r.proposals)
        return
    assert sent not in f.response
    if "blocked" in expect:
        blocked = [p for r in trace.rounds for p in r.proposals if p.gate is not None and not p.gate.admissible]
        assert blocked and all(expect["blocked"] in " ".join(p.gate.reasons) for p in blocked if p.gate)
        assert expect["channel"] in f.response
    else:
        assert world.calls["drive"] == 0 and trace.screen is not None and trace.screen.decided
        assert expect["decided"] in trace.screen.rules and expect["says"] in f.response


@pytest.mark.parametrize("probe", ECHOED, ids=lambda p: p["sent"][:40])
def test_what_the_embedded_model_wrote_back_reads_as_scaffolding(probe: dict[str, Any]) -> None:
    assert scaffolding_echo(probe["sent"], [], [probe["request"], *probe.get("earlier", [])])
