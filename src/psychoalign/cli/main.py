"""The ``psychoalign`` command. Each sub-command lives in its own module; this file wires them."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table
from rich.text import Text

from ..errors import InputError, PsychoAlignError
from ..models import BACKENDS, ModelSpec, backend_class, build_model, resolved_label
from ..textio import decode_utf8, normalise_text, read_text
from .common import ConfigOpt, JsonOpt, emit_json, err_console, out_console, safe, settings_from

__all__ = ["app", "run"]

app = typer.Typer(
    name="psychoalign",
    help=(
        "PsychoAlign: negotiated alignment (DRIVE / EVALUATOR / MEDIATOR) and STAR red teaming.\n\n"
        "Start with `psychoalign models list` to see which model backends work here, then "
        '`psychoalign chat "hello"` for a raw call to the embedded model.'
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
models_app = typer.Typer(help="Model backends: what is installed and usable here.", no_args_is_help=True)
config_app = typer.Typer(help="Inspect the effective configuration.", no_args_is_help=True)
app.add_typer(models_app, name="models")
app.add_typer(config_app, name="config")


def _print_version(value: bool) -> None:
    if not value:
        return
    from importlib.metadata import PackageNotFoundError, version

    try:
        number = version("psychoalign")
    except PackageNotFoundError:
        raise PsychoAlignError(
            "psychoalign has no installed version (it runs from a source tree)", hint="install it: pip install -e ."
        ) from None
    sys.stdout.write(f"psychoalign {number}\n")
    raise typer.Exit()


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show full tracebacks on errors (or PSYCHOALIGN_DEBUG=1)."),
    version: bool = typer.Option(
        False, "--version", "-V", callback=_print_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Global options; ``--debug`` is read by :func:`run` before the command starts."""


def _spec_overrides(
    backend: str | None, model: str | None, base_url: str | None, temperature: float | None, max_tokens: int | None
) -> dict[str, Any]:
    flags = {
        "backend": backend,
        "model": model,
        "base_url": base_url,
        "temperature": temperature,
        "max_tokens": max_tokens,
    }
    return {k: v for k, v in flags.items() if v is not None}


