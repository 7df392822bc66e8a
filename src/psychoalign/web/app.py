"""``create_app``: the one FastAPI application behind ``psychoalign serve``.

Faces: pages under ``/`` (STAR platform, trace viewer), the OpenAI-compatible API under ``/v1``,
the A2A system agent (card at ``/.well-known/agent-card.json``, JSON-RPC and HTTP+JSON under
``/a2a/``), ``/healthz`` and ``/metrics``. To add a face, include a router in :func:`create_app`
(or on the returned app); to add middleware, ``app.add_middleware``. Every route must decide who
may use it: the ``/v1`` routes check API keys, the A2A agent its bearer token, pages the session.
"""

from __future__ import annotations

import functools
import html
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.middleware import Middleware
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Match
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..a2a.server import CARD_CACHE_CONTROL, CARD_PATH, OLD_CARD_PATH, UNAUTHENTICATED_CODE
from ..a2a.server import error_response as a2a_error
from ..config import Settings
from ..negotiation.engine import Negotiator
from ..traces.store import TraceStore
from .apikeys import is_loopback
from .errors import APIError, error_response
from .gateway import Gateway
from .local_token import LocalTokenCookie
from .methods import RouteMethods
from .metrics import GatewayMetrics
from .openai_api import openai_router
from .ops import REQUEST_ID_SCOPE_KEY, RequestContextMiddleware, current_request_id, ops_router
from .origin import OriginGuard
from .security import SecurityHeadersMiddleware, security_headers

_log = logging.getLogger(__name__)
#: What a browser gets for an unhandled error: static (a template could be what failed), styled by /static.
_ERROR_PAGE = (
    '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Error 500 · PsychoAlign</title>'
    '<link rel="stylesheet" href="/static/app.css"></head><body><main><section class="card narrow">'
    '<h1>Something went wrong</h1><p class="error" role="alert">{message}</p>'
    '<p><a href="/">Back to the start page</a></p></section></main></body></html>'
)


async def _error_page(request: Request, message: str) -> Response:
    """The 500 page in the site's layout; the static one when the layout cannot be rendered (the
    templates, or the database the page's header reads, may be what failed)."""
    templates = getattr(request.app.state, "templates", None)
    if templates is not None:
        try:
            page: Response = await templates.render(
                request, "error.html", {"status": 500, "message": message}, status_code=500
            )
            return page
        except Exception:  # any failure here: the static page below
            _log.warning("the error page could not be rendered; sent the static one", exc_info=True)
    return HTMLResponse(_ERROR_PAGE.format(message=html.escape(message)), status_code=500)


