"""Google Gemini through the official ``google-genai`` SDK. Structured output by ``response_json_schema``."""

from __future__ import annotations

from typing import Any, ClassVar

import httpx

from ..errors import TransientBackendError
from .base import Sdk, SdkBackend
from .spec import ModelSpec
from .types import ChatRequest, Completion, Usage


class GeminiBackend(SdkBackend):
    """Adapter over ``genai.Client(...).aio.models.generate_content``."""

    name = "gemini"
    default_model: ClassVar[str] = "gemini-2.5-flash"
    sdk = Sdk("google-genai", module="google.genai", extra="gemini")

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        with self.needs_sdk():
            from google import genai
            from google.genai import types
        key = self.required_api_key()
        self._types = types
        self._errors = genai.errors
        http_options = (
            types.HttpOptions(base_url=spec.base_url, timeout=int(spec.timeout_s * 1000))
            if spec.base_url
            else types.HttpOptions(timeout=int(spec.timeout_s * 1000))
        )
        self._client = genai.Client(api_key=key, http_options=http_options)

    async def complete(self, request: ChatRequest) -> Completion:
        types = self._types
        system = "\n\n".join(m.content for m in request.messages if m.role == "system")
        contents = [
            types.Content(role="model" if m.role == "assistant" else "user", parts=[types.Part(text=m.content)])
            for m in request.messages
            if m.role != "system"
        ]
        config: dict[str, Any] = {
            "temperature": request.temperature,
            "max_output_tokens": request.max_tokens,
        }
        if system:
            config["system_instruction"] = system
        if request.seed is not None:
            config["seed"] = request.seed
        if request.stop:
            config["stop_sequences"] = list(request.stop)
        if request.json_schema is not None:
            config["response_mime_type"] = "application/json"
            config["response_json_schema"] = request.json_schema
        try:
            response = await self._client.aio.models.generate_content(
                model=self.model_name, contents=contents, config=types.GenerateContentConfig(**config)
            )
        except self._errors.APIError as exc:
            code = int(getattr(exc, "code", 0) or 0)
            raise self.http_error(code, f"gemini: HTTP {code}: {exc}") from exc
        except (httpx.TransportError, httpx.TimeoutException) as exc:
            what = (
                "timed out" if isinstance(exc, httpx.TimeoutException) else f"cannot be reached ({type(exc).__name__})"
            )
            raise TransientBackendError(f"model endpoint {what}", detail=f"gemini: {exc}") from exc
        meta = response.usage_metadata
        return Completion(
            text=response.text or "",
            usage=Usage(
                prompt_tokens=int(getattr(meta, "prompt_token_count", 0) or 0),
                completion_tokens=int(getattr(meta, "candidates_token_count", 0) or 0),
            ),
            model=self.model_name,
            finish_reason=None,
        )
