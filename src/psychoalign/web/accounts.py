"""Lab accounts: leads and participants, argon2 password hashes, one-time invites, server-side sessions.

Identities (username, display name) live here and only leads see them; STAR data and analyses
carry only the pseudonymous STAR participant id linked to a participant account.

Secrets are never stored in the clear: session tokens and invite tokens are kept as SHA-256
digests, passwords as argon2id hashes. The store sits behind :class:`AccountStore` (contract in
the docstrings); :class:`SQLAccountStore` implements it on SQLite (default) or PostgreSQL.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError
from pydantic import BaseModel, ConfigDict
from sqlalchemy import (
    Boolean,
    Column,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    and_,
    bindparam,
    delete,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from ..errors import InputError
from ..storage import MigrateOnce, create_engine_for, created_at_column, time_column

__all__ = ["Role"]

USERNAME_PATTERN = r"^[A-Za-z0-9_.@-]{1,64}$"
MIN_PASSWORD = 10
#: The server owner's lead account: what the local token's page link signs in (web/local_token.py).
#: A fixed id no other account has (theirs are uuid hex), no username and no password: nobody can
#: log in to it with a form or an invite, only with the token ``psychoalign serve`` prints.
OWNER_ID = "local-owner"
OWNER_NAME = "Server owner (local token link)"


class Role(StrEnum):
    LEAD = "lead"
    PARTICIPANT = "participant"


class Account(BaseModel):
    """A person who can log in. ``participant_id`` is the pseudonymous STAR id (participants only)."""

    model_config = ConfigDict(frozen=True)

    id: str
    username: str | None = None
    display_name: str = ""
    role: Role
    participant_id: str | None = None
    active: bool = False
    has_password: bool = False  # False: invited, never joined
    created_at: datetime


class Invite(BaseModel):
    """A one-time invite. ``token`` is only known at creation; the store keeps its digest."""

    model_config = ConfigDict(frozen=True)

    token: str
    account_id: str
    expires_at: datetime


class Session(BaseModel):
    model_config = ConfigDict(frozen=True)

    account: Account
    created_at: datetime
    expires_at: datetime


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def new_participant_id() -> str:
    """A pseudonymous STAR participant id: says nothing about the person."""
    return f"p-{secrets.token_hex(5)}"


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime) -> datetime:
    """SQLite returns naive datetimes; every time we store is UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class AccountStore(ABC):
    """Accounts, invites, sessions and login throttling.

    Contract: every method is one transaction; a failed call changes nothing. Tokens returned by
    :meth:`create_invite` and :meth:`create_session` are shown once and stored only as digests.
    """

    @abstractmethod
    async def create_account(
        self,
        role: Role,
        *,
        username: str | None = None,
        password: str | None = None,
        display_name: str = "",
        participant_id: str | None = None,
    ) -> Account:
        """Create an account. With a password it is active at once; without, it waits for an
        invite to be accepted. Participants get a fresh pseudonymous ``participant_id`` unless
        one is given. Raises :class:`InputError` for a taken username or a weak password."""

    @abstractmethod
    async def get(self, account_id: str) -> Account | None: ...

    @abstractmethod
    async def by_participant(self, participant_id: str) -> Account | None: ...

    @abstractmethod
    async def list_accounts(self, role: Role | None = None) -> list[Account]:
        """Oldest first."""

    @abstractmethod
    async def count(self, role: Role) -> int: ...

    @abstractmethod
    async def authenticate(self, username: str, password: str) -> Account | None:
        """The active account if the password matches, else None. Takes about the same time
        whether or not the username exists."""

    @abstractmethod
    async def owner_account(self) -> Account:
        """The server owner's lead account (:data:`OWNER_ID`), created on first use and active
        (again) after: holding the local token is what proves its owner. Safe under races."""

    @abstractmethod
    async def create_invite(self, account_id: str, *, ttl: timedelta = timedelta(days=7)) -> Invite:
        """A one-time link token: for an account that has no password yet, or, on an active one,
        a reset (accepting sets a new username and password). Voids the account's earlier links."""

    @abstractmethod
    async def invited_accounts(self) -> set[str]:
        """Ids of the accounts with an unused, unexpired invite (people who may still join)."""

    @abstractmethod
    async def invite_account(self, token: str) -> Account | None:
        """The account an unused, unexpired invite is for, or None."""

    @abstractmethod
    async def accept_invite(self, token: str, username: str, password: str) -> Account:
        """Set username and password and activate, exactly once per token (atomic under races).
        Raises :class:`InputError` if the token is unknown, used or expired, or the input is bad."""

    @abstractmethod
    async def set_active(self, account_id: str, active: bool) -> None:
        """Deactivating also ends every session of the account and voids its invite links."""

    @abstractmethod
    async def create_session(self, account_id: str, *, ttl: timedelta) -> str:
        """A new session token for the account."""

    @abstractmethod
    async def get_session(self, token: str, *, idle: timedelta) -> Session | None:
        """The live session for ``token``: not expired, not idle longer than ``idle``, account
        active. Touches its last-seen time."""

    @abstractmethod
    async def delete_session(self, token: str) -> None:
        """Revoke at once (logout): the token never works again."""

    @abstractmethod
    async def record_login_failure(self, keys: list[str]) -> None: ...

    @abstractmethod
    async def login_failures(self, key: str, since: datetime) -> int: ...

    @abstractmethod
    async def login_failure_stats(self, key: str, since: datetime) -> tuple[int, datetime | None]:
        """How many failures ``key`` has since ``since``, and when the latest was (None: none)."""

    @abstractmethod
    async def clear_login_failures(self, key: str, *, prefix: bool = False) -> None:
        """Forget the failures of ``key`` (with ``prefix``: of every key starting with it)."""

    @abstractmethod
    async def secret(self, name: str) -> bytes:
        """A random 32-byte server secret, created on first use and shared by every worker."""

    def now(self) -> datetime:
        """The store's clock (UTC)."""
        return _now()

    async def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release connections."""


metadata = MetaData()
accounts_table = Table(
    "web_accounts",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("username", String(64), unique=True),
    Column("display_name", String(200), nullable=False),
    Column("role", String(16), nullable=False),
    Column("participant_id", String(64), unique=True),
    Column("password_hash", Text),
    Column("active", Boolean, nullable=False),
    created_at_column(),
)
invites_table = Table(
    "web_invites",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("account_id", String(32), nullable=False, index=True),
    time_column("expires_at", nullable=False),
    time_column("used_at"),
)
sessions_table = Table(
    "web_sessions",
    metadata,
    Column("token_hash", String(64), primary_key=True),
    Column("account_id", String(32), nullable=False, index=True),
    created_at_column(),
    time_column("expires_at", nullable=False),
    time_column("last_seen", nullable=False),
)
failures_table = Table(
    "web_login_failures",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("key", String(200), nullable=False, index=True),
    time_column("at", nullable=False),
)
secrets_table = Table(
    "web_secrets",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("value", String(128), nullable=False),
)


#: The lookup every page request makes, built once (building a statement costs more than running it).
_SESSION_BY_DIGEST = (
    select(sessions_table, accounts_table)
    .join(accounts_table, accounts_table.c.id == sessions_table.c.account_id)
    .where(sessions_table.c.token_hash == bindparam("digest"))
)


def _void_invites(account_id: str, now: datetime) -> Any:
    """Mark an account's unused invites used: their links stop working."""
    return (
        update(invites_table)
        .where(and_(invites_table.c.account_id == account_id, invites_table.c.used_at.is_(None)))
        .values(used_at=now)
    )


