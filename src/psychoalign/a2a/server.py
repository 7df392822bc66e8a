"""Each agent role as an A2A server: card, JSON-RPC and HTTP+JSON bindings, streaming, bearer auth.

The DRIVE and EVALUATOR services accept tasks only from the MEDIATOR's identity: the no-direct-
channel invariant holds on the network too, not just inside one process.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import logging
import math
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from a2a.helpers import get_data_parts, new_data_part, new_task_from_user_message
from a2a.server.agent_execution import AgentExecutor, RequestContext, SimpleRequestContextBuilder
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore, TaskStore, TaskUpdater
from a2a.types import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    HTTPAuthSecurityScheme,
    Part,
    Role,
    SecurityRequirement,
    SecurityScheme,
    SendMessageRequest,
    StringList,
    Task,
    TaskState,
)
from a2a.utils import TransportProtocol
from a2a.utils.constants import A2A_JSON_MEDIA_TYPE, VERSION_HEADER
from a2a.utils.error_handlers import A2A_DOMAIN, ERROR_INFO_TYPE
from a2a.utils.errors import InvalidParamsError, PushNotificationNotSupportedError, UnsupportedOperationError
from google.protobuf.struct_pb2 import Struct, Value
from jsonrpc.jsonrpc2 import JSONRPC20Request  # type: ignore[import-untyped]  # the SDK's own validator
from starlette.applications import Starlette
from starlette.authentication import AuthCredentials, AuthenticationBackend, AuthenticationError, SimpleUser
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..agents.messages import AgentRole
from ..errors import ConfigError, public_message
from ..jsonguard import JSONLimitError, NonFiniteError, check_finite, check_json
from ..negotiation.bus import AgentTransport
from .codec import decode_task, encode_reply, is_packed
from .routing import allowed_methods

__all__ = ["CARD_PATH", "OLD_CARD_PATH", "error_response"]

_log = logging.getLogger(__name__)
CARD_PATH = "/.well-known/agent-card.json"
#: Where earlier A2A versions served the card: a 404 that names :data:`CARD_PATH`, credentials or not
#: (a client probing for the card must learn where it is, not that it needs a token).
OLD_CARD_PATH = "/.well-known/agent.json"
#: The methods its route answers: only these skip credentials, so no other method can pass it
#: unauthenticated to a route of the SDK (the REST binding's catch-all tenant mount).
_OLD_CARD_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
#: JSON-RPC code for a missing or invalid credential: A2A 1.0 defines none, so one from the
#: implementation-defined server-error range (-32000..-32099), outside A2A's own -32001..-32009.
UNAUTHENTICATED_CODE = -32040
INVALID_REQUEST_CODE = -32600
INVALID_PARAMS_CODE = -32602
PARSE_ERROR_CODE = -32700
#: Largest A2A request body accepted (a2a.max_body_bytes overrides it).
MAX_BODY_BYTES = 2_000_000
CARD_CACHE_CONTROL = "public, max-age=300"
VERSION_KEY = VERSION_HEADER.lower().encode()
JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"

ROLE_SKILLS: dict[str, tuple[str, str, list[str]]] = {
    "drive": (
        "propose",
        "Takes a DriveTask {request, context, n, feedback} and returns DriveOutput: n ranked proposals, "
        "each {text, utility in [0,1]}. Unconstrained capability maximiser; never user-facing.",
        ["drive"],
    ),
    "evaluator": (
        "evaluate",
        "Takes an EvaluateTask {request, context, proposal, framework} and returns an Evaluation: score 0-100, "
        "verdict APPROVED/CONDITIONAL/VETOED, modifications, rule hits by layer, conflict classification; or an "
        "EvaluateBatchTask {request, context, proposals, framework} and returns {evaluations}, one per proposal, "
        "each judged in its own model call. Either may carry earlier: the conversation's earlier user turns, "
        "read by the framework's deterministic checks.",
        ["evaluate", "evaluate_batch"],
    ),
    "mediator": (
        "arbitrate",
        "Takes an AssessTask (feasibility of admissible proposals) or a ComposeTask (the final user-facing "
        "response) and returns MediatorAssessment or MediatorCompose.",
        ["assess", "compose"],
    ),
}


class BearerBackend(AuthenticationBackend):
    """``Authorization: Bearer <token>`` -> identity. The agent card stays public.

    ``tokens`` maps identity -> plain token; ``digests`` maps the SHA-256 hex digest of an
    accepted token (a deployment's ``api_keys``) -> identity. Comparison is constant-time.
    """

    def __init__(self, tokens: Mapping[str, str], digests: Mapping[str, str] | None = None) -> None:
        self._tokens = [(name, token.encode()) for name, token in tokens.items() if token]
        self._digests = {d.lower(): name for d, name in (digests or {}).items()}

    def identify(self, token: str) -> str | None:
        raw = token.encode()
        found = None
        for name, expected in self._tokens:  # no early exit: timing says nothing about which token
            if hmac.compare_digest(raw, expected):
                found = name
        return found or self._digests.get(hashlib.sha256(raw).hexdigest())

    async def authenticate(self, conn: HTTPConnection) -> tuple[AuthCredentials, SimpleUser] | None:
        path = conn.url.path
        if path == CARD_PATH or (path == OLD_CARD_PATH and conn.scope.get("method") in _OLD_CARD_METHODS):
            return None
        header = conn.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise AuthenticationError("missing bearer token")
        name = self.identify(token.strip())
        if name is None:
            raise AuthenticationError("invalid bearer token")
        return AuthCredentials(["authenticated"]), SimpleUser(name)


def error_response(
    path: str,
    http_status: int,
    status: str,
    message: str,
    *,
    code: int | None = None,
    request_id: str | int | None = None,
    reason: str | None = None,
) -> Response:
    """An error in the shape of the binding ``path`` belongs to: a JSON-RPC error object on the
    JSON-RPC route (``code``, default Invalid Request; ``request_id`` the request's own id when it
    could be read), the HTTP+JSON (google.rpc.Status, AIP-193) error elsewhere, typed
    ``application/a2a+json`` as every HTTP+JSON answer (A2A 1.0 §11.1). Both carry a
    ``google.rpc.ErrorInfo`` with ``reason`` (default ``status``), as the SDK's own errors do."""
    info = {"@type": ERROR_INFO_TYPE, "reason": reason or status, "domain": A2A_DOMAIN, "metadata": {}}
    headers = {"WWW-Authenticate": "Bearer"} if http_status == 401 else {}
    if path.rstrip("/") == JSONRPC_PATH:
        error = {"code": code if code is not None else INVALID_REQUEST_CODE, "message": message, "data": [info]}
        body = {"jsonrpc": "2.0", "id": request_id, "error": error}
        return JSONResponse(body, status_code=http_status, headers=headers)
    body = {"error": {"code": http_status, "status": status, "message": message, "details": [info]}}
    return JSONResponse(body, status_code=http_status, headers=headers, media_type=A2A_JSON_MEDIA_TYPE)


def _unauthorized(conn: HTTPConnection, exc: Exception) -> Response:
    """401 in the shape of the binding the client used."""
    return error_response(conn.url.path, 401, "UNAUTHENTICATED", f"Unauthenticated: {exc}", code=UNAUTHENTICATED_CODE)


async def _old_card(request: Request) -> Response:
    """The card's old path (earlier A2A versions): a 404 in the HTTP+JSON shape that names the current one."""
    return error_response(
        request.url.path, 404, "NOT_FOUND", f"no A2A route at {OLD_CARD_PATH}: the agent card is at {CARD_PATH}"
    )


async def _not_found(request: Request, exc: Exception) -> Response:
    """Routing errors (no such path, wrong method) in the binding's error shape, not plain text.
    A path served for other methods is a 405 with ``Allow``: the SDK's multi-tenant catch-all
    mount (``/{tenant}/…``) matches every path, so the router itself answers such a request 404."""
    path = request.url.path
    allowed = allowed_methods(getattr(request.scope.get("app"), "routes", ()), path)
    if request.method in allowed:  # the route exists for this method: a 404 its handler raised
        allowed = []
    if getattr(exc, "status_code", 404) == 405 or allowed:
        why = f"method {request.method} is not allowed here" + (f": send {' or '.join(allowed)}" if allowed else "")
        response = error_response(path, 405, "INVALID_ARGUMENT", why)
        if allowed:
            response.headers["Allow"] = ", ".join(allowed)
        return response
    return error_response(path, 404, "NOT_FOUND", f"no A2A route at {path[:200]}")


_LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def _is_local(name: str) -> bool:
    try:
        return name == "localhost" or ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _hostname(value: str) -> str | None:
    try:
        return urlsplit(value if "//" in value else "//" + value).hostname
    except ValueError:  # an unbalanced bracket, a bad port
        return None


class OpenGuard:
    """For a service without credentials (``--insecure``, loopback only), which trusts callers by
    address: any page the user visits could POST to it, and with DNS rebinding read the answers.
    Refuses, before the SDK runs and in the binding's error shape (HTTP 403
    ``PERMISSION_DENIED``), a ``Host`` other than the card's own (a loopback card also answers
    ``localhost``, ``127.0.0.1`` and ``::1``), any ``Origin`` but the service's own (``null``
    included), and ``Sec-Fetch-Site: cross-site``. Services with bearer tokens need no such guard:
    a page cannot send a token it does not know. ``psychoalign serve`` has its own
    (web/origin.py)."""

    def __init__(self, app: ASGIApp, card: AgentCard) -> None:
        self.app = app
        names = {h.lower() for i in card.supported_interfaces if (h := _hostname(i.url))}
        if any(_is_local(n) for n in names):
            names |= _LOCAL_NAMES
        self.hosts = frozenset(names)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or ()}
        host = headers.get("host", "")
        why = None
        name = _hostname(host)
        if name is None or name.lower() not in self.hosts:
            why = f"Host '{host[:80]}' is not a name this service answers: use one of {', '.join(sorted(self.hosts))}"
        elif (origin := headers.get("origin")) is not None:
            parts = urlsplit(origin.strip().rstrip("/").lower())
            if parts.scheme not in ("http", "https") or parts.netloc != host.strip().lower():
                why = (
                    f"requests from web origin '{origin[:80]}' are refused: this service has no credentials, "
                    "so it answers only programs, not web pages"
                )
        elif headers.get("sec-fetch-site") == "cross-site":
            why = "cross-site requests are refused: this service has no credentials"
        if why is None:
            await self.app(scope, receive, send)
            return
        await error_response(scope["path"], 403, "PERMISSION_DENIED", why)(scope, receive, send)


