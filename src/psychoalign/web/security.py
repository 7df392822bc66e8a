"""Web security for every page of the app: headers and CSP, server-side sessions, CSRF, login throttling,
and the role dependencies every route declares.

* **Headers** (:class:`SecurityHeadersMiddleware`, pure ASGI): a strict Content-Security-Policy
  (scripts and styles only from ``/static``; no inline script, style or event handler can run),
  ``frame-ancestors 'none'``, ``nosniff``, ``no-referrer``, ``no-store`` on HTML, HSTS over TLS.
  A route may set its own stricter CSP (the analysis report uses a sandbox).
* **Sessions** are server-side rows (:class:`~psychoalign.web.accounts.AccountStore`); the cookie
  holds a random token (HttpOnly, SameSite=Lax, ``Secure`` and the ``__Host-`` prefix over TLS),
  so logout revokes at once. A new token is issued at every login (no fixation).
* **CSRF**: every unsafe request to a page router must carry ``csrf_token`` (form field) or
  ``X-CSRF-Token`` (header) equal to HMAC(server secret, session token) — bound to the session.
  Anonymous forms (login, invite) bind to a random HttpOnly pre-session cookie instead. A foreign
  ``Origin`` or ``Sec-Fetch-Site: cross-site`` is refused as well.
* **Login throttling**: failures are counted per (username, client address) with an exponential
  backoff, and per address for any username, in the database (shared by every worker); a browser
  that logged in before is throttled only by its own failures. Over a limit, login answers 429.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import math
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from datetime import timedelta
from typing import Annotated, Any
from urllib.parse import quote, urlencode

from fastapi import Depends, HTTPException, Request
from fastapi.responses import RedirectResponse, Response
from starlette.routing import Match

from ..config import LabSettings
from .accounts import Account, AccountStore, Role

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
)
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
CSRF_FIELD = "csrf_token"
CSRF_HEADER = "x-csrf-token"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def security_headers(*, tls: bool, html: bool = True, static: bool = False) -> list[tuple[str, str]]:
    """The headers every response carries (a response that sets one itself keeps its own)."""
    headers = [
        ("content-security-policy", CSP),
        ("x-content-type-options", "nosniff"),
        ("x-frame-options", "DENY"),
        ("referrer-policy", "no-referrer"),
        ("cross-origin-opener-policy", "same-origin"),
        ("cross-origin-resource-policy", "same-origin"),
        ("permissions-policy", "camera=(), microphone=(), geolocation=(), interest-cohort=()"),
    ]
    if html or not static:  # pages, exports, JSON: nothing personal stays in a cache; /static may be cached
        headers.append(("cache-control", "no-store"))
    if tls:
        headers.append(("strict-transport-security", "max-age=31536000; includeSubDomains"))
    return headers


@functools.lru_cache(maxsize=8)
def _encoded_headers(tls: bool, html: bool, static: bool) -> tuple[tuple[bytes, bytes], ...]:
    """:func:`security_headers` as the bytes a response carries (made once per kind of response)."""
    return tuple((name.encode(), value.encode()) for name, value in security_headers(tls=tls, html=html, static=static))


class SecurityHeadersMiddleware:
    """Adds the security headers to every response (pure ASGI: no body buffering)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        tls = scope.get("scheme") == "https"
        static = str(scope.get("path", "")).startswith("/static/")

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers: list[tuple[bytes, bytes]] = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                content_type = next((v for k, v in headers if k.lower() == b"content-type"), b"")
                html = content_type.startswith(b"text/html")
                headers.extend(item for item in _encoded_headers(tls, html, static) if item[0] not in present)
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, send_with_headers)


