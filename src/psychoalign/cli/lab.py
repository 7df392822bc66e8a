"""`psychoalign lab …`: bootstrap and look after the STAR lab's accounts (the pages run under `psychoalign serve`)."""

from __future__ import annotations

import asyncio
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from ..errors import InputError
from ..textio import decode_utf8
from .common import ConfigOpt, JsonOpt, emit_json, out_console, run_closing, safe, settings_from

if TYPE_CHECKING:
    from ..config import Settings
    from ..web.star.lab import StarLab

lab_app = typer.Typer(help="STAR lab accounts: the first lead, invites, who is registered.", no_args_is_help=True)


def _lab(settings: Settings) -> StarLab:
    from ..web.star.lab import StarLab  # lazily: FastAPI loads only for lab commands

    return StarLab(settings, settings.effective_store_url())


def lab_url(settings: Settings) -> str:
    """Where ``psychoalign serve`` will serve the lab with this configuration: ``serve.public_url``
    when set, else ``serve.host``/``serve.port`` (a wildcard bind is reached on loopback here)."""
    serve = settings.serve
    if serve.public_url:
        return serve.public_url.rstrip("/")
    host = "127.0.0.1" if serve.host in ("", "0.0.0.0") else "[::1]" if serve.host == "::" else serve.host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    port = serve.port or "PORT"  # port 0: the free port `psychoalign serve` picks and prints
    return f"http://{host}:{port}"


def _read_password() -> str:
    """The password typed twice at a terminal, or the first two lines of standard input when it
    is not one (a script: getpass would warn there that the input may echo)."""
    no_password = InputError(
        "no password was given: standard input ended before the password and its repetition matched",
        hint="type it twice at the prompt (or pipe it on two lines), or use --invite for a one-time link",
    )
    if not sys.stdin.isatty():
        # bytes, decoded strictly: a non-UTF-8 password would otherwise reach the hash as
        # surrogates and fail there (an internal error, not a line naming the input)
        first, second = (
            decode_utf8(sys.stdin.buffer.readline(), "the password on standard input").rstrip("\r\n") for _ in range(2)
        )
        if not first or first != second:
            raise no_password
        return first
    try:
        return str(typer.prompt("Password (at least 10 characters)", hide_input=True, confirmation_prompt=True))
    except typer.Abort:  # the terminal closed before two equal passwords
        raise no_password from None


@lab_app.command("add-lead")
def add_lead(
    username: str | None = typer.Option(None, "--username", help="The lead's login name (not with --invite)."),
    name: str = typer.Option("", "--name", help="Display name."),
    invite: bool = typer.Option(False, "--invite", help="Print a one-time invite link instead of asking a password."),
    base_url: str | None = typer.Option(
        None,
        "--base-url",
        help="Where the lab is served, for the link (default: serve.public_url, else serve.host and serve.port).",
    ),
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Create a lead (admin) account: with a password typed now, or a one-time invite link."""
    password = None
    if not invite and not username:
        raise InputError(
            "no lead to add: neither --username nor --invite was given",
            hint="give --username NAME (and type a password), or --invite for a one-time link",
        )
    if not invite:
        password = _read_password()

    settings = settings_from(config)
    base = (base_url or lab_url(settings)).rstrip("/")

    async def go() -> dict[str, Any]:
        from ..web.accounts import Role

        lab = _lab(settings)
        try:
            account = await lab.accounts.create_account(
                Role.LEAD, username=None if invite else username, password=password, display_name=name or username or ""
            )
            if invite:
                token = (await lab.accounts.create_invite(account.id, ttl=timedelta(days=7))).token
                return {"account": account.id, "invite_url": f"{base}/invite/{token}", "valid_days": 7}
            return {"account": account.id, "username": username or "", "login_url": f"{base}/login"}
        finally:
            await lab.close()

    result = asyncio.run(go())
    if json_out:
        emit_json(result)
    elif "invite_url" in result:
        out_console.print(safe(f"one-time invite link (valid 7 days): {result['invite_url']}"), soft_wrap=True)
    else:
        out_console.print(safe(f"lead '{result['username']}' created; log in at {result['login_url']}"), soft_wrap=True)


@lab_app.command("accounts")
def accounts(config: Path | None = ConfigOpt, json_out: bool = JsonOpt) -> None:
    """Every account: username, role, pseudonymous participant id, active (leads' view)."""

    async def listed(lab: StarLab) -> list[dict[str, object]]:
        return [a.model_dump(mode="json") for a in await lab.accounts.list_accounts()]

    rows = run_closing(lambda: _lab(settings_from(config)), listed)
    if json_out:
        emit_json(rows)
        return
    if not rows:
        raise InputError("no accounts yet", hint="psychoalign lab add-lead --username NAME")
    table = Table(title="Lab accounts")
    for col in ("username", "name", "role", "participant id", "active"):
        table.add_column(col)
    for r in rows:
        table.add_row(
            safe(str(r["username"] or "(invited)")),
            safe(str(r["display_name"])),
            safe(r["role"]),
            safe(r["participant_id"] or ""),
            "yes" if r["active"] else "no",
        )
    out_console.print(table)
