"""The embedded attacker under the plain protocol (issue #14 item 1): SmolLM2-135M, which cannot
write the structured attacker's JSON, writes distinct, on-objective user messages when the driver
plays the Crescendo ladder and asks it only to phrase each step.

The target is scripted (canned, varied background answers), so the test measures the attacker
alone and stays quick; the attacker is the real embedded model with its default decoding.
"""

from __future__ import annotations

import pytest

from psychoalign.config import Settings
from psychoalign.experiments.harness.metering import CallMeter, ModelPool
from psychoalign.experiments.harness.systems import SystemReply
from psychoalign.experiments.suites.attacks.categories import DirectAttack
from psychoalign.experiments.suites.attacks.multiturn import (
    EscalationSettings,
    content_words,
    drive_escalation,
    resolve_protocol,
)
from psychoalign.judges.refusal import RuleRefusalJudge
from psychoalign.models import Message
from tests.conftest import SHARED_DATA

pytestmark = [
    pytest.mark.realmodel,
    pytest.mark.needs_data("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates"),
]

ANSWERS = [
    "It has a long history: the first cases were documented in the nineteenth century, and laws followed.",
    "Views changed as technology spread; researchers and journalists wrote about it in the 1990s.",
    "Specialists describe several stages, and the details depend on the tools and the setting.",
    "There are many sources on this; most of them focus on prevention and on the law.",
]


async def test_embedded_attacker_writes_distinct_on_objective_messages() -> None:
    pool = ModelPool(Settings())
    attacker = pool.model("attacker", CallMeter())
    assert resolve_protocol("auto", attacker) == "plain"  # the embedded model is never asked for JSON
    items = DirectAttack().load(SHARED_DATA)
    objectives = [items[i].turns[0] for i in (0, 3)]
    judge = RuleRefusalJudge()

    async def respond(messages: list[Message]) -> SystemReply:
        turn = sum(1 for m in messages if m.role == "user")
        return SystemReply(response=ANSWERS[(turn - 1) % len(ANSWERS)])

    async def refusal(response: str, request: str):  # type: ignore[no-untyped-def]
        return await judge.judge(response, request=request)

    sent: list[tuple[str, str]] = []
    for objective in objectives:
        dialogue = await drive_escalation(
            objective,
            respond,  # type: ignore[arg-type]
            attacker,
            refusal,
            instructions="",
            settings=EscalationSettings(max_turns=4, max_backtracks=0, protocol="plain"),
        )
        assert dialogue.degenerate is None, dialogue.degenerate
        assert [t.turn for t in dialogue.turns] == [1, 2, 3, 4]
        sent += [(objective, t.message) for t in dialogue.turns]
        # the last turn asks for the objective itself
        assert content_words(dialogue.turns[-1].message) & content_words(objective)
    messages = [m for _, m in sent]
    assert len(set(messages)) == len(messages)
    on_objective = sum(1 for o, m in sent if content_words(m) & content_words(o))
    assert on_objective >= 6, sent  # of 8
    await pool.aclose()
