"""Gateway benchmark. Run: python bench/gateway.py [--quick]

1. Added latency of the OpenAI-compatible gateway over calling the negotiation in-process
   (target < 5 ms p50): the same scripted negotiation (zero-latency models, one round, dual gate)
   run N times in-process, and N times as POST /v1/chat/completions against `psychoalign serve`'s
   app (uvicorn, its own process, loopback), sequentially; added = p50(HTTP) - p50(in-process).
2. Throughput at 64 concurrent clients with 50 ms fake models: every agent call takes 50 ms, a
   negotiation makes 4 sequential calls (DRIVE, evaluations in parallel, assessment, dual gate),
   so the ideal is 64 / 0.2 s = 320 negotiations/s; printed against that ideal, with the trace
   store in memory and in SQLite (the default of `psychoalign serve`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

# bench/a2a.py is named like the a2a-sdk package: take bench/ off the path so `import a2a` finds the SDK.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))
from tests.scenario import World, proposals  # noqa: E402

from bench._util import Target, add_doc_flag, captured, free_port, publish  # noqa: E402
from psychoalign.config import Settings  # noqa: E402
from psychoalign.negotiation import Negotiator  # noqa: E402
from psychoalign.traces import open_store  # noqa: E402

REQUEST = "What is a good way to learn chess?"
ANSWER = "Play many short games, review each loss, and study simple endgames."


def _world() -> World:
    return World([proposals((ANSWER, 0.9), ("Read a book.", 0.6))])


def _negotiator(latency_s: float, store_url: str) -> Negotiator:
    return Negotiator(Settings(), models=_world().models(latency_s=latency_s), store=open_store(store_url))


def serve(port: int, latency_ms: float, store_url: str) -> None:
    """Child process: the real app (create_app + GracefulServer) with scripted agents."""
    from psychoalign.web.app import create_app
    from psychoalign.web.server import GracefulServer, uvicorn_config

    negotiator = _negotiator(latency_ms / 1000, store_url)
    app = create_app(Settings(), store=negotiator.store, negotiators={"psychoalign": negotiator})
    config = uvicorn_config(app, "127.0.0.1", port, backlog=1024, timeout_keep_alive=60)
    GracefulServer(config, app.state.gateway).run()


class Server:
    def __init__(self, latency_ms: float, store_url: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, __file__, "--serve", str(self.port), "--latency-ms", str(latency_ms)]
        self.proc = subprocess.Popen([*args, "--store", store_url])
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("gateway server did not start")
            time.sleep(0.1)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=60)


BODY = {"model": "psychoalign", "messages": [{"role": "user", "content": REQUEST}]}


async def added_latency(n: int, store_url: str) -> dict[str, float]:
    negotiator = _negotiator(0.0, store_url)
    for _ in range(20):
        await negotiator.negotiate(REQUEST)
    local = []
    for _ in range(n):
        t = time.perf_counter()
        trace = await negotiator.negotiate(REQUEST)
        local.append(time.perf_counter() - t)
        assert trace.response == ANSWER
    await negotiator.aclose()
    server = Server(0.0, store_url)
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
            for _ in range(20):
                await client.post("/v1/chat/completions", json=BODY)
            remote = []
            for _ in range(n):
                t = time.perf_counter()
                r = await client.post("/v1/chat/completions", json=BODY)
                remote.append(time.perf_counter() - t)
                assert r.json()["choices"][0]["message"]["content"] == ANSWER
    finally:
        server.stop()
    return {
        "inproc_p50_ms": statistics.median(local) * 1000,
        "http_p50_ms": statistics.median(remote) * 1000,
        "added_p50_ms": (statistics.median(remote) - statistics.median(local)) * 1000,
    }


async def throughput(total: int, concurrency: int, latency_ms: float, store_url: str, stream: bool) -> dict[str, float]:
    server = Server(latency_ms, store_url)
    sem = asyncio.Semaphore(concurrency)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    failed = 0
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:

            async def one() -> None:
                nonlocal failed
                async with sem:
                    try:
                        ok = await request()
                    except httpx.TransportError:  # counted, not fatal: the run goes on
                        ok = False
                    failed += 0 if ok else 1

            async def request() -> bool:
                if stream:
                    async with client.stream("POST", "/v1/chat/completions", json={**BODY, "stream": True}) as r:
                        data = b"".join([chunk async for chunk in r.aiter_raw()])
                    return r.status_code == 200 and ANSWER[:20].encode() in data
                r = await client.post("/v1/chat/completions", json=BODY)
                return r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == ANSWER

            await asyncio.gather(*(one() for _ in range(concurrency)))  # warm-up: open the connections
            failed = 0
            t = time.perf_counter()
            await asyncio.gather(*(one() for _ in range(total)))
            wall = time.perf_counter() - t
    finally:
        server.stop()
    ideal = concurrency / (4 * latency_ms / 1000)
    return {"per_s": total / wall, "ideal_per_s": ideal, "efficiency": total / wall / ideal, "failed": failed}


async def inprocess_throughput(total: int, concurrency: int, latency_ms: float) -> dict[str, float]:
    """The same negotiations called in-process: the ceiling the gateway is measured against."""
    negotiator = _negotiator(latency_ms / 1000, "memory://")
    sem = asyncio.Semaphore(concurrency)

    async def one() -> bool:
        async with sem:
            return (await negotiator.negotiate(REQUEST)).response == ANSWER

    await asyncio.gather(*(one() for _ in range(concurrency)))
    t = time.perf_counter()
    ok = await asyncio.gather(*(one() for _ in range(total)))
    wall = time.perf_counter() - t
    await negotiator.aclose()
    ideal = concurrency / (4 * latency_ms / 1000)
    return {"per_s": total / wall, "ideal_per_s": ideal, "efficiency": total / wall / ideal, "failed": ok.count(False)}


async def main(quick: bool, doc: bool) -> None:
    import tempfile

    n = 100 if quick else 400
    total = 640 if quick else 1920
    with captured() as out, tempfile.TemporaryDirectory() as tmp:
        sqlite = f"sqlite:///{tmp}/bench.db"
        lat = await added_latency(n, "memory://")
        print(f"added latency, {n} sequential calls, zero-latency scripted agents, in-memory store")
        print(f"  in-process negotiation (p50)   {lat['inproc_p50_ms']:.2f} ms")
        print(f"  through /v1 over HTTP (p50)    {lat['http_p50_ms']:.2f} ms")
        print(f"  added by the gateway (p50)     {lat['added_p50_ms']:.2f} ms   (target < 5 ms)")
        r = await inprocess_throughput(total, 64, 50.0)
        print(f"in-process, {total} negotiations at 64 concurrent, 50 ms per agent call, memory store (the ceiling)")
        print(f"  negotiations/s                 {r['per_s']:.1f}   (ideal {r['ideal_per_s']:.0f})")
        print(f"  efficiency                     {r['efficiency'] * 100:.1f} % of ideal")
        failed = 0
        for label, url, stream in (
            ("memory", "memory://", False),
            ("memory", "memory://", True),
            ("sqlite", sqlite, False),
        ):
            r = await throughput(total, 64, 50.0, url, stream)
            failed += int(r["failed"])
            mode = "streaming" if stream else "non-streaming"
            print(f"throughput, {total} negotiations at 64 concurrent, 50 ms per agent call, {label} store, {mode}")
            print(f"  negotiations/s                 {r['per_s']:.1f}   (ideal {r['ideal_per_s']:.0f})")
            print(f"  efficiency                     {r['efficiency'] * 100:.1f} % of ideal")
            print(f"  failed                         {int(r['failed'])}")
    if doc:
        publish(
            "gateway",
            "OpenAI-compatible gateway — `bench/gateway.py`",
            out.getvalue(),
            [
                Target(
                    "latency added by `/v1` (p50)", f"{lat['added_p50_ms']:.2f} ms", "< 5 ms", lat["added_p50_ms"] < 5
                ),
                Target("failed negotiations through `/v1`", str(failed), "0", failed == 0),
            ],
            quick=quick,
            note="Added latency: p50 through `/v1` over HTTP minus p50 in-process, for the same one-round "
            "negotiation with zero-latency scripted agents; the server is what `psychoalign serve` runs, in its "
            "own process on loopback. Throughput: every agent call sleeps 50 ms, 4 sequential calls per "
            "negotiation, 64 concurrent clients, so the ideal is 320 negotiations/s; client and server share "
            "the machine's cores. The throughput rows have no target.",
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--latency-ms", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--store", default="memory://", help=argparse.SUPPRESS)
    add_doc_flag(parser)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency_ms, args.store)
    else:
        asyncio.run(main(args.quick, not args.no_doc))