class RestMediaType:
    """Every HTTP+JSON answer typed ``application/a2a+json`` (A2A 1.0 §11.1), errors included: the
    SDK types its results so but its errors (task not found, invalid params, unsupported
    operations) ``application/json``. JSON-RPC answers stay ``application/json`` (§9.1), and so
    does the agent card."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if not path or path.rstrip("/") == JSONRPC_PATH or path == CARD_PATH:
            await self.app(scope, receive, send)
            return

        async def typed(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, _REST_TYPE if k.lower() == b"content-type" and v.split(b";")[0].strip() == _JSON else v)
                    for k, v in message.get("headers") or ()
                ]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, typed)


_JSON = b"application/json"
_REST_TYPE = A2A_JSON_MEDIA_TYPE.encode()


class VersionParam:
    """``A2A-Version`` as a request parameter (``?A2A-Version=1.0``), which A2A 1.0 §3.6.1 lets a
    client send instead of the header: copied into the header the SDK reads (it read only the
    header, so such a request counted as 0.3 and was refused). A header, when sent, wins."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope.get("query_string"):
            headers: list[tuple[bytes, bytes]] = list(scope.get("headers") or ())
            if all(k.lower() != VERSION_KEY for k, _ in headers):
                query = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
                sent = [v for k, v in query if k.lower().encode("latin-1") == VERSION_KEY]
                if sent:
                    scope = {**scope, "headers": [*headers, (VERSION_KEY, sent[-1].encode("latin-1"))]}
        await self.app(scope, receive, send)


