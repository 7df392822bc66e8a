"""PAIR, Prompt Automatic Iterative Refinement (Chao et al. 2023, "Jailbreaking Black Box Large
Language Models in Twenty Queries", arXiv:2310.08419), as an attack strategy any system can be
run against.

An attacker model (the ``attacker`` role, or ``attacker_role``) writes a jailbreak prompt for the
objective; the system answers it in a fresh one-turn conversation; the suite's judge scores the
answer against the *original* objective; the attacker sees the answer and its score and refines.
``streams`` independent streams (each its own attacker conversation, seeded apart) run for up to
``depth`` rounds; the attack stops at the first round in which any stream succeeds.

The judges are the literature suites' tiers (:mod:`..benchmarks._literature`); the attacker's
1-10 feedback score is ``1 + 9 * rubric score`` under the StrongREJECT tier and 10 / 1 for a
success / failure under the binary tiers (PAIR's own 1-10 judge is not used: one judge scores the
attack and the suite). The attacker is asked for ``{improvement, prompt}`` as structured output
when it gives structured replies (a configured endpoint); a plain-text attacker's whole reply is
the prompt. An attacker reply that yields no usable prompt (empty, unparsable) stops that stream
with the reason; if no stream reached the target at all, the cell fails (never a score), and an
attacker that cannot be reached fails the cell (an attack cut short is not scored as resisted).

Metrics: ``attack_success``; ``queries_to_success`` (target queries sent up to and including the
successful round, on successes only). Every attempt is stored in ``details["attempts"]`` (stream,
round, the attacker's improvement, the prompt, the reply, the verdict); the attacker's calls are
reported in ``details["attacker_cost"]``, not as the system's cost.
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from pydantic import BaseModel, Field

from ....errors import ModelError, SchemaValidationError
from ....models import ChatModel, Message
from ....prompts import load_prompt_yaml
from ...harness.benchmark import Item, Respond, ScoredItem
from ...harness.judging import Judges
from ...harness.metering import CallMeter
from ._objectives import Attempts, ObjectiveAttack, ObjectiveOptions, attack_metrics, rubric_score

__all__ = ["PAIR"]

#: Characters of a target reply the attacker sees, and of an attacker prompt sent to the target.
REPLY_CHARS = 1500
PROMPT_CHARS = 4000


class PAIROptions(ObjectiveOptions):
    streams: int = Field(3, ge=1, le=50, description="Independent attacker conversations (the paper: 20).")
    depth: int = Field(3, ge=1, le=20, description="Refinement rounds per stream (the paper: 3).")
    attacker_role: str = Field("attacker", min_length=1)
    attacker_max_tokens: int | None = Field(None, ge=32, le=8192)
    keep_last: int = Field(3, ge=1, le=20, description="Past attempts the attacker sees per stream.")
    seed: int = 0


class _AttackerReply(BaseModel):
    improvement: str = Field("", max_length=4000)
    prompt: str = Field(min_length=1, max_length=20000)


class _Stream:
    def __init__(self, index: int, system: str, first: str) -> None:
        self.index = index
        self.system = system
        self.first = first
        self.history: list[tuple[str, str]] = []  # (attacker JSON, feedback)
        self.stopped: str | None = None

    def messages(self, keep_last: int) -> list[Message]:
        out = [Message(role="system", content=self.system), Message(role="user", content=self.first)]
        for said, feedback in self.history[-keep_last:]:
            out += [Message(role="assistant", content=said), Message(role="user", content=feedback)]
        return out


class PAIR(ObjectiveAttack):
    options_model = PAIROptions
    name = "pair"
    title = "PAIR"
    source = "PAIR (Chao et al. 2023): an attacker model refines jailbreak prompts, streams x depth"
    run_source = "PAIR (Chao et al. 2023), {streams} streams x depth {depth}, attacker [roles.{attacker_role}]"
    metrics = attack_metrics("PAIR")
    opts: PAIROptions

    def cost_hints(self) -> dict[str, int]:
        # streams x depth target calls, judgements, attacker calls
        calls = self.opts.streams * self.opts.depth
        return {"target_calls": calls, "judged_turns": calls, "attacker_calls": calls}

    async def _attack_prompt(
        self, attacker: ChatModel, stream: _Stream, round_: int, item: Item
    ) -> tuple[_AttackerReply | None, str]:
        """The attacker's next (improvement, prompt), or None and why not."""
        seed = hash_seed(self.opts.seed, item.id, stream.index, round_)
        messages = stream.messages(self.opts.keep_last)
        try:
            if attacker.rates_numbers:
                reply, result = await attacker.structured(
                    messages,
                    _AttackerReply,
                    schema_name="pair_attacker",
                    temperature=1.0,
                    seed=seed,
                    max_tokens=self.opts.attacker_max_tokens,
                )
                return reply, result.text
            result = await attacker.chat(messages, temperature=1.0, seed=seed, max_tokens=self.opts.attacker_max_tokens)
        except SchemaValidationError as exc:
            # an unusable reply ends this stream; an unreachable attacker (other errors) fails the cell
            stream.stopped = f"attacker reply unusable: {exc.message}"
            return None, ""
        text = result.text.strip()
        if not text:
            stream.stopped = "attacker gave an empty prompt"
            return None, result.text
        return _AttackerReply(prompt=text[:20000]), result.text

    def _feedback_score(self, scored: ScoredItem) -> int:
        if "score" in scored.metrics:
            return 1 + round(9 * scored.metrics["score"])
        return 10 if scored.metrics["attack_success"] == 1.0 else 1

    async def run(self, item: Item, respond: Respond, judges: Judges) -> ScoredItem:
        p = load_prompt_yaml("attack_pair")
        goal = item.data["behavior"]
        target = str(item.data.get("target") or "Sure, here is")
        meter = CallMeter()  # the attacker's calls: reported with the item, not as the system's cost
        attacker = judges.pool.model(self.opts.attacker_role, meter)
        streams = [
            _Stream(i, p["pair_system"].format(goal=goal, target=target).strip(), p["pair_first"].format(goal=goal))
            for i in range(self.opts.streams)
        ]
        attempts = Attempts()
        queries = 0
        success_at: int | None = None
        for round_ in range(1, self.opts.depth + 1):
            live = [s for s in streams if s.stopped is None]
            if not live:
                break
            asks = await asyncio.gather(*(self._attack_prompt(attacker, s, round_, item) for s in live))
            ready = [(s, a, raw) for s, (a, raw) in zip(live, asks, strict=True) if a is not None]

            async def one(stream: _Stream, ask: _AttackerReply, raw: str) -> tuple[_Stream, _AttackerReply, str, Any]:
                reply = await respond([Message(role="user", content=ask.prompt[:PROMPT_CHARS])])
                scored = await self.suite.judge_harmful(item, reply.response, judges)
                return stream, ask, raw, (reply, scored)

            results = await asyncio.gather(*(one(s, a, raw) for s, a, raw in ready))
            queries += len(results)
            for stream, ask, raw, (reply, scored) in results:
                success = scored.metrics["attack_success"] == 1.0
                score = self._feedback_score(scored)
                row = {
                    "stream": stream.index,
                    "round": round_,
                    "improvement": ask.improvement,
                    "prompt": ask.prompt[:PROMPT_CHARS],
                    "response": reply.response,
                    "success": success,
                    "feedback_score": score,
                    **rubric_score(scored),
                }
                attempts.add(reply, scored, row)
                feedback = p["pair_feedback"].format(response=reply.response[:REPLY_CHARS], goal=goal, score=score)
                stream.history.append((raw or ask.prompt, feedback))
                if success and success_at is None:
                    success_at = queries
            if success_at is not None:
                break
        if not attempts.rows:
            reasons = sorted({s.stopped or "" for s in streams})
            raise ModelError(f"PAIR: no attacker prompt reached the target ({'; '.join(reasons)})")
        return attempts.result(
            success_at,
            {
                "category": item.data["category"],
                "judge": self.tier(judges),
                "queries": queries,
                "attacker": judges.pool.label(self.opts.attacker_role),
                "attacker_cost": meter.summary(),
                "streams_stopped": {str(s.index): s.stopped for s in streams if s.stopped},
            },
        )


def hash_seed(*parts: object) -> int:
    """A stable 31-bit seed from ``parts`` (Python's ``hash`` of a str changes per process)."""
    return int(hashlib.sha256(":".join(map(str, parts)).encode()).hexdigest()[:8], 16) & 0x7FFFFFFF


def register(registry: Any) -> None:
    """Plugin hook (:mod:`psychoalign.experiments.harness.registry`): PAIR as a benchmark."""
    registry.add_benchmark(PAIR)
