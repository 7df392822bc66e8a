"""Model-layer benchmark. Run: python bench/models.py [--quick]

Prints, for the local backend: load time, tokens/s plain and schema-constrained, and the per-call
overhead of the model layer over a direct llama_cpp call (target < 5 %); for the openai backend
against a zero-latency loopback server: client overhead per call (target < 2 ms) and calls/s at
64 concurrent requests.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

import httpx
from pydantic import BaseModel, Field

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import Target, add_doc_flag, captured, fake_openai, peak_rss_mb, publish
from psychoalign.models import Message, ModelSpec, build_model, resolved_label
from psychoalign.models.local import _load, default_model_path, render_prompt


class Rating(BaseModel):
    reason: str = Field(max_length=200)
    score: int = Field(ge=0, le=100)


PROMPT = "Write two sentences about the history of tea."


def bench_local(reps: int) -> dict[str, float]:
    spec = ModelSpec(backend="local", max_tokens=64, seed=0)
    t0 = time.perf_counter()
    loaded = _load(default_model_path(), spec.n_ctx, spec.n_threads)
    load_s = time.perf_counter() - t0
    model = build_model(spec)
    prompt = render_prompt((Message(role="user", content=PROMPT),))

    def direct() -> tuple[float, int]:
        t = time.perf_counter()
        out = loaded.llama.create_completion(
            prompt, max_tokens=64, temperature=0.0, seed=0, stop=["\nUser:", "\n\n"], stream=False
        )
        assert isinstance(out, dict)
        return time.perf_counter() - t, int(out["usage"]["completion_tokens"])

    async def layered() -> tuple[float, int]:
        t = time.perf_counter()
        r = await model.chat(PROMPT)
        return time.perf_counter() - t, r.usage.completion_tokens

    async def constrained() -> tuple[float, int]:
        t = time.perf_counter()
        r = await model.chat("Rate how polite this is: 'Please pass the salt.'", output=Rating)
        return time.perf_counter() - t, r.usage.completion_tokens

    async def measure() -> tuple[list[tuple[float, int]], ...]:
        direct()  # warm-up (and the grammar compile for the constrained path)
        await layered()
        await constrained()
        d, layer, cons = [], [], []
        for _ in range(reps):  # interleaved, and each from an empty KV cache, so both paths do equal work
            loaded.llama.reset()
            d.append(direct())
            loaded.llama.reset()
            layer.append(await layered())
            loaded.llama.reset()
            cons.append(await constrained())
        return d, layer, cons

    d, layer, cons = asyncio.run(measure())
    d_time = statistics.median(t for t, _ in d)
    l_time = statistics.median(t for t, _ in layer)
    return {
        "load_s": load_s,
        "plain_tok_per_s": sum(n for _, n in layer) / sum(t for t, _ in layer),
        "constrained_tok_per_s": sum(n for _, n in cons) / sum(t for t, _ in cons),
        "direct_call_ms": d_time * 1000,
        "layer_call_ms": l_time * 1000,
        "layer_overhead_pct": (l_time - d_time) / d_time * 100,
        "same_tokens": float(all(a[1] == b[1] for a, b in zip(d, layer, strict=True))),
    }


async def bench_openai(calls: int) -> dict[str, float]:
    with fake_openai(0) as url:
        spec = ModelSpec(backend="openai", model="fake", base_url=url)
        model = build_model(spec)
        payload = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "temperature": 0.0}
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=256, max_keepalive_connections=64)) as raw:
            for _ in range(50):  # warm both paths
                await raw.post(f"{url}/chat/completions", json=payload)
                await model.chat("hi")
            raw_times, layer_times = [], []
            for _ in range(calls):
                t = time.perf_counter()
                await raw.post(f"{url}/chat/completions", json=payload)
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
                    await raw.post(f"{url}/chat/completions", json=payload)

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
        "raw_httpx_ms": statistics.median(raw_times) * 1000,
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
    reps, calls = (3, 200) if args.quick else (10, 1000)
    with captured() as out:
        local = bench_local(reps)
        label = resolved_label(ModelSpec(backend="local"))
        print(f"local backend ({label}, llama-cpp-python)")
        print(f"  load time                         {local['load_s']:.2f} s")
        print(f"  plain generation (incl. prompt)   {local['plain_tok_per_s']:.1f} tokens/s")
        print(f"  schema-constrained (incl. prompt) {local['constrained_tok_per_s']:.1f} tokens/s")
        print(f"  direct llama_cpp call (median)    {local['direct_call_ms']:.1f} ms")
        print(f"  through ChatModel (median)        {local['layer_call_ms']:.1f} ms")
        print(f"  model-layer overhead              {local['layer_overhead_pct']:+.2f} %   (target < 5 %)")
        print(f"  same completion lengths           {'yes' if local['same_tokens'] else 'NO'}")
        remote = asyncio.run(bench_openai(calls))
        print("openai backend vs loopback server with zero latency")
        print(f"  raw httpx POST (median)           {remote['raw_httpx_ms']:.3f} ms")
        print(f"  through ChatModel (median)        {remote['layer_ms']:.3f} ms")
        print(f"  client overhead per call          {remote['client_overhead_ms']:.3f} ms   (target < 2 ms)")
        print(f"  calls/s at 64 concurrent          {remote['calls_per_s_64_concurrent']:.0f}")
        raw_rate = remote["raw_calls_per_s_64_concurrent"]
        print(f"  raw httpx calls/s, 64 concurrent  {raw_rate:.0f}   (server-bound ceiling)")
        print(f"peak RSS                            {peak_rss_mb():.0f} MB")
    if not args.no_doc:
        publish(
            "models",
            "Model layer — `bench/models.py`",
            out.getvalue(),
            [
                Target(
                    "model-layer overhead over a direct llama.cpp call",
                    f"{local['layer_overhead_pct']:+.2f} %",
                    "< 5 %",
                    local["layer_overhead_pct"] < 5,
                ),
                Target(
                    "openai client overhead per call",
                    f"{remote['client_overhead_ms']:.3f} ms",
                    "< 2 ms",
                    remote["client_overhead_ms"] < 2,
                ),
            ],
            quick=args.quick,
            note="The local figures compare the same prompt through `ChatModel` and through a direct "
            "llama.cpp call, interleaved, each from an empty KV cache; token rates include prompt "
            "evaluation. The openai figures run against `bench/fake_openai_server.py` in its own process; "
            "at 64 concurrent calls that single-process server is the ceiling.",
        )


if __name__ == "__main__":
    main()
