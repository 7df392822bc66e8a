"""Loopback fakes of real wire protocols: a real HTTP server on 127.0.0.1, scripted per test."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route


@dataclass
class Scripted:
    """One canned HTTP answer."""

    body: dict[str, Any] | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0


@dataclass
class FakeServer:
    """Answers from ``queue`` in order, then ``default``; records every request."""

    queue: list[Scripted] = field(default_factory=list)
    default: Scripted | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""

    async def handle(self, request: Request) -> JSONResponse:
        body = json.loads(await request.body() or b"{}")
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        answer = self.queue.pop(0) if self.queue else self.default
        if answer is None:
            return JSONResponse({"error": "no scripted answer"}, status_code=500)
        if answer.delay_s:
            await asyncio.sleep(answer.delay_s)
        return JSONResponse(answer.body or {}, status_code=answer.status, headers=answer.headers)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(app: Starlette) -> Iterator[str]:
    """Run ``app`` with uvicorn on a free loopback port in a thread; yield its base URL."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("loopback server did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


@contextmanager
def fake_endpoint(path: str, fake: FakeServer) -> Iterator[FakeServer]:
    app = Starlette(routes=[Route(path, fake.handle, methods=["POST"])])
    with serve(app) as url:
        fake.url = url
        yield fake


def openai_reply(text: str, prompt_tokens: int = 7, completion_tokens: int = 3) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens},
    }


def anthropic_reply(text: str | None = None, tool_input: dict[str, Any] | None = None) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if text is not None:
        content.append({"type": "text", "text": text})
    if tool_input is not None:
        content.append({"type": "tool_use", "id": "toolu_1", "name": "reply", "input": tool_input})
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-fake",
        "content": content,
        "stop_reason": "tool_use" if tool_input is not None else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 11, "output_tokens": 5},
    }


def gemini_reply(text: str) -> dict[str, Any]:
    return {
        "candidates": [{"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 13, "candidatesTokenCount": 4, "totalTokenCount": 17},
    }
