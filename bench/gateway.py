"""Gateway benchmark. Run: python bench/gateway.py [--quick] [--latency-only]

1. Added latency over the upstream calls at 100 concurrent clients (target <= 5 ms at p50): the
   same scripted negotiation (one round, dual gate; each agent call takes UPSTREAM_MS) by 100
   concurrent clients as POST /v1/chat/completions against `psychoalign serve`'s app (uvicorn, its
   own process, loopback); per negotiation, added = its latency - the time its upstream calls ran.
   Shown at the client, inside the server, and in-process (the engine alone), with the server's
   CPU per negotiation.
2. Progressive streaming, time to first token (target <= 1.5x a plain stream's): every agent call
   takes 50 ms. A plain stream is one call to that fake upstream streamed back through the same
   server (50 ms, then the text); the gated streams are `/v1` with progressive streaming
   (serve.stream_window) and without it (the whole negotiation first). Measured with every agent
   on the upstream, with a scripted EVALUATOR in-process (no latency, no CPU of its own), and
   with the embedded classifier as the EVALUATOR (in-process, its real CPU; it also screens the
   request) when it is installed.
3. Bad input (target: 0 responses >= 500, 0 tracebacks in the server log): >= 100 malformed
   bodies (nesting, huge numbers, bad UTF-8, wrong types, bad tools, mutated valid bodies, ...).
4. Full mode only: throughput at 64 concurrent clients with 50 ms fake models (4 sequential calls
   per negotiation: ideal 320 negotiations/s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import aiohttp
import httpx

# bench/a2a.py is named like the a2a-sdk package: take bench/ off the path so `import a2a` finds the SDK.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))
from tests.scenario import World, proposals  # noqa: E402

from bench._util import Target, add_doc_flag, captured, free_port, publish  # noqa: E402
from psychoalign.config import Settings  # noqa: E402
from psychoalign.frameworks import load_framework  # noqa: E402
from psychoalign.models import ChatModel, ModelSpec  # noqa: E402
from psychoalign.models.classifier import ClassifierBackend  # noqa: E402
from psychoalign.negotiation import Negotiator  # noqa: E402
from psychoalign.negotiation.track import conversation_ref  # noqa: E402
from psychoalign.traces import open_store  # noqa: E402

REQUEST = "What is a good way to learn chess?"
ANSWER = "Play many short games, review each loss, and study simple endgames."
#: The long answer of the streaming runs (about 1,000 characters: windows of 64, 128, 256, 512
#: and the rest).
LONG = " ".join([ANSWER] * 15)
WINDOW = 64
#: What one upstream model call takes in the added-latency run: a short reply of a hosted model.
#: With zero-latency agents every client would queue for the server's CPU instead: 100 clients x
#: the CPU of one negotiation, whatever the gateway adds.
UPSTREAM_MS = 1000.0


#: Who the upstream call is for: the bench's id of the request (x-bench-id) or in-process call.
_CALLER: ContextVar[str] = ContextVar("bench_caller", default="")
#: caller -> (start, seconds) of each upstream call made for it, in this process.
UPSTREAM: defaultdict[str, list[tuple[float, float]]] = defaultdict(list)
#: caller -> seconds the server spent on the request, from its arrival to its last byte sent.
SERVER: dict[str, float] = {}
CALLER_HEADER = "x-bench-id"


def _timed(models: dict[str, ChatModel], latencies: dict[str, float]) -> dict[str, ChatModel]:
    """Record every upstream call under the current caller: it starts when the engine calls the
    model and lasts the upstream's own latency (a late wake-up of the event loop after it is the
    gateway's delay, not the upstream's)."""
    for role, model in models.items():
        inner = model.backend.complete

        async def complete(request: Any, inner: Any = inner, seconds: float = latencies[role]) -> Any:
            UPSTREAM[_CALLER.get()].append((time.perf_counter(), seconds))
            return await inner(request)

        model.backend.complete = complete  # type: ignore[method-assign]
    return models


def upstream_s(caller: str) -> float:
    """Wall time during which at least one upstream call of ``caller`` was running."""
    total, end = 0.0, float("-inf")
    for start, seconds in sorted(UPSTREAM.pop(caller, [])):
        stop = start + seconds
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def _models(latency_s: float, eval_latency_s: float, answer: str, classifier: bool = False) -> dict[str, ChatModel]:
    world = World([proposals((answer, 0.9), ("Read a book.", 0.6))])
    models = world.models(latency_s=latency_s)
    if classifier:  # the embedded classifier: in-process, real CPU, and it screens the request
        spec = ModelSpec(backend="classifier")
        backend = ClassifierBackend(spec)
        backend.preload()
        models["evaluator"], eval_latency_s = ChatModel(spec, backend), 0.0
    elif eval_latency_s != latency_s:
        models["evaluator"] = world.models(latency_s=eval_latency_s)["evaluator"]
    latencies = dict.fromkeys(models, latency_s) | {"evaluator": eval_latency_s}
    return _timed(models, latencies)


class PerRequest:
    """Outermost ASGI layer of the bench's server: each request runs as its caller (the
    ``x-bench-id`` header), and its time in the server is recorded."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        caller = dict(scope.get("headers") or ()).get(CALLER_HEADER.encode()) if scope["type"] == "http" else None
        if caller is None:
            await self.app(scope, receive, send)
            return
        token = _CALLER.set(caller.decode())
        start = time.perf_counter()
        try:
            await self.app(scope, receive, send)
        finally:
            SERVER[caller.decode()] = time.perf_counter() - start
            _CALLER.reset(token)


