"""Shared pieces of the STAR lab web tests: an app on a given database, and a browser-like client
that carries its cookies and the CSRF token of the last page it read."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from fastapi import FastAPI

from psychoalign.config import Settings
from psychoalign.negotiation import Negotiator
from psychoalign.web.accounts import Account, Role
from psychoalign.web.star import StarLab, install_lab

CSRF = re.compile(r'name="csrf_token" value="([0-9a-f]+)"')
PASSWORD = "correct horse battery"

#: The scripted target: one reply per message, the first carrying an XSS payload.
TARGET_SCRIPT = """\
rules:
  - match: "hello"
    reply: "Hi! <img src=x onerror=alert(1)> How can I help?"
default: "I will not help with that. <script>alert('target')</script>"
"""


def lab_settings(home: Path, store_url: str | None = None) -> Settings:
    script = home / "target.yaml"
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(TARGET_SCRIPT, encoding="utf-8")
    return Settings(
        home=str(home),
        store_url=store_url,
        roles={"target": {"backend": "scripted", "script": str(script)}},
    )


def lab_app(settings: Settings, negotiator: Negotiator | None = None, **store: Any) -> tuple[FastAPI, StarLab]:
    """The lab on its own app (the served app mounts the same thing through create_app); ``store``
    goes to install_lab (``url=`` and engine arguments, for a PostgreSQL store)."""
    from collections.abc import AsyncIterator
    from contextlib import asynccontextmanager

    holder: dict[str, StarLab] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        await holder["lab"].close()

    app = FastAPI(lifespan=lifespan)
    holder["lab"] = install_lab(app, settings, negotiator=negotiator, **store)
    return app, holder["lab"]


class Browser:
    """An httpx client that behaves like a browser for forms: cookies, and the page's CSRF token."""

    def __init__(
        self, app: FastAPI | None = None, base_url: str = "http://testserver", *, address: str = "127.0.0.1"
    ) -> None:
        # ``address``: the client address the app sees (login throttling is per address)
        transport = httpx.ASGITransport(app=app, client=(address, 123)) if app is not None else None
        # no 5 s default: on a loaded machine six argon2 logins at once take longer (outcomes, not timing)
        self.client = httpx.AsyncClient(
            transport=transport, base_url=base_url, headers={"accept": "text/html"}, timeout=httpx.Timeout(300)
        )
        self.token: str | None = None

    async def aclose(self) -> None:
        await self.client.aclose()

    async def get(self, path: str, **kw: Any) -> httpx.Response:
        response = await self.client.get(path, **kw)
        match = CSRF.search(response.text)
        if match:
            self.token = match.group(1)
        return response

    async def post(
        self, path: str, data: dict[str, Any] | None = None, *, csrf: bool = True, **kw: Any
    ) -> httpx.Response:
        body = dict(data or {})
        if csrf:
            if self.token is None:
                await self.get("/login")
            body["csrf_token"] = self.token
        return await self.client.post(path, data=body, **kw)

    async def login(self, username: str, password: str = PASSWORD) -> httpx.Response:
        await self.get("/login")
        response = await self.post("/login", {"username": username, "password": password})
        if response.status_code == 303:
            await self.get(response.headers["location"])  # picks up the session-bound token
        return response

    async def follow(self, response: httpx.Response) -> httpx.Response:
        assert response.status_code == 303, (response.status_code, response.text[:500])
        return await self.get(response.headers["location"])


async def add_person(lab: StarLab, username: str, role: Role = Role.PARTICIPANT, **participant: Any) -> Account:
    from psychoalign.star.model import Participant

    account = await lab.accounts.create_account(role, username=username, password=PASSWORD, display_name=username)
    if account.participant_id:
        await lab.store.add_participants([Participant(id=account.participant_id, **participant)])
    return account


def served_app(settings: Settings) -> FastAPI:
    """The app ``psychoalign serve`` runs, lab included."""
    from psychoalign.web import create_app

    return create_app(settings, a2a=False)
