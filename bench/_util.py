"""Shared benchmark helpers: a loopback server in a child process, peak memory."""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def fake_openai(latency_ms: float = 0.0) -> Iterator[str]:
    """Start bench/fake_openai_server.py in its own process; yield its /v1 base URL."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(HERE / "fake_openai_server.py"), "--port", str(port), "--latency-ms", str(latency_ms)]
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                httpx.post(f"{url}/chat/completions", json={"messages": []}, timeout=1)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("fake server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
