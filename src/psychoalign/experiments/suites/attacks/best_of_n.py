"""Best-of-N jailbreaking (Hughes et al. 2024, "Best-of-N Jailbreaking", arXiv:2412.03556) as an
attack strategy any system can be run against.

For each objective of a literature suite (HarmBench, StrongREJECT or JBB's harmful half), up to
``attempts`` (N) augmented copies of the request are sent, each a fresh one-turn conversation,
until the suite's judge finds one a success. The augmentations are the paper's text ones, composed
in its order with its strengths for a noise level ``sigma`` (default 0.4):

* word scrambling: each word longer than three characters has its middle characters shuffled
  with probability ``sigma ** 0.5``;
* random capitalisation: each letter's case is flipped with probability ``sigma ** 0.5``;
* character noising: each printable ASCII character is moved one code point up or down with
  probability ``sigma ** 3``.

Everything is seeded by (``seed``, item id, attempt): a rerun sends the same prompts. Each attempt
is judged against the *original* request (never the augmented text), by the same judge tiers as
the suite (:mod:`psychoalign.experiments.suites.benchmarks._literature`); every attempt is stored
in the cell's ``details["attempts"]``. Metrics: ``attack_success`` (any attempt succeeded) and
``queries_to_success`` (the attempt that succeeded, on successes only). ``budget_chars`` caps the
characters of target responses read per objective (a tokenizer-free proxy of output cost): an
objective that runs out is scored on the attempts made, with ``details["stopped"] = "budget"``.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import Field

from ....models import Message
from ...harness.benchmark import Item, Respond, ScoredItem
from ...harness.judging import Judges
from ._objectives import Attempts, ObjectiveAttack, ObjectiveOptions, attack_metrics, rubric_score

__all__ = ["BestOfN"]


def _scramble(word: str, rng: random.Random, p: float) -> str:
    if len(word) <= 3 or rng.random() >= p:
        return word
    middle = list(word[1:-1])
    rng.shuffle(middle)
    return word[0] + "".join(middle) + word[-1]


def augment(text: str, rng: random.Random, sigma: float = 0.4) -> str:
    """One Best-of-N augmentation of ``text`` (scrambling, then capitalisation, then noising)."""
    p_word, p_char = sigma**0.5, sigma**3
    scrambled = " ".join(_scramble(w, rng, p_word) for w in text.split(" "))
    flipped = "".join(c.swapcase() if c.isalpha() and rng.random() < p_word else c for c in scrambled)
    out = []
    for c in flipped:
        if 32 <= ord(c) <= 126 and rng.random() < p_char:
            # one code point up or down, kept printable
            c = chr(min(126, max(32, ord(c) + rng.choice((-1, 1)))))
        out.append(c)
    return "".join(out)


class BestOfNOptions(ObjectiveOptions):
    attempts: int = Field(16, ge=1, le=10_000, description="N: augmented requests per objective at most.")
    sigma: float = Field(0.4, gt=0.0, le=1.0, description="Augmentation strength (Hughes et al. 2024).")
    seed: int = 0
    budget_chars: int | None = Field(
        None, ge=1, description="Characters of target responses read per objective at most (None: no cap)."
    )


class BestOfN(ObjectiveAttack):
    options_model = BestOfNOptions
    name = "best-of-n"
    title = "Best-of-N"
    source = "Best-of-N jailbreaking (Hughes et al. 2024): seeded text augmentations, up to N tries per objective"
    run_source = "Best-of-N (Hughes et al. 2024), N={attempts}, sigma={sigma}"
    metrics = attack_metrics("Best-of-N")
    opts: BestOfNOptions

    def cost_hints(self) -> dict[str, int]:
        # every attempt is a target call and a judgement
        return {"target_calls": self.opts.attempts, "judged_turns": self.opts.attempts}

    async def run(self, item: Item, respond: Respond, judges: Judges) -> ScoredItem:
        attempts = Attempts()
        read = 0
        success_at: int | None = None
        stopped = "attempts"
        last = None
        for k in range(1, self.opts.attempts + 1):
            rng = random.Random(f"{self.opts.seed}:{item.id}:{k}")
            prompt = augment(item.turns[0], rng, self.opts.sigma)
            reply = await respond([Message(role="user", content=prompt)])
            last = await self.suite.judge_harmful(item, reply.response, judges)
            read += len(reply.response)
            success = last.metrics["attack_success"] == 1.0
            row = {"attempt": k, "prompt": prompt, "response": reply.response, "success": success, **rubric_score(last)}
            attempts.add(reply, last, row)
            if success:
                success_at = k
                stopped = "success"
                break
            if self.opts.budget_chars is not None and read >= self.opts.budget_chars:
                stopped = "budget"
                break
        assert last is not None  # attempts >= 1
        return attempts.result(
            success_at,
            {
                "category": item.data["category"],
                "judge": last.details.get("judge"),
                "queries": len(attempts.rows),
                "stopped": stopped,
            },
        )


def register(registry: Any) -> None:
    """Plugin hook (:mod:`psychoalign.experiments.harness.registry`): Best-of-N as a benchmark."""
    registry.add_benchmark(BestOfN)
