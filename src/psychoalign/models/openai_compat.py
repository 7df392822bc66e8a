"""Any OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, vLLM, Ollama, llama.cpp server, LM Studio)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import math
import socket
import ssl
import time
from email.utils import parsedate_to_datetime
from typing import Any, ClassVar

import aiohttp
from aiohttp.helpers import BasicAuth, get_env_proxy_for_url
from yarl import URL

from ..errors import (
    BackendUnavailableError,
    ConfigError,
    EndpointError,
    TransientBackendError,
    endpoint_error,
    redact_url,
)
from ..jsonguard import loads_bounded
from .base import Backend
from .spec import ModelSpec
from .types import ChatRequest, Completion, Usage

_RETRYABLE = {408, 409, 425, 429, 500, 502, 503, 504}
#: Open connections per backend (one backend serves every concurrent call of a role or a run).
MAX_CONNECTIONS = 256
#: Bytes of an error body read for the internal detail (never for the user-facing message).
_ERROR_BODY_BYTES = 4096
#: Bytes of a reply read at most. A chat completion is kilobytes (max_tokens bounds it); an
#: endpoint sending more (a misconfigured proxy, a hostile server) is refused, not buffered: a
#: 200 MB body took 683 MB of memory to read and decode.
MAX_REPLY_BYTES = 8 * 2**20
_JSON = {"Content-Type": "application/json"}


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One default TLS context for every client: loading the CA bundle costs ~20 ms each time.
    ``create_default_context`` honours ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``."""
    return ssl.create_default_context()


def parse_retry_after(headers: Any) -> float | None:
    """Seconds to wait from ``retry-after-ms`` (OpenAI) or ``Retry-After`` (seconds or an
    HTTP date, RFC 9110 10.2.3); None when absent or unreadable. Never negative."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            ms = float(value)
            if math.isfinite(ms):
                return max(0.0, ms / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
        return max(0.0, seconds) if math.isfinite(seconds) else None
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - time.time())


async def _error_body(response: aiohttp.ClientResponse) -> str:
    """The start of an error response's body (for the internal detail only)."""
    try:
        raw = await response.content.read(_ERROR_BODY_BYTES)
    except (aiohttp.ClientError, TimeoutError) as exc:
        return f"(body unreadable: {type(exc).__name__})"
    return raw.decode("utf-8", "replace")