class BodyLimit:
    """Refuses request bodies the SDK would choke on, before it reads them, in the binding's error
    shape: over ``limit`` bytes (HTTP 413; a declared Content-Length over the limit is refused
    at once), of a media type the binding does not take (HTTP 415: a JSON-RPC Invalid Request,
    HTTP+JSON ``INVALID_ARGUMENT``; :func:`_unsupported_type`), not UTF-8 (a JSON-RPC parse error,
    HTTP+JSON ``INVALID_ARGUMENT``; the SDK
    answered an internal error naming the codec), or JSON nested deeper or with longer numbers
    than :mod:`psychoalign.jsonguard` allows (the same parse error). The body is then replayed."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or ()).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            await self._refuse(
                scope, receive, send, 413, f"request body is larger than the limit of {self.limit} bytes"
            )
            return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.limit:
                await self._refuse(
                    scope, receive, send, 413, f"request body is larger than the limit of {self.limit} bytes"
                )
                return
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and (unsupported := _unsupported_type(scope)) is not None:
            await self._refuse(scope, receive, send, 415, unsupported[0], hint=unsupported[1])
            return
        try:
            text = body.decode("utf-8")
        except UnicodeDecodeError as exc:
            why = f"request body is not UTF-8 (byte 0x{body[exc.start : exc.start + 1].hex()} at offset {exc.start})"
            await self._refuse(scope, receive, send, 400, why, code=PARSE_ERROR_CODE)
            return
        try:  # the SDK's parser would recurse without bound (and choke on huge integers)
            check_json(text)
            # NaN and Infinity are not JSON; the SDK's parser took them, stored them in the task
            # (message metadata), then failed to write that task out in every later answer.
            check_finite(text)
        except (JSONLimitError, NonFiniteError) as exc:
            await self._refuse(
                scope, receive, send, 400, f"request body refused: {exc}", code=PARSE_ERROR_CODE, hint=""
            )
            return
        invalid = _invalid_jsonrpc(body) if scope["path"].rstrip("/") == JSONRPC_PATH and body else None
        if invalid is not None:
            why, request_id = invalid
            await self._refuse(
                scope, receive, send, 400, f"invalid JSON-RPC request: {why}", hint="", request_id=request_id
            )
            return
        unknown = _unknown_status_filter(scope, body) or _params_not_object(scope, body)
        if unknown is not None:
            why, request_id = unknown
            jsonrpc = scope["path"].rstrip("/") == JSONRPC_PATH  # a JSON-RPC error travels in a 200
            response = error_response(
                scope["path"],
                200 if jsonrpc else 400,
                "INVALID_ARGUMENT",
                why,
                code=INVALID_PARAMS_CODE,
                request_id=request_id,
                reason="INVALID_PARAMS",
            )
            await response(scope, receive, send)
            return
        sent = False

        async def replay() -> Message:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # later calls: the client's disconnect, for streams

        await self.app(scope, replay, send)

    async def _refuse(
        self,
        scope: Scope,
        receive: Receive,
        send: Send,
        status: int,
        why: str,
        *,
        code: int | None = None,
        hint: str | None = None,
        request_id: str | int | None = None,
    ) -> None:
        if hint is None:
            hint = "shorten it or raise a2a.max_body_bytes" if status == 413 else "send JSON encoded as UTF-8"
        message = f"{why}: {hint}" if hint else why
        reason = "INVALID_ARGUMENT"
        if status == 400 and scope["path"].rstrip("/") == JSONRPC_PATH:
            # A JSON-RPC error travels in a 200 response, as the SDK answers the parse and request
            # errors it finds itself (and as the A2A TCK checks); only transport refusals (401,
            # 413) keep their HTTP status.
            status = 200
            reason = "INVALID_REQUEST" if code is None else reason
        response = error_response(scope["path"], status, reason, message, code=code, request_id=request_id)
        await response(scope, receive, send)


#: The media types a request body may have, by binding (A2A 1.0 §9.1: JSON-RPC is
#: ``application/json``; §11.1, as amended in 1.0.1: HTTP+JSON is ``application/a2a+json``, and
#: ``application/json`` is still accepted there, which the SDK's own REST client sends).
_RPC_TYPES = ("application/json",)
_REST_TYPES = (A2A_JSON_MEDIA_TYPE, "application/json")


def _unsupported_type(scope: Scope) -> tuple[str, str] | None:
    """Why a request body's Content-Type is refused (and the fix), or None when the binding takes
    it. Parameters (``; charset=utf-8``) are allowed. A missing type is refused too: a browser
    sends a form or ``text/plain`` cross-site without asking first, never ``application/json``."""
    sent = next((v for k, v in scope.get("headers") or () if k.lower() == b"content-type"), None)
    media = sent.decode("latin-1").split(";")[0].strip().lower() if sent is not None else ""
    allowed = _RPC_TYPES if scope["path"].rstrip("/") == JSONRPC_PATH else _REST_TYPES
    if media in allowed:
        return None
    said = f"Content-Type '{media[:80]}'" if media else "a request body without a Content-Type"
    return f"{said} is not supported here", f"send the body as {' or '.join(allowed)}"


_STATE_NAMES = frozenset(TaskState.keys())
_STATE_NUMBERS = frozenset(TaskState.values())
_STATES = ", ".join(TaskState.keys()[1:])  # all but TASK_STATE_UNSPECIFIED


def _unknown_status_filter(scope: Scope, body: bytes) -> tuple[str, str | int | None] | None:
    """ListTasks' ``status`` filter when it names no task state (a typo, a 0.3 name such as
    ``completed``), with the request's id: the SDK parses requests ignoring what it does not
    know, an unknown enum value included, so the filter was dropped and every task listed. A
    filter the server cannot apply is invalid params (A2A 1.0 §3.1.4), not a wider answer."""
    path = scope["path"].rstrip("/")
    request_id: str | int | None = None
    if path == JSONRPC_PATH:
        if b'"ListTasks"' not in body:  # most requests: no second parse
            return None
        try:
            data = json.loads(body)
        except ValueError:
            return None
        params = data.get("params") if isinstance(data, dict) else None
        if data.get("method") != "ListTasks" or not isinstance(params, dict) or params.get("status") is None:
            return None
        value: Any = params["status"]
        if isinstance(data.get("id"), str | int) and not isinstance(data.get("id"), bool):
            request_id = data["id"]
    elif scope.get("method") == "GET" and path == f"{REST_PATH}/tasks" and scope.get("query_string"):
        sent = [v for k, v in parse_qsl(scope["query_string"].decode("latin-1")) if k == "status"]
        if not sent:
            return None
        value = sent[-1]
    else:
        return None
    if isinstance(value, str) and (value in _STATE_NAMES or (value.isdigit() and int(value) in _STATE_NUMBERS)):
        return None
    if isinstance(value, int) and not isinstance(value, bool) and value in _STATE_NUMBERS:
        return None
    got = json.dumps(value)[:60] if not isinstance(value, str) else repr(value[:60])
    return f"status {got} is not a task state: send one of {_STATES}, or leave the filter out", request_id


def _params_not_object(scope: Scope, body: bytes) -> tuple[str, str | int | None] | None:
    """A JSON-RPC request whose ``params`` is there but not an object (``null`` or a list; a
    scalar is already an invalid request by the envelope check), with the request's id: every
    A2A 1.0 method takes named parameters (§9.3). The SDK answered ``null`` with its parser's
    Python error text, and a list as if no parameter had been sent; invalid params (-32602) in
    one line says what to send instead."""
    if scope["path"].rstrip("/") != JSONRPC_PATH or b'"params"' not in body:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict) or "params" not in data or isinstance(data["params"], dict):
        return None
    request_id = data.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    params = data["params"]
    got = "null" if params is None else "an array" if isinstance(params, list) else f"a {type(params).__name__}"
    return f"params is {got}: send params as an object of named parameters, or leave it out", request_id


def _invalid_jsonrpc(body: bytes) -> tuple[str, str | int | None] | None:
    """What is wrong with a JSON-RPC envelope, by the SDK's own validator, and the request's id
    when it could be read (a string or an integer, as the SDK echoes it), or ``None``. The SDK
    answers the same error but logs each one with a full traceback (a client's typo is not a
    server fault); JSON that does not parse is left to the SDK's parse error. Parsed as the SDK
    parses it (bytes: a UTF-8 BOM is accepted).

    A request without ``id`` is a JSON-RPC notification, which the SDK ran and answered (a
    negotiation for nobody). A2A 1.0 §9.3 makes ``id`` part of every request's required form, and
    every A2A method has a result, so A2A has no notifications: such a request is not a valid A2A
    request object, -32600, and nothing runs."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    request_id = data.get("id") if isinstance(data, dict) else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    try:
        JSONRPC20Request.from_data(data)
    except Exception as exc:  # the validator raises its own exception types and ValueError
        return " ".join(str(exc).split())[:200] or type(exc).__name__, request_id
    if isinstance(data, dict) and "id" not in data:
        return (
            "no 'id': a request without one is a JSON-RPC notification, and A2A defines none "
            "(every A2A method answers): send an 'id' (a string or an integer)",
            None,
        )
    return None


