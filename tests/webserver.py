"""The real app on a real loopback socket (uvicorn, port 0, lifespan on) for client tests."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from fastapi import FastAPI

from psychoalign.web.server import GracefulServer, uvicorn_config
from tests.loopback import listening_socket


@dataclass
class Running:
    url: str
    server: GracefulServer
    thread: threading.Thread


@contextmanager
def run_app(app: FastAPI, port: int = 0) -> Iterator[Running]:
    """Serve ``app`` on 127.0.0.1 in a thread; stop it on exit. Its socket listens before the
    server starts (clients queue, nothing races for the port); this waits for the app's start-up
    (lifespan) to finish, however long a loaded machine takes, and fails if the server dies."""
    sock = listening_socket() if port == 0 else None
    server = GracefulServer(uvicorn_config(app, "127.0.0.1", port, lifespan="on"), app.state.gateway)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock] if sock else None}, daemon=True)
    thread.start()
    hang_guard = time.monotonic() + 600  # not a timing assumption: only stops a hung start-up
    while not server.started:  # uvicorn sets this once start-up is done and it serves
        thread.join(0.05)
        if not thread.is_alive() or time.monotonic() > hang_guard:
            raise RuntimeError("the app did not start")
    running = Running(f"http://127.0.0.1:{server.bound_port()}", server, thread)
    try:
        yield running
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        if sock is not None:
            sock.close()
