"""The harm judge an endpoint gets by default: the prompt that agrees best with labelled answers."""

from __future__ import annotations

from typing import Any

import pytest

from psychoalign.errors import EndpointError
from psychoalign.judges.harm import build_harm_judge, candidates_for
from psychoalign.judges.harm_pick import LabelledHarm, PickedHarmJudge
from psychoalign.judges.records import JudgeError
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend

ROWS = [LabelledHarm(goal=f"goal {i}", response=f"response {i}", harmful=i % 3 == 0) for i in range(12)]
HARMFUL = {r.goal for r in ROWS if r.harmful}


def endpoint(harm_prompt: Any, harmbench: Any, strongreject: Any) -> tuple[ChatModel, list[str]]:
    """A scripted judge endpoint answering each prompt with the given function of the goal."""
    asked: list[str] = []

    def reply(request: ChatRequest) -> Any:
        text = request.messages[-1].content
        if "[BEHAVIOUR]" in text:
            asked.append("harmbench")
            return harmbench(text.split("[BEHAVIOUR]", 1)[1].split("[END BEHAVIOUR]", 1)[0].strip())
        if "[INSTRUCTION]" in text:
            asked.append("strongreject")
            return strongreject(text.split("[INSTRUCTION]", 1)[1].split("[END INSTRUCTION]", 1)[0].strip())
        asked.append("model")
        return harm_prompt(text.split("Harmful goal: ", 1)[1].split("\n", 1)[0].strip())

    spec = ModelSpec(backend="scripted", model="judge", schema_retries=0, max_retries=0)
    return ChatModel(spec, ScriptedBackend(spec, fn=reply)), asked


async def test_the_prompt_with_the_best_kappa_is_picked_and_then_used() -> None:
    model, asked = endpoint(
        lambda goal: {"harmful": True, "reason": "everything"},  # kappa 0
        lambda goal: "Yes" if goal in HARMFUL else "No",  # perfect
        lambda goal: "I will not grade this.",  # unreadable: dropped
    )
    judge = PickedHarmJudge(candidates_for(model), ROWS, reference="test rows")
    assert judge.label == "scripted:judge"  # the judge model, before and after the pick
    harmful, record = await judge.harmful("goal 3", "response 3")
    assert harmful and record.judge == "harm-harmbench"
    summary = judge.summary()
    assert summary["chosen"] == "harmbench"
    assert summary["candidates"]["harmbench"]["kappa"] == 1.0
    assert summary["candidates"]["model"]["kappa"] == 0.0
    assert "rubric" in summary["candidates"]["strongreject"]["error"]
    assert judge.label == "scripted:judge" and judge.tier == "auto"
    # each candidate judged the rows once (strongreject stopped at its first unreadable reply)
    assert (asked.count("model"), asked.count("harmbench"), asked.count("strongreject")) == (12, 13, 1)
    await judge.ready()
    assert asked.count("harmbench") == 13  # picked once


async def test_ties_go_to_the_package_prompt_and_all_unreadable_fails_closed() -> None:
    model, _ = endpoint(
        lambda goal: {"harmful": goal in HARMFUL, "reason": "x"},
        lambda goal: "Yes" if goal in HARMFUL else "No",
        lambda goal: "1.b 0\n2.b 5\n3.b 5" if goal in HARMFUL else "1.b 1\n2.b 1\n3.b 1",
    )
    tied = PickedHarmJudge(candidates_for(model), ROWS, reference="test rows")
    await tied.ready()
    assert tied.summary()["chosen"] == "model"
    assert all(c["kappa"] == 1.0 for c in tied.summary()["candidates"].values())
    broken, _ = endpoint(lambda goal: "not json", lambda goal: "maybe", lambda goal: "?")
    with pytest.raises(JudgeError, match="no harm prompt could be read"):
        await PickedHarmJudge(candidates_for(broken), ROWS, reference="test rows").harmful("goal 0", "x")


async def test_each_literature_prompt_is_a_harm_tier_of_its_own() -> None:
    model, _ = endpoint(
        lambda goal: {"harmful": False, "reason": "x"},
        lambda goal: "No",
        lambda goal: "1.b 0\n2.b 3\n3.b 3",  # score (3 + 3 - 2) / 8 = 0.5: harmful at the 0.5 threshold
    )
    assert build_harm_judge("harmbench", model).tier == "harmbench"
    assert (await build_harm_judge("harmbench", model).harmful("g", "r"))[0] is False
    strongreject = build_harm_judge("strongreject", model)
    assert strongreject.tier == "strongreject" and (await strongreject.harmful("g", "r"))[0] is True
    assert build_harm_judge("auto", model).tier == "model"  # the pick is the experiments' (Judges.harm)


async def test_an_endpoint_that_gives_no_reply_stops_the_pick_instead_of_dropping_a_prompt() -> None:
    """An outage (HTTP 500 after the retries, a timeout) is not a prompt's failure: it would drop
    the candidates asked while it lasted, or fail every cell as a judge that can never answer.
    It reaches the caller as it is, nothing is picked, and once the endpoint answers the pick is
    the one an endpoint that never failed makes."""
    down = True

    def harm_prompt(goal: str) -> Any:
        if down:
            raise EndpointError("scripted:judge: model endpoint returned HTTP 500 (gave up after 4 attempts)")
        return {"harmful": goal in HARMFUL, "reason": "x"}

    model, _ = endpoint(harm_prompt, lambda goal: "maybe", lambda goal: "?")
    judge = PickedHarmJudge(candidates_for(model), ROWS, reference="test rows")
    with pytest.raises(EndpointError, match="HTTP 500"):
        await judge.ready()
    assert judge.chosen is None and "model" not in judge.selection
    down = False
    await judge.ready()
    assert judge.summary()["chosen"] == "model" and judge.selection["model"]["kappa"] == 1.0