class RoleExecutor(AgentExecutor):
    """Runs one role's agent for each A2A task. Task lifecycle: working -> completed, or
    rejected (bad input, forbidden sender; from submitted) or failed (the model failed).

    An accepted task's first event is the Task already ``working`` with the progress message
    (A2A allows a task to start in any non-terminal state): three events per task (Task, artifact,
    completion) instead of four; each event costs the SDK a queue hop, a task-store save and a
    protobuf copy (bench/a2a.py)."""

    def __init__(self, role: AgentRole, transport: AgentTransport, allowed_senders: set[str] | None) -> None:
        self.role = role
        self.transport = transport
        self.allowed_senders = allowed_senders  # None: no authentication configured

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.message is not None
        task = context.current_task or new_task_from_user_message(context.message)
        user = context.call_context.user if context.call_context is not None else None
        sender = user.user_name if user is not None and user.is_authenticated else ""
        problem = ""
        packed = False
        if self.allowed_senders is not None and sender not in self.allowed_senders:
            problem = f"{self.role} accepts tasks only from the mediator"
        else:
            try:
                parts = get_data_parts(list(context.message.parts))
                packed = bool(parts) and is_packed(parts[0])
                ptask = decode_task(parts[0] if parts else None)
                if ptask.kind not in ROLE_SKILLS[self.role][2]:
                    raise ValueError(f"{self.role} does not accept '{ptask.kind}' tasks")
            except ValueError as exc:
                problem = str(exc)
        updater = TaskUpdater(event_queue, task.id, task.context_id)
        if problem:
            await event_queue.enqueue_event(task)  # the Task must be the first event
            await updater.reject(updater.new_agent_message([Part(text=problem)]))
            return
        task.status.state = TaskState.TASK_STATE_WORKING
        task.status.message.CopyFrom(updater.new_agent_message([Part(text=f"{self.role}: {ptask.kind} started")]))
        task.status.timestamp.GetCurrentTime()
        await event_queue.enqueue_event(task)  # the Task must be the first event
        try:
            reply = await self.transport.deliver(self.role, ptask)
        except Exception as exc:  # the model failed: the caller must fail closed
            # The caller gets the failure class; what the provider said (redacted) stays in this
            # service's log, never on the wire.
            detail = getattr(exc, "detail", None)
            _log.warning("%s task failed: %s%s", self.role, public_message(exc), f" ({detail})" if detail else "")
            await updater.failed(updater.new_agent_message([Part(text=f"{self.role} failed: {public_message(exc)}")]))
            return
        await updater.add_artifact(
            parts=[new_data_part(encode_reply(reply, packed=packed))], name=f"{self.role}-{ptask.kind}", last_chunk=True
        )
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


