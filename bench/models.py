"""Model-layer benchmark. Run: python bench/models.py [--quick]

Prints, for the local backend: load time, tokens/s plain and schema-constrained, and the per-call
overhead of the model layer over a direct llama_cpp call (target < 5 %); for the openai backend
against a zero-latency loopback server: client overhead per call (target < 2 ms) and calls/s at
64 concurrent requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import Target, add_doc_flag, captured, fake_openai, peak_rss_mb, publish
from psychoalign.models import Message, ModelSpec, build_model, resolved_label
from psychoalign.models.local import PLAIN_REPEAT_PENALTY, _load, default_model_path
from psychoalign.models.openai_compat import MAX_CONNECTIONS


class Rating(BaseModel):
    reason: str = Field(max_length=200)
    score: int = Field(ge=0, le=100)


PROMPT = "Write two sentences about the history of tea."
#: ~3,000 tokens: how the layer's own work (the template, counting the prompt's tokens) grows with length.
LONG_PROMPT = "Each side stated its position and the mediator summarised the open points of the negotiation. " * 170


@dataclass(frozen=True)
class Call:
    """One timed call: wall and process CPU seconds, completion tokens, reply text."""

    wall_s: float
    cpu_s: float
    tokens: int
    text: str


def _timed_start() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def _timed_end(start: tuple[float, float], tokens: int, text: str) -> Call:
    return Call(time.perf_counter() - start[0], time.process_time() - start[1], tokens, text.strip())


def _paired_overhead_pct(direct: list[float], layer: list[float]) -> float:
    """Median over interleaved pairs of layer/direct - 1, in %: each pair ran back to back, so a
    burst of load from another process hits both sides of one pair rather than one side of the median."""
    return (statistics.median(b / a for a, b in zip(direct, layer, strict=True)) - 1) * 100


def bench_local(reps: int) -> dict[str, float]:
    spec = ModelSpec(backend="local", max_tokens=64, seed=0)
    t0 = time.perf_counter()
    loaded = _load(default_model_path(), spec.n_ctx, spec.n_threads)
    load_s = time.perf_counter() - t0
    model = build_model(spec)
    # The direct call asks llama.cpp for exactly what LocalBackend asks for a plain reply: the
    # prompt through the model's chat template, its end-of-turn stop, the repetition penalty, and
    # the spec's max_tokens, temperature and seed. Same work in, so the same text must come out.
    prompt, stops = loaded.render((Message(role="user", content=PROMPT),))

    def direct() -> Call:
        start = _timed_start()
        out = loaded.llama.create_completion(
            prompt,
            max_tokens=spec.max_tokens,
            temperature=spec.temperature,
            seed=spec.seed,
            repeat_penalty=PLAIN_REPEAT_PENALTY,
            stop=stops,
            stream=False,
        )
        assert isinstance(out, dict)
        return _timed_end(start, int(out["usage"]["completion_tokens"]), out["choices"][0]["text"])

    async def layered() -> Call:
        start = _timed_start()
        r = await model.chat(PROMPT)
        return _timed_end(start, r.usage.completion_tokens, r.text)

    async def constrained() -> Call:
        start = _timed_start()
        r = await model.chat("Rate how polite this is: 'Please pass the salt.'", output=Rating)
        return _timed_end(start, r.usage.completion_tokens, r.text)

    async def layer_only(prompt: str, calls: int) -> list[float]:
        """CPU per ChatModel call with llama.cpp's generation replaced by a canned reply: the
        layer's own work (checks, chat template, tokenising, thread hand-off, result objects)."""
        canned = {"choices": [{"text": "x", "finish_reason": "stop"}], "usage": {"completion_tokens": 1}}
        loaded.llama.create_completion = lambda *_a, **_k: canned  # type: ignore[method-assign]
        try:
            cpu = []
            for _ in range(calls):
                start = _timed_start()
                await model.chat(prompt)
                cpu.append(_timed_end(start, 0, "").cpu_s)
            return cpu
        finally:
            del loaded.llama.create_completion  # back to the class's method

    async def measure() -> tuple[list[Call], list[Call], list[Call], list[float], list[float]]:
        direct()  # warm-up
        await layered()
        await constrained()  # (compiles the grammar)
        d, layer, cons = [], [], []
        # Interleaved, each from an empty KV cache so both paths do equal work, and the pair's order
        # alternates so neither side always runs first (warm caches, a burst of load).
        for i in range(reps):
            loaded.llama.reset()
            if i % 2:
                layer.append(await layered())
                loaded.llama.reset()
                d.append(direct())
            else:
                d.append(direct())
                loaded.llama.reset()
                layer.append(await layered())
            loaded.llama.reset()
            cons.append(await constrained())
        return d, layer, cons, await layer_only(PROMPT, 200), await layer_only(LONG_PROMPT, 50)

    d, layer, cons, own_cpu, own_cpu_long = asyncio.run(measure())
    long_tokens = len(
        loaded.llama.tokenize(loaded.render((Message(role="user", content=LONG_PROMPT),))[0].encode(), special=True)
    )
    return {
        "load_s": load_s,
        "plain_tok_per_s": sum(c.tokens for c in layer) / sum(c.wall_s for c in layer),
        "constrained_tok_per_s": sum(c.tokens for c in cons) / sum(c.wall_s for c in cons),
        "tokens": statistics.median(c.tokens for c in layer),
        "direct_wall_ms": statistics.median(c.wall_s for c in d) * 1000,
        "layer_wall_ms": statistics.median(c.wall_s for c in layer) * 1000,
        "direct_cpu_ms": statistics.median(c.cpu_s for c in d) * 1000,
        "layer_cpu_ms": statistics.median(c.cpu_s for c in layer) * 1000,
        "wall_overhead_pct": _paired_overhead_pct([c.wall_s for c in d], [c.wall_s for c in layer]),
        "cpu_overhead_pct": _paired_overhead_pct([c.cpu_s for c in d], [c.cpu_s for c in layer]),
        "layer_own_cpu_ms": statistics.median(own_cpu) * 1000,
        "layer_own_cpu_long_ms": statistics.median(own_cpu_long) * 1000,
        "long_tokens": long_tokens,
        "same_text": float(all(a.text == b.text and a.tokens == b.tokens for a, b in zip(d, layer, strict=True))),
    }