def check_password(password: str) -> None:
    if len(password) < MIN_PASSWORD:
        raise InputError(f"the password is too short: use at least {MIN_PASSWORD} characters")
    if len(password) > 1024:
        raise InputError("the password is too long: use at most 1024 characters")


def check_username(username: str) -> str:
    import re

    username = username.strip()
    if not re.fullmatch(USERNAME_PATTERN, username):
        raise InputError("the username must be 1-64 letters, digits or . _ @ -")
    return username


class SQLAccountStore(AccountStore):
    """SQL accounts (SQLAlchemy async). ``clock`` is injectable so throttling tests need no sleep."""

    def __init__(
        self,
        url: str | None = None,
        *,
        engine: AsyncEngine | None = None,
        clock: Callable[[], datetime] = _now,
        hasher: PasswordHasher | None = None,
        **engine_kwargs: Any,
    ) -> None:
        if engine is None:
            if url is None:
                raise InputError("SQLAccountStore needs a database URL or an engine")
            engine = create_engine_for(url, **engine_kwargs)
            self._owns_engine = True
        else:
            self._owns_engine = False
        self.engine = engine
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT")  # reads: no BEGIN / ROLLBACK
        self.clock = clock
        self.hasher = hasher or PasswordHasher()
        self._dummy_hash = self.hasher.hash(secrets.token_urlsafe(16))
        self._migrate = MigrateOnce(engine, "accounts")
        self._secrets: dict[str, bytes] = {}

    def now(self) -> datetime:
        return self.clock()

    async def init(self) -> None:
        await self._migrate()  # DDL only for what is missing

    async def close(self) -> None:
        if self._owns_engine:
            await self.engine.dispose()

    @staticmethod
    def _account(row: Any) -> Account:
        return Account(
            id=row["id"],
            username=row["username"],
            display_name=row["display_name"],
            role=Role(row["role"]),
            participant_id=row["participant_id"],
            active=row["active"],
            has_password=row["password_hash"] is not None,
            created_at=_aware(row["created_at"]),
        )

    async def create_account(
        self,
        role: Role,
        *,
        username: str | None = None,
        password: str | None = None,
        display_name: str = "",
        participant_id: str | None = None,
    ) -> Account:
        await self.init()
        if username is not None:
            username = check_username(username)
        password_hash = None
        if password is not None:
            if username is None:
                raise InputError("an account with a password needs a username")
            check_password(password)
            password_hash = await asyncio.to_thread(self.hasher.hash, password)
        if role is Role.PARTICIPANT and participant_id is None:
            participant_id = new_participant_id()
        row = {
            "id": uuid.uuid4().hex,
            "username": username,
            "display_name": display_name.strip()[:200],
            "role": role.value,
            "participant_id": participant_id if role is Role.PARTICIPANT else None,
            "password_hash": password_hash,
            "active": password_hash is not None,
            "created_at": self.clock(),
        }
        try:
            async with self.engine.begin() as conn:
                await conn.execute(insert(accounts_table).values(**row))
        except IntegrityError:
            raise InputError(
                "that username or participant id is taken", hint="choose another username or participant id"
            ) from None
        return self._account(row)

    async def get(self, account_id: str) -> Account | None:
        await self.init()
        async with self._reader.connect() as conn:
            row = (
                (await conn.execute(select(accounts_table).where(accounts_table.c.id == account_id))).mappings().first()
            )
        return self._account(row) if row else None

    async def by_participant(self, participant_id: str) -> Account | None:
        await self.init()
        async with self._reader.connect() as conn:
            query = select(accounts_table).where(accounts_table.c.participant_id == participant_id)
            row = (await conn.execute(query)).mappings().first()
        return self._account(row) if row else None

    async def list_accounts(self, role: Role | None = None) -> list[Account]:
        await self.init()
        query = select(accounts_table).order_by(accounts_table.c.created_at, accounts_table.c.id)
        if role is not None:
            query = query.where(accounts_table.c.role == role.value)
        async with self._reader.connect() as conn:
            rows = (await conn.execute(query)).mappings().all()
        return [self._account(r) for r in rows]

    async def count(self, role: Role) -> int:
        await self.init()
        async with self._reader.connect() as conn:
            query = select(func.count()).select_from(accounts_table).where(accounts_table.c.role == role.value)
            return int((await conn.execute(query)).scalar_one())

    async def authenticate(self, username: str, password: str) -> Account | None:
        await self.init()
        async with self._reader.connect() as conn:
            query = select(accounts_table).where(accounts_table.c.username == username.strip())
            row = (await conn.execute(query)).mappings().first()
        stored = row["password_hash"] if row is not None and row["active"] else None
        try:
            # Verify against a dummy hash for unknown users: the same work, so timing does not
            # reveal which usernames exist. In a thread: argon2 is deliberately slow and must not
            # stall every other request on the event loop.
            await asyncio.to_thread(self.hasher.verify, stored or self._dummy_hash, password[:1024])
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return None
        if stored is None or row is None:
            return None
        if self.hasher.check_needs_rehash(stored):
            async with self.engine.begin() as conn:
                await conn.execute(
                    update(accounts_table)
                    .where(accounts_table.c.id == row["id"])
                    .values(password_hash=await asyncio.to_thread(self.hasher.hash, password))
                )
        return self._account(row)

    async def owner_account(self) -> Account:
        owner = await self.get(OWNER_ID)
        if owner is None:
            row = {
                "id": OWNER_ID,
                "username": None,
                "display_name": OWNER_NAME,
                "role": Role.LEAD.value,
                "participant_id": None,
                "password_hash": None,
                "active": True,
                "created_at": self.clock(),
            }
            try:
                async with self.engine.begin() as conn:
                    await conn.execute(insert(accounts_table).values(**row))
            except IntegrityError:  # another worker made it first
                pass
        elif not owner.active:
            async with self.engine.begin() as conn:
                await conn.execute(update(accounts_table).where(accounts_table.c.id == OWNER_ID).values(active=True))
        owner = await self.get(OWNER_ID)
        if owner is None or owner.role is not Role.LEAD or owner.username is not None:
            # fail closed: the link never signs in to an account someone can also log in to otherwise
            raise InputError(f"the account {OWNER_ID!r} is not the server owner's lead account")
        return owner

    async def create_invite(self, account_id: str, *, ttl: timedelta = timedelta(days=7)) -> Invite:
        if account_id == OWNER_ID:
            raise InputError(
                "the server owner's account takes no invite: it signs in only with the local token link "
                "that `psychoalign serve` prints"
            )
        account = await self.get(account_id)
        if account is None:
            raise InputError(f"unknown account '{account_id}'")
        token = secrets.token_urlsafe(32)
        now = self.clock()
        expires = now + ttl
        async with self.engine.begin() as conn:
            await conn.execute(_void_invites(account_id, now))  # one live link per account
            await conn.execute(
                insert(invites_table).values(
                    token_hash=hash_token(token), account_id=account_id, expires_at=expires, used_at=None
                )
            )
        return Invite(token=token, account_id=account_id, expires_at=expires)

    async def invited_accounts(self) -> set[str]:
        await self.init()
        async with self._reader.connect() as conn:
            query = select(invites_table.c.account_id).where(
                and_(invites_table.c.used_at.is_(None), invites_table.c.expires_at > self.clock())
            )
            return {str(r[0]) for r in (await conn.execute(query)).all()}

    async def invite_account(self, token: str) -> Account | None:
        await self.init()
        async with self._reader.connect() as conn:
            row = (
                (await conn.execute(select(invites_table).where(invites_table.c.token_hash == hash_token(token))))
                .mappings()
                .first()
            )
        if row is None or row["used_at"] is not None or _aware(row["expires_at"]) <= self.clock():
            return None
        return await self.get(row["account_id"])

    async def accept_invite(self, token: str, username: str, password: str) -> Account:
        await self.init()
        username = check_username(username)
        check_password(password)
        password_hash = await asyncio.to_thread(self.hasher.hash, password)
        now = self.clock()
        try:
            async with self.engine.begin() as conn:
                used = await conn.execute(
                    update(invites_table)
                    .where(
                        and_(
                            invites_table.c.token_hash == hash_token(token),
                            invites_table.c.used_at.is_(None),
                            invites_table.c.expires_at > now,
                        )
                    )
                    .values(used_at=now)
                    .returning(invites_table.c.account_id)
                )
                account_id = used.scalar_one_or_none()
                if account_id is None:
                    raise InputError("this invite link is unknown, used or expired", hint="ask your lead for a new one")
                await conn.execute(
                    update(accounts_table)
                    .where(accounts_table.c.id == account_id)
                    .values(username=username, password_hash=password_hash, active=True)
                )
        except IntegrityError:
            raise InputError("that username is taken", hint="choose another username") from None
        account = await self.get(account_id)
        assert account is not None
        return account

    async def set_active(self, account_id: str, active: bool) -> None:
        await self.init()
        async with self.engine.begin() as conn:
            await conn.execute(update(accounts_table).where(accounts_table.c.id == account_id).values(active=active))
            if not active:
                await conn.execute(delete(sessions_table).where(sessions_table.c.account_id == account_id))
                await conn.execute(_void_invites(account_id, self.clock()))

    async def create_session(self, account_id: str, *, ttl: timedelta) -> str:
        await self.init()
        token = secrets.token_urlsafe(32)
        now = self.clock()
        async with self.engine.begin() as conn:
            await conn.execute(
                insert(sessions_table).values(
                    token_hash=hash_token(token),
                    account_id=account_id,
                    created_at=now,
                    expires_at=now + ttl,
                    last_seen=now,
                )
            )
        return token

    async def get_session(self, token: str, *, idle: timedelta) -> Session | None:
        await self.init()
        now = self.clock()
        digest = hash_token(token)
        async with self._reader.connect() as conn:
            row = (await conn.execute(_SESSION_BY_DIGEST, {"digest": digest})).mappings().first()
        if row is None:
            return None
        if _aware(row["expires_at"]) <= now or _aware(row["last_seen"]) + idle <= now or not row["active"]:
            await self.delete_session(token)
            return None
        if now - _aware(row["last_seen"]) > timedelta(minutes=1):  # touch at most once a minute
            async with self.engine.begin() as conn:
                await conn.execute(
                    update(sessions_table).where(sessions_table.c.token_hash == digest).values(last_seen=now)
                )
        return Session(
            account=self._account(row), created_at=_aware(row["created_at"]), expires_at=_aware(row["expires_at"])
        )

    async def delete_session(self, token: str) -> None:
        await self.init()
        async with self.engine.begin() as conn:
            await conn.execute(delete(sessions_table).where(sessions_table.c.token_hash == hash_token(token)))

    async def record_login_failure(self, keys: list[str]) -> None:
        await self.init()
        now = self.clock()
        async with self.engine.begin() as conn:
            await conn.execute(insert(failures_table), [{"key": k[:200], "at": now} for k in keys])
            # keep the table small: failures older than a day never matter
            await conn.execute(delete(failures_table).where(failures_table.c.at < now - timedelta(days=1)))

    async def login_failures(self, key: str, since: datetime) -> int:
        await self.init()
        async with self._reader.connect() as conn:
            query = (
                select(func.count())
                .select_from(failures_table)
                .where(and_(failures_table.c.key == key[:200], failures_table.c.at > since))
            )
            return int((await conn.execute(query)).scalar_one())

    async def login_failure_stats(self, key: str, since: datetime) -> tuple[int, datetime | None]:
        await self.init()
        async with self._reader.connect() as conn:
            query = select(func.count(), func.max(failures_table.c.at)).where(
                and_(failures_table.c.key == key[:200], failures_table.c.at > since)
            )
            count, last = (await conn.execute(query)).one()
        return int(count), _aware(last) if last is not None else None

    async def clear_login_failures(self, key: str, *, prefix: bool = False) -> None:
        await self.init()
        column = failures_table.c.key
        match = column.startswith(key[:200], autoescape=True) if prefix else column == key[:200]
        async with self.engine.begin() as conn:
            await conn.execute(delete(failures_table).where(match))

    async def secret(self, name: str) -> bytes:
        if name in self._secrets:
            return self._secrets[name]
        await self.init()
        try:
            async with self.engine.begin() as conn:
                await conn.execute(insert(secrets_table).values(name=name, value=secrets.token_hex(32)))
        except IntegrityError:
            pass  # another worker created it first: use theirs
        async with self._reader.connect() as conn:
            value = (await conn.execute(select(secrets_table.c.value).where(secrets_table.c.name == name))).scalar_one()
        self._secrets[name] = bytes.fromhex(value)
        return self._secrets[name]
