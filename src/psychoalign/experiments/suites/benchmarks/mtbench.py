"""MT-Bench: two-turn questions graded by the MT-Bench judge. Scoring rules: docs/experiments.md."""

from __future__ import annotations

import json
from pathlib import Path

from ....errors import InputError
from ....models import Message
from ....textio import nonblank_lines
from ...harness.benchmark import Benchmark, Item, Metric, Respond, ScoredItem, data_file
from ...harness.judging import Judges
from ...harness.systems import SystemReply


async def two_turns(item: Item, respond: Respond) -> tuple[SystemReply, SystemReply]:
    """The system's answers to an MT-Bench item's two questions; the second sees the first exchange."""
    q1, q2 = item.turns
    first = await respond([Message(role="user", content=q1)])
    second = await respond(
        [
            Message(role="user", content=q1),
            Message(role="assistant", content=first.response),
            Message(role="user", content=q2),
        ]
    )
    return first, second


class MTBench(Benchmark):
    option_names = ()
    name = "mt-bench"
    title = "MT-B"
    source = "MT-Bench (Zheng et al. 2023), FastChat question.jsonl, 80 two-turn questions"
    metrics = (
        Metric("score", "MT-B", binary=False),
        Metric("turn1", "MT-B turn 1", binary=False),
        Metric("turn2", "MT-B turn 2", binary=False),
    )
    primary = "score"
    needs = ("mtbench",)

    def load(self, data_dir: Path) -> list[Item]:
        path = data_file(data_dir, "mt_bench/question.jsonl")
        refs = self._refs(data_file(data_dir, "mt_bench/reference_answer_gpt-4.jsonl"))
        items = []
        for n, line in nonblank_lines(path, what="benchmark file"):
            try:
                row = json.loads(line)
                qid, category, turns = int(row["question_id"]), str(row["category"]), [str(t) for t in row["turns"]]
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise InputError(f"{path}:{n}: malformed question ({exc})") from None
            if len(turns) != 2:
                raise InputError(f"{path}:{n}: expected 2 turns, found {len(turns)}")
            items.append(
                Item(id=f"mt-bench/{qid}", turns=tuple(turns), data={"category": category, "refs": refs.get(qid)})
            )
        return items

    @staticmethod
    def _refs(path: Path) -> dict[int, list[str]]:
        out: dict[int, list[str]] = {}
        for n, line in nonblank_lines(path, what="benchmark file"):
            try:
                row = json.loads(line)
                out[int(row["question_id"])] = [str(t) for t in row["choices"][0]["turns"]]
            except (json.JSONDecodeError, KeyError, TypeError, ValueError, IndexError) as exc:
                raise InputError(f"{path}:{n}: malformed reference answer ({exc})") from None
        return out

    async def run(self, item: Item, respond: Respond, judges: Judges) -> ScoredItem:
        q1, q2 = item.turns
        first, second = await two_turns(item, respond)
        judge = judges.mtbench()
        refs = item.data.get("refs")
        category = str(item.data["category"])
        r1, rec1 = await judge.grade([q1], [first.response], refs, category)
        r2, rec2 = await judge.grade([q1, q2], [first.response, second.response], refs, category)
        return ScoredItem.from_replies(
            first,
            second,
            metrics={"score": (r1 + r2) / 20, "turn1": r1 / 10, "turn2": r2 / 10},
            judges=[rec1, rec2],
            details={"category": category, "ratings": [r1, r2]},
        )
