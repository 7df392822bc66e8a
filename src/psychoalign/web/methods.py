"""``RouteMethods``: what a path answers to a method none of its routes takes, and to a trailing
slash that no route has.

* ``OPTIONS`` on a path whose routes do not declare it: 204 with ``Allow`` listing every method
  the path's routes take (a path served by several routes, ``GET /login`` and ``POST /login``,
  lists them all, not only the first route's).
* A 405 from a route carries the same full ``Allow`` header.
* A path that no route serves but whose trailing-slash twin is (``/lead/`` for ``/lead``) is
  redirected (307, method and body kept) with a path-only ``Location``: never built from the
  request's ``Host`` header, which a client chooses (``Host: evil.com`` must not send a browser
  to ``http://evil.com/lead``). An app using this turns its router's own slash redirect off.

Routes that match a path for every method (the ``/v1`` catch-all, mounts, the A2A agent) are
left to answer themselves.
"""

from __future__ import annotations

from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["RouteMethods"]

#: The methods a page route may declare (OPTIONS is answered here).
_METHODS = ("DELETE", "GET", "PATCH", "POST", "PUT")


class RouteMethods:
    """The full ``Allow`` header for OPTIONS and 405 answers, and relative trailing-slash
    redirects (see the module's docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        routes: list[BaseRoute] = list(getattr(getattr(scope.get("app"), "router", None), "routes", ()))
        found = {route.matches(scope)[0] for route in routes}
        if Match.FULL in found:
            await self.app(scope, receive, send)
            return
        if Match.PARTIAL in found:  # the path is served, not with this method
            allow = ", ".join(_allowed(scope, routes))
            if scope["method"] == "OPTIONS":
                await _respond(send, 204, [(b"allow", f"{allow}, OPTIONS".encode())])
                return
            await self.app(scope, receive, _with_allow(send, allow))
            return
        location = _slash_twin(scope, routes)
        if location is not None:
            await _respond(send, 307, [(b"location", location.encode("latin-1"))])
            return
        await self.app(scope, receive, send)


def _allowed(scope: Scope, routes: list[BaseRoute]) -> list[str]:
    """The methods some route takes on ``scope``'s path, sorted; HEAD with GET (``HeadAsGet``
    answers it). Asked of the routes themselves (``matches``): an included router's routes are
    nested inside it."""
    methods = {m for m in _METHODS if any(r.matches({**scope, "method": m})[0] is Match.FULL for r in routes)}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)


def _slash_twin(scope: Scope, routes: list[BaseRoute]) -> str | None:
    """The path-only URL of ``scope``'s path with its trailing slash dropped or added, when a
    route serves that and the result cannot be read as another host (``//evil.com``)."""
    path: str = scope["path"]
    if path == "/":
        return None
    twin = path[:-1] if path.endswith("/") else path + "/"
    if all(route.matches({**scope, "path": twin})[0] is Match.NONE for route in routes):
        return None
    raw = (scope.get("raw_path") or path.encode("utf-8")).decode("latin-1")
    location = raw[:-1] if raw.endswith("/") else raw + "/"
    if not location.startswith("/") or location[1:2] in ("/", "\\"):
        return None  # a scheme-relative URL would leave the site
    query: bytes = scope.get("query_string", b"")
    return location + ("?" + query.decode("latin-1") if query else "")


def _with_allow(send: Send, allow: str) -> Send:
    async def sending(message: Message) -> None:
        if message["type"] == "http.response.start" and message["status"] == 405:
            headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"allow"]
            message = {**message, "headers": [*headers, (b"allow", allow.encode())]}
        await send(message)

    return sending


async def _respond(send: Send, status: int, headers: list[tuple[bytes, bytes]]) -> None:
    await send({"type": "http.response.start", "status": status, "headers": [*headers, (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})
