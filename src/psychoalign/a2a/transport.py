"""The negotiation engine's A2A transport: each role at a URL, every call as the MEDIATOR's identity."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx
from a2a.client import A2ACardResolver, AgentCardResolutionError, Client, ClientConfig, ClientFactory
from a2a.helpers import get_data_parts, get_message_text, new_data_message
from a2a.types import Role, SendMessageConfiguration, SendMessageRequest, TaskState

from ..agents.messages import AgentReply, AgentRole
from ..errors import EndpointError, redact
from .codec import Task, decode_reply, encode_task

_TRANSIENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError, httpx.ReadError)


def _is_unreachable(exc: BaseException) -> bool:
    """A connection-level failure, possibly wrapped by the a2a client."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, (*_TRANSIENT, AgentCardResolutionError)):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status behind an A2A client error (an httpx status error in its chain), if any."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, httpx.HTTPStatusError):
            return seen.response.status_code
        status = getattr(seen, "status_code", None)
        if isinstance(status, int):
            return status
        seen = seen.__cause__ or seen.__context__
    return None


class A2ATransport:
    """Sends each task as an A2A message to the role's service and validates the reply.

    Fails closed: a service that is down, rejects the task, fails it or answers with something
    that is not a valid reply raises :class:`EndpointError`; the engine then fails the negotiation.
    Connection failures are retried ``retries`` times with exponential backoff; a task the
    service itself failed is not (its model layer already retried).
    """

    def __init__(
        self,
        urls: Mapping[str, str],
        *,
        tokens: Mapping[str, str] | None = None,
        token: str | None = None,
        timeout_s: float = 300.0,
        retries: int = 2,
        backoff_s: float = 0.25,
    ) -> None:
        """``tokens`` maps each role to the bearer token of its service (``a2a.tokens``);
        ``token`` is one token for every role (a role in ``tokens`` wins)."""
        self.urls = {role: url.rstrip("/") for role, url in urls.items()}
        self._tokens = {role: (tokens or {}).get(role) or token for role in self.urls}
        # One HTTP client per role: each carries only that service's token. LLM calls take far
        # longer than httpx's 5 s default.
        self._http = {
            role: httpx.AsyncClient(
                headers={"Authorization": f"Bearer {tok}"} if tok else {},
                timeout=httpx.Timeout(timeout_s, connect=10.0),
                limits=httpx.Limits(max_connections=64, max_keepalive_connections=32),
            )
            for role, tok in self._tokens.items()
        }
        self._clients: dict[str, Client] = {}
        self._lock = asyncio.Lock()
        self.retries = retries
        self.backoff_s = backoff_s

    async def _client(self, role: str) -> Client:
        if role not in self._clients:
            async with self._lock:
                if role not in self._clients:
                    if role not in self.urls:
                        raise EndpointError(f"no A2A URL configured for role '{role}'", hint="set a2a.urls.<role>")
                    http = self._http[role]
                    card = await A2ACardResolver(http, self.urls[role]).get_agent_card()
                    config = ClientConfig(streaming=False, httpx_client=http, supported_protocol_bindings=["JSONRPC"])
                    self._clients[role] = ClientFactory(config).create(card)
        return self._clients[role]

    async def deliver(self, recipient: AgentRole, task: Task) -> AgentReply[Any]:
        url = self.urls.get(recipient, "?")
        for attempt in range(self.retries + 1):
            try:
                return await self._once(recipient, task)
            except EndpointError:
                raise
            except Exception as exc:
                # Users get the failure class; the URL and the peer's words are internal detail.
                if not _is_unreachable(exc):  # a protocol error: fail closed at once
                    status = _http_status(exc)
                    raise EndpointError(
                        f"{recipient} agent returned HTTP {status}"
                        if status
                        else f"{recipient} agent: A2A protocol error ({type(exc).__name__})",
                        hint=f"check a2a.tokens.{recipient}" if status in (401, 403) else None,
                        detail=f"{url}: {type(exc).__name__}: {exc}",
                    ) from None
                self._clients.pop(recipient, None)
                if attempt == self.retries:
                    raise EndpointError(
                        f"{recipient} agent is unreachable ({type(exc).__name__})",
                        hint="is the agent running? see `psychoalign agent serve`",
                        detail=f"{url}: {type(exc).__name__}: {exc}",
                    ) from None
                await asyncio.sleep(self.backoff_s * 2**attempt)
        raise AssertionError("unreachable")

    async def _once(self, recipient: str, task: Task) -> AgentReply[Any]:
        client = await self._client(recipient)
        url = self.urls[recipient]
        message = new_data_message(encode_task(task, packed=True), role=Role.ROLE_USER)
        final = None
        # history_length=0: the reply artifact is all we read; the echoed history (our own task
        # and the service's progress message) would only be converted to JSON and back.
        request = SendMessageRequest(message=message, configuration=SendMessageConfiguration(history_length=0))
        async for resp in client.send_message(request):
            if resp.HasField("task"):
                final = resp.task
        if final is None:
            raise EndpointError(f"{recipient} agent returned no task", detail=url)
        state = final.status.state
        if state != TaskState.TASK_STATE_COMPLETED:
            # The service's own message is the failure class of its model call (a2a/server.py), at
            # most a line: bounded here too, in case the peer is not ours.
            why = get_message_text(final.status.message) if final.status.HasField("message") else ""
            raise EndpointError(
                f"{recipient} agent ended the task {TaskState.Name(state)}: {redact(why, 300)}",
                detail=f"{url}: {why}",
            )
        for artifact in final.artifacts:
            data = get_data_parts(list(artifact.parts))
            if data:
                return decode_reply(task.kind, data[0], host=url)
        raise EndpointError(f"{recipient} agent completed without a reply artifact", detail=url)

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()
        for http in self._http.values():
            await http.aclose()