class LoginRequiredError(Exception):
    """Raised by the role dependencies for anonymous requests: pages redirect to the login page.
    ``next_path`` is the page to return to as a URL (path percent-encoded, then its query as sent)."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


class CsrfError(HTTPException):
    def __init__(self, detail: str) -> None:
        super().__init__(status_code=403, detail=detail)


def safe_next(value: str | None) -> str:
    """Only same-site relative paths are followed after login (no open redirect)."""
    if (
        not value
        or not value.startswith("/")
        or value.startswith("//")
        or "\\" in value
        or any(ord(c) < 32 or ord(c) == 127 for c in value)  # browsers drop tabs and newlines: "/\t/evil"
    ):
        return "/"
    return value


class Security:
    """The app's security state: the account store, the settings and the server secret."""

    def __init__(self, accounts: AccountStore, settings: LabSettings | None = None) -> None:
        self.accounts = accounts
        self.settings = settings or LabSettings()
        self._key: bytes | None = None

    async def key(self) -> bytes:
        if self._key is None:
            self._key = await self.accounts.secret("csrf")
        return self._key

    def secure(self, request: Request) -> bool:
        mode = self.settings.secure_cookies
        return mode == "always" or (mode == "auto" and request.url.scheme == "https")

    def session_cookie(self, request: Request) -> str:
        return "__Host-psa_session" if self.secure(request) else "psa_session"

    def anon_cookie(self, request: Request) -> str:
        return "__Host-psa_pre" if self.secure(request) else "psa_pre"

    # -- sessions ---------------------------------------------------------------------------
    async def account(self, request: Request) -> Account | None:
        """The logged-in account for this request (cached on the request)."""
        if hasattr(request.state, "account"):
            cached: Account | None = request.state.account
            return cached
        token = request.cookies.get(self.session_cookie(request))
        account = None
        if token:
            session = await self.accounts.get_session(token, idle=timedelta(minutes=self.settings.idle_minutes))
            account = session.account if session else None
        request.state.account = account
        request.state.session_token = token if account else None
        return account

    async def login(self, request: Request, response: Response, account: Account) -> None:
        old = request.cookies.get(self.session_cookie(request))
        if old:
            await self.accounts.delete_session(old)
        token = await self.accounts.create_session(account.id, ttl=timedelta(hours=self.settings.session_hours))
        response.set_cookie(
            self.session_cookie(request),
            token,
            max_age=int(self.settings.session_hours * 3600),
            httponly=True,
            samesite="lax",
            secure=self.secure(request),
            path="/",
        )
        response.delete_cookie(self.anon_cookie(request), path="/")

    async def logout(self, request: Request, response: Response) -> None:
        token = request.cookies.get(self.session_cookie(request))
        if token:
            await self.accounts.delete_session(token)
        response.delete_cookie(self.session_cookie(request), path="/", secure=self.secure(request), httponly=True)
        # the content warnings read are per session: the next login shows them again
        response.delete_cookie("psa_warned", path="/", secure=self.secure(request), httponly=True)

    # -- CSRF -------------------------------------------------------------------------------
    async def csrf_token(self, request: Request) -> str:
        """The token forms on this page must carry. Anonymous visitors get a pre-session nonce
        (set as a cookie by :meth:`finish_response`)."""
        await self.account(request)
        binding = getattr(request.state, "session_token", None)
        if binding:
            material = f"session:{binding}"
        else:
            nonce = request.cookies.get(self.anon_cookie(request)) or getattr(request.state, "new_anon", None)
            if not nonce:
                nonce = secrets.token_urlsafe(24)
                request.state.new_anon = nonce
            material = f"anon:{nonce}"
        return hmac.new(await self.key(), material.encode(), hashlib.sha256).hexdigest()

    def finish_response(self, request: Request, response: Response) -> None:
        nonce = getattr(request.state, "new_anon", None)
        if nonce:
            response.set_cookie(
                self.anon_cookie(request),
                nonce,
                max_age=3600,
                httponly=True,
                samesite="strict",
                secure=self.secure(request),
                path="/",
            )

    async def verify_csrf(self, request: Request) -> None:
        origin = request.headers.get("origin")
        if origin and origin != "null" and origin.rstrip("/") != f"{request.url.scheme}://{request.url.netloc}":
            raise CsrfError("cross-origin form submission refused")
        if request.headers.get("sec-fetch-site") == "cross-site":
            raise CsrfError("cross-site form submission refused")
        sent = request.headers.get(CSRF_HEADER)
        if not sent:
            content_type = request.headers.get("content-type", "")
            if content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
                value = (await request.form()).get(CSRF_FIELD)
                sent = value if isinstance(value, str) else None
        await self.account(request)
        binding = getattr(request.state, "session_token", None)
        anonymous_form = request.url.path == "/login" or request.url.path.startswith("/invite/")
        if not binding and sent and not anonymous_form:
            # A same-site form of a session that ended (logout in another tab, expiry): nothing is
            # done; after login the person is back on the form's page, where the autosaved draft waits.
            raise LoginRequiredError(quote(_page_of(request)))
        if not binding and not request.cookies.get(self.anon_cookie(request)):
            raise CsrfError("the form expired or cookies are off: reload the page and try again")
        expected = await self.csrf_token(request)
        if not sent or not hmac.compare_digest(sent, expected):
            raise CsrfError("the form expired or did not come from this site: reload the page and try again")

    # -- login throttling -------------------------------------------------------------------
    # Failures count per (username, client address), so strangers elsewhere never slow a user
    # down, with an exponential backoff after the free ones; a global limit per address stops one
    # address spraying many usernames. A browser that logged in before carries a signed "known"
    # cookie and is throttled only by its own failures: neither the address's limit nor strangers
    # guessing the same username from the same address ever refuse it.
    def known_cookie(self, request: Request) -> str:
        return "__Host-psa_known" if self.secure(request) else "psa_known"

    async def _known_mac(self, user: str, nonce: str) -> str:
        return hmac.new(await self.key(), f"known|{user}|{nonce}".encode(), hashlib.sha256).hexdigest()

    async def known_nonce(self, request: Request, username: str) -> str | None:
        """The id of this browser if it proved ``username``'s password before (signed cookie)."""
        nonce, _, mac = request.cookies.get(self.known_cookie(request), "").partition(".")
        user = _throttle_user(username)
        if nonce and mac and hmac.compare_digest(mac, await self._known_mac(user, nonce)):
            return nonce
        return None

    async def throttle_keys(self, request: Request, username: str) -> list[str]:
        """The failure counters a login attempt touches: its browser's if known, else its
        (username, address) pair's and its address's."""
        user = _throttle_user(username)
        nonce = await self.known_nonce(request, username)
        if nonce:
            return [f"dev:{user}|{nonce}"]
        address = request.client.host if request.client else "unknown"
        return [f"pair:{user}|{address}", f"addr:{address}"]

    async def login_wait(self, request: Request, username: str) -> int:
        """Seconds until a login of ``username`` from this request may be tried (0: now)."""
        settings = self.settings
        window = timedelta(minutes=settings.login_window_minutes)
        now = self.accounts.now()
        wait = timedelta(0)
        keys = await self.throttle_keys(request, username)
        count, last = await self.accounts.login_failure_stats(keys[0], now - window)
        if last is not None and count >= settings.login_max_per_user:
            extra = count - settings.login_max_per_user
            backoff = timedelta(seconds=settings.login_backoff_s * 2 ** min(extra, 30))
            wait = max(wait, last + min(backoff, window) - now)
        if len(keys) > 1:
            count, last = await self.accounts.login_failure_stats(keys[1], now - window)
            if last is not None and count >= settings.login_max_per_address:
                wait = max(wait, last + window - now)
        return math.ceil(wait.total_seconds()) if wait > timedelta(0) else 0

    async def login_succeeded(self, request: Request, response: Response, username: str) -> None:
        """Forget this browser's (or pair's) failures and mark the browser as known to the user."""
        keys = await self.throttle_keys(request, username)
        await self.accounts.clear_login_failures(keys[0])
        user = _throttle_user(username)
        nonce = await self.known_nonce(request, username) or secrets.token_hex(12)
        response.set_cookie(
            self.known_cookie(request),
            f"{nonce}.{await self._known_mac(user, nonce)}",
            max_age=int(self.settings.login_known_days * 86400),
            httponly=True,
            samesite="lax",
            secure=self.secure(request),
            path="/",
        )

    async def unlock(self, username: str) -> None:
        """A lead lifts every login backoff of ``username`` (every address, every browser)."""
        user = _throttle_user(username)
        await self.accounts.clear_login_failures(f"pair:{user}|", prefix=True)
        await self.accounts.clear_login_failures(f"dev:{user}|", prefix=True)