def _card(
    name: str,
    description: str,
    base_url: str,
    skills: list[AgentSkill],
    auth: bool,
    grpc_url: str | None = None,
    input_modes: tuple[str, ...] = ("application/json", "text/plain"),
) -> AgentCard:
    card = AgentCard(
        name=name,
        description=description,
        version="0.1.0",
        capabilities=AgentCapabilities(streaming=True, push_notifications=False),
        default_input_modes=list(input_modes),
        default_output_modes=["application/json", "text/plain"],
        skills=skills,
        supported_interfaces=[
            AgentInterface(
                protocol_binding=TransportProtocol.JSONRPC, protocol_version="1.0", url=f"{base_url}{JSONRPC_PATH}"
            ),
            AgentInterface(
                protocol_binding=TransportProtocol.HTTP_JSON, protocol_version="1.0", url=f"{base_url}{REST_PATH}"
            ),
        ],
    )
    if grpc_url:  # host:port of the gRPC binding (a2a/grpc_binding.py)
        card.supported_interfaces.append(
            AgentInterface(protocol_binding=TransportProtocol.GRPC, protocol_version="1.0", url=grpc_url)
        )
    if auth:
        card.security_schemes["bearer"].CopyFrom(
            SecurityScheme(http_auth_security_scheme=HTTPAuthSecurityScheme(scheme="bearer"))
        )
        card.security_requirements.append(SecurityRequirement(schemes={"bearer": StringList()}))
    return card


