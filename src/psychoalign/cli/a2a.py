"""`psychoalign agent serve`, `serve-a2a` and `up`: the agents as A2A services."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import typer
import yaml
from pydantic import SecretStr

from ..a2a import remote_transport
from ..agents import DriveAgent, EvaluatorAgent, MediatorAgent
from ..config import DEFAULT_DEPLOYMENT, ENV_PREFIX, RESERVED_ENV, Settings
from ..errors import ConfigError, InputError
from ..frameworks import load_framework
from ..models import build_model
from ..models.spec import DEFAULT_KEY_ENV
from ..negotiation.bus import InProcessTransport
from ..web.apikeys import is_loopback
from .common import ConfigOpt, err_console, out_console, print_pairs, safe, settings_from

agent_app = typer.Typer(help="Run one agent role as an A2A service.", no_args_is_help=True)
ROLES = ("drive", "evaluator", "mediator")
DEFAULT_PORTS = {"system": 8100, "drive": 8101, "evaluator": 8102, "mediator": 8103}


GrpcPortOpt = typer.Option(None, "--grpc-port", help="Also serve the A2A gRPC binding on this port (same auth).")


def _listen(host: str, port: int, grpc_port: int | None) -> tuple[socket.socket, int]:
    """The HTTP socket, bound and listening before the app (and its card) is built, so ``--port
    0`` is resolved and the card names the port clients can reach."""
    from .serve import _bind

    if grpc_port is not None and not 1 <= grpc_port <= 65535:
        raise InputError(f"--grpc-port {grpc_port} is not a port", hint="name a port from 1 to 65535")
    sock = _bind(host, port)
    return sock, int(sock.getsockname()[1])


def _serve(app: Any, sock: socket.socket, host: str, grpc_port: int | None = None) -> None:
    """uvicorn for JSON-RPC and HTTP+JSON on ``sock``; with ``grpc_port`` the gRPC binding too, in
    the same event loop, on the same request handler and task store."""
    import uvicorn

    async def serve() -> None:
        rpc = None
        if grpc_port is not None:
            from ..a2a.grpc_binding import build_grpc_server

            address = _hostport(host, grpc_port)
            try:
                rpc = build_grpc_server(
                    app.state.a2a_handler, address, app.state.a2a_auth, max_message_bytes=app.state.a2a_max_body_bytes
                )
            except OSError as exc:
                raise ConfigError(str(exc), hint="choose another --grpc-port") from None
            await rpc.start()
        try:
            await uvicorn.Server(uvicorn.Config(app, log_level="warning")).serve(sockets=[sock])
        finally:
            if rpc is not None:
                await rpc.stop(5)
            sock.close()

    asyncio.run(serve())


def _grpc_url(host: str, grpc_port: int | None, public_url: str | None = None) -> str | None:
    """The gRPC interface the card advertises: the public URL's host when there is one (as the
    HTTP interfaces are), else the bind address; the port is the one gRPC binds."""
    if grpc_port is None:
        return None
    public = urlsplit(public_url).hostname if public_url else None
    return _hostport(public or host, grpc_port)


def _hostport(host: str, port: int) -> str:
    """``host:port``, with an IPv6 address in brackets (``[::1]:8100``)."""
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


InsecureOpt = typer.Option(
    False, "--insecure", help="Serve without authentication. Refused unless --host is a loopback address."
)


def _check_insecure(insecure: bool, host: str) -> None:
    if insecure and not is_loopback(host):
        raise ConfigError(
            f"--insecure is allowed only on a loopback address, not {host}",
            hint="configure tokens (docs/a2a.md) or bind 127.0.0.1",
        )


@agent_app.command("serve")
def agent_serve(
    role: str = typer.Option(..., "--role", "-r", help="drive, evaluator or mediator."),
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int | None = typer.Option(None, "--port", help="Default: 8101 drive, 8102 evaluator, 8103 mediator."),
    public_url: str | None = typer.Option(None, "--public-url", help="Base URL to advertise in the card."),
    grpc_port: int | None = GrpcPortOpt,
    insecure: bool = InsecureOpt,
    config: Path | None = ConfigOpt,
) -> None:
    """Serve ROLE as an A2A agent (card at /.well-known/agent-card.json, JSON-RPC and HTTP+JSON).

    The service accepts only its own bearer token, a2a.tokens.<role> (the MEDIATOR's runtime
    holds it); without one it refuses to start unless --insecure on loopback."""
    if role not in ROLES:
        raise InputError(f"unknown role '{role}'", hint="use drive, evaluator or mediator")
    from ..a2a import build_role_app

    _check_insecure(insecure, host)
    settings = settings_from(config)
    token = settings.a2a.token(role)
    if not token and not insecure:  # before loading a model: fail fast
        raise ConfigError(
            f"the {role} service refuses to start without credentials",
            hint=f"set PSYCHOALIGN_A2A__TOKENS__{role.upper()} (a2a.tokens.{role}), or --insecure on loopback",
        )
    sock, port = _listen(host, DEFAULT_PORTS[role] if port is None else port, grpc_port)
    base = public_url or f"http://{_hostport(host, port)}"
    model = build_model(settings.model_spec(role), cache_dir=settings.cache_dir())
    agents: dict[str, Any] = {
        "drive": DriveAgent(model) if role == "drive" else None,
        "evaluator": EvaluatorAgent(model) if role == "evaluator" else None,
        "mediator": MediatorAgent(model) if role == "mediator" else None,
    }
    transport = InProcessTransport(**agents)
    app = build_role_app(
        role,  # type: ignore[arg-type]
        transport,
        base,
        token,
        insecure=insecure,
        grpc_url=_grpc_url(host, grpc_port, public_url),
        max_body_bytes=settings.a2a.max_body_bytes,
    )
    err_console.print(
        safe(f"{role} agent on {base} ({'bearer auth' if token else 'NO AUTH (--insecure)'}), {model.label}")
    )
    _serve(app, sock, host, grpc_port)


def serve_a2a(
    host: str = typer.Option("127.0.0.1", "--host"),
    port: int = typer.Option(DEFAULT_PORTS["system"], "--port"),
    deployment: str = typer.Option(DEFAULT_DEPLOYMENT, "--deployment", "-d", help="The deployment profile to serve."),
    framework: str | None = typer.Option(
        None, "--framework", "-f", help="Default framework (default: the deployment's); clients may pick its others."
    ),
    public_url: str | None = typer.Option(None, "--public-url", help="Base URL to advertise in the card."),
    grpc_port: int | None = GrpcPortOpt,
    insecure: bool = InsecureOpt,
    config: Path | None = ConfigOpt,
) -> None:
    """Serve the whole negotiation (gates and all) as one A2A agent.

    Clients authenticate with a2a.tokens.user or one of the deployment's api_keys; without any
    it refuses to start unless --insecure on loopback. A client may select only the deployment's
    frameworks (by name). Agents run in-process unless a2a.urls names all three roles.
    """
    from ..a2a.system import a2a_task_store, build_system_app
    from ..negotiation import Negotiator
    from ..traces import open_store

    _check_insecure(insecure, host)
    base_settings = settings_from(config)
    profile = base_settings.deployment(deployment)
    base_settings.check_deployments()
    settings = base_settings.for_deployment(deployment)
    token = settings.a2a.token("user")
    if not token and not profile.api_keys and not insecure:
        raise ConfigError(
            "the system agent refuses to start without credentials",
            hint=f"set PSYCHOALIGN_A2A__TOKENS__USER or deployments.{deployment}.api_keys, or --insecure on loopback",
        )
    default = framework or profile.framework
    load_framework(default)  # a typo in -f fails here, not on every request
    store = open_store(settings.effective_store_url())
    negotiator = Negotiator(settings, store=store, transport=remote_transport(settings))
    sock, port = _listen(host, port, grpc_port)
    base = public_url or f"http://{_hostport(host, port)}"
    app = build_system_app(
        negotiator,
        base,
        framework=default,
        token=token,
        frameworks=[default, *profile.frameworks()],
        api_key_digests=profile.api_keys,
        grpc_url=_grpc_url(host, grpc_port, public_url),
        max_body_bytes=settings.a2a.max_body_bytes,
        task_store=a2a_task_store(store),  # tasks survive a restart, and memory stays flat
    )
    layout = "A2A agents " + ", ".join(settings.a2a.urls.values()) if settings.a2a.urls else "in-process agents"
    auth = "bearer auth" if token or profile.api_keys else "NO AUTH (--insecure)"
    err_console.print(safe(f"PsychoAlign system agent on {base} ({layout}, {auth})"), soft_wrap=True)
    _serve(app, sock, host, grpc_port)


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
    port_base: int = typer.Option(
        DEFAULT_PORTS["system"], "--port-base", min=1, max=65535 - 3, help="System agent port; roles use +1..+3."
    ),
    framework: str = typer.Option("general", "--framework", "-f"),
    startup_timeout: float = typer.Option(
        120.0, "--startup-timeout", min=1, max=3600, help="Seconds each process may take to serve its agent card."
    ),
    config: Path | None = ConfigOpt,
) -> None:
    """Start DRIVE, EVALUATOR, MEDIATOR and the system agent as separate processes on loopback.

    Tokens come from a2a.tokens, and any missing one is generated for this run. Each role process
    gets only its own token and only its own model endpoint's API key; the system agent (the
    MEDIATOR's runtime) gets the three role tokens and the client token, and no model key.
    Ctrl-C stops everything.
    """
    settings = settings_from(config)
    settings.check_deployments()
    load_framework(framework)  # before four processes start
    configured = settings.a2a.plain_tokens()
    tokens = {name: configured.get(name) or secrets.token_urlsafe(24) for name in (*ROLES, "user")}
    workdir = Path(tempfile.mkdtemp(prefix="psychoalign-up-"))

    def child_config(name: str) -> list[str]:
        path = workdir / f"{name}.yaml"
        path.touch(mode=0o600)
        data = child_settings(settings, name, tokens)
        path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
        return ["--config", str(path)]

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
                *child_config(role),
            ]
            procs[role] = subprocess.Popen(cmd, env=child_env(settings, os.environ, role))
        for role in ROLES:
            _wait_for_card(urls[role], procs[role], startup_timeout)
        system_env = child_env(settings, os.environ, "system")
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
            *child_config("system"),
        ]
        procs["system"] = subprocess.Popen(cmd, env=system_env)
        _wait_for_card(urls["system"], procs["system"], startup_timeout)
        print_pairs("PsychoAlign is up", ("agent", "url"), urls)
        if "user" not in configured:
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
        shutil.rmtree(workdir, ignore_errors=True)


#: The process switches a child of ``up`` keeps; every other ``PSYCHOALIGN_`` variable is a
#: setting, already in the child's config file (tokens and inline keys included, filtered).
CHILD_SWITCHES = RESERVED_ENV - {ENV_PREFIX + "CONFIG"}


def key_env_names(settings: Settings) -> set[str]:
    """Every environment variable that can hold a model API key for ``settings``: each
    ``api_key_env`` named in ``[defaults]``, ``[roles.*]`` or a deployment's role overrides, and
    the providers' usual ones (``OPENAI_API_KEY`` …)."""
    names = set(DEFAULT_KEY_ENV.values())
    tables = [settings.defaults, *settings.roles.values()]
    tables += [table for profile in settings.deployments.values() for table in profile.roles.values()]
    names.update(t["api_key_env"] for t in tables if isinstance(t.get("api_key_env"), str) and t["api_key_env"])
    return names


