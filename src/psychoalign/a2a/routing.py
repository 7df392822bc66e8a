"""What an HTTP path allows: one answer for every 405 and OPTIONS of the app (the A2A binding's
errors and the ``/v1`` catch-all), so their ``Allow`` headers cannot drift apart."""

from __future__ import annotations

from collections.abc import Iterable

from starlette.routing import BaseRoute, Route

__all__ = ["allowed_methods"]


def allowed_methods(routes: Iterable[BaseRoute], path: str) -> list[str]:
    """The methods the routes among ``routes`` whose path matches ``path`` answer, sorted. HEAD is
    in with GET: the app answers HEAD wherever it answers GET (a route that declares GET alone is
    run as GET and its body left out)."""
    methods = {m for r in routes if isinstance(r, Route) and r.path_regex.match(path) for m in r.methods or ()}
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods)