async def _bounded_body(response: aiohttp.ClientResponse, url: str) -> bytes:
    """The whole body, read chunk by chunk up to :data:`MAX_REPLY_BYTES` (one ``read(n)`` returns
    only what is buffered); over it, :class:`EndpointError` without reading the rest."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.content.iter_chunked(64 * 1024):
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise EndpointError(
                f"model endpoint sent a reply over {MAX_REPLY_BYTES // 2**20} MB",
                hint="check base_url (is it a chat completions endpoint?) and max_tokens",
                detail=f"POST {url}: more than {MAX_REPLY_BYTES} bytes",
            )
        chunks.append(chunk)
    return b"".join(chunks)


def connection_failure(exc: BaseException) -> str:
    """The failure class of a connection-level error, for users: no host, no address, no text
    from the peer."""
    if isinstance(exc, TimeoutError | aiohttp.ServerTimeoutError):
        return "model endpoint timed out"
    if isinstance(exc, aiohttp.ClientConnectorError):
        os_error = exc.os_error
        if isinstance(os_error, ConnectionRefusedError):
            return "connection refused by the model endpoint"
        if isinstance(os_error, socket.gaierror):
            return "cannot resolve the model endpoint's host name"
        if isinstance(exc, aiohttp.ClientConnectorCertificateError | aiohttp.ClientSSLError):
            return "TLS failure connecting to the model endpoint"
        return "cannot connect to the model endpoint"
    if isinstance(exc, aiohttp.ServerDisconnectedError):
        return "the model endpoint closed the connection"
    return f"connection to the model endpoint failed ({type(exc).__name__})"


def empty_completion(choice: dict[str, Any], reason: str | None, url: str) -> EndpointError:
    """An empty ``content``: never an answer (a refusal judge would score it as one, a gate pass
    it as harmless). Reasoning models (Qwen3, DeepSeek-R1 behind vLLM or Ollama) send one when
    ``max_tokens`` ran out while thinking: the thinking is in ``reasoning_content`` / ``reasoning``."""
    message = choice.get("message")
    thought = isinstance(message, dict) and any(message.get(k) for k in ("reasoning_content", "reasoning"))
    if thought:
        why, hint = "the model spent it reasoning", "raise max_tokens, or turn the model's thinking off"
    elif reason == "length":
        why, hint = "max_tokens ran out", "raise max_tokens"
    else:
        why, hint = f"finish_reason {reason!r}", "raise max_tokens, or try another model"
    return EndpointError(
        f"model endpoint sent an empty completion ({why})", hint=hint, detail=f"POST {url}: empty content"
    )


class OpenAIBackend(Backend):
    """Thin adapter over the Chat Completions wire protocol via aiohttp.

    Structured output uses ``response_format: {"type": "json_schema", "json_schema": {..., "strict": true}}``;
    the schema keeps its ``minimum``/``maximum``/``enum`` bounds (servers that enforce them do,
    and :class:`ChatModel` validates the reply either way).

    Why aiohttp and not httpx: at 50 concurrent calls httpx/httpcore/anyio cost ~0.63 ms of client
    CPU per call against ~0.17 ms for aiohttp (docs/performance.md), and the client, not the
    endpoint, was the bottleneck of every concurrent workload (negotiations, experiment runs).
    Behaviour kept from the httpx client: per-read and connect timeouts (the overall deadline is
    :class:`ChatModel`'s), bounded connections, keep-alive, TLS with the system CAs, proxies from
    ``HTTP(S)_PROXY`` / ``NO_PROXY``, one attempt per call (retries are :class:`ChatModel`'s).
    """

    name: ClassVar[str] = "openai"
    default_model: ClassVar[str] = "gpt-4o-mini"

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        self.base_url = (spec.base_url or "https://api.openai.com/v1").rstrip("/")
        self.url = f"{self.base_url}/chat/completions"
        key = spec.resolved_api_key()
        if key is None and spec.base_url is None:
            raise BackendUnavailableError(
                f"no API key for the openai backend: ${spec.key_env_name()} is not set",
                hint=f"export {spec.key_env_name()}=... or set base_url to a local server",
            )
        if key and (URL(self.base_url).user or URL(self.base_url).password):
            # aiohttp refuses the request (ValueError, a crash) when the URL's user:password and
            # the key's Authorization header meet; the URL is not echoed: it holds a password.
            raise ConfigError(
                "base_url holds a user name and password and an API key is set: the endpoint gets one "
                "Authorization header",
                hint=f"drop user:password@ from base_url, or unset {spec.key_env_name()} / api_key",
            )
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=min(10.0, spec.timeout_s), sock_read=spec.timeout_s
        )
        # Proxy from HTTP(S)_PROXY / NO_PROXY, read once here: aiohttp's trust_env would look the
        # environment (and ~/.netrc) up again in a worker thread on every request, two thread hops
        # per call that cost more than the request itself on loopback.
        self._proxy: tuple[URL, BasicAuth | None] | None = None
        with contextlib.suppress(LookupError, ValueError):  # no proxy for this URL
            self._proxy = get_env_proxy_for_url(URL(self.url))
        # A session belongs to the event loop it was made in; made on first use, remade if the
        # backend is used from another loop (a second asyncio.run).
        self._session: aiohttp.ClientSession | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _client(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        if self._session is None or self._session.closed or self._loop is not loop:
            if self._session is not None and not self._session.closed and self._loop is not None:
                if self._loop.is_closed():
                    self._session.detach()  # its loop is gone: nothing left to close cleanly
                else:
                    self._loop.call_soon_threadsafe(asyncio.ensure_future, self._session.close())
            connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, limit_per_host=0, ssl=_ssl_context())
            self._session = aiohttp.ClientSession(
                connector=connector, headers=self._headers, timeout=self._timeout, trust_env=False
            )
            self._loop = loop
        return self._session

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages],
            "temperature": request.temperature,
            "max_tokens": request.max_tokens,
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if request.stop:
            body["stop"] = list(request.stop)
        if request.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": request.schema_name, "schema": request.json_schema, "strict": True},
            }
        return body

    async def complete(self, request: ChatRequest) -> Completion:
        """One attempt. Errors name the failure class only; the URL and what the endpoint said
        (redacted, bounded) are the exception's internal ``detail`` (psychoalign.errors)."""
        url = self.url
        data = json.dumps(self.payload(request), ensure_ascii=False).encode()
        try:
            proxy, proxy_auth = self._proxy or (None, None)
            async with self._client().post(
                url, data=data, headers=_JSON, proxy=proxy, proxy_auth=proxy_auth
            ) as response:
                status = response.status
                if status >= 400:
                    detail = f"POST {url}: HTTP {status}: {await _error_body(response)}"
                    if status in _RETRYABLE:
                        raise TransientBackendError(
                            f"model endpoint returned HTTP {status}",
                            retry_after=parse_retry_after(response.headers),
                            detail=detail,
                        )
                    hint = (
                        f"check the API key (${self.spec.key_env_name()}, or api_key_env / api_key)"
                        if status in (401, 403)
                        else f"check the model name '{self.model_name}' and that base_url (up to /v1) serves it"
                        if status == 404
                        else "check model and base_url"
                    )
                    raise endpoint_error(status, f"model endpoint returned HTTP {status}", hint=hint, detail=detail)
                raw = await _bounded_body(response, url)
        except aiohttp.InvalidURL as exc:
            raise EndpointError("invalid model endpoint URL", hint="check base_url", detail=f"{url!r}") from exc
        except (aiohttp.ClientError, TimeoutError) as exc:
            # Connection refused/reset, server disconnected, a read or connect timeout: may pass on retry.
            raise TransientBackendError(
                connection_failure(exc), detail=f"POST {url}: {type(exc).__name__}: {exc}"
            ) from exc
        try:
            body = loads_bounded(raw)
            choice = body["choices"][0]
            text = choice["message"].get("content") or ""
            usage = body.get("usage") or {}
            prompt_tokens = int(usage.get("prompt_tokens") or 0)
            completion_tokens = int(usage.get("completion_tokens") or 0)
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise EndpointError(
                "model endpoint sent a reply that is not a chat completion",
                detail=f"POST {url}: {type(exc).__name__}: {exc}: {raw[:_ERROR_BODY_BYTES].decode('utf-8', 'replace')}",
            ) from exc
        if not isinstance(text, str):
            raise EndpointError(
                "model endpoint sent a reply that is not a chat completion: content is not text",
                detail=f"POST {url}",
            )
        reason = choice.get("finish_reason")
        reason = reason if isinstance(reason, str) else None
        if not text.strip():
            raise empty_completion(choice, reason, url)
        return Completion(
            text=text,
            usage=Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens),
            model=str(body.get("model") or self.model_name),
            finish_reason=reason,
        )

    async def aclose(self) -> None:
        session, self._session = self._session, None
        if session is None or session.closed:
            return
        if self._loop is asyncio.get_running_loop():
            await session.close()
        elif self._loop is not None and self._loop.is_closed():
            session.detach()

    @classmethod
    def availability(cls, spec: ModelSpec | None = None) -> tuple[bool, str]:
        spec = spec or ModelSpec(backend="openai")
        if spec.base_url:
            return True, f"endpoint {redact_url(spec.base_url)}"
        if spec.resolved_api_key():
            return True, f"${spec.key_env_name()} set"
        return False, f"set ${spec.key_env_name()} or base_url"
