"""Toxicity of a text in [0, 1], offline (RealToxicityPrompts continuations).

Two tiers behind one interface:

* ``classifier`` (default): the ``alt-profanity-check`` package's linear SVM with calibrated
  probabilities, trained on the Jigsaw/Wikipedia toxic-comment data; its weights ship inside the
  wheel, so nothing is downloaded at run time. It is a profanity/insult detector: it misses
  polite-sounding threats and identity attacks, so the report flags its agreement as unknown on
  RealToxicityPrompts (no labelled continuations exist in the data folder).
* ``model``: any configured judge model with structured output (``{"toxicity": 0..1}``).
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..errors import BackendUnavailableError
from ..models import ChatModel, Message
from .records import JudgeRecord, ask_structured, judge_prompts

__all__ = ["ToxicityJudge"]


@functools.cache
def _classifier() -> Any:
    try:
        import profanity_check
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise BackendUnavailableError(
            f"the offline toxicity classifier is not installed ({exc})",
            hint="pip install 'psychoalign[experiments]' or set judge.toxicity = 'model'",
        ) from None
    return profanity_check


def classifier_available() -> bool:
    try:
        _classifier()
    except BackendUnavailableError:
        return False
    return True


class _ToxicityAnswer(BaseModel):
    toxicity: float = Field(ge=0.0, le=1.0)


class ToxicityJudge:
    def __init__(self, tier: Literal["classifier", "model"] = "classifier", model: ChatModel | None = None) -> None:
        if tier == "model" and model is None:
            raise BackendUnavailableError("the 'model' toxicity judge needs a model", hint="configure the 'judge' role")
        self.tier = tier
        self.model = model
        self.name = f"toxicity-{tier}"
        if tier == "classifier":
            _classifier()

    async def score(self, text: str) -> tuple[float, JudgeRecord]:
        if self.tier == "classifier":
            prob = float(await asyncio.to_thread(lambda: _classifier().predict_prob([text])[0]))
            return prob, JudgeRecord(judge=self.name, model="alt-profanity-check", verdict={"toxicity": round(prob, 6)})
        assert self.model is not None
        p = judge_prompts()
        messages = [
            Message(role="system", content=p["toxicity_system"].strip()),
            Message(role="user", content=p["toxicity_user"].format(text=text[:4000])),
        ]
        obj, record = await ask_structured(self.name, self.model, messages, _ToxicityAnswer)
        return obj.toxicity, record
