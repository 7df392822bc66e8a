"""Alignment and capability ratings of one answer (the paper's Table 5), each 1..10.

A judge model with structured output returns JSON. A model asked for plain text only (the
embedded model) rates one dimension per call in FastChat's ``Rating: [[r]]`` convention, rating
first, after two worked examples (:func:`~psychoalign.judges.mtbench.plain_examples`), read by
:func:`~psychoalign.judges.mtbench.parse_rating`; a reply without a rating in 1..10 is a
:class:`~psychoalign.judges.records.JudgeError` (not judged), never a zero. :func:`parse_quality`
reads both ratings from one reply ("Alignment: [[7]]", "Capability: [[5]]").
"""

from __future__ import annotations

import re

from pydantic import BaseModel, Field

from ..models import ChatModel, Message
from ..prompts import load_prompt_yaml
from ..textnorm import normalise
from .mtbench import parse_rating, plain_examples
from .records import JudgeError, JudgeRecord, ask_structured, judge_prompts

__all__ = ["QualityJudge"]

_RATING = {key: re.compile(rf"\b{key}\b\W{{0,6}}\[\[\s*(\d+(?:\.\d+)?)\s*\]\]") for key in ("alignment", "capability")}


def parse_quality(text: str) -> tuple[float, float] | None:
    """(alignment, capability) from "Alignment: [[a]]" and "Capability: [[c]]" (the first of each,
    any case or markdown), or None when either is missing or outside 1..10."""
    norm = normalise(text).text
    out: list[float] = []
    for pattern in _RATING.values():
        m = pattern.search(norm)
        if m is None:
            return None
        value = float(m.group(1))
        if not 1.0 <= value <= 10.0:
            return None
        out.append(value)
    return out[0], out[1]


class _QualityAnswer(BaseModel):
    explanation: str = Field("", max_length=2000)
    alignment: float = Field(ge=1, le=10)
    capability: float = Field(ge=1, le=10)


class QualityJudge:
    name = "quality"

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    async def _plain(self, dimension: str, request: str, answer: str) -> tuple[float, str, bool]:
        """One dimension from a plain-text judge: (rating, reply, cached)."""
        p = load_prompt_yaml("judge_benchmarks")
        system = p["quality_system_plain"].format(
            dimension=dimension, definition=p["quality_dimensions_plain"][dimension]
        )
        messages = [Message(role="system", content=system.strip())]
        for ex in plain_examples():
            q = p["quality_user"].format(request=ex["values"]["request"], answer=ex["answer_quality"])
            messages += [Message(role="user", content=q.strip()), Message(role="assistant", content=ex[dimension])]
        messages.append(Message(role="user", content=p["quality_user"].format(request=request, answer=answer[:6000])))
        result = await self.model.chat(messages, temperature=0.0, max_tokens=64)  # the rating comes first
        rating = parse_rating(result.text)
        if rating is None:
            raise JudgeError(
                f"judge 'quality' gave no {dimension} rating [[r]] in 1..10 (reply starts {result.text[:60]!r})"
            )
        return rating, result.text, result.cached

    async def rate_one(self, dimension: str, request: str, answer: str) -> float:
        """One dimension's rating (``alignment`` or ``capability``): one call for a plain-text judge."""
        if not self.model.rates_numbers:
            return (await self._plain(dimension, request, answer))[0]
        align, cap, _ = await self.rate(request, answer)
        return align if dimension == "alignment" else cap

    async def rate(self, request: str, answer: str) -> tuple[float, float, JudgeRecord]:
        p = judge_prompts()
        if not self.model.rates_numbers:  # the embedded model: plain text, one rating per call, read by rule
            align, raw_a, cached_a = await self._plain("alignment", request, answer)
            cap, raw_c, cached_c = await self._plain("capability", request, answer)
            record = JudgeRecord(
                judge=self.name,
                model=self.model.label,
                verdict={"alignment": align, "capability": cap, "format": "plain"},
                raw=f"alignment: {raw_a}\ncapability: {raw_c}",
                cached=cached_a and cached_c,
            )
            return align, cap, record
        user = Message(role="user", content=p["quality_user"].format(request=request, answer=answer[:6000]))
        messages = [Message(role="system", content=p["quality_system"].strip()), user]
        obj, record = await ask_structured(self.name, self.model, messages, _QualityAnswer)
        return obj.alignment, obj.capability, record
