"""Gateway benchmark. Run: python bench/gateway.py [--quick]

1. Added latency at 100 concurrent clients (target <= 5 ms at p50): the same scripted negotiation
   (zero-latency agents: the fake upstream answers at once; one round, dual gate) run by 100
   concurrent callers in-process, and by 100 concurrent clients as POST /v1/chat/completions
   against `psychoalign serve`'s app (uvicorn, its own process, loopback); added = p50 through
   HTTP - p50 in-process.
2. Progressive streaming, time to first token (target <= 1.5x a plain stream's): every agent call
   takes 50 ms. A plain stream is one call to that fake upstream streamed back through the same
   server (50 ms, then the text); the gated streams are `/v1` with progressive streaming
   (serve.stream_window) and without it (the whole negotiation first). Measured with every agent
   on the upstream, and with the EVALUATOR in-process (as the embedded classifier is).
3. Bad input (target: 0 responses >= 500, 0 tracebacks in the server log): >= 100 malformed
   bodies (nesting, huge numbers, bad UTF-8, wrong types, bad tools, mutated valid bodies, ...).
4. Full mode only: throughput at 64 concurrent clients with 50 ms fake models (4 sequential calls
   per negotiation: ideal 320 negotiations/s).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

# bench/a2a.py is named like the a2a-sdk package: take bench/ off the path so `import a2a` finds the SDK.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))
from tests.scenario import World, proposals  # noqa: E402

from bench._util import Target, add_doc_flag, captured, free_port, publish  # noqa: E402
from psychoalign.config import Settings  # noqa: E402
from psychoalign.models import ChatModel  # noqa: E402
from psychoalign.negotiation import Negotiator  # noqa: E402
from psychoalign.negotiation.track import conversation_ref  # noqa: E402
from psychoalign.traces import open_store  # noqa: E402

REQUEST = "What is a good way to learn chess?"
ANSWER = "Play many short games, review each loss, and study simple endgames."
#: The long answer of the streaming runs (about 1,000 characters: five windows of 200).
LONG = " ".join([ANSWER] * 15)
WINDOW = 200


def _models(latency_s: float, eval_latency_s: float, answer: str) -> dict[str, ChatModel]:
    world = World([proposals((answer, 0.9), ("Read a book.", 0.6))])
    models = world.models(latency_s=latency_s)
    if eval_latency_s != latency_s:
        models["evaluator"] = world.models(latency_s=eval_latency_s)["evaluator"]
    return models


def _negotiator(
    latency_s: float, store_url: str, eval_latency_s: float | None = None, answer: str = ANSWER
) -> Negotiator:
    eval_s = latency_s if eval_latency_s is None else eval_latency_s
    return Negotiator(Settings(), models=_models(latency_s, eval_s, answer), store=open_store(store_url))


def serve(port: int, latency_ms: float, eval_ms: float | None, store_url: str, window: int, long: bool) -> None:
    """Child process: the real app (create_app + GracefulServer) with scripted agents, plus a
    plain streaming route that stands for the upstream model streamed straight to the client."""
    from starlette.requests import Request
    from starlette.responses import StreamingResponse

    from psychoalign.web.app import create_app
    from psychoalign.web.server import GracefulServer, uvicorn_config

    eval_s = None if eval_ms is None else eval_ms / 1000
    negotiator = _negotiator(latency_ms / 1000, store_url, eval_s, LONG if long else ANSWER)
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

    app.add_route("/bench/plain", plain, methods=["POST"])
    config = uvicorn_config(app, "127.0.0.1", port, backlog=1024, timeout_keep_alive=60)
    GracefulServer(config, app.state.gateway).run()


class Server:
    def __init__(
        self,
        latency_ms: float,
        store_url: str,
        *,
        eval_ms: float | None = None,
        window: int = 0,
        long: bool = False,
        log: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        args = [sys.executable, __file__, "--serve", str(self.port), "--latency-ms", str(latency_ms)]
        args += ["--store", store_url, "--window", str(window)]
        args += ["--eval-ms", str(eval_ms)] if eval_ms is not None else []
        args += ["--long"] if long else []
        self.log = open(log, "w") if log is not None else None  # noqa: SIM115 - closed in stop()
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT if self.log else None)
        deadline = time.monotonic() + 60
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


async def _concurrent(n: int, concurrency: int, call: Any) -> list[float]:
    """Latencies of ``n`` calls made by ``concurrency`` workers at once."""
    latencies: list[float] = []
    queue: asyncio.Queue[int] = asyncio.Queue()
    for i in range(n):
        queue.put_nowait(i)

    async def worker() -> None:
        while not queue.empty():
            queue.get_nowait()
            t = time.perf_counter()
            await call()
            latencies.append(time.perf_counter() - t)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return latencies


async def added_latency(n: int, concurrency: int) -> dict[str, float]:
    negotiator = _negotiator(0.0, "memory://")

    async def local() -> None:
        # As /v1 does: the request filed under its conversation, whose earlier turns are looked up.
        text = _unique(BODY)["messages"][0]["content"]
        trace = await negotiator.negotiate(text, conversation=conversation_ref("bench", [text], None))
        assert trace.response == ANSWER

    await _concurrent(concurrency, concurrency, local)  # warm-up
    inproc = await _concurrent(n, concurrency, local)
    await negotiator.aclose()
    server = Server(0.0, "memory://")
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    try:
        async with httpx.AsyncClient(base_url=server.url, timeout=120, limits=limits) as client:

            async def remote() -> None:
                r = await client.post("/v1/chat/completions", json=_unique(BODY))
                assert r.json()["choices"][0]["message"]["content"] == ANSWER

            await _concurrent(concurrency, concurrency, remote)  # warm-up: open the connections
            http = await _concurrent(n, concurrency, remote)
    finally:
        server.stop()
    return {
        "inproc_p50_ms": statistics.median(inproc) * 1000,
        "http_p50_ms": statistics.median(http) * 1000,
        "added_p50_ms": (statistics.median(http) - statistics.median(inproc)) * 1000,
    }


async def _ttft(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> float:
    """Seconds from sending the request to the first content byte of the stream."""
    t = time.perf_counter()
    async with client.stream("POST", path, json=body) as r:
        async for line in r.aiter_lines():
            if line.startswith("data: {") and '"content":"' in line.replace(" ", "") and '"content":""' not in line:
                return time.perf_counter() - t
    raise AssertionError(f"no content in the stream of {path}")


async def first_token(n: int, latency_ms: float, eval_ms: float | None) -> dict[str, float]:
    """p50 time to first token: plain upstream stream, progressive /v1, whole-answer /v1."""
    out: dict[str, float] = {}
    for label, window in (("progressive", WINDOW), ("whole", 0)):
        server = Server(latency_ms, "memory://", eval_ms=eval_ms, window=window, long=True)
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

            async def one() -> None:
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


async def main(quick: bool, doc: bool) -> None:
    n = 300 if quick else 1000
    runs = 30 if quick else 100
    with captured() as out, tempfile.TemporaryDirectory() as tmp:
        lat = await added_latency(n, 100)
        print(f"added latency, {n} negotiations by 100 concurrent clients, zero-latency scripted agents, memory store")
        print(f"  in-process negotiation (p50)   {lat['inproc_p50_ms']:.2f} ms")
        print(f"  through /v1 over HTTP (p50)    {lat['http_p50_ms']:.2f} ms")
        print(f"  added by the gateway (p50)     {lat['added_p50_ms']:.2f} ms   (target <= 5 ms)")
        ratios = {}
        for label, eval_ms in (("every agent on the upstream", None), ("EVALUATOR in-process", 0.0)):
            t = await first_token(runs, 50.0, eval_ms)
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
        publish(
            "gateway",
            "OpenAI-compatible gateway — `bench/gateway.py`",
            out.getvalue(),
            [
                Target(
                    "latency added by `/v1` at 100 concurrent clients (p50)",
                    f"{lat['added_p50_ms']:.2f} ms",
                    "≤ 5 ms",
                    lat["added_p50_ms"] <= 5,
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
                Target(
                    f"responses ≥ 500 to {bad['bodies']} malformed bodies", str(len(bad["five"])), "0", not bad["five"]
                ),
                Target("tracebacks in the server log", str(bad["tracebacks"]), "0", bad["tracebacks"] == 0),
            ],
            quick=quick,
            note="Added latency: p50 through `/v1` over HTTP minus p50 in-process, both with 100 concurrent callers, "
            "for the same one-round negotiation with zero-latency scripted agents; the server is what "
            "`psychoalign serve` runs, in its own process on loopback, and shares the machine's cores with the "
            "client. Time to first token: every upstream call takes 50 ms; the plain stream is one such call "
            "streamed back through the same server; progressive streaming releases the first 200-character "
            "window after the DRIVE's draft and one EVALUATOR call on its first 400 characters. Malformed bodies: "
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
    add_doc_flag(parser)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency_ms, args.eval_ms, args.store, args.window, args.long)
    else:
        asyncio.run(main(args.quick, not args.no_doc))