class HeadAsGet:
    """HEAD on a path whose route declares GET but not HEAD (FastAPI's page routes declare GET
    alone, so HEAD got 405) runs that GET route, its sign-in and role checks included, and sends
    its status and headers without the body. Routes that answer HEAD themselves (``/v1/models``,
    the A2A card, static files) and paths without a GET route are left alone. Innermost, so the
    access log, the metrics and the origin guard see the request as HEAD."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD" or not _get_only(scope):
            await self.app(scope, receive, send)
            return

        async def bodiless(message: Message) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):
                    return  # the GET body's chunks are not sent
                message = {"type": "http.response.body", "body": b"", "more_body": False}
            await send(message)

        await self.app({**scope, "method": "GET"}, receive, bodiless)


def _get_only(scope: Scope) -> bool:
    """Whether no route answers ``scope`` (a HEAD) itself but one answers it as a GET."""
    routes: list[BaseRoute] = list(getattr(getattr(scope.get("app"), "router", None), "routes", ()))
    if any(route.matches(scope)[0] is Match.FULL for route in routes):
        return False
    as_get = {**scope, "method": "GET"}
    return any(route.matches(as_get)[0] is Match.FULL for route in routes)


class A2AMount(BaseRoute):
    """Hands the A2A paths (the card, ``/a2a`` and everything under it) to the SDK's Starlette
    app, unchanged: the SDK builds absolute routes, so a prefix ``Mount`` would not match them.
    The card's slash form and its old path go there too: the A2A 404s that ``serve-a2a`` answers
    (the old path's names the card), not a redirect."""

    def __init__(self, app: ASGIApp, *, loopback_only: bool = False, built_at: datetime | None = None) -> None:
        self.app = app
        self.path = "/a2a"
        self.loopback_only = loopback_only  # an agent without credentials: same rule as keyless /v1
        # The card is built with the app and never changes while it runs: its Last-Modified.
        self.built_at = (built_at or datetime.now(UTC)).replace(microsecond=0)
        self.last_modified = format_datetime(self.built_at, usegmt=True)

    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope["type"] == "http":
            path = scope["path"]
            if path in (CARD_PATH, CARD_PATH + "/", OLD_CARD_PATH, "/a2a") or path.startswith("/a2a/"):
                return Match.FULL, {}
        return Match.NONE, {}

    def url_path_for(self, name: str, /, **path_params: Any) -> Any:
        from starlette.routing import NoMatchFound

        raise NoMatchFound(name, path_params)

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        # the card (its slash form and old path: 404s) needs no credential
        public = scope["path"].rstrip("/") in (CARD_PATH, OLD_CARD_PATH)
        if self.loopback_only and not public and not is_loopback(client[0] if client else None):
            # As keyless /v1 answers such a caller: 401, here in the A2A binding's error shape.
            message = "Unauthenticated: this A2A agent has no credentials configured and answers loopback clients only"
            await a2a_error(scope["path"], 401, "UNAUTHENTICATED", message, code=UNAUTHENTICATED_CODE)(
                scope, receive, send
            )
            return
        if scope["path"] == CARD_PATH and scope["method"] in ("GET", "HEAD"):
            await self._card(scope, receive, send)
            return
        await self.app(scope, receive, send)

    async def _card(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The SDK's card with ``Last-Modified``; ``If-Modified-Since`` at or after it: 304."""
        since = dict(scope.get("headers") or ()).get(b"if-modified-since")
        if since is not None:
            try:
                cached = parsedate_to_datetime(since.decode("latin-1"))
            except (TypeError, ValueError, IndexError):
                cached = None
            if cached is not None and cached.tzinfo is not None and cached >= self.built_at:
                headers = {"last-modified": self.last_modified, "cache-control": CARD_CACHE_CONTROL}
                await Response(status_code=304, headers=headers)(scope, receive, send)
                return

        async def with_date(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] == 200:
                headers = [*message.get("headers", []), (b"last-modified", self.last_modified.encode())]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, with_date)


def create_app(
    settings: Settings,
    *,
    store: TraceStore | None = None,
    negotiators: Mapping[str, Negotiator] | None = None,
    base_url: str | None = None,
    a2a: bool = True,
    lab: bool = True,
    local_token: str | None = None,
) -> FastAPI:
    """Build the app. ``store`` defaults to ``settings.effective_store_url()``; ``negotiators``
    overrides named deployments' negotiators (tests, benchmarks); ``base_url`` is what the A2A
    card advertises (default ``serve.public_url``, else ``http://host:port``); ``lab`` adds the STAR
    lab pages (docs/star-platform.md); ``local_token``: keyless /v1 and an A2A agent without
    credentials require this bearer token (``psychoalign serve`` makes one per start, serve.local_token);
    a browser that opened a page with ``?token=`` once may send it as a cookie (web/local_token.py)."""
    gateway = Gateway(settings, store=store, negotiators=negotiators, metrics=GatewayMetrics())
    labs: list[Any] = []
    closing: list[Callable[[], Awaitable[None]]] = []

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        recovered = await gateway.store.recover_interrupted()
        if recovered:
            _log.warning("marked %d interrupted negotiation(s) failed", recovered)
        try:
            yield
        finally:
            for star_lab in labs:
                await star_lab.close()
            for close in closing:
                await close()
            await gateway.aclose()

    app = FastAPI(
        title="PsychoAlign",
        summary="Negotiated alignment behind an OpenAI-compatible API, the STAR lab and an A2A agent.",
        lifespan=lifespan,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )
    app.state.gateway = gateway
    app.state.settings = settings

    @app.exception_handler(APIError)
    async def api_error(request: Request, exc: APIError) -> Response:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        param = ".".join(str(p) for p in first["loc"][1:]) or None
        return error_response(APIError(400, f"{param or 'request'}: {first['msg']}", param=param))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> Response:
        rid = request.scope.get(REQUEST_ID_SCOPE_KEY) or current_request_id()
        _log.exception("unhandled error (request id %s)", rid)
        message = f"internal error (request id {rid}); the server log has the details"
        # Starlette answers this outside every middleware: the security headers are set here.
        headers = dict(security_headers(tls=request.url.scheme == "https"))
        if "text/html" in request.headers.get("accept", ""):  # a person in a browser: a page, not JSON
            page = await _error_page(request, message)
            page.headers.update(headers)
            return page
        body = {"error": {"message": message, "type": "server_error", "param": None, "code": None}}
        return JSONResponse(body, status_code=500, headers=headers)

    app.include_router(ops_router(gateway))
    app.include_router(openai_router(gateway, local_token=local_token))
    if lab:  # the STAR lab pages (docs/star-platform.md): security layer, /login, /tasks, /lead
        from .star import install_lab

        deployment = settings.serve.a2a_deployment or next(iter(settings.deployments))
        labs.append(install_lab(app, settings, negotiator=gateway.negotiator(deployment)))
        # The trace viewer uses the lab's security layer (sessions, roles, CSP, templates).
        from .traces import trace_router

        app.include_router(trace_router(gateway))
        # The experiment viewer: the result store in the same database, for the same leads.
        from ..experiments.harness.store import open_result_store
        from .experiments import ExperimentSource, experiment_router
        from .security import require_lead

        results = open_result_store(settings.effective_store_url())
        closing.append(results.close)
        source = ExperimentSource(results, gateway.store, data_dir_setting=settings.experiments.data_dir)
        app.include_router(experiment_router(source, guard=[Depends(require_lead)]))
    if a2a:
        name = settings.serve.a2a_deployment or next(iter(settings.deployments))
        open_agent = not settings.deployment(name).api_keys and settings.a2a.token("user") is None
        # An open agent takes the local token as its bearer token (HTTP and gRPC alike).
        a2a_app = _a2a_app(gateway, settings, base_url, local_token if open_agent else None)
        app.state.a2a_app = a2a_app  # its handler, credentials and limits serve the gRPC binding too
        app.router.routes.append(A2AMount(a2a_app, loopback_only=open_agent))
    if local_token is not None:  # the token in a browser (?token= once, then a cookie): inside the guard
        app.add_middleware(LocalTokenCookie, token=local_token)
    # Inside the request-id middleware (refusals carry an id and are counted), outside every route.
    app.add_middleware(OriginGuard, serve=settings.serve)
    app.add_middleware(RequestContextMiddleware, gateway=gateway)
    # The security headers outermost: the origin guard's and the local token's own answers carry
    # them too, and an app without the lab (whose install put them innermost) has them as well.
    inner = [m for m in app.user_middleware if getattr(m, "cls", None) is SecurityHeadersMiddleware]
    app.user_middleware[:] = [m for m in app.user_middleware if m not in inner]
    app.add_middleware(SecurityHeadersMiddleware)
    # Next to the routes: full Allow headers, relative slash redirects (never from the Host
    # header: the router's own redirect is off), and HEAD as GET innermost.
    app.router.redirect_slashes = False
    app.user_middleware.append(Middleware(RouteMethods))
    app.user_middleware.append(Middleware(HeadAsGet))
    return app


def _a2a_app(gateway: Gateway, settings: Settings, base_url: str | None, local_token: str | None) -> ASGIApp:
    from ..a2a.system import a2a_task_store, build_system_app

    serve = settings.serve
    name = serve.a2a_deployment or next(iter(settings.deployments))
    deployment = settings.deployment(name)
    host = f"[{serve.host}]" if ":" in serve.host else serve.host  # IPv6 in brackets
    url = (base_url or serve.public_url or f"http://{host}:{serve.port}").rstrip("/")
    grpc_url = None
    if serve.grpc_port is not None:  # the card lists the gRPC interface, at the advertised host
        grpc_host = urlsplit(url).hostname or serve.host
        grpc_url = f"[{grpc_host}]:{serve.grpc_port}" if ":" in grpc_host else f"{grpc_host}:{serve.grpc_port}"
    return build_system_app(
        gateway.negotiator(name),
        url,
        framework=deployment.framework,
        token=settings.a2a.token("user") or local_token,
        frameworks=deployment.frameworks(),
        api_key_digests=deployment.api_keys,
        max_body_bytes=settings.a2a.max_body_bytes,
        # Tasks live in the trace store's database: with several workers any one of them can
        # answer a client's get, list, cancel or follow-up (in memory, only the one that made it).
        task_store=a2a_task_store(gateway.store),
        grpc_url=grpc_url,
        on_trace=functools.partial(gateway.observe, name),  # A2A negotiations in /metrics too
    )
