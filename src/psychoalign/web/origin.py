"""Closed to other origins: the machine faces (``/v1``, the A2A agent, ``/metrics``) answer
programs, not the pages a browser happens to show.

A keyless loopback server trusts callers by address, so any page the user visits could POST to
it (spending provider keys), and with DNS rebinding read the answers. :class:`OriginGuard`
refuses, before any route runs:

* a ``Host`` outside the allow-list (:func:`host_allow_list`): the bind address, ``localhost``
  names on a loopback bind, ``serve.public_url``'s host and ``serve.allowed_hosts`` — a rebound
  name is never among them;
* a foreign ``Origin`` (any but the server's own, ``null`` included) or ``Sec-Fetch-Site:
  cross-site``, unless the origin is in ``serve.cors_origins``: those get CORS (preflight
  included, via Starlette's ``CORSMiddleware``); credentials are bearer tokens, never cookies.

Pages are not covered here: they carry their own CSRF and origin checks (web/security.py).
An app whose every path answers without credentials (``experiment view`` on loopback) passes
``face`` to check every path the same way.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from urllib.parse import urlsplit

from starlette.middleware.cors import CORSMiddleware
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ..a2a.server import CARD_PATH
from ..a2a.server import error_response as a2a_error
from ..config import ServeSettings
from .errors import APIError, error_response

#: Response headers a cross-origin page may read (the decision travels in headers).
CORS_EXPOSE = (
    "x-request-id",
    "x-psychoalign-trace-id",
    "x-psychoalign-status",
    "x-psychoalign-outcome",
    "x-psychoalign-tension",
    "x-psychoalign-state",
    "x-psychoalign-defense",
    "retry-after",
)
#: The headers the official OpenAI SDKs send with every request (their Stainless platform and
#: retry headers; the JavaScript one's too when it runs in a browser), which a browser names in
#: the preflight: without them the preflight was refused and ``new OpenAI({baseURL,
#: dangerouslyAllowBrowser: true})`` on a listed origin could not call ``/v1`` at all.
OPENAI_SDK_HEADERS = (
    "user-agent",
    "openai-organization",
    "openai-project",
    "x-stainless-arch",
    "x-stainless-async",
    "x-stainless-helper-method",
    "x-stainless-lang",
    "x-stainless-os",
    "x-stainless-package-version",
    "x-stainless-read-timeout",
    "x-stainless-retry-count",
    "x-stainless-runtime",
    "x-stainless-runtime-version",
    "x-stainless-timeout",
)
_CORS_HEADERS = (
    "authorization",
    "content-type",
    "x-request-id",
    "x-psychoalign-conversation-id",
    "x-psychoalign-framework",
    "a2a-version",
    "a2a-extensions",
    *OPENAI_SDK_HEADERS,
)
_WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::"})
_LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def face_of(path: str) -> str | None:
    """``"v1"``, ``"a2a"``, ``"metrics"``, or ``None`` for a path this guard leaves alone."""
    if path == "/v1" or path.startswith("/v1/"):
        return "v1"
    if path == CARD_PATH or path == "/a2a" or path.startswith("/a2a/"):
        return "a2a"
    if path == "/metrics":
        return "metrics"
    return None


def _bare(host: str) -> str:
    return host.strip().strip("[]").lower()


def host_allow_list(serve: ServeSettings) -> frozenset[str] | None:
    """Host names the machine faces answer; ``None`` = any (``'*'``, or a wildcard bind without
    ``serve.allowed_hosts``: such a bind needs API keys on every deployment)."""
    if "*" in serve.allowed_hosts:
        return None
    bind = _bare(serve.host)
    if bind in _WILDCARD_BINDS and not serve.allowed_hosts:
        return None
    names = {_bare(h) for h in serve.allowed_hosts}
    if bind not in _WILDCARD_BINDS:
        names.add(bind)
        if bind == "localhost" or _is_loopback_ip(bind):
            names |= _LOCAL_NAMES
    if serve.public_url:
        public = urlsplit(serve.public_url).hostname
        if public:
            names.add(public.lower())
    return frozenset(names)


def _is_loopback_ip(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _host_name(header: str) -> str | None:
    try:
        return urlsplit("//" + header).hostname
    except ValueError:  # an unbalanced bracket, a bad port
        return None


class OriginGuard:
    """Pure ASGI middleware (streams pass through untouched); see the module doc."""

    def __init__(self, app: ASGIApp, serve: ServeSettings, face: Callable[[str], str | None] = face_of) -> None:
        self.app = app
        self.face = face
        self.hosts = host_allow_list(serve)
        self.cors_origins = frozenset(serve.cors_origins)
        self.cors: ASGIApp = CORSMiddleware(
            app,
            allow_origins=list(serve.cors_origins),
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=list(_CORS_HEADERS),
            expose_headers=list(CORS_EXPOSE),
            allow_credentials=False,
            max_age=600,
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        face = self.face(scope["path"]) if scope["type"] == "http" else None
        if face is None:
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        host = headers.get("host")
        if host is not None and self.hosts is not None:
            name = _host_name(host)
            if name is None or name.lower() not in self.hosts:
                why = (
                    f"Host '{host[:80]}' is not a name this server answers: use one of "
                    f"{', '.join(sorted(self.hosts)) or '(none)'}, or add it to serve.allowed_hosts"
                )
                await self._refuse(face, scope["path"], 403, "host_not_allowed", why)(scope, receive, send)
                return
        origin = headers.get("origin")
        if origin is not None:
            origin = origin.strip().rstrip("/").lower()
            if origin in self.cors_origins:
                await self.cors(scope, receive, send)
                return
            parts = urlsplit(origin)
            if host is None or parts.scheme not in ("http", "https") or parts.netloc != host.strip().lower():
                why = (
                    f"requests from web origin '{origin[:80]}' are refused: a page may call this server only "
                    "when its origin is listed in serve.cors_origins"
                )
                await self._refuse(face, scope["path"], 403, "origin_not_allowed", why)(scope, receive, send)
                return
        elif headers.get("sec-fetch-site") == "cross-site":
            why = "cross-site requests are refused: list the calling page's origin in serve.cors_origins"
            await self._refuse(face, scope["path"], 403, "origin_not_allowed", why)(scope, receive, send)
            return
        await self.app(scope, receive, send)

    @staticmethod
    def _refuse(face: str, path: str, status: int, code: str, message: str) -> Response:
        """The refusal in the shape of the face: OpenAI's error, the A2A binding's, plain text."""
        if face == "v1":
            return error_response(APIError(status, message, code=code))
        if face == "a2a":
            return a2a_error(path, status, "PERMISSION_DENIED", message)
        return PlainTextResponse(f"{face}: {message}\n", status_code=status)