def role_card(role: AgentRole, base_url: str, auth: bool, grpc_url: str | None = None) -> AgentCard:
    skill_id, description, kinds = ROLE_SKILLS[role]
    skill = AgentSkill(
        id=skill_id,
        name=f"PsychoAlign {role}",
        description=description,
        tags=["psychoalign", role, *kinds],
        input_modes=["application/json"],
        output_modes=["application/json"],
    )
    return _card(
        f"PsychoAlign {role.upper()}",
        f"The {role.upper()} agent of a PsychoAlign negotiation.",
        base_url,
        [skill],
        auth,
        grpc_url,
    )


#: Most tasks an in-memory task store keeps (a2a_app's default store).
MAX_TASKS = 10_000


class BoundedTaskStore(InMemoryTaskStore):
    """The SDK's in-memory task store, bounded: it kept every task forever (each with its
    messages and artifacts), so a long-running service grew without limit. Beyond ``limit`` tasks
    the least recently updated one that is not running (finished, or waiting for input) is
    forgotten; a client asking for it later gets TaskNotFound."""

    _SETTLED = frozenset(
        {
            TaskState.TASK_STATE_COMPLETED,
            TaskState.TASK_STATE_FAILED,
            TaskState.TASK_STATE_CANCELED,
            TaskState.TASK_STATE_REJECTED,
            TaskState.TASK_STATE_INPUT_REQUIRED,
            TaskState.TASK_STATE_AUTH_REQUIRED,
        }
    )

    def __init__(self, limit: int = MAX_TASKS) -> None:
        super().__init__()
        self._limit = limit
        self._recent: OrderedDict[tuple[str, str], bool] = OrderedDict()  # (owner, id) -> settled

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await super().save(task, context)
        key = (self._impl.owner_resolver(context), task.id)
        self._recent.pop(key, None)
        self._recent[key] = task.status.state in self._SETTLED
        if len(self._recent) > self._limit + self._limit // 10 + 1:  # in batches: amortised O(1)
            self._evict()

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        await super().delete(task_id, context)
        self._recent.pop((self._impl.owner_resolver(context), task_id), None)

    def _evict(self) -> None:
        for key in [k for k, settled in self._recent.items() if settled][: len(self._recent) - self._limit]:
            owner, task_id = key
            del self._recent[key]
            with self._impl.lock:
                owned = self._impl.tasks.get(owner, {})
                owned.pop(task_id, None)
                if not owned:
                    self._impl.tasks.pop(owner, None)


