"""Lab accounts on SQLite and PostgreSQL: argon2 hashes, one-time invites (also under a race),
session expiry and revocation, the shared server secret, the lab CLI."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select
from typer.testing import CliRunner

from psychoalign.errors import InputError
from psychoalign.web.accounts import Role, SQLAccountStore, accounts_table
from tests.helpers import PG_URL, pg_schema

PW = "a long enough password"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SQLAccountStore]:
    if request.param == "sqlite":
        s = SQLAccountStore(f"sqlite:///{tmp_path / 'acc.db'}")
        yield s
        await s.close()
        return
    async with pg_schema("t") as connect_args:
        s = SQLAccountStore(PG_URL, connect_args=connect_args)
        yield s
        await s.close()


async def test_password_hashes_are_argon2_and_authenticate(store: SQLAccountStore) -> None:
    lead = await store.create_account(Role.LEAD, username="lead", password=PW)
    async with store.engine.connect() as conn:
        stored = (await conn.execute(select(accounts_table.c.password_hash))).scalar_one()
    assert stored.startswith("$argon2id$") and PW not in stored
    assert (await store.authenticate("lead", PW)) == lead
    assert await store.authenticate("lead", PW + "x") is None
    assert await store.authenticate("nobody", PW) is None
    with pytest.raises(InputError, match="too short"):
        await store.create_account(Role.LEAD, username="x", password="short")
    with pytest.raises(InputError, match="taken"):
        await store.create_account(Role.LEAD, username="lead", password=PW)
    participant = await store.create_account(Role.PARTICIPANT, display_name="Ann")
    assert participant.participant_id and participant.participant_id.startswith("p-") and not participant.active


async def test_invite_works_exactly_once_even_under_a_race(store: SQLAccountStore) -> None:
    person = await store.create_account(Role.PARTICIPANT, display_name="Ann")
    invite = await store.create_invite(person.id)
    assert (await store.invite_account(invite.token)) == person
    results = await asyncio.gather(
        *(store.accept_invite(invite.token, f"ann{i}", PW) for i in range(6)), return_exceptions=True
    )
    winners = [r for r in results if not isinstance(r, BaseException)]
    assert len(winners) == 1 and all(isinstance(r, InputError) for r in results if r not in winners)
    assert await store.invite_account(invite.token) is None
    assert (await store.authenticate(winners[0].username or "", PW)) is not None


async def test_expired_invite_and_sessions(store: SQLAccountStore) -> None:
    now = [datetime.now(UTC)]
    store.clock = lambda: now[0]
    person = await store.create_account(Role.PARTICIPANT, display_name="Ann")
    invite = await store.create_invite(person.id, ttl=timedelta(hours=1))
    now[0] += timedelta(hours=2)
    with pytest.raises(InputError, match="unknown, used or expired"):
        await store.accept_invite(invite.token, "ann", PW)
    lead = await store.create_account(Role.LEAD, username="lead", password=PW)
    token = await store.create_session(lead.id, ttl=timedelta(hours=12))
    assert (await store.get_session(token, idle=timedelta(hours=1))) is not None
    now[0] += timedelta(minutes=90)  # idle longer than an hour
    assert await store.get_session(token, idle=timedelta(hours=1)) is None
    token = await store.create_session(lead.id, ttl=timedelta(hours=12))
    await store.set_active(lead.id, False)  # deactivation ends every session
    assert await store.get_session(token, idle=timedelta(hours=1)) is None
    assert await store.authenticate("lead", PW) is None


async def test_server_secret_is_shared_by_every_worker(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'acc.db'}"
    one, two = SQLAccountStore(url), SQLAccountStore(url)
    assert await one.secret("csrf") == await two.secret("csrf")
    assert len(await one.secret("csrf")) == 32
    await one.close()
    await two.close()


def test_lab_cli_creates_a_lead_and_lists_accounts(tmp_path: Path) -> None:
    from psychoalign.cli.main import app

    runner = CliRunner()
    result = runner.invoke(app, ["lab", "add-lead", "--username", "boss"], input=f"{PW}\n{PW}\n")
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["lab", "add-lead", "--invite"])
    assert result.exit_code == 0 and "/invite/" in result.output
    result = runner.invoke(app, ["lab", "accounts", "--json"])
    assert result.exit_code == 0
    assert '"username": "boss"' in result.output and '"role": "lead"' in result.output


@pytest.mark.parametrize(
    ("serve", "base"),
    [
        ('host = "127.0.0.1"\nport = 8123\n', "http://127.0.0.1:8123"),
        ('host = "0.0.0.0"\nport = 9001\n', "http://127.0.0.1:9001"),
        ('host = "::1"\nport = 8124\n', "http://[::1]:8124"),
        ('port = 8125\npublic_url = "https://lab.example.org/"\n', "https://lab.example.org"),
    ],
)
def test_add_lead_links_to_where_serve_will_listen(tmp_path: Path, serve: str, base: str) -> None:
    """The login and invite links follow serve.host/serve.port (or serve.public_url), not :8000."""
    from psychoalign.cli.main import app

    config = tmp_path / "psychoalign.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[serve]\n{serve}')
    runner = CliRunner()
    result = runner.invoke(app, ["lab", "add-lead", "--username", "boss", "-c", str(config)], input=f"{PW}\n{PW}\n")
    assert result.exit_code == 0, result.output
    assert f"log in at {base}/login" in result.output and ":8000" not in result.output
    result = runner.invoke(app, ["lab", "add-lead", "--invite", "-c", str(config)])
    assert result.exit_code == 0, result.output
    assert f"{base}/invite/" in result.output and ":8000" not in result.output
    result = runner.invoke(app, ["lab", "add-lead", "--invite", "--base-url", "http://x.test:1/", "-c", str(config)])
    assert "http://x.test:1/invite/" in result.output


def test_add_lead_without_a_password_on_stdin_says_so(tmp_path: Path) -> None:
    """Standard input ends (a script, a container) or the two passwords differ: one line with the
    fix and exit 2, not click's bare "Aborted."."""
    from tests.cli.test_main import cli

    env = {"PSYCHOALIGN_HOME": str(tmp_path / "home")}
    for stdin in ("", f"{PW}\nsomething else entirely\n"):
        out = cli("lab", "add-lead", "--username", "boss", env=env, stdin=stdin)
        assert out.returncode == 2, (out.returncode, out.stdout, out.stderr)
        assert "no password was given" in out.stderr and "--invite" in out.stderr and "Aborted" not in out.stderr
    out = cli("lab", "accounts", "--json", env=env)
    assert '"username": "boss"' not in out.stdout  # nothing created
