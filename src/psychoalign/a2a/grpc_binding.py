"""The A2A gRPC binding (extra ``grpc``): the same request handler as the HTTP app, bearer auth
from gRPC metadata, so all three A2A 1.0 transports serve one agent and one task store."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import grpc
import grpc.aio
from a2a.auth.user import UnauthenticatedUser, User
from a2a.server.request_handlers import RequestHandler
from a2a.server.request_handlers.grpc_handler import DefaultGrpcServerCallContextBuilder, GrpcHandler
from a2a.types import a2a_pb2_grpc
from a2a.utils.constants import PROTOCOL_VERSION_CURRENT
from a2a.utils.errors import A2AError, InvalidParamsError

from .server import MAX_BODY_BYTES, BearerBackend

__all__ = ["build_grpc_server"]


class _Identity(User):
    def __init__(self, name: str) -> None:
        self._name = name

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def user_name(self) -> str:
        return self._name


def _metadata(metadata: Any, name: str) -> str | None:
    for key, value in metadata or ():
        if key.lower() == name:
            return value if isinstance(value, str) else value.decode("utf-8", "replace")
    return None


def version_refusal(metadata: Any) -> str:
    """Why the call's ``a2a-version`` cannot be served ("" when it can). A2A 1.0 §3.6: a server
    MUST refuse a version it does not support; the SDK's gRPC handler does not check (its HTTP
    handlers do). Same rule as theirs: the major version must match; patch and minor are
    ignored. A call without the metadata is served (raw gRPC clients send none)."""
    sent = _metadata(metadata, "a2a-version")
    if sent is None or not sent.strip():
        return ""
    major = sent.strip().split(".")[0]
    if major.isdigit() and int(major) == int(PROTOCOL_VERSION_CURRENT.split(".")[0]):
        return ""
    return f"A2A version '{sent[:40]}' is not supported: send a2a-version {PROTOCOL_VERSION_CURRENT}"


def _bearer(metadata: Any) -> str:
    for key, value in metadata or ():
        if key.lower() == "authorization":
            text = value if isinstance(value, str) else value.decode()
            scheme, _, token = text.partition(" ")
            return token.strip() if scheme.lower() == "bearer" else ""
    return ""


class _ContextBuilder(DefaultGrpcServerCallContextBuilder):
    """Maps the bearer token (already checked by :class:`BearerInterceptor`) to the identity
    the executors see, exactly as the HTTP middleware does."""

    def __init__(self, backend: BearerBackend | None) -> None:
        self._backend = backend

    def build_user(self, context: grpc.aio.ServicerContext) -> User:
        if self._backend is None:
            return UnauthenticatedUser()
        name = self._backend.identify(_bearer(context.invocation_metadata()))
        return _Identity(name) if name else UnauthenticatedUser()


class BearerInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Refuses a call without a valid bearer token with ``UNAUTHENTICATED`` before any handler
    runs (when ``backend`` is set), a call naming an A2A version this server does not speak with
    ``FAILED_PRECONDITION`` (:func:`version_refusal`), and a request that does not decode (a string that is not
    UTF-8, a truncated message) with ``INVALID_ARGUMENT`` instead of gRPC's ``UNKNOWN``."""

    def __init__(self, backend: BearerBackend | None) -> None:
        self._backend = backend

    async def intercept_service(self, continuation: Any, details: grpc.HandlerCallDetails) -> Any:
        handler = await continuation(details)
        if handler is None:
            return None
        token = _bearer(details.invocation_metadata)
        refusal, status = "", grpc.StatusCode.UNAUTHENTICATED
        if self._backend is not None and not (token and self._backend.identify(token)):
            refusal = "Unauthenticated: " + ("invalid bearer token" if token else "missing bearer token")
        elif version := version_refusal(details.invocation_metadata):
            # The SDK maps VersionNotSupportedError to FAILED_PRECONDITION on gRPC.
            refusal, status = version, grpc.StatusCode.FAILED_PRECONDITION
        decode = handler.request_deserializer
        codec = {"request_deserializer": None, "response_serializer": handler.response_serializer}

        async def parsed(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
            if refusal:
                await context.abort(status, refusal)
            try:
                return decode(raw) if decode is not None else raw
            except Exception as exc:  # protobuf DecodeError: bad UTF-8 in a string, truncated bytes
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"request does not decode: {exc}"[:300])

        if handler.unary_stream is not None:
            stream = handler.unary_stream

            async def unary_stream(raw: bytes, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                request = await parsed(raw, context)
                async for item in stream(request, context):
                    yield item

            return grpc.unary_stream_rpc_method_handler(unary_stream, **codec)
        unary = handler.unary_unary

        async def unary_unary(raw: bytes, context: grpc.aio.ServicerContext) -> Any:
            return await unary(await parsed(raw, context), context)

        return grpc.unary_unary_rpc_method_handler(unary_unary, **codec)


class _Handler(GrpcHandler):
    """The SDK's gRPC handler; a request missing a required field is ``INVALID_ARGUMENT`` whose
    message names the fields (``Validation failed: message.message_id: Field is required.``).
    The SDK's said only "Validation failed": the fields were only in the ``google.rpc.BadRequest``
    detail of the trailing metadata (still sent), which raw gRPC clients and their logs do not
    show."""

    async def abort_context(self, error: A2AError, context: grpc.aio.ServicerContext) -> None:
        errors = error.data.get("errors") if isinstance(error, InvalidParamsError) and error.data else None
        if isinstance(errors, list) and errors:
            named = "; ".join(f"{e.get('field', '?')}: {e.get('message', '')}" for e in errors if isinstance(e, dict))
            if named:
                error.message = f"{error.message}: {named}"[:500]
        await super().abort_context(error, context)


def build_grpc_server(
    handler: RequestHandler, address: str, backend: BearerBackend | None, *, max_message_bytes: int = MAX_BODY_BYTES
) -> grpc.aio.Server:
    """A gRPC server (not started) for ``handler`` on ``address`` (``host:port``). With ``backend``
    every call needs a bearer token in the ``authorization`` metadata. A port another process
    holds is refused (:class:`OSError`), never shared. Messages over
    ``max_message_bytes`` are refused (``RESOURCE_EXHAUSTED``), as the HTTP bindings refuse larger
    bodies. Call inside a running loop."""
    # No SO_REUSEPORT (gRPC's default): with it a second service given the same port binds too,
    # and the kernel spreads calls over both, another agent with other credentials included.
    options = [("grpc.max_receive_message_length", max_message_bytes), ("grpc.so_reuseport", 0)]
    server = grpc.aio.server(interceptors=[BearerInterceptor(backend)], options=options)
    a2a_pb2_grpc.add_A2AServiceServicer_to_server(_Handler(handler, _ContextBuilder(backend)), server)  # type: ignore[no-untyped-call]
    try:
        bound = server.add_insecure_port(address)
    except RuntimeError:  # grpcio raises where older releases returned 0
        bound = 0
    if bound == 0:
        raise OSError(f"cannot bind gRPC to {address}: the port is in use or the address is not this host's")
    return server