def _needed_key_env(settings: Settings, name: str) -> str | None:
    """The one key variable the process ``name`` reads: a role's own endpoint key (none for the
    system agent, whose agents are all remote, nor for keyless backends or an inline key)."""
    if name not in ROLES:
        return None
    spec = settings.model_spec(name)
    if spec.backend not in DEFAULT_KEY_ENV or spec.api_key is not None:
        return None
    return spec.key_env_name()


def child_env(settings: Settings, environ: Mapping[str, str], name: str) -> dict[str, str]:
    """The environment of ``up``'s child ``name`` (a role or ``system``): the parent's, without
    any ``PSYCHOALIGN_`` setting (tokens included: the child's config file holds exactly its own)
    and without any model API key but the one its own role's endpoint uses. Stripped: every
    variable :func:`key_env_names` lists and anything named ``*_API_KEY``."""
    keep = _needed_key_env(settings, name)
    keys = key_env_names(settings)
    env: dict[str, str] = {}
    for var, value in environ.items():
        upper = var.upper()
        if upper.startswith(ENV_PREFIX) and upper not in CHILD_SWITCHES:
            continue
        if var != keep and (var in keys or upper.endswith("_API_KEY") or upper == "API_KEY"):
            continue
        env[var] = value
    return env


def _without_key(table: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in table.items() if k != "api_key"}


def child_settings(settings: Settings, name: str, tokens: Mapping[str, str]) -> dict[str, Any]:
    """The config file of ``up``'s child ``name``: the effective settings, holding only what that
    process uses. A role gets its own token and its own resolved model spec (no other role's
    table, no inline key of another role, no store URL or metrics token); the system agent gets
    the three role tokens and the client token, and no inline model key (its agents are remote)."""
    data: dict[str, Any] = _plain(settings.model_dump(exclude={"source"}))
    for profile in data["deployments"].values():
        profile["roles"] = {role: _without_key(table) for role, table in profile["roles"].items()}
    if name in ROLES:
        data["a2a"]["tokens"] = {name: tokens[name]}
        data["defaults"] = {}
        data["roles"] = {name: _plain(settings.model_spec(name).model_dump(exclude_unset=True))}
        data["store_url"] = None
        data["serve"]["metrics_token"] = None
    else:
        data["a2a"]["tokens"] = {n: tokens[n] for n in (*ROLES, "user")}
        data["defaults"] = _without_key(data["defaults"])
        data["roles"] = {role: _without_key(table) for role, table in data["roles"].items()}
    return data


def _plain(value: Any) -> Any:
    """Settings as plain data for a child's config file (secrets included: the file is 0600)."""
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value