def _negotiator(
    latency_s: float,
    store_url: str,
    eval_latency_s: float | None = None,
    answer: str = ANSWER,
    classifier: bool = False,
) -> Negotiator:
    eval_s = latency_s if eval_latency_s is None else eval_latency_s
    models = _models(latency_s, eval_s, answer, classifier)
    return Negotiator(Settings(), models=models, store=open_store(store_url))


def serve(
    port: int, latency_ms: float, eval_ms: float | None, store_url: str, window: int, long: bool, classifier: bool
) -> None:
    """Child process: the real app (create_app + GracefulServer) with scripted agents, plus a
    plain streaming route that stands for the upstream model streamed straight to the client."""
    from starlette.requests import Request
    from starlette.responses import JSONResponse, StreamingResponse

    from psychoalign.web.app import create_app
    from psychoalign.web.server import GracefulServer, uvicorn_config

    eval_s = None if eval_ms is None else eval_ms / 1000
    negotiator = _negotiator(latency_ms / 1000, store_url, eval_s, LONG if long else ANSWER, classifier)
    settings = Settings.model_validate({"serve": {"stream_window": window}})
    app = create_app(settings, store=negotiator.store, negotiators={"psychoalign": negotiator})

    async def plain(request: Request) -> StreamingResponse:
        async def body() -> Any:
            await asyncio.sleep(latency_ms / 1000)  # one upstream call, then its text
            for i in range(0, len(LONG), 48):
                chunk = {"choices": [{"index": 0, "delta": {"content": LONG[i : i + 48]}}]}
                yield f"data: {json.dumps(chunk)}\n\n".encode()
            yield b"data: [DONE]\n\n"

        return StreamingResponse(body(), media_type="text/event-stream")

    async def timings(request: Request) -> JSONResponse:
        """Per bench request: seconds in the server, seconds of upstream calls (then forgotten)."""
        out = {caller: {"server_s": SERVER.pop(caller), "upstream_s": upstream_s(caller)} for caller in list(SERVER)}
        return JSONResponse(out)

    app.add_route("/bench/plain", plain, methods=["POST"])
    app.add_route("/bench/timings", timings, methods=["GET"])
    app.add_middleware(PerRequest)
    config = uvicorn_config(app, "127.0.0.1", port, backlog=1024, timeout_keep_alive=60)
    GracefulServer(config, app.state.gateway, freeze_heap=True).run()  # as `psychoalign serve` runs it