def _throttle_user(username: str) -> str:
    return username.strip().lower()[:64]


async def get_security(request: Request) -> Security:
    """Async on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, per request."""
    security: Security = request.app.state.security
    return security


async def current_account(request: Request, security: Security = Depends(get_security)) -> Account | None:
    return await security.account(request)


def _logged_in(request: Request, account: Account | None) -> Account:
    if account is None:
        if request.method in ("GET", "HEAD"):  # the query as sent: already percent-encoded
            path = quote(request.url.path) + (f"?{request.url.query}" if request.url.query else "")
        else:  # a form sent after the session ended: back to its page after login, not to a POST-only URL
            path = quote(_page_of(request))
        raise LoginRequiredError(path)
    return account


def _page_of(request: Request) -> str:
    """The page a form action belongs to: the nearest path above it that a GET route serves, e.g.
    the campaign page for ``/lead/campaigns/c/status``, ``/tasks`` for ``/tasks/claim``; ``/``
    when none. (Never the action's own path: ``/tasks/claim`` is not the task ``claim``.)"""
    path = request.url.path.rstrip("/").rsplit("/", 1)[0]
    while path:
        scope = {"type": "http", "path": path, "method": "GET", "root_path": ""}
        if any(route.matches(scope)[0] is Match.FULL for route in request.app.router.routes):
            return path
        path = path.rsplit("/", 1)[0]
    return "/"