@app.command()
def chat(
    prompt: str = typer.Argument(..., help="The prompt; '-' reads it from standard input."),
    role: str = typer.Option("chat", "--role", "-r", help="Use this role's model from the config."),
    backend: str | None = typer.Option(None, "--backend", "-b", help=f"One of: {', '.join(BACKENDS)}."),
    model: str | None = typer.Option(None, "--model", "-m", help="Model name (or a .gguf path for local)."),
    base_url: str | None = typer.Option(None, "--base-url", help="Endpoint for OpenAI-compatible servers."),
    system: str | None = typer.Option(None, "--system", help="System prompt."),
    schema: Path | None = typer.Option(None, "--schema", help="JSON Schema file the reply must satisfy."),
    temperature: float | None = typer.Option(None, "--temperature", "-t"),
    max_tokens: int | None = typer.Option(None, "--max-tokens"),
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Send one prompt to one model and print the reply (a raw call: no negotiation, no gates)."""
    if backend is not None and backend not in BACKENDS:
        raise PsychoAlignError(f"unknown backend '{backend}'", hint=f"choose one of: {', '.join(BACKENDS)}")
    if prompt == "-":
        prompt = decode_utf8(sys.stdin.buffer.read(), "standard input")
    if not prompt.strip():
        raise InputError("the prompt is empty", hint="pass a non-empty prompt")
    flags = _spec_overrides(backend, model, base_url, temperature, max_tokens)
    settings = settings_from(config, {"roles": {role: flags}} if flags else None)
    spec = settings.model_spec(role)
    schema_obj = _read_schema(schema) if schema is not None else None

    async def go() -> Any:
        m = build_model(spec, cache_dir=settings.cache_dir())
        try:
            return await m.chat(prompt, system=system, output=schema_obj)
        finally:
            await m.aclose()

    result = asyncio.run(go())
    if json_out:
        emit_json(result.model_dump(mode="json"))
        return
    out_console.print(safe(result.text))
    err_console.print(
        f"[dim]{result.backend}:{result.model} · {result.usage.prompt_tokens}+{result.usage.completion_tokens} "
        f"tokens · {result.latency_s:.2f}s{' · cached' if result.cached else ''}[/dim]"
    )


def _read_schema(path: Path) -> dict[str, Any]:
    import json

    try:
        data = json.loads(read_text(path, what="schema file"))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: line {exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise InputError(f"{path}: a JSON Schema must be an object")
    return data


@models_app.command("list")
def models_list(config: Path | None = ConfigOpt, json_out: bool = JsonOpt) -> None:
    """List backends, whether each is usable here, and the model each role resolves to."""
    settings = settings_from(config)
    rows = []
    for name in BACKENDS:
        cls = backend_class(name)
        ok, detail = cls.availability(ModelSpec(backend=name))
        rows.append({"backend": name, "usable": ok, "detail": detail, "default_model": cls.default_model})
    roles = {r: resolved_label(settings.model_spec(r)) for r in ("drive", "evaluator", "mediator", "chat")}
    if json_out:
        emit_json({"backends": rows, "roles": roles})
        return
    table = Table(title="Model backends")
    for col in ("backend", "usable", "default model", "detail"):
        table.add_column(col)
    for row in rows:
        table.add_row(
            str(row["backend"]),
            "[green]yes[/]" if row["usable"] else "[red]no[/]",
            str(row["default_model"]),
            safe(str(row["detail"])),
        )
    out_console.print(table)
    roles_table = Table(title="Roles (effective configuration)")
    roles_table.add_column("role")
    roles_table.add_column("model")
    for role, label in roles.items():
        roles_table.add_row(role, label)
    out_console.print(roles_table)


@config_app.command("show")
def config_show(config: Path | None = ConfigOpt, json_out: bool = JsonOpt) -> None:
    """Print the effective configuration (file + environment + flags), secrets masked.

    Validates it as the commands would: a bad [negotiation] table (or a deployment's override)
    is an error here too, not only when a negotiation starts."""
    from ..negotiation.params import negotiation_source, parse_params

    settings = settings_from(config)
    parse_params(settings.negotiation, where=negotiation_source(settings))
    for name in settings.deployments:
        profile = settings.for_deployment(name)
        parse_params(profile.negotiation, where=negotiation_source(settings, name))
    settings.check_deployments()
    data = settings.masked()
    if json_out:
        emit_json(data)
        return
    import yaml

    out_console.print(safe(yaml.safe_dump(data, sort_keys=False)))


def _register_optional_commands() -> None:
    """Sub-commands that live in their own modules (negotiation, traces, frameworks, ...)."""
    from importlib import import_module

    for module in ("negotiate", "a2a", "star", "judge", "serve", "experiment", "lab"):
        try:
            mod = import_module(f"{__package__}.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"{__package__}.{module}":
                raise
            continue
        mod.register(app)


_register_optional_commands()


def run() -> None:
    """Console-script entry point: one clean error line unless --debug."""
    debug = "--debug" in sys.argv or os.environ.get("PSYCHOALIGN_DEBUG") == "1"
    try:
        app()
    except PsychoAlignError as exc:
        if debug:
            if exc.detail:  # internal (redacted): what the endpoint or peer said
                err_console.print(Text.assemble(("detail: ", "bold"), normalise_text(exc.detail)), soft_wrap=True)
            raise
        hint = f" — {exc.hint}" if exc.hint else ""
        _error_line(exc.message + hint)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]")
        sys.exit(130)
    except OSError as exc:  # a file or socket the command needed: name it, no traceback
        if debug:
            raise
        where = f" {exc.filename}" if exc.filename else ""
        _error_line(f"{exc.strerror or type(exc).__name__}:{where} — check the path or address and its permissions")
        sys.exit(1)
    except Exception as exc:  # a bug: one line naming its class; the message and traceback with --debug
        if debug:
            raise
        # Not the message: an unexpected exception's text can hold anything, model output included
        # (a pydantic error quotes the input it rejected). docs/negotiation.md, "Failure reasons".
        _error_line(
            f"internal error ({type(exc).__name__}) — run with --debug for its message and the traceback, and report it"
        )
        sys.exit(1)


def _error_line(message: str) -> None:
    """One error line; text that came from input (argv, files) may hold lone surrogates, which
    cannot be printed as UTF-8."""
    err_console.print(Text.assemble(("error: ", "bold red"), normalise_text(message)), soft_wrap=True)
