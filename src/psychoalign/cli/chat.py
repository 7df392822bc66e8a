"""`psychoalign chat`: one raw call to one model (no negotiation, no gates)."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import typer

from ..config import KNOWN_ROLES
from ..errors import InputError, PsychoAlignError
from ..models import BACKENDS, build_model
from ..textio import decode_utf8, read_text
from .common import ConfigOpt, JsonOpt, emit_json, err_console, out_console, safe, settings_from


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
    if role not in KNOWN_ROLES and role not in settings.roles:
        # a typo fell back to [defaults] silently: the reply came from a model nobody chose
        known = ", ".join(sorted({*KNOWN_ROLES, *settings.roles}))
        raise InputError(f"unknown role '{role}' for --role", hint=f"choose one of: {known}; or add [roles.{role}]")
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
        safe(
            f"{result.backend}:{result.model} · {result.usage.prompt_tokens}+{result.usage.completion_tokens} "
            f"tokens · {result.latency_s:.2f}s{' · cached' if result.cached else ''}",
            style="dim",
        )
    )


def _read_schema(path: Path) -> dict[str, Any]:
    import json

    try:
        data = json.loads(read_text(path, what="schema file"))
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{path}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}",
            hint="fix the JSON at that place (examples/answer.schema.json is a working schema)",
        ) from None
    if not isinstance(data, dict):
        raise InputError(
            f"{path}: a JSON Schema must be an object", hint='start it with {"type": "object", "properties": {…}}'
        )
    return data
