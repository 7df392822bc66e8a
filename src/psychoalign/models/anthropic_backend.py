"""Anthropic Messages API through the official SDK.

Structured output uses the API's native ``output_config.format`` (``json_schema``). The current
SDK (2.x) no longer accepts sampling parameters such as ``temperature``, so the spec's
temperature is not sent to Anthropic.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from ..errors import TransientBackendError
from .base import Sdk, SdkBackend
from .spec import ModelSpec
from .types import ChatRequest, Completion, Usage


class AnthropicBackend(SdkBackend):
    """Adapter over ``anthropic.AsyncAnthropic``; SDK retries are off (ChatModel owns retry policy)."""

    name = "anthropic"
    default_model: ClassVar[str] = "claude-sonnet-4-6"
    sdk = Sdk("anthropic", module="anthropic", extra="anthropic")
    retry_statuses = frozenset({408, 409, 429})

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        with self.needs_sdk():
            import anthropic
        key = self.required_api_key()
        self._sdk = anthropic
        self._client = anthropic.AsyncAnthropic(
            api_key=key, base_url=spec.base_url, max_retries=0, timeout=spec.timeout_s
        )

    async def complete(self, request: ChatRequest) -> Completion:
        sdk = self._sdk
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        kwargs: dict[str, Any] = {
            "model": self.model_name,
            "max_tokens": request.max_tokens,
            "messages": [{"role": m.role, "content": m.content} for m in request.messages if m.role != "system"],
        }
        if system:
            kwargs["system"] = system
        if request.stop:
            kwargs["stop_sequences"] = list(request.stop)
        if request.json_schema is not None:
            kwargs["output_config"] = {"format": {"type": "json_schema", "schema": request.json_schema}}
        try:
            response = await self._client.messages.create(**kwargs)
        except (sdk.APIConnectionError, sdk.RateLimitError, sdk.InternalServerError) as exc:
            # The provider's text goes to the internal detail only (psychoalign.errors).
            status = getattr(exc, "status_code", None)
            what = f"returned HTTP {status}" if status else f"cannot be reached ({type(exc).__name__})"
            raise TransientBackendError(f"model endpoint {what}", detail=f"anthropic: {exc}") from exc
        except sdk.APIStatusError as exc:
            raise self.http_error(exc.status_code, f"anthropic: HTTP {exc.status_code}: {exc.message}") from exc
        text = ""
        for block in response.content:
            if block.type == "tool_use":  # older models answer a schema request with a tool call
                text = json.dumps(block.input)
                break
            if block.type == "text":
                text += block.text
        return Completion(
            text=text,
            usage=Usage(prompt_tokens=response.usage.input_tokens, completion_tokens=response.usage.output_tokens),
            model=response.model,
            finish_reason=response.stop_reason,
        )

    async def aclose(self) -> None:
        await self._client.close()
