"""`psychoalign serve`: the one server (pages, OpenAI-compatible /v1, A2A system agent).

Also `psychoalign serve-key`: make an API key for a deployment and print the digest to configure.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import secrets
import signal
import socket
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

import typer

from ..config import Settings
from ..errors import ConfigError, InputError, redact_url
from .common import ConfigOpt, JsonOpt, emit_json, err_console, settings_from

#: The levels `--log-level` takes.
LOG_LEVELS = ("debug", "info", "warning", "error")
#: A worker that dies this soon after starting is broken (bad config, port, database): stop, do not respawn.
STARTUP_WINDOW_S = 10.0


def serve(
    host: str | None = typer.Option(None, "--host", help="Bind address (default serve.host = 127.0.0.1)."),
    port: int | None = typer.Option(None, "--port", "-p", help="Port (default serve.port = 8000; 0 = any free)."),
    public_url: str | None = typer.Option(None, "--public-url", help="Base URL advertised in the A2A agent card."),
    grpc_port: int | None = typer.Option(
        None, "--grpc-port", min=1, max=65535, help="Also serve the A2A agent's gRPC binding on this port (same auth)."
    ),
    log_level: str = typer.Option("info", "--log-level", help="debug, info, warning, error."),
    workers: int = typer.Option(
        1,
        "--workers",
        "-w",
        min=1,
        max=64,
        help="Server processes sharing the port. Everything they share lives in the database "
        "(sessions, CSRF secret, login throttle, tasks): use PostgreSQL for more than one.",
    ),
    config: Path | None = ConfigOpt,
) -> None:
    """Serve everything: the OpenAI-compatible API (/v1), web pages (/), the A2A system agent.

    Listens on 127.0.0.1 by default. Binding another address needs API keys on every deployment
    (secure by default). SIGTERM/Ctrl-C drains: in-flight negotiations get serve.shutdown_grace_s,
    then fail closed (in every worker).
    """
    from ..web.apikeys import KeyCheck
    from ..web.local_token import token_url
    from ..web.server import check_exposure, configure_logging

    if log_level.lower() not in LOG_LEVELS:  # logging's ValueError was an internal error
        raise InputError(f"--log-level {log_level!r} is not a level", hint=f"use one of: {', '.join(LOG_LEVELS)}")
    overrides: dict[str, Any] = {}
    for key, value in (("host", host), ("port", port), ("public_url", public_url), ("grpc_port", grpc_port)):
        if value is not None:
            overrides[key] = value
    settings_overrides = {"serve": overrides} if overrides else None
    settings = settings_from(config, settings_overrides)
    s = settings.serve
    check_exposure(settings, s.host)
    settings.check_deployments()
    if s.grpc_port is not None and workers > 1:
        raise ConfigError(
            f"--grpc-port {s.grpc_port} is served by one process, not {workers} workers",
            hint="use --workers 1 with gRPC, or serve gRPC with `psychoalign serve-a2a --grpc-port`",
        )
    configure_logging(log_level)
    keyless = KeyCheck(settings.deployments).keyless()
    # Per start, as Jupyter does: local processes and web pages cannot guess it (docs/serve.md).
    token = secrets.token_urlsafe(32) if keyless and s.local_token else None

    def banner(port: int) -> str:
        host = f"[{s.host}]" if ":" in s.host else s.host
        shown = s.public_url or f"http://{host}:{port}"
        grpc = f"  ·  A2A gRPC {host}:{s.grpc_port}" if s.grpc_port is not None else ""
        text = (
            f"PsychoAlign on {shown}  ·  OpenAI API {shown}/v1  ·  A2A card {shown}/.well-known/agent-card.json{grpc}\n"
            f"deployments: {', '.join(settings.deployments)}  ·  store: {redact_url(settings.effective_store_url())}"
        )
        if token is not None:
            text += (
                f"\nlocal token for {', '.join(keyless)} (/v1 and A2A; new at each start): {token}\n"
                f"  in a browser, open once (signs you in to the lab and the trace viewer as the server's owner): "
                f"{token_url(shown, token)}\n"
                f"  export PSYCHOALIGN_TOKEN={token} OPENAI_BASE_URL={shown}/v1"
            )
        elif keyless:
            text += (
                f"\nwarning: serve.local_token = false: {', '.join(keyless)} answer any local process "
                "(and any page it opens) without a token"
            )
        return text

    if workers == 1:
        # Bound here, so `--port 0` is resolved before the app is built: the banner and the A2A
        # card name the port clients can reach (they said :0).
        sock = _bind(s.host, s.port)
        port = int(sock.getsockname()[1])
        settings_overrides = {"serve": {**overrides, "port": port}}
        err_console.print(banner(port), highlight=False)
        try:
            _run_worker(config, settings_overrides, log_level, sock, token)
        finally:
            sock.close()
        return
    sqlite = settings.effective_store_url().startswith("sqlite")
    # Tables, indexes and the shared secrets are created once here, before any worker starts
    # (several processes creating them at once on a fresh PostgreSQL database can collide).
    asyncio.run(_prepare_store(settings))
    # Linux: each worker listens on its own SO_REUSEPORT socket and the kernel spreads new
    # connections evenly over them (one shared socket lets whichever worker wakes first take a
    # whole burst of keep-alive connections). The parent's bound, non-listening socket holds the
    # port (and resolves port 0). Elsewhere: one socket, shared.
    reuseport = sys.platform == "linux" and hasattr(socket, "SO_REUSEPORT")
    sock = _bind(s.host, s.port, reuseport=reuseport)
    port = int(sock.getsockname()[1])
    settings_overrides = {"serve": {**overrides, "port": port}}  # workers advertise the real port
    listen_on: socket.socket | tuple[str, int] = (s.host, port) if reuseport else sock
    err_console.print(f"{banner(port)}  ·  {workers} workers on port {port}", highlight=False)
    if sqlite:
        err_console.print(
            "note: several workers on SQLite serialise every write through one file; use PostgreSQL (store_url)",
            highlight=False,
        )
    try:
        _supervise(listen_on, workers, (config, settings_overrides, log_level), token)
    finally:
        sock.close()


async def _prepare_store(settings: Settings) -> None:
    """Create every table the server uses (traces, lab accounts, lab state, STAR store) and the
    lab's shared secrets, once, in the parent process (recovering interrupted traces creates the
    trace tables)."""
    from ..a2a.system import a2a_task_store
    from ..traces.store import SQLTraceStore
    from ..web.star import StarLab

    traces = SQLTraceStore(settings.effective_store_url())
    lab = StarLab(settings, settings.effective_store_url())
    try:
        await traces.recover_interrupted()
        tasks = a2a_task_store(traces)
        if tasks is not None:  # the A2A agent's task table, created once before the workers
            await tasks.initialize()  # type: ignore[attr-defined]
        await lab.init()
        await lab.accounts.secret("csrf")
    finally:
        await lab.close()
        await traces.close()


def _bind(host: str, port: int, *, reuseport: bool = False, listen: bool | None = None) -> socket.socket:
    """A socket bound to host:port: listening and shared by the workers, or (``reuseport``) one
    that only holds the port while each worker listens on its own."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must say TCP: asyncio sets TCP_NODELAY only on sockets whose proto is IPPROTO_TCP, and
    # accepted connections inherit proto 0 from a socket made without it. Nagle's algorithm then
    # meets the client's delayed ACK on every reply written in two parts: ~40 ms per request
    # (bench/a2a.py: one A2A call 1.7 ms -> 44 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuseport:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror}", hint="choose another --port") from None
    if listen if listen is not None else not reuseport:
        sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _run_worker(
    config: Path | None,
    overrides: dict[str, Any] | None,
    log_level: str,
    listen_on: socket.socket | tuple[str, int] | None,
    local_token: str | None = None,
) -> None:
    """One server process: the whole app with the draining uvicorn server. A worker accepts on
    the socket the parent bound, or on its own SO_REUSEPORT socket at (host, port); without
    either, uvicorn binds serve.host:serve.port."""
    from ..web.app import create_app
    from ..web.server import GracefulServer, configure_logging, uvicorn_config

    sock = _bind(*listen_on, reuseport=True, listen=True) if isinstance(listen_on, tuple) else listen_on
    settings = settings_from(config, overrides)
    configure_logging(log_level)
    app = create_app(settings, local_token=local_token)
    server = GracefulServer(
        uvicorn_config(app, settings.serve.host, settings.serve.port),
        app.state.gateway,
        a2a_app=getattr(app.state, "a2a_app", None),
        freeze_heap=True,  # once started: the start-up heap out of the collector's reach
    )
    server.run(sockets=[sock] if sock is not None else None)


