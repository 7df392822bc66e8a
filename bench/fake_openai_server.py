"""A loopback OpenAI-compatible server for benchmarks: fixed latency, canned or schema-fitting replies.

    python bench/fake_openai_server.py --port 8765 --latency-ms 50

For a request with ``response_format.json_schema`` it answers with an instance built from the
schema (first enum value, minimum of bounded numbers, one item per array), so structured calls
validate. Plain requests get a short fixed text.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
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


def build_app(latency_s: float) -> Starlette:
    async def chat(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        if latency_s:
            await asyncio.sleep(latency_s)
        fmt = body.get("response_format") or {}
        if fmt.get("type") == "json_schema":
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

    return Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--latency-ms", type=float, default=0.0)
    args = parser.parse_args()
    uvicorn.run(
        build_app(args.latency_ms / 1000), host="127.0.0.1", port=args.port, log_level="warning", access_log=False
    )


if __name__ == "__main__":
    main()
