"""The per-start local token (``serve.local_token``) in a browser, as Jupyter does it.

A browser cannot send ``Authorization: Bearer <token>`` from an address bar or a page's link, so
``psychoalign serve`` also prints a page URL with ``?token=…``. :class:`LocalTokenCookie`:

* on a page (any path that is not ``/v1``, A2A or ``/metrics``), a ``GET``/``HEAD`` with the
  right ``token`` query parameter sets an HttpOnly, ``SameSite=Strict`` cookie holding it and
  redirects to the same URL without the parameter (the token leaves the address bar and the
  history); a wrong token gets ``403`` and no cookie;
* on ``/v1`` and the A2A agent, a request without an ``Authorization`` header that carries the
  cookie counts as one with the token as its bearer token — only when the browser says the
  request is same-origin (``Sec-Fetch-Site`` absent, ``same-origin`` or ``none``). Other ports of
  the same host are the same *site*, so ``SameSite`` alone would let their pages send it.

It runs inside :class:`~psychoalign.web.origin.OriginGuard`: a foreign ``Host`` or ``Origin`` is
refused before the cookie is looked at, so the cookie never opens these faces to another origin.
The cookie stands for the token and for nothing more: the pages take a session.

With the lab installed, the same exchange (from a loopback client) also signs the browser in to
the server owner's lead account (:data:`~psychoalign.web.accounts.OWNER_ID`) with an ordinary lab
session (:meth:`~psychoalign.web.security.Security.login`: a new server-side session, HttpOnly,
SameSite=Lax, ``__Host-`` and Secure over TLS; forms then carry that session's CSRF token), so
whoever holds the printed link opens the lab and the trace viewer. Whoever holds the token
controls the server already (it is printed to the terminal that started it).
"""

from __future__ import annotations

import hmac
from collections.abc import Callable
from urllib.parse import parse_qsl, urlencode

from starlette.requests import Request, cookie_parser
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ..errors import InputError
from .apikeys import is_loopback
from .origin import face_of
from .security import Security, safe_next

__all__ = ["COOKIE", "LocalTokenCookie", "token_url"]

COOKIE = "psa_local_token"
QUERY = "token"
#: Sec-Fetch-Site values of requests a browser makes for this origin itself (absent: not a browser).
_SAME_ORIGIN = frozenset({"same-origin", "none"})
_NO_STORE = {"cache-control": "no-store", "referrer-policy": "no-referrer"}


def token_url(base: str, token: str) -> str:
    """The page URL the banner prints: opening it once lets this browser use the token."""
    return f"{base.rstrip('/')}/?{urlencode({QUERY: token})}"


class LocalTokenCookie:
    """Pure ASGI middleware (streams pass through untouched); see the module doc."""

    def __init__(self, app: ASGIApp, token: str, face: Callable[[str], str | None] = face_of) -> None:
        self.app = app
        self.token = token.encode()
        self.face = face

    def _matches(self, sent: str) -> bool:
        return hmac.compare_digest(sent.encode(), self.token)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        face = self.face(scope["path"])
        if face is None:
            if scope["method"] in ("GET", "HEAD") and QUERY.encode() in scope.get("query_string", b""):
                params = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
                sent = [v for k, v in params if k == QUERY]
                if sent:
                    rest = [(k, v) for k, v in params if k != QUERY]
                    await (await self._exchange(scope, sent[-1], rest))(scope, receive, send)
                    return
        elif face in ("v1", "a2a"):
            scope = self._with_bearer(scope)
        await self.app(scope, receive, send)

    async def _exchange(self, scope: Scope, sent: str, rest: list[tuple[str, str]]) -> Response:
        """``?token=`` on a page: the cookie (and the owner's lab session) and the clean URL, or 403."""
        if not self._matches(sent):
            message = (
                "this local token is not the one the server printed at its start (it is new at each start): "
                "open the URL in the banner of `psychoalign serve`\n"
            )
            return PlainTextResponse(message, status_code=403, headers=_NO_STORE)
        path = safe_next(scope.get("root_path", "") + scope["path"])  # never "//host": no open redirect
        response = RedirectResponse(path + (f"?{urlencode(rest)}" if rest else ""), status_code=303, headers=_NO_STORE)
        response.set_cookie(
            COOKIE,
            self.token.decode(),
            httponly=True,
            samesite="strict",
            secure=scope.get("scheme") == "https",
            path="/",
        )
        security: Security | None = getattr(getattr(scope.get("app"), "state", None), "security", None)
        client = scope.get("client")
        if security is not None and is_loopback(client[0] if client else None):
            try:
                owner = await security.accounts.owner_account()
            except InputError as exc:  # fail closed: no session, and why
                return PlainTextResponse(f"{exc.message}\n", status_code=409, headers=_NO_STORE)
            await security.login(Request(scope), response, owner)
        return response

    def _with_bearer(self, scope: Scope) -> Scope:
        """``scope`` with the token as its bearer token when the cookie may stand for it."""
        headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or ())
        cookie = site = None
        for name, value in headers:
            if name == b"authorization":
                return scope  # the client chose its credential: never mixed with the cookie
            if name == b"cookie":
                cookie = value.decode("latin-1")
            elif name == b"sec-fetch-site":
                site = value.decode("latin-1").strip().lower()
        if cookie is None or (site is not None and site not in _SAME_ORIGIN):
            return scope
        sent = cookie_parser(cookie).get(COOKIE)
        if not sent or not self._matches(sent):
            return scope
        return {**scope, "headers": [*headers, (b"authorization", b"Bearer " + self.token)]}
