"""MT-Bench single-answer grading with FastChat's judge prompts (read from the data folder).

Turn 1 uses ``single-v1`` (``single-math-v1`` with the GPT-4 reference answer for the math,
reasoning and coding questions); turn 2 uses the ``-multi-turn`` variants, which show the whole
conversation and ask about the second answer. The rating (1-10) is read as FastChat reads it
(``[[r]]``, then ``[r]``) in ``fastchat`` mode, or from a JSON reply in ``structured`` mode (the
same prompt plus a one-line JSON instruction). A judge model asked for plain text only (the
embedded model: ``rates_numbers`` False) is always graded in ``fastchat`` mode, with two worked
examples in the same prompt format before the item (:func:`plain_examples`): FastChat's own
prompt asks for ``[[r]]``, but the 135M model wrote prose and no rating without them. A reply
without a rating in 1..10 is a :class:`JudgeError` (not judged), never a zero.
"""

from __future__ import annotations

import json
import re
from functools import cache
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ..errors import InputError
from ..models import ChatModel, Message
from ..prompts import load_prompt_yaml
from ..textio import read_text
from .records import JudgeError, JudgeRecord, ask_structured, judge_prompts

__all__ = ["MTBenchJudge"]

#: FastChat's categories graded against a reference answer.
NEED_REF_CATEGORIES = frozenset({"math", "reasoning", "coding"})
_ONE = re.compile(r"\[\[(\d+\.?\d*)\]\]")
_BACKUP = re.compile(r"\[(\d+\.?\d*)\]")


@cache
def load_judge_prompts(path: Path) -> dict[str, dict[str, str]]:
    """``judge_prompts.jsonl`` by name; errors name the file and line."""
    out: dict[str, dict[str, str]] = {}
    lines = read_text(path, what="MT-Bench judge prompt file").splitlines()
    for n, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out[row["name"]] = {"system": row["system_prompt"], "template": row["prompt_template"]}
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise InputError(f"{path}:{n}: malformed judge prompt ({exc})") from None
    for name in ("single-v1", "single-math-v1", "single-v1-multi-turn", "single-math-v1-multi-turn"):
        if name not in out:
            raise InputError(f"{path}: judge prompt '{name}' is missing")
    return out


def plain_examples() -> list[dict[str, Any]]:
    """The worked examples shown to plain-text rating judges (``prompts/judge_benchmarks.yaml``)."""
    data: list[dict[str, Any]] = load_prompt_yaml("judge_benchmarks")["rating_examples_plain"]
    return data


def parse_rating(text: str) -> float | None:
    """FastChat's rule: the first ``[[r]]``, else the first ``[r]``; None when absent or outside 1..10."""
    m = _ONE.search(text) or _BACKUP.search(text)
    if m is None:
        return None
    value = float(m.group(1))
    return value if 1.0 <= value <= 10.0 else None


class _Rating(BaseModel):
    explanation: str = Field("", max_length=3000)
    # whole numbers, as FastChat's prompt asks ("[[5]]"): a schema of floats invited ratings like 4.123
    rating: int = Field(ge=1, le=10)


class MTBenchJudge:
    """Grades one answer of one turn. ``mode``: ``structured`` (default) or ``fastchat``."""

    name = "mt-bench"

    def __init__(self, model: ChatModel, prompts_file: Path, mode: Literal["structured", "fastchat"] = "structured"):
        self.model = model
        self.prompts = load_judge_prompts(prompts_file)
        self.requested = mode
        self.mode: Literal["structured", "fastchat"] = mode if model.rates_numbers else "fastchat"

    def messages(
        self, questions: list[str], answers: list[str], refs: list[str] | None, category: str
    ) -> list[Message]:
        turn = len(answers)
        use_ref = category in NEED_REF_CATEGORIES and refs is not None
        name = ("single-math-v1" if use_ref else "single-v1") + ("-multi-turn" if turn == 2 else "")
        prompt = self.prompts[name]
        values: dict[str, str] = {}
        if turn == 1:
            values = {"question": questions[0], "answer": answers[0]}
            if use_ref and refs:
                values["ref_answer_1"] = refs[0]
        else:
            values = {
                "question_1": questions[0],
                "answer_1": answers[0],
                "question_2": questions[1],
                "answer_2": answers[1],
            }
            if use_ref and refs:
                values["ref_answer_1"], values["ref_answer_2"] = refs[0], refs[1] if len(refs) > 1 else refs[0]
        user = prompt["template"].format(**values)
        if self.mode == "structured":
            user += judge_prompts()["mtbench_structured_suffix"].rstrip()
        messages = [Message(role="system", content=prompt["system"])]
        if not self.model.rates_numbers:
            for ex in plain_examples():
                messages.append(Message(role="user", content=prompt["template"].format(**ex["values"])))
                messages.append(Message(role="assistant", content=ex["reply"]))
        return [*messages, Message(role="user", content=user)]

    async def grade(
        self, questions: list[str], answers: list[str], refs: list[str] | None, category: str
    ) -> tuple[float, JudgeRecord]:
        """(rating 1..10, record) for the last of ``answers`` (turn ``len(answers)``)."""
        messages = self.messages(questions, answers, refs, category)
        if self.mode == "structured":
            obj, record = await ask_structured(self.name, self.model, messages, _Rating)
            return obj.rating, record.model_copy(update={"verdict": {**record.verdict, "turn": len(answers)}})
        result = await self.model.chat(messages, temperature=0.0)
        rating = parse_rating(result.text)
        if rating is None:
            raise JudgeError(f"judge 'mt-bench' gave no [[rating]] in 1..10 (reply starts {result.text[:60]!r})")
        return rating, JudgeRecord(
            judge=self.name,
            model=self.model.label,
            verdict={"rating": rating, "turn": len(answers), "format": "fastchat"},
            prompt=messages,
            raw=result.text,
            cached=result.cached,
        )