class _ContextFromTask(SimpleRequestContextBuilder):
    """A message that asks for push notifications from an agent without them is refused with
    PushNotificationNotSupportedError. A follow-up that names its task but not its context
    continues the task's context (A2A 1.0 §3.4.3: infer the contextId from the task). The SDK
    makes up a new one (a2a-python #1206), so the task's events no longer match; in one process
    the running task hid it, across workers sharing a task store every such follow-up failed."""

    def __init__(self, task_store: TaskStore, *, push_notifications: bool = False) -> None:
        super().__init__(task_store=task_store)
        self._tasks = task_store
        self._push = push_notifications

    async def build(
        self,
        context: ServerCallContext,
        params: SendMessageRequest | None = None,
        task_id: str | None = None,
        context_id: str | None = None,
        task: Task | None = None,
    ) -> RequestContext:
        if params is not None and params.HasField("message") and params.message.role != Role.ROLE_USER:
            # The SDK's task helper raised a bare ValueError here: -32603 and a traceback.
            raise InvalidParamsError(
                f"message.role must be ROLE_USER, not {Role.Name(params.message.role)}: clients send user messages"
            )
        if params is not None and params.HasField("message"):
            for field, value in (("contextId", params.message.context_id), ("taskId", params.message.task_id)):
                if "\x00" in value:  # stored as the task's key: PostgreSQL refused it (an internal error)
                    raise InvalidParamsError(f"message.{field} contains a NUL character (\\u0000): remove it")
            # The same helper raised a bare ValueError for an empty text part: -32603 (HTTP+JSON
            # 500), a server fault for a client's empty string.
            empty = next((i for i, p in enumerate(params.message.parts) if p.HasField("text") and not p.text), None)
            if empty is not None:
                raise InvalidParamsError(f"message.parts[{empty}].text is empty: send the text, or leave the part out")
        if params is not None and not self._push and params.configuration.HasField("task_push_notification_config"):
            # The SDK dropped the webhook without a word (it keeps one only with a push store), ran
            # the task, and the client waited for a notification that never came (A2A 1.0 §3.3.4).
            raise PushNotificationNotSupportedError(
                "Push notifications are not supported by the agent: leave out "
                "configuration.taskPushNotificationConfig and poll GetTask or stream the task"
            )
        if params is not None and params.HasField("message"):
            where = _non_finite(params)
            if where is not None:
                # JSON bodies are refused at the edge (BodyLimit); gRPC carries doubles as they are.
                raise InvalidParamsError(f"{where} holds NaN or Infinity: send finite numbers")
        if task_id:
            stored = task or await self._tasks.get(task_id, context)
            if stored is not None and stored.status.state in _TERMINAL:
                # Refused before the SDK sets the task up: its own refusal came after it had made
                # the task's event queues, which it then never closed (a pending task destroyed,
                # with tracebacks in the log, on every such message).
                raise UnsupportedOperationError(
                    f"Task {task_id} is in terminal state {TaskState.Name(stored.status.state)}: a finished task "
                    "takes no more messages; send the follow-up with its contextId and no taskId (a new task "
                    "in the same conversation)"
                )
            if stored is not None and not context_id:
                context_id = stored.context_id
        return await super().build(context, params, task_id, context_id, task)


_TERMINAL = frozenset(
    {
        TaskState.TASK_STATE_COMPLETED,
        TaskState.TASK_STATE_FAILED,
        TaskState.TASK_STATE_CANCELED,
        TaskState.TASK_STATE_REJECTED,
    }
)


def _non_finite(params: SendMessageRequest) -> str | None:
    """The first field of a message (its metadata, a part's data or metadata) or of the request's
    metadata that holds NaN or Infinity, or None. Such a value was stored with the task, and every
    later answer that carried the task (SendMessage, GetTask, ListTasks) failed to serialise it."""
    message = params.message
    roots: list[tuple[str, Struct | Value]] = [("metadata", params.metadata), ("message.metadata", message.metadata)]
    for i, part in enumerate(message.parts):
        roots.append((f"message.parts[{i}].metadata", part.metadata))
        if part.HasField("data"):
            roots.append((f"message.parts[{i}].data", part.data))
    for where, root in roots:
        stack: list[Struct | Value] = [root]
        while stack:  # iterative: a gRPC message may nest as deep as protobuf allows
            item = stack.pop()
            if isinstance(item, Struct):
                stack.extend(item.fields.values())
            elif item.HasField("number_value"):
                if not math.isfinite(item.number_value):
                    return where
            elif item.HasField("struct_value"):
                stack.append(item.struct_value)
            elif item.HasField("list_value"):
                stack.extend(item.list_value.values)
    return None


#: What the SDK's JSON-RPC dispatcher logs, with a full traceback, for a client's malformed
#: request (a wrong type in params, say): it answers the client -32600/-32602 itself.
_CLIENT_ERRORS = frozenset({"Failed to parse request params", "Failed to validate base JSON-RPC request"})
_DISPATCHER_LOG = "a2a.server.routes.jsonrpc_dispatcher"


