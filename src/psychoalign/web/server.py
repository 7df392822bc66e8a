"""Running the app with uvicorn, with a shutdown that fails in-flight negotiations closed.

On SIGINT/SIGTERM uvicorn stops accepting connections and waits for open ones. Its wait alone
would hang on a long negotiation, and its forced cancel would drop the client without an answer.
:class:`GracefulServer` first drains the gateway: negotiations get ``serve.shutdown_grace_s`` to
finish, then each remaining one is cancelled, its trace stored ``failed`` ("server shutting
down"), and its client receives the fixed fail-closed refusal before the connection closes.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import socket
from types import FrameType
from typing import Any

import uvicorn
from fastapi import FastAPI

from ..config import Settings
from ..errors import ConfigError
from .apikeys import KeyCheck, is_loopback
from .gateway import Gateway
from .ops import RequestIdFilter

__all__ = ["GracefulServer", "check_exposure", "configure_logging"]

_log = logging.getLogger(__name__)
LOG_FORMAT = "%(asctime)s %(levelname)s [%(request_id)s] %(name)s: %(message)s"


class GracefulServer(uvicorn.Server):
    """uvicorn server whose exit first drains the app's gateway (see module doc). ``freeze_heap``
    (what ``psychoalign serve`` runs): once started, the heap built so far is frozen (``gc.freeze``),
    so the collector never walks it again; tests that run many servers in one process leave it off."""

    def __init__(
        self, config: uvicorn.Config, gateway: Gateway, *, a2a_app: Any = None, freeze_heap: bool = False
    ) -> None:
        super().__init__(config)
        self.gateway = gateway
        self.a2a_app = a2a_app  # with serve.grpc_port: its gRPC binding runs in this loop too
        self.freeze_heap = freeze_heap
        self._grpc: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._drain: asyncio.Future[int] | None = None

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        serve = self.gateway.settings.serve
        if serve.grpc_port is not None and self.a2a_app is not None:
            from ..a2a.grpc_binding import build_grpc_server

            host = f"[{serve.host}]" if ":" in serve.host else serve.host
            state = self.a2a_app.state
            try:
                self._grpc = build_grpc_server(
                    state.a2a_handler,
                    f"{host}:{serve.grpc_port}",
                    state.a2a_auth,
                    max_message_bytes=state.a2a_max_body_bytes,
                )
            except OSError as exc:
                raise ConfigError(str(exc), hint="choose another --grpc-port") from None
            await self._grpc.start()
        await super().startup(sockets)
        if self.freeze_heap:
            # Everything imported and built by now lives as long as the process: out of the
            # collector's reach. Otherwise every full collection walks the whole start-up heap and
            # stalls every request in flight (bench/gateway.py: two of them took 2.9 s of a run of
            # 300 negotiations; 9 of up to 330 ms in 25 s of page requests, docs/performance.md).
            gc.collect()
            gc.freeze()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        try:
            await super().shutdown(sockets)
        finally:
            if self._grpc is not None:
                await self._grpc.stop(5)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Safe from a signal handler or another thread."""
        loop = self._loop
        if loop is not None and self._drain is None and not loop.is_closed():
            grace = self.gateway.settings.serve.shutdown_grace_s
            self._drain = asyncio.run_coroutine_threadsafe(self.gateway.drain(grace), loop)  # type: ignore[assignment]
        super().handle_exit(sig, frame)

    def bound_port(self) -> int:
        """The port actually bound (``port=0`` picks a free one)."""
        for server in getattr(self, "servers", []):
            for sock in server.sockets:
                return int(sock.getsockname()[1])
        return int(self.config.port)


def check_exposure(settings: Settings, host: str) -> None:
    """Secure by default: a non-loopback bind needs credentials on every face."""
    if is_loopback(host):
        return
    # The A2A system agent accepts its deployment's API keys (or a2a.tokens.user), so keys on
    # every deployment close every machine-facing face; the pages have their own logins.
    keyless = KeyCheck(settings.deployments).keyless()
    if keyless:
        raise ConfigError(
            f"refusing to listen on {host}: deployment(s) without api_keys: {', '.join(keyless)}",
            hint="add deployments.<name>.api_keys (psychoalign serve-key prints one), or bind 127.0.0.1",
        )


def configure_logging(level: str = "info") -> None:
    """Access and app logs on stderr, each line with its request id."""
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler.addFilter(RequestIdFilter())
    root = logging.getLogger("psychoalign")
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    root.propagate = False


def uvicorn_config(app: FastAPI, host: str, port: int, **kw: Any) -> uvicorn.Config:
    grace = app.state.gateway.settings.serve.shutdown_grace_s
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=kw.pop("log_level", "warning"),
        access_log=False,  # our own access log carries the request id
        timeout_graceful_shutdown=int(grace) + 15,  # drain first; then uvicorn's own limit
        **kw,
    )