def _supervise(
    listen_on: socket.socket | tuple[str, int],
    workers: int,
    args: tuple[Path | None, dict[str, Any] | None, str],
    local_token: str | None = None,
) -> None:
    """Start ``workers`` processes listening on ``listen_on``; replace one that dies; on
    SIGINT/SIGTERM pass SIGTERM on (each drains its negotiations) and wait for all of them."""
    context = multiprocessing.get_context("spawn")  # a fresh interpreter: no event loop or engine inherited
    stopping = False

    def start() -> tuple[multiprocessing.process.BaseProcess, float]:
        process = context.Process(target=_run_worker, args=(*args, listen_on, local_token), daemon=False)
        process.start()
        return process, time.monotonic()

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    running = [start() for _ in range(workers)]
    failed = False
    try:
        while not stopping:
            time.sleep(0.2)
            for i, (process, started) in enumerate(running):
                if process.is_alive() or stopping:
                    continue
                if time.monotonic() - started < STARTUP_WINDOW_S:
                    err_console.print(
                        f"worker {process.pid} exited with code {process.exitcode} while starting; stopping",
                        highlight=False,
                    )
                    failed = stopping = True
                    break
                err_console.print(f"worker {process.pid} died (code {process.exitcode}); starting another")
                running[i] = start()
    finally:
        for process, _ in running:
            if process.is_alive() and process.pid is not None:
                process.terminate()  # SIGTERM: the worker drains, then exits
        for process, _ in running:
            process.join()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if failed:
        raise typer.Exit(1)


def serve_key(
    deployment: str = typer.Option("psychoalign", "--deployment", "-d", help="Deployment the key is for."),
    json_out: bool = JsonOpt,
) -> None:
    """Make a new API key: prints the key (give it to the client) and its SHA-256 (put it in config)."""
    from ..web.apikeys import hash_key, new_key

    if not deployment.strip():
        raise InputError("--deployment is empty", hint="name the deployment the key is for, e.g. -d psychoalign")
    key = new_key()
    if json_out:
        emit_json({"deployment": deployment, "key": key, "sha256": hash_key(key)})
        return
    # Plain echo: rich would read "[deployments.x]" as markup.
    typer.echo(f"API key (shown once): {key}")
    typer.echo(f'add to psychoalign.toml:\n[deployments.{_toml_key(deployment)}]\napi_keys = ["{hash_key(key)}"]')


def _toml_key(name: str) -> str:
    """``name`` as a TOML key: bare when it can be, else quoted (``[deployments."a b"]``), so the
    printed table pastes into psychoalign.toml as it is."""
    import json
    import re

    return name if re.fullmatch(r"[A-Za-z0-9_-]+", name) else json.dumps(name)
