"""`psychoalign agent serve`, `serve-a2a` and `up`: the agents as A2A services."""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import typer
from rich.table import Table

from ..agents import DriveAgent, EvaluatorAgent, MediatorAgent
from ..errors import ConfigError, InputError
from ..models import build_model
from ..negotiation.bus import InProcessTransport
from .common import ConfigOpt, err_console, out_console, settings_from

__all__ = ["register"]

agent_app = typer.Typer(help="Run one agent role as an A2A service.", no_args_is_help=True)
ROLES = ("drive", "evaluator", "mediator")
DEFAULT_PORTS = {"system": 8100, "drive": 8101, "evaluator": 8102, "mediator": 8103}


def _serve(app: Any, host: str, port: int) -> None:
    import uvicorn

    uvicorn.run(app, host=host, port=port, log_level="warning")


@agent_app.command("serve")
def agent_serve(
    role: str = typer.Option(..., "--role", "-r", help="drive, evaluator or mediator."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int | None = typer.Option(None, "--port", help="Default: 8101 drive, 8102 evaluator, 8103 mediator."),
    public_url: str | None = typer.Option(None, "--public-url", help="Base URL to advertise in the card."),
    config: Path | None = ConfigOpt,
) -> None:
    """Serve ROLE as an A2A agent (card at /.well-known/agent-card.json, JSON-RPC and HTTP+JSON)."""
    if role not in ROLES:
        raise InputError(f"unknown role '{role}'", hint="use drive, evaluator or mediator")
    from ..a2a import build_role_app

    settings = settings_from(config)
    port = port or DEFAULT_PORTS[role]
    model = build_model(settings.model_spec(role), cache_dir=settings.cache_dir())
    agents: dict[str, Any] = {
        "drive": DriveAgent(model) if role == "drive" else None,
        "evaluator": EvaluatorAgent(model) if role == "evaluator" else None,
        "mediator": MediatorAgent(model) if role == "mediator" else None,
    }
    tokens = settings.a2a.plain_tokens()
    if role != "mediator" and tokens and "mediator" not in tokens:
        raise ConfigError("a2a.tokens has no 'mediator' token", hint="set a2a.tokens.mediator, or no tokens at all")
    base = public_url or f"http://{host}:{port}"
    app = build_role_app(role, InProcessTransport(**agents), base, tokens or None)  # type: ignore[arg-type]
    err_console.print(f"{role} agent on {base} ({'bearer auth' if tokens else 'no auth'}), model {model.label}")
    _serve(app, host, port)


def serve_a2a(
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(DEFAULT_PORTS["system"], "--port"),
    framework: str = typer.Option("general", "--framework", "-f", help="Default framework for requests."),
    public_url: str | None = typer.Option(None, "--public-url", help="Base URL to advertise in the card."),
    config: Path | None = ConfigOpt,
) -> None:
    """Serve the whole negotiation (gates and all) as one A2A agent.

    Agents run in-process unless a2a.urls names all three roles (then over A2A, as the mediator).
    """
    from ..a2a.system import build_system_app
    from ..negotiation import Negotiator
    from ..traces import open_store

    settings = settings_from(config)
    negotiator = Negotiator(settings, store=open_store(settings.effective_store_url()))
    base = public_url or f"http://{host}:{port}"
    app = build_system_app(negotiator, base, framework=framework, token=settings.a2a.token("user"))
    layout = "A2A agents " + ", ".join(settings.a2a.urls.values()) if settings.a2a.urls else "in-process agents"
    err_console.print(f"PsychoAlign system agent on {base} ({layout})")
    _serve(app, host, port)


def _wait_for_card(url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ConfigError(f"the process for {url} exited with code {proc.returncode}")
        try:
            if httpx.get(f"{url}/.well-known/agent-card.json", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise ConfigError(f"no agent card at {url} after {timeout_s:g}s")


def up(
    port_base: int = typer.Option(DEFAULT_PORTS["system"], "--port-base", help="System agent port; roles use +1..+3."),
    framework: str = typer.Option("general", "--framework", "-f"),
    startup_timeout: float = typer.Option(120.0, "--startup-timeout"),
    config: Path | None = ConfigOpt,
) -> None:
    """Start DRIVE, EVALUATOR, MEDIATOR and the system agent as separate processes on loopback.

    Tokens come from a2a.tokens or are generated for this run. Ctrl-C stops everything.
    """
    settings = settings_from(config)
    tokens = settings.a2a.plain_tokens() or {name: secrets.token_urlsafe(24) for name in (*ROLES, "user")}
    env = dict(os.environ)
    for name, token in tokens.items():
        env[f"PSYCHOALIGN_A2A__TOKENS__{name.upper()}"] = token
    common = ["--config", str(config)] if config else []
    ports = {"drive": port_base + 1, "evaluator": port_base + 2, "mediator": port_base + 3, "system": port_base}
    urls = {name: f"http://127.0.0.1:{p}" for name, p in ports.items()}
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def stop(*_: object) -> None:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()

    def on_sigterm(*_: object) -> None:
        stop()
        sys.exit(0)

    signal.signal(signal.SIGTERM, on_sigterm)
    try:
        for role in ROLES:
            cmd = [
                sys.executable,
                "-m",
                "psychoalign",
                "agent",
                "serve",
                "--role",
                role,
                "--port",
                str(ports[role]),
                *common,
            ]
            procs[role] = subprocess.Popen(cmd, env=env)
        for role in ROLES:
            _wait_for_card(urls[role], procs[role], startup_timeout)
        system_env = dict(env)
        for role in ROLES:
            system_env[f"PSYCHOALIGN_A2A__URLS__{role.upper()}"] = urls[role]
        cmd = [
            sys.executable,
            "-m",
            "psychoalign",
            "serve-a2a",
            "--port",
            str(ports["system"]),
            "-f",
            framework,
            *common,
        ]
        procs["system"] = subprocess.Popen(cmd, env=system_env)
        _wait_for_card(urls["system"], procs["system"], startup_timeout)
        table = Table(title="PsychoAlign is up")
        table.add_column("agent")
        table.add_column("url")
        for name, url in urls.items():
            table.add_row(name, url)
        out_console.print(table)
        if "user" in tokens and not settings.a2a.tokens:
            out_console.print(f"client token (identity 'user'): {tokens['user']}")
        out_console.print("Ctrl-C to stop.", highlight=False)
        while all(p.poll() is None for p in procs.values()):
            time.sleep(0.5)
        dead = [n for n, p in procs.items() if p.poll() is not None]
        raise ConfigError(f"agent process stopped: {', '.join(dead)}")
    except KeyboardInterrupt:
        err_console.print("stopping…")
    finally:
        stop()


def register(app: typer.Typer) -> None:
    app.add_typer(agent_app, name="agent")
    app.command("serve-a2a")(serve_a2a)
    app.command("up")(up)