class Server:
    def __init__(
        self,
        latency_ms: float,
        store_url: str,
        *,
        eval_ms: float | None = None,
        window: int = 0,
        long: bool = False,
        classifier: bool = False,
        log: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, __file__, "--serve", str(self.port), "--latency-ms", str(latency_ms)]
        args += ["--store", store_url, "--window", str(window)]
        args += ["--eval-ms", str(eval_ms)] if eval_ms is not None else []
        args += ["--long"] if long else []
        args += ["--classifier"] if classifier else []
        self.log = open(log, "w") if log is not None else None  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT if self.log else None)
        deadline = time.monotonic() + 300  # a loaded machine imports slowly; not part of any figure
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
        if self.log is not None:
            self.log.close()


BODY = {"model": "psychoalign", "messages": [{"role": "user", "content": REQUEST}]}
_RUN = iter(range(10**9))


def _unique(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` as a new conversation: identical requests from one caller would be turns of one
    conversation, whose cross-turn track reads the earlier turns back from the store (a cost that
    grows with the conversation, not the gateway's)."""
    return {**body, "messages": [{"role": "user", "content": f"{REQUEST} (run {next(_RUN)})"}]}


async def _concurrent(n: int, concurrency: int, call: Any, spread_s: float = 0.0) -> dict[str, float]:
    """Latency of each of ``n`` calls, by caller id, made by ``concurrency`` workers at once. With
    ``spread_s`` the workers start evenly over that time: with a fixed upstream latency, workers
    that start together stay in lockstep, every reply lands at once and each waits for the CPU of
    all the others (clients do not arrive so)."""
    latencies: dict[str, float] = {}
    todo = iter(range(n))

    async def worker(k: int) -> None:
        await asyncio.sleep(k * spread_s / concurrency)
        for _ in todo:  # shared: each call is made once
            caller = f"c{next(_RUN)}"
            t = time.perf_counter()
            await call(caller)
            latencies[caller] = time.perf_counter() - t

    await asyncio.gather(*(worker(k) for k in range(concurrency)))
    return latencies


def _p(values: list[float], q: float) -> float:
    """The ``q`` quantile (0-1) of ``values``, in milliseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _cpu_s(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def added_latency(n: int, concurrency: int, upstream_ms: float) -> dict[str, float]:
    """The issue's measure: per negotiation, its latency minus the time its upstream calls took
    (the union of their intervals), at ``concurrency`` concurrent clients, each agent call taking
    ``upstream_ms``: in-process (the engine alone), at the HTTP client (server in its own
    process) and inside the server (arrival to last byte). The load comes from aiohttp: httpx's
    pool costs ~12 ms of CPU per request at 100 connections, on the cores the server runs on."""
    negotiator = _negotiator(upstream_ms / 1000, "memory://")
    framework = load_framework("general")  # as the gateway hands it over: parsed once

    async def local(caller: str) -> None:
        # As /v1 does: the request filed under its conversation, whose earlier turns are looked up.
        token = _CALLER.set(caller)
        try:
            text = _unique(BODY)["messages"][0]["content"]
            ref = conversation_ref("bench", [text], None)
            trace = await negotiator.negotiate(text, framework=framework, conversation=ref)
        finally:
            _CALLER.reset(token)
        assert trace.response == ANSWER

    warm = await _concurrent(concurrency, concurrency, local)  # warm-up
    cycle = statistics.median(upstream_s(c) for c in warm)  # one negotiation's upstream time
    UPSTREAM.clear()
    engine_cpu = time.process_time()
    inproc = await _concurrent(n, concurrency, local, cycle)
    engine_cpu = time.process_time() - engine_cpu
    inproc_up = {c: upstream_s(c) for c in inproc}
    await negotiator.aclose()
    server = Server(upstream_ms, "memory://")
    try:
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(server.url, connector=connector) as client:

            async def remote(caller: str) -> None:
                body = _unique(BODY)
                async with client.post("/v1/chat/completions", json=body, headers={CALLER_HEADER: caller}) as r:
                    reply = await r.json()
                assert reply["choices"][0]["message"]["content"] == ANSWER

            await _concurrent(concurrency, concurrency, remote)  # warm-up: open the connections
            async with client.get("/bench/timings"):  # forget the warm-up's
                pass
            cpu = _cpu_s(server.proc.pid)
            http = await _concurrent(n, concurrency, remote, cycle)
            cpu = _cpu_s(server.proc.pid) - cpu
            async with client.get("/bench/timings") as r:
                timings = await r.json()
    finally:
        server.stop()
    inproc_added = [inproc[c] - inproc_up[c] for c in inproc]
    client_added = [http[c] - timings[c]["upstream_s"] for c in http]
    server_added = [timings[c]["server_s"] - timings[c]["upstream_s"] for c in http]
    return {
        "upstream_p50_ms": _p([t["upstream_s"] for t in timings.values()], 0.5),
        "inproc_p50_ms": _p(inproc_added, 0.5),
        "inproc_p95_ms": _p(inproc_added, 0.95),
        "client_p50_ms": _p(client_added, 0.5),
        "client_p95_ms": _p(client_added, 0.95),
        "server_p50_ms": _p(server_added, 0.5),
        "server_p95_ms": _p(server_added, 0.95),
        "server_cpu_ms": cpu / n * 1000,
        "engine_cpu_ms": engine_cpu / n * 1000,
    }


async def _ttft(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> float:
    """Seconds from sending the request to the first content byte of the stream. The stream is
    read to its end: the next request must not share the CPU with this one's later checks."""
    t = time.perf_counter()
    first: float | None = None
    async with client.stream("POST", path, json=body) as r:
        async for line in r.aiter_lines():
            if first is not None:
                continue
            if line.startswith("data: {") and '"content":"' in line.replace(" ", "") and '"content":""' not in line:
                first = time.perf_counter() - t
    if first is None:
        raise AssertionError(f"no content in the stream of {path}")
    return first


async def first_token(n: int, latency_ms: float, eval_ms: float | None, classifier: bool = False) -> dict[str, float]:
    """p50 time to first token: plain upstream stream, progressive /v1, whole-answer /v1."""
    out: dict[str, float] = {}
    for label, window in (("progressive", WINDOW), ("whole", 0)):
        server = Server(latency_ms, "memory://", eval_ms=eval_ms, window=window, long=True, classifier=classifier)
        try:
            async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
                for _ in range(3):
                    await _ttft(client, "/v1/chat/completions", {**_unique(BODY), "stream": True})
                runs = [
                    await _ttft(client, "/v1/chat/completions", {**_unique(BODY), "stream": True}) for _ in range(n)
                ]
                out[label] = statistics.median(runs) * 1000
                if label == "progressive":
                    plain = [await _ttft(client, "/bench/plain", {**BODY, "stream": True}) for _ in range(n)]
                    out["plain"] = statistics.median(plain) * 1000
        finally:
            server.stop()
    return out


def malformed_bodies(seed: int = 25) -> list[tuple[str, bytes, str]]:
    """(what, body, content type): at least 100 bodies /v1 must refuse without a server error."""
    ok = json.dumps(BODY).encode()
    msg = [{"role": "user", "content": "hi"}]
    base: dict[str, Any] = {"model": "psychoalign", "messages": msg}
    cases: list[tuple[str, Any]] = [
        ("deep array", "[" * 100_000 + "]" * 100_000),
        ("deep object", '{"a":' * 50_000 + "1" + "}" * 50_000),
        ("deep in messages", json.dumps(base)[:-1] + ', "metadata": ' + "[" * 5000 + "]" * 5000 + "}"),
        ("5000-digit integer", '{"model": "psychoalign", "seed": ' + "9" * 5000 + ', "messages": []}'),
        ("huge exponent", '{"model": "psychoalign", "temperature": 1e999999, "messages": []}'),
        ("NaN", '{"model": "psychoalign", "temperature": NaN, "messages": [{"role": "user", "content": "hi"}]}'),
        ("truncated", json.dumps(base)[:-5]),
        ("empty", ""),
        ("not an object", "[1, 2, 3]"),
        ("a string", '"hello"'),
        ("null", "null"),
        ("lone surrogate", '{"model": "psychoalign", "messages": [{"role": "user", "content": "\\ud800"}]}'),
        ("NUL", '{"model": "psychoalign", "messages": [{"role": "user", "content": "a\\u0000b"}]}'),
        ("duplicate keys", '{"model": "psychoalign", "model": 3, "messages": []}'),
    ]
    wrong: dict[str, list[Any]] = {
        "model": [None, 3, "", "x" * 500, [], {}],
        "messages": [None, 3, "hi", [], [3], [{}], [{"role": "user"}], [{"role": "wizard", "content": "x"}]],
        "stream": ["yes", 1, None, {}],
        "temperature": ["hot", 99, -1, [], {}],
        "top_p": [2, "x"],
        "max_tokens": [-1, 0, "10", 1.5],
        "max_completion_tokens": [-5, "x"],
        "stop": [3, ["a"] * 5, [""], [3]],
        "seed": ["x", 2**70, 1.5],
        "n": [2, 0, "x"],
        "logprobs": ["yes", True],
        "top_logprobs": [3],
        "response_format": [
            "json",
            {"type": "xml"},
            {"type": "json_schema"},
            {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 3}}},
        ],
        "tools": [
            "x",
            [3],
            [{"type": "function"}],
            [{"type": "function", "function": {"name": "bad name"}}],
            [{"type": "function", "function": {"name": "f", "parameters": {"type": "nope"}}}],
        ],
        "tool_choice": ["required", {"type": "function", "function": {"name": "missing"}}, 3],
        "stream_options": [{"include_usage": "yes"}, "x", {"nope": True}],
        "psychoalign": [{"framework": 3}, {"conversation_id": "bad id!"}, "x", {"nope": 1}],
        "functions": [[{"name": "f"}]],
        "modalities": [["audio"]],
        "unknown_field": [1],
    }
    for key, values in wrong.items():
        for value in values:
            cases.append((f"{key}={json.dumps(value)[:30]}", json.dumps({**base, key: value})))
    bad_messages = [
        [{"role": "assistant", "content": "hi"}],
        [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
        [{"role": "user", "content": [3]}],
        [{"role": "tool", "tool_call_id": "a", "content": "x"}],
        [{"role": "user", "content": "hi", "tool_calls": []}],
        [{"role": "user", "content": ""}],
        [{"role": "user", "content": "x" * 9000}],
    ]
    for m in bad_messages:
        cases.append((f"messages={json.dumps(m)[:30]}", json.dumps({**base, "messages": m})))
    out: list[tuple[str, bytes, str]] = [
        (what, body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body, "application/json")
        for what, body in cases
    ]
    out.append(("invalid UTF-8", b'{"model": "\xff\xfe", "messages": []}', "application/json"))
    out.append(("text/plain", ok, "text/plain"))
    out.append(("form", ok, "application/x-www-form-urlencoded"))
    out.append(
        ("over 1 MB", b'{"model": "psychoalign", "messages": [], "x": "' + b"a" * 1_100_000 + b'"}', "application/json")
    )
    rng = random.Random(seed)
    for i in range(40):  # mutations of a valid body: bytes flipped, cut, repeated
        data = bytearray(ok)
        for _ in range(rng.randint(1, 6)):
            pos = rng.randrange(len(data))
            op = rng.randrange(3)
            if op == 0:
                data[pos] = rng.randrange(256)
            elif op == 1:
                del data[pos : pos + rng.randint(1, 8)]
            else:
                data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        out.append((f"mutation {i}", bytes(data), "application/json"))
    return out


async def bad_input(log: Path) -> dict[str, Any]:
    bodies = malformed_bodies()
    server = Server(0.0, "memory://", log=log)
    statuses: dict[int, int] = {}
    five: list[str] = []
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
            for what, body, ctype in bodies:
                r = await client.post("/v1/chat/completions", content=body, headers={"content-type": ctype})
                statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                if r.status_code >= 500:
                    five.append(what)
    finally:
        server.stop()
    text = log.read_text(encoding="utf-8", errors="replace")  # noqa: ASYNC240 - after the server stopped
    return {"bodies": len(bodies), "statuses": statuses, "five": five, "tracebacks": text.count("Traceback")}


async def throughput(total: int, concurrency: int, latency_ms: float) -> dict[str, float]:
    server = Server(latency_ms, "memory://")
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    failed = 0
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:

            async def one(caller: str) -> None:
                nonlocal failed
                r = await client.post("/v1/chat/completions", json=_unique(BODY))
                failed += 0 if r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == ANSWER else 1

            await _concurrent(concurrency, concurrency, one)
            failed = 0
            t = time.perf_counter()
            await _concurrent(total, concurrency, one)
            wall = time.perf_counter() - t
    finally:
        server.stop()
    ideal = concurrency / (4 * latency_ms / 1000)
    return {"per_s": total / wall, "ideal_per_s": ideal, "efficiency": total / wall / ideal, "failed": failed}


async def latency_part(n: int) -> dict[str, float]:
    lat = await added_latency(n, 100, UPSTREAM_MS)
    print(
        f"added latency over the upstream calls, {n} negotiations by 100 concurrent clients, "
        f"every agent call {UPSTREAM_MS:.0f} ms upstream, memory store"
    )
    print(f"  upstream time per negotiation (p50)        {lat['upstream_p50_ms']:.0f} ms")
    for label, key in (("in-process, the engine alone", "inproc"), ("inside the server", "server")):
        print(f"  {label + ' (p50 / p95)':<42} {lat[key + '_p50_ms']:.2f} / {lat[key + '_p95_ms']:.2f} ms")
    added = f"{lat['client_p50_ms']:.2f} / {lat['client_p95_ms']:.2f} ms"
    print(f"  {'through /v1, at the client (p50 / p95)':<42} {added}   (target: p50 <= 5 ms)")
    print(f"  CPU per negotiation, in-process engine     {lat['engine_cpu_ms']:.2f} ms")
    print(f"  CPU per negotiation, the server            {lat['server_cpu_ms']:.2f} ms")
    return lat


async def main(quick: bool, doc: bool) -> None:
    n = 300 if quick else 1000
    runs = 30 if quick else 100
    with captured() as out, tempfile.TemporaryDirectory() as tmp:
        lat = await latency_part(n)
        ratios = {}
        configs: list[tuple[str, float | None, bool]] = [
            ("every agent on the upstream", None, False),
            ("EVALUATOR in-process", 0.0, False),
        ]
        if ClassifierBackend.availability()[0]:
            configs.append(("EVALUATOR = the embedded classifier", None, True))
        else:
            print(f"time to first token with the embedded classifier: skipped ({ClassifierBackend.availability()[1]})")
        for label, eval_ms, classifier in configs:
            t = await first_token(runs, 50.0, eval_ms, classifier)
            ratios[label] = t["progressive"] / t["plain"]
            print(
                f"time to first token, {runs} streams each, 50 ms per upstream call, {label}, ~1,000-character answer"
            )
            print(f"  plain upstream stream (p50)    {t['plain']:.1f} ms")
            ratio = f"{ratios[label]:.2f}x plain; target <= 1.5x"
            print(f"  /v1 progressive, window {WINDOW} (p50) {t['progressive']:.1f} ms   ({ratio})")
            print(f"  /v1 whole answer gated (p50)   {t['whole']:.1f} ms   ({t['whole'] / t['plain']:.2f}x plain)")
        bad = await bad_input(Path(tmp) / "server.log")
        codes = ", ".join(f"{k}: {v}" for k, v in sorted(bad["statuses"].items()))
        print(f"bad input, {bad['bodies']} malformed bodies to /v1/chat/completions (a mutation may stay valid: 200)")
        print(f"  responses by status            {codes}")
        which = f" ({', '.join(bad['five'][:5])})" if bad["five"] else ""
        print(f"  responses >= 500               {len(bad['five'])}{which}")
        print(f"  tracebacks in the server log   {bad['tracebacks']}")
        if not quick:
            r = await throughput(1920, 64, 50.0)
            print("throughput, 1920 negotiations at 64 concurrent, 50 ms per agent call, memory store")
            print(f"  negotiations/s                 {r['per_s']:.1f}   (ideal {r['ideal_per_s']:.0f})")
            print(f"  failed                         {int(r['failed'])}")
    if doc:
        all_ratio, local_ratio = ratios["every agent on the upstream"], ratios["EVALUATOR in-process"]
        classifier_ratio = ratios.get("EVALUATOR = the embedded classifier")
        classifier_target = (
            []
            if classifier_ratio is None
            else [
                Target(
                    "progressive time to first token, EVALUATOR = the embedded classifier",
                    f"{classifier_ratio:.2f}×",
                    "≤ 1.5× plain",
                    classifier_ratio <= 1.5,
                )
            ]
        )
        publish(
            "gateway",
            "OpenAI-compatible gateway — `bench/gateway.py`",
            out.getvalue(),
            [
                Target(
                    "latency added over the upstream calls at 100 concurrent clients (p50, at the client)",
                    f"{lat['client_p50_ms']:.2f} ms",
                    "≤ 5 ms",
                    lat["client_p50_ms"] <= 5,
                ),
                Target(
                    "progressive time to first token, every agent on the upstream",
                    f"{all_ratio:.2f}×",
                    "≤ 1.5× plain",
                    all_ratio <= 1.5,
                ),
                Target(
                    "progressive time to first token, EVALUATOR in-process",
                    f"{local_ratio:.2f}×",
                    "≤ 1.5× plain",
                    local_ratio <= 1.5,
                ),
                *classifier_target,
                Target(
                    f"responses ≥ 500 to {bad['bodies']} malformed bodies", str(len(bad["five"])), "0", not bad["five"]
                ),
                Target("tracebacks in the server log", str(bad["tracebacks"]), "0", bad["tracebacks"] == 0),
            ],
            quick=quick,
            note="Added latency: for each negotiation, its latency minus the wall time during which at least one "
            "of its upstream model calls was running (each scripted agent call takes 1,000 ms; a one-round "
            "negotiation with the dual gate), with 100 concurrent clients that start spread over one negotiation's "
            "upstream time: in-process (the engine alone), inside "
            "the server (from the request's arrival to its last byte) and at the HTTP client (aiohttp, in its own "
            "process). The server is what `psychoalign serve` runs, in its own process on loopback, and shares "
            "the machine's cores with the client and whatever else runs (see the load average above): the "
            "CPU per negotiation (the engine alone in-process, and the whole server) is the part "
            "that does not depend on that load. Time to first token: "
            "every upstream call takes 50 ms; the plain stream is one such call "
            "streamed back through the same server; progressive streaming releases the first 64-character "
            "window after the DRIVE's draft and one EVALUATOR call on its first 264 characters (with every agent "
            "on the upstream that is two 50 ms calls one after the other, against the plain stream's one: a "
            "floor of about 2× for any gate that judges the draft's text before releasing it). With the "
            "embedded classifier as the EVALUATOR, the classifier screens the request before the DRIVE call starts "
            "(a request the screen decides gets no DRIVE call), then the first window's check is the classifier on "
            "the first 264 characters. Malformed bodies: "
            "`malformed_bodies()` in the bench (nesting, huge numbers, bad UTF-8, wrong types and values for "
            "every field, bad tools and messages, wrong content types, an oversize body, 40 random mutations "
            "of a valid body).",
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--latency-ms", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--eval-ms", type=float, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--store", default="memory://", help=argparse.SUPPRESS)
    parser.add_argument("--window", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--long", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--classifier", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--latency-only",
        action="store_true",
        help="part 1 only (added latency and CPU per negotiation), printed; docs/performance.md is left as it is",
    )
    add_doc_flag(parser)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency_ms, args.eval_ms, args.store, args.window, args.long, args.classifier)
    elif args.latency_only:
        asyncio.run(latency_part(300 if args.quick else 1000))
    else:
        asyncio.run(main(args.quick, not args.no_doc))
