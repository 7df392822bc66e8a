"""Loopback fakes of real wire protocols: a real HTTP server on 127.0.0.1, scripted per test."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
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
    hang: bool = False  # answer only once the test releases the server (FakeServer.release)


@dataclass
class FakeServer:
    """Answers from ``queue`` in order, then ``default``; records every request."""

    queue: list[Scripted] = field(default_factory=list)
    default: Scripted | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    url: str = ""
    release: threading.Event = field(default_factory=threading.Event)

    async def handle(self, request: Request) -> JSONResponse:
        body = json.loads(await request.body() or b"{}")
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        answer = self.queue.pop(0) if self.queue else self.default
        if answer is None:
            return JSONResponse({"error": "no scripted answer"}, status_code=500)
        if answer.hang:  # a server that never answers in time, whatever the machine's load
            await asyncio.get_running_loop().run_in_executor(None, self.release.wait)
        return JSONResponse(answer.body or {}, status_code=answer.status, headers=answer.headers)


def free_port() -> int:
    """A port nothing listens on right now. Only for ports a subprocess must be told; in-process
    servers use :func:`listening_socket` (no window in which another process can take the port)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def listening_socket() -> socket.socket:
    """A loopback socket already listening on a free port: clients can connect (and queue) before
    the server that will accept them has started, so no test waits for a server to come up."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    return sock


class ThreadedServer:
    """uvicorn serving ``app`` in a thread on ``sock`` (default: a new :func:`listening_socket`)."""

    def __init__(self, app: Any, sock: socket.socket | None = None) -> None:
        self.sock = sock if sock is not None else listening_socket()
        self.port = int(self.sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=60)  # clean-up only: no outcome waits on it
        self.sock.close()


@contextmanager
def serve(app: Starlette) -> Iterator[str]:
    """Run ``app`` with uvicorn on a listening loopback socket in a thread; yield its base URL."""
    server = ThreadedServer(app)
    try:
        yield server.url
    finally:
        server.stop()


@contextmanager
def fake_endpoint(path: str, fake: FakeServer) -> Iterator[FakeServer]:
    app = Starlette(routes=[Route(path, fake.handle, methods=["POST"])])
    with serve(app) as url:
        fake.url = url
        try:
            yield fake
        finally:
            fake.release.set()


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


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@contextmanager
def mirror(root: Path) -> Iterator[str]:
    """A static file server (a data mirror): ``root`` over HTTP on loopback. The socket is bound
    before the URL is handed out, so no client waits on start-up."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