async def require_login(request: Request, account: Account | None = Depends(current_account)) -> Account:
    """Any logged-in account. Anonymous: redirect to login."""
    return _logged_in(request, account)


async def require_lead(request: Request, account: Account | None = Depends(current_account)) -> Account:
    """Leads only (admin pages). Anonymous: redirect to login; participants: 403."""
    account = _logged_in(request, account)
    if account.role is not Role.LEAD:
        raise HTTPException(status_code=403, detail="this page is for the lab's leads")
    return account


async def require_participant(request: Request, account: Account | None = Depends(current_account)) -> Account:
    """Participants only (task pages): the account carries its pseudonymous STAR participant id."""
    account = _logged_in(request, account)
    if account.role is not Role.PARTICIPANT or not account.participant_id:
        raise HTTPException(status_code=403, detail="this page is for participants")
    return account


#: Route parameters that require a lead / a participant (FastAPI's ``Annotated`` dependency form).
LeadAccount = Annotated[Account, Depends(require_lead)]
ParticipantAccount = Annotated[Account, Depends(require_participant)]


async def refuse_nul(request: Request) -> None:
    """Router-level dependency: a NUL character in a page's path, query or form field is refused
    with 400 naming the field. PostgreSQL text cannot hold one: it would fail deep in a query (a
    500) instead. Uploaded files are checked where they are read (``star.lead.upload_text``)."""
    fields: list[tuple[str, str]] = [(k, str(v)) for k, v in request.path_params.items()]
    fields += list(request.query_params.multi_items())
    if request.method in UNSAFE_METHODS and request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        fields += [(k, v) for k, v in (await request.form()).multi_items() if isinstance(v, str)]
    for name, value in fields:
        if "\x00" in name or "\x00" in value:
            shown = name.replace("\x00", "")[:40] or "a field"
            raise HTTPException(status_code=400, detail=f"{shown} contains a NUL character: remove it and send again")


async def csrf_protect(request: Request, security: Security = Depends(get_security)) -> None:
    """Router-level dependency of every page router: no NUL in the input (:func:`refuse_nul`), and
    every unsafe request must carry the session's CSRF token."""
    await refuse_nul(request)
    if request.method in UNSAFE_METHODS:
        await security.verify_csrf(request)


def login_redirect(exc: LoginRequiredError, *, ended: bool = False) -> RedirectResponse:
    """To the login page, back to ``exc.next_path`` after; ``ended``: the page says the session ended.
    ``next`` is one query parameter, percent-encoded whole: a page's own query (``?a=1&b=2``)
    comes back intact, not cut at its first ``&``."""
    query = [("msg", "session_ended")] if ended else []
    query.append(("next", exc.next_path))
    return RedirectResponse(f"/login?{urlencode(query, safe='/')}", status_code=303)
