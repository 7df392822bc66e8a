"""Any OpenAI-compatible ``/chat/completions`` endpoint (OpenAI, vLLM, Ollama, llama.cpp server, LM Studio)."""

from __future__ import annotations

import functools
import itertools
import ssl
from typing import Any, ClassVar

import httpx

from ..errors import BackendUnavailableError, EndpointError, TransientBackendError
from .base import Backend
from .spec import ModelSpec
from .types import ChatRequest, Completion, Usage

__all__ = ["OpenAIBackend"]

_RETRYABLE = {408, 409, 425, 429, 500, 502, 503, 504}
_POOL_SHARDS = 8


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One default TLS context for every client: loading the CA bundle costs ~20 ms each time."""
    return ssl.create_default_context()


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


class OpenAIBackend(Backend):
    """Thin adapter over the Chat Completions wire protocol via httpx.

    Structured output uses ``response_format: {"type": "json_schema", "json_schema": {..., "strict": true}}``;
    the schema keeps its ``minimum``/``maximum``/``enum`` bounds (servers that enforce them do,
    and :class:`ChatModel` validates the reply either way).
    """

    name: ClassVar[str] = "openai"
    default_model: ClassVar[str] = "gpt-4o-mini"

    def __init__(self, spec: ModelSpec, *, client: httpx.AsyncClient | None = None) -> None:
        super().__init__(spec)
        self.base_url = (spec.base_url or "https://api.openai.com/v1").rstrip("/")
        key = spec.resolved_api_key()
        if key is None and spec.base_url is None:
            raise BackendUnavailableError(
                f"no API key for the openai backend: ${spec.key_env_name()} is not set",
                hint=f"export {spec.key_env_name()}=... or set base_url to a local server",
            )
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # httpcore's pool matches queued requests to connections in O(queued x connections); at
        # 50+ concurrent calls that dominates CPU. Several small pools, used round-robin, keep it
        # linear (bench/negotiation.py measures the difference).
        self._clients = (
            [client]
            if client is not None
            else [
                httpx.AsyncClient(
                    headers=headers,
                    timeout=httpx.Timeout(spec.timeout_s, connect=min(10.0, spec.timeout_s)),
                    limits=httpx.Limits(max_connections=32, max_keepalive_connections=32),
                    verify=_ssl_context(),
                )
                for _ in range(_POOL_SHARDS)
            ]
        )
        self._next = itertools.cycle(self._clients)
        self._owns_client = client is None

    def payload(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": [m.model_dump() for m in request.messages],
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
        url = f"{self.base_url}/chat/completions"
        try:
            response = await next(self._next).post(url, json=self.payload(request))
        except (httpx.TransportError, httpx.TimeoutException) as exc:
            raise TransientBackendError(f"cannot reach {url}: {type(exc).__name__}") from exc
        if response.status_code in _RETRYABLE:
            raise TransientBackendError(
                f"{url} answered HTTP {response.status_code}", retry_after=_retry_after(response)
            )
        if response.status_code >= 400:
            detail = response.text[:300].replace("\n", " ")
            hint = "check the API key" if response.status_code in (401, 403) else "check model and base_url"
            raise EndpointError(f"{url} answered HTTP {response.status_code}: {detail}", hint=hint)
        try:
            body = response.json()
            choice = body["choices"][0]
            text = choice["message"].get("content") or ""
            usage = body.get("usage") or {}
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise EndpointError(f"{url} sent a reply that is not a chat completion: {exc!r}") from exc
        return Completion(
            text=text,
            usage=Usage(
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
            ),
            model=str(body.get("model") or self.model_name),
            finish_reason=choice.get("finish_reason"),
        )

    async def aclose(self) -> None:
        if self._owns_client:
            for c in self._clients:
                await c.aclose()

    @classmethod
    def availability(cls, spec: ModelSpec | None = None) -> tuple[bool, str]:
        spec = spec or ModelSpec(backend="openai")
        if spec.base_url:
            return True, f"endpoint {spec.base_url}"
        if spec.resolved_api_key():
            return True, f"${spec.key_env_name()} set"
        return False, f"set ${spec.key_env_name()} or base_url"
