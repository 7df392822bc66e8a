"""Which llama.cpp load parameters change the embedded model's replies, for the response cache key.

Loads the default embedded model (SmolLM2) under several ``n_ctx`` and ``n_threads`` settings and
asks each the same fixed prompts greedily (temperature 0, seed 0). It prints, per setting, how many
replies equal those of the reference setting (n_ctx 4096, 1 thread). The cache key holds the
parameters that can change a reply (docs/configuration.md, "Response cache"); this shows what the
thread count does on this machine.

    python bench/load_params.py
"""

from __future__ import annotations

import argparse
import asyncio

from psychoalign.models import ModelSpec
from psychoalign.models.local import LocalBackend
from psychoalign.models.types import ChatRequest, Message

PROMPTS = (
    "Give me three tips for a job interview.",
    "What is the capital of France, and why is it famous?",
    "Write a short poem about the sea.",
)
SETTINGS = ((4096, 1), (4096, 2), (2048, 1), (1024, 1))


async def replies(n_ctx: int, n_threads: int) -> list[str]:
    backend = LocalBackend(ModelSpec(backend="local", n_ctx=n_ctx, n_threads=n_threads, max_tokens=96))
    out = []
    for prompt in PROMPTS:
        request = ChatRequest(messages=(Message(role="user", content=prompt),), temperature=0.0, max_tokens=96, seed=0)
        out.append((await backend.complete(request)).text)
    return out


async def main() -> None:
    reference = await replies(*SETTINGS[0])
    for n_ctx, n_threads in SETTINGS:
        got = reference if (n_ctx, n_threads) == SETTINGS[0] else await replies(n_ctx, n_threads)
        same = sum(a == b for a, b in zip(got, reference, strict=True))
        print(f"n_ctx={n_ctx} n_threads={n_threads}: {same}/{len(PROMPTS)} replies equal the reference")


if __name__ == "__main__":
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    asyncio.run(main())
