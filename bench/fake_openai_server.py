"""A loopback OpenAI-compatible server for benchmarks: fixed latency, canned or schema-fitting replies.

    python bench/fake_openai_server.py --port 8765 --latency-ms 50

For a request with ``response_format.json_schema`` it answers with an instance built from the
schema (first enum value, minimum of bounded numbers, one item per array), so structured calls
validate. Plain requests get a short fixed text.

Failures a user's endpoint shows, to try error paths by hand: ``--fault MODE`` starts in a mode,
``POST /fault {"mode": MODE, "after": N}`` switches to it (after N more good replies), mid-run:

    none       normal replies                 slow       sleeps --slow-s before answering
    401        wrong API key                  malformed  a 200 whose body is not JSON
    404        unknown model                  empty      a completion with empty content
    429        rate limit, Retry-After: 1     nojson     plain prose where a JSON schema was asked
    500        server error
``--models a,b`` answers 404 for any other model name, as a real server does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route


def instance_for(schema: dict[str, Any]) -> Any:
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object":
        return {k: instance_for(v) for k, v in schema.get("properties", {}).items()}
    if kind == "array":
        n = max(1, int(schema.get("minItems", 1)))
        return [instance_for(schema.get("items", {})) for _ in range(n)]
    if kind in ("number", "integer"):
        lo = schema.get("minimum", 0)
        hi = schema.get("maximum", lo)
        return (lo + hi) / 2 if kind == "number" else (int(lo) + int(hi)) // 2
    if kind == "boolean":
        return False
    if "anyOf" in schema:
        return instance_for(schema["anyOf"][0])
    return "ok"


FAULTS = ("none", "401", "404", "429", "500", "slow", "malformed", "empty", "nojson")


def _error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse({"error": {"message": message, "type": "fake"}}, status_code=status, headers=headers)


def build_app(
    latency_s: float, fault: str = "none", models: frozenset[str] = frozenset(), slow_s: float = 600.0
) -> Starlette:
    state: dict[str, Any] = {"mode": fault, "after": 0, "next": "none"}

    async def set_fault(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        if body.get("mode") not in FAULTS:
            return _error(400, f"mode must be one of {FAULTS}")
        after = int(body.get("after", 0))
        state.update(mode="none" if after else body["mode"], after=after, next=body["mode"])
        return JSONResponse(state)

    def current_mode() -> str:
        if state["after"] > 0:
            state["after"] -= 1
            if state["after"] == 0:
                state["mode"] = state["next"]
            return "none"
        return str(state["mode"])

    async def chat(request: Request) -> Response:
        body = json.loads(await request.body())
        mode = current_mode()
        if mode == "401":
            return _error(401, "Incorrect API key provided")
        if mode == "404" or (models and body.get("model") not in models):
            return _error(404, f"The model `{body.get('model')}` does not exist")
        if mode == "429":
            return _error(429, "Rate limit reached", {"Retry-After": "1"})
        if mode == "500":
            return _error(500, "internal error")
        if mode == "malformed":
            return Response("<html>502 Bad Gateway</html>", media_type="application/json")
        if mode == "slow":
            await asyncio.sleep(slow_s)
        if latency_s:
            await asyncio.sleep(latency_s)
        fmt = body.get("response_format") or {}
        if mode == "empty":
            text = ""
        elif fmt.get("type") == "json_schema" and mode != "nojson":
            text = json.dumps(instance_for(fmt["json_schema"]["schema"]))
        else:
            text = "A short canned answer."
        return JSONResponse(
            {
                "id": "x",
                "object": "chat.completion",
                "model": body.get("model", "fake"),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5},
            }
        )

    return Starlette(
        routes=[Route("/v1/chat/completions", chat, methods=["POST"]), Route("/fault", set_fault, methods=["POST"])]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--fault", choices=FAULTS, default="none", help="start in this failure mode")
    parser.add_argument("--models", default="", help="comma-separated model names served (others: 404)")
    parser.add_argument("--slow-s", type=float, default=600.0, help="how long the 'slow' mode sleeps")
    args = parser.parse_args()
    models = frozenset(m for m in args.models.split(",") if m)
    app = build_app(args.latency_ms / 1000, args.fault, models, args.slow_s)
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