class ClientErrorOneLine(logging.Filter):
    """A client's malformed request is logged in one line naming the problem, never with a
    traceback: it is the client's error, not the server's (and a client could fill the log)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg in _CLIENT_ERRORS and record.exc_info:
            problem = record.exc_info[1]
            record.msg = f"{record.msg} (answered as a client error): {' '.join(str(problem).split())[:300]}"
            record.exc_info = None
            record.exc_text = None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


def _quiet_client_errors() -> None:
    log = logging.getLogger(_DISPATCHER_LOG)
    if not any(isinstance(f, ClientErrorOneLine) for f in log.filters):
        log.addFilter(ClientErrorOneLine())


def a2a_app(
    executor: AgentExecutor,
    card: AgentCard,
    tokens: Mapping[str, str] | None,
    *,
    digests: Mapping[str, str] | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    task_store: TaskStore | None = None,
) -> Starlette:
    """The SDK's routes for ``executor``: the card (with ``Cache-Control``), JSON-RPC at the
    interface URL with and without a trailing slash, HTTP+JSON. With ``tokens`` or ``digests``
    every route but the card needs a bearer token (see :class:`BearerBackend`). The protocol
    version may come as a request parameter (:class:`VersionParam`). Bodies over
    ``max_body_bytes`` are refused, and every error (credentials, size, routing) comes in the
    shape of the binding it was made on. ``task_store`` defaults to one in memory (one process);
    a database store lets several processes serve the same tasks."""
    # validate_input_modes: a part whose media type the card does not declare is the protocol's
    # ContentTypeNotSupportedError (A2A 1.0 §3.1.1), not a task the agent then rejects.
    tasks = task_store if task_store is not None else BoundedTaskStore()
    _quiet_client_errors()
    handler = DefaultRequestHandler(
        agent_executor=executor,
        task_store=tasks,
        agent_card=card,
        validate_input_modes=True,
        request_context_builder=_ContextFromTask(tasks, push_notifications=card.capabilities.push_notifications),
    )
    routes: list[Any] = [
        # card first: the REST routes add a catch-all mount
        *create_agent_card_routes(card, cache_control=CARD_CACHE_CONTROL),
        Route(OLD_CARD_PATH, _old_card, methods=list(_OLD_CARD_METHODS)),
        *create_jsonrpc_routes(handler, rpc_url=JSONRPC_PATH),
        # Most JSON-RPC clients (and the A2A TCK) POST to the interface URL plus "/"; Starlette
        # does not redirect a POST, so serve both.
        *create_jsonrpc_routes(handler, rpc_url=JSONRPC_PATH + "/"),
        *create_rest_routes(handler, path_prefix=REST_PATH),
    ]
    auth = bool(tokens) or bool(digests)
    backend = BearerBackend(tokens or {}, digests)
    # Credentials first (nothing of an unauthenticated body is read), then the size limit.
    middleware = [Middleware(RestMediaType), Middleware(VersionParam)]
    if auth:
        middleware.append(Middleware(AuthenticationMiddleware, backend=backend, on_error=_unauthorized))
    else:  # open: callers are trusted by address, so no web page may reach it
        middleware.append(Middleware(OpenGuard, card=card))
    middleware.append(Middleware(BodyLimit, limit=max_body_bytes))
    app = Starlette(routes=routes, middleware=middleware, exception_handlers={404: _not_found, 405: _not_found})
    # A path no route serves is a 404 in the binding's shape, not a redirect to the path plus "/"
    # (which the REST binding's multi-tenant mount would then answer 404 anyway).
    app.router.redirect_slashes = False
    # The gRPC binding (a2a/grpc_binding.py) serves the same handler, task store and credentials.
    app.state.a2a_handler = handler
    app.state.a2a_auth = backend if auth else None
    app.state.a2a_max_body_bytes = max_body_bytes
    return app


def build_role_app(
    role: AgentRole,
    transport: AgentTransport,
    base_url: str,
    token: str | None = None,
    *,
    insecure: bool = False,
    grpc_url: str | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> Starlette:
    """The A2A app for one role. ``token`` is this service's own bearer token; only the
    MEDIATOR's runtime holds it (identity ``mediator``), so no other agent can send tasks here:
    a DRIVE knows only its own token, never the EVALUATOR's. Without a token the service refuses
    to be built unless ``insecure`` (the CLI allows that on loopback only)."""
    if not token and not insecure:
        raise ConfigError(
            f"the {role} service refuses to start without credentials",
            hint=f"set PSYCHOALIGN_A2A__TOKENS__{role.upper()} (a2a.tokens.{role}), or --insecure on loopback",
        )
    tokens = {"mediator": token} if token else None
    executor = RoleExecutor(role, transport, {"mediator"} if token else None)
    card = role_card(role, base_url, auth=bool(token), grpc_url=grpc_url)
    return a2a_app(executor, card, tokens, max_body_bytes=max_body_bytes)
