"""Operational basics: request ids (header, logs), access log, HTTP metrics, /healthz, /metrics."""

from __future__ import annotations

import hmac
import logging
import re
import time
import uuid
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .apikeys import is_loopback, parse_bearer
from .errors import APIError

if TYPE_CHECKING:
    from .gateway import Gateway

REQUEST_ID_HEADER = "x-request-id"
REQUEST_ID_SCOPE_KEY = "psychoalign.request_id"
_request_id: ContextVar[str] = ContextVar("psychoalign_request_id", default="-")
_VALID_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_access = logging.getLogger("psychoalign.web.access")


def current_request_id() -> str:
    return _request_id.get()


class RequestIdFilter(logging.Filter):
    """Adds ``record.request_id`` (``-`` outside a request) so formats can print it."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.request_id = _request_id.get()
        return True


class RequestContextMiddleware:
    """Pure ASGI (streams pass through untouched): assigns a request id (the client's
    ``x-request-id`` when well-formed, else a new one), echoes it, logs one access line and
    records request count and latency by route template."""

    def __init__(self, app: ASGIApp, gateway: Gateway) -> None:
        self.app = app
        self.metrics = gateway.metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        supplied = ""
        for name, value in scope.get("headers", []):
            if name == REQUEST_ID_HEADER.encode():
                supplied = value.decode("latin-1")
        rid = supplied if _VALID_ID.match(supplied) else uuid.uuid4().hex
        scope[REQUEST_ID_SCOPE_KEY] = rid  # for the 500 handler, which runs outside this middleware
        token = _request_id.set(rid)
        status = 500
        start = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers", []))
                headers.append((REQUEST_ID_HEADER.encode(), rid.encode()))
                message = {**message, "headers": headers}
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            elapsed = time.perf_counter() - start
            route = _route_label(scope)
            metrics = self.metrics
            metrics.child(metrics.requests, scope["method"], route, str(status)).inc()
            metrics.child(metrics.latency, route).observe(elapsed)
            _access.info("%s %s %d %.1fms", scope["method"], scope["path"], status, elapsed * 1000)
            _request_id.reset(token)


def _route_label(scope: Scope) -> str:
    route: Any = scope.get("route")
    path = getattr(route, "path", None) or getattr(route, "path_format", None)
    return str(path) if path else "unmatched"


def ops_router(gateway: Gateway) -> APIRouter:
    router = APIRouter()

    @router.get("/healthz", include_in_schema=False)
    async def healthz() -> JSONResponse:
        """Public: liveness, and whether the server is draining (503 then)."""
        body = {"status": "draining" if gateway.draining else "ok", "in_flight": gateway.inflight}
        return JSONResponse(body, status_code=503 if gateway.draining else 200)

    @router.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        """Loopback clients, or anyone with ``serve.metrics_token`` as a bearer token."""
        configured = gateway.settings.serve.metrics_token
        try:
            token = parse_bearer(request.headers.get("authorization"))
        except APIError:
            token = None
        if configured is not None:
            allowed = token is not None and hmac.compare_digest(token.encode(), configured.get_secret_value().encode())
        else:
            allowed = is_loopback(request.client.host if request.client else None)
        if not allowed:
            return PlainTextResponse("metrics: forbidden (loopback or serve.metrics_token)\n", status_code=403)
        return Response(gateway.metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    return router
