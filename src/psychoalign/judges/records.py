"""What every benchmark judge returns and what is stored with the item: the judgement, the
messages the judge model was sent, its raw reply, which model gave it, and whether it came from
the cache."""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ModelError, SchemaValidationError
from ..models import ChatModel, ChatResult, Message
from ..prompts import load_prompt_yaml

__all__ = ["JudgeRecord"]


class JudgeRecord(BaseModel):
    """One judge call. ``verdict`` is the normalised result the score is computed from; ``prompt``
    the messages the judge model was sent and ``raw`` its text (both empty for offline judges;
    ``prompt`` also for cells stored before prompts were kept), so a cell can be audited by hand."""

    model_config = ConfigDict(frozen=True)

    judge: str
    model: str = ""
    verdict: dict[str, Any] = Field(default_factory=dict)
    prompt: list[Message] = Field(default_factory=list)
    raw: str = ""
    cached: bool = False


class JudgeError(ModelError):
    """The judge returned something unusable (no rating, wrong labels). The cell fails with this
    reason; it is never scored as zero."""


class TextJudge:
    """A judge that reads a chat model's plain reply at temperature 0 (the literature judges:
    HarmBench's yes/no, StrongREJECT's rubric); subclasses build the messages and parse the text."""

    name: ClassVar[str]

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    @property
    def label(self) -> str:
        return self.model.label

    async def _ask(self, messages: list[Message], max_tokens: int) -> ChatResult:
        return await self.model.chat(messages, temperature=0.0, max_tokens=max_tokens, schema_name=self.name)

    def _record(self, verdict: dict[str, Any], result: ChatResult, messages: list[Message]) -> JudgeRecord:
        return JudgeRecord(
            judge=self.name,
            model=self.model.label,
            verdict=verdict,
            prompt=messages,
            raw=result.text,
            cached=result.cached,
        )


T = TypeVar("T", bound=BaseModel)


async def ask_structured(
    judge: str, model: ChatModel, messages: list[Message], output: type[T]
) -> tuple[T, JudgeRecord]:
    """One structured judge call at temperature 0; a reply that never fits the schema is a
    :class:`JudgeError` (the cell fails with the reason)."""
    try:
        obj, result = await model.structured(messages, output, schema_name=judge.replace("-", "_"), temperature=0.0)
    except SchemaValidationError as exc:
        raise JudgeError(f"judge '{judge}' returned junk: {exc.message}", detail=exc.detail) from None
    record = JudgeRecord(
        judge=judge,
        model=model.label,
        verdict=obj.model_dump(mode="json"),
        prompt=messages,
        raw=result.text,
        cached=result.cached,
    )
    return obj, record


def judge_prompts() -> dict[str, str]:
    data: dict[str, str] = load_prompt_yaml("judge_benchmarks")
    return data