async def bench_openai(calls: int) -> dict[str, float]:
    with fake_openai(0) as url:
        spec = ModelSpec(backend="openai", model="fake", base_url=url)
        model = build_model(spec)
        # The baseline is the HTTP client the backend itself uses (aiohttp), posting the body the
        # backend sends for chat("hi") and parsing the reply: the difference is the layer's work.
        payload = json.dumps(
            {
                "model": "fake",
                "messages": [{"role": "user", "content": "hi"}],
                "temperature": spec.temperature,
                "max_tokens": spec.max_tokens,
                "seed": spec.seed,
            }
        ).encode()
        endpoint = f"{url}/chat/completions"
        connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, limit_per_host=0)
        async with aiohttp.ClientSession(connector=connector) as raw:

            async def raw_post() -> None:
                async with raw.post(endpoint, data=payload, headers={"Content-Type": "application/json"}) as r:
                    json.loads(await r.read())

            for _ in range(50):  # warm both paths
                await raw_post()
                await model.chat("hi")
            raw_times, layer_times = [], []
            for _ in range(calls):
                t = time.perf_counter()
                await raw_post()
                raw_times.append(time.perf_counter() - t)
                t = time.perf_counter()
                await model.chat("hi")
                layer_times.append(time.perf_counter() - t)
            conc_model = build_model(spec)
            sem = asyncio.Semaphore(64)

            async def via_layer() -> None:
                async with sem:
                    await conc_model.chat("hi")

            async def via_raw() -> None:
                async with sem:
                    await raw_post()

            # Warm the connection pools first: opening 64 connections dominates a short run.
            await asyncio.gather(*(via_layer() for _ in range(256)), *(via_raw() for _ in range(256)))
            t = time.perf_counter()
            await asyncio.gather(*(via_raw() for _ in range(calls * 2)))
            raw_elapsed = time.perf_counter() - t
            t = time.perf_counter()
            await asyncio.gather(*(via_layer() for _ in range(calls * 2)))
            elapsed = time.perf_counter() - t
        await model.aclose()
        await conc_model.aclose()
    return {
        "raw_aiohttp_ms": statistics.median(raw_times) * 1000,
        "layer_ms": statistics.median(layer_times) * 1000,
        "client_overhead_ms": (statistics.median(layer_times) - statistics.median(raw_times)) * 1000,
        "calls_per_s_64_concurrent": calls * 2 / elapsed,
        "raw_calls_per_s_64_concurrent": calls * 2 / raw_elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer repetitions")
    add_doc_flag(parser)
    args = parser.parse_args()
    reps, calls = (3, 200) if args.quick else (20, 1000)
    with captured() as out:
        local = bench_local(reps)
        label = resolved_label(ModelSpec(backend="local"))
        print(f"local backend ({label}, llama-cpp-python)")
        print(f"  load time                         {local['load_s']:.2f} s")
        print(f"  plain generation (incl. prompt)   {local['plain_tok_per_s']:.1f} tokens/s")
        print(f"  schema-constrained (incl. prompt) {local['constrained_tok_per_s']:.1f} tokens/s")
        same = "yes" if local["same_text"] else "NO"
        print(f"  same prompt, params and reply     {same}   ({local['tokens']:.0f} tokens)")
        d_wall, d_cpu, l_wall, l_cpu = (
            local[k] for k in ("direct_wall_ms", "direct_cpu_ms", "layer_wall_ms", "layer_cpu_ms")
        )
        print(f"  direct llama_cpp call (median)    {d_wall:.1f} ms wall, {d_cpu:.1f} ms CPU")
        print(f"  through ChatModel (median)        {l_wall:.1f} ms wall, {l_cpu:.1f} ms CPU")
        print(f"  model-layer overhead, CPU         {local['cpu_overhead_pct']:+.2f} %   (target < 5 %)")
        print(f"  model-layer overhead, wall        {local['wall_overhead_pct']:+.2f} %")
        own = local["layer_own_cpu_ms"]
        print(f"  layer's own CPU per call          {own:.2f} ms   ({own / d_cpu * 100:.2f} % of a direct call)")
        print(f"    with a {local['long_tokens']:.0f}-token prompt         {local['layer_own_cpu_long_ms']:.2f} ms")
        remote = asyncio.run(bench_openai(calls))
        print("openai backend vs loopback server with zero latency")
        print(f"  raw aiohttp POST (median)         {remote['raw_aiohttp_ms']:.3f} ms")
        print(f"  through ChatModel (median)        {remote['layer_ms']:.3f} ms")
        print(f"  client overhead per call          {remote['client_overhead_ms']:.3f} ms   (target < 2 ms)")
        print(f"  calls/s at 64 concurrent          {remote['calls_per_s_64_concurrent']:.0f}")
        raw_rate = remote["raw_calls_per_s_64_concurrent"]
        print(f"  raw aiohttp calls/s, 64 concurrent {raw_rate:.0f}")
        print(f"peak RSS                            {peak_rss_mb():.0f} MB")
    if not args.no_doc:
        publish(
            "models",
            "Model layer — `bench/models.py`",
            out.getvalue(),
            [
                Target(
                    "model-layer overhead over a direct llama.cpp call (CPU time, same reply)",
                    f"{local['cpu_overhead_pct']:+.2f} %" if local["same_text"] else "replies differ",
                    "< 5 %",
                    bool(local["same_text"]) and local["cpu_overhead_pct"] < 5,
                ),
                Target(
                    "openai client overhead per call",
                    f"{remote['client_overhead_ms']:.3f} ms",
                    "< 2 ms",
                    remote["client_overhead_ms"] < 2,
                ),
            ],
            quick=args.quick,
            note="The local figures compare one request through `ChatModel` and through a direct "
            "llama.cpp call given the same chat-templated prompt, stop, repetition penalty, max_tokens, "
            "temperature and seed (the replies must match byte for byte), interleaved in alternating "
            "order, each from an empty KV cache; overheads are medians over the pairs, in process CPU "
            "time (the machine is shared) and wall time. The layer's own CPU per call is measured with "
            "llama.cpp's generation replaced by a canned reply: on a loaded machine the paired overheads "
            "move by several % from run to run, in either direction, and this is the steadier figure. "
            "Token rates include prompt evaluation. "
            "The openai figures post to `bench/fake_openai_server.py`, in its own process, through "
            "`ChatModel` and through a bare aiohttp session (the client the backend uses) sending the "
            "same body; the server is single-process, so calls/s at 64 concurrent is bound by it.",
        )


if __name__ == "__main__":
    main()
