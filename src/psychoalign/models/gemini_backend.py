"""Google Gemini through the official ``google-genai`` SDK. Structured output by ``response_json_schema``."""

from __future__ import annotations

from typing import Any, ClassVar

import httpx

from ..errors import BackendUnavailableError, EndpointError, TransientBackendError
from .base import Backend
from .spec import ModelSpec
from .types import ChatRequest, Completion, Usage


class GeminiBackend(Backend):
    """Adapter over ``genai.Client(...).aio.models.generate_content``."""

    name: ClassVar[str] = "gemini"
    default_model: ClassVar[str] = "gemini-2.5-flash"

    def __init__(self, spec: ModelSpec) -> None:
        super().__init__(spec)
        try:
            from google import genai
            from google.genai import types
        except ImportError as exc:
            raise BackendUnavailableError(
                "the google-genai SDK is not installed", hint="pip install 'psychoalign[gemini]'"
            ) from exc
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
            detail = f"gemini: HTTP {code}: {exc}"  # the provider's text: internal detail only
            if code in (408, 429) or code >= 500:
                raise TransientBackendError(f"model endpoint returned HTTP {code}", detail=detail) from exc
            hint = "check the API key" if code in (401, 403) else "check the model name"
            raise EndpointError(f"model endpoint returned HTTP {code}", hint=hint, detail=detail) from exc
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

    @classmethod
    def availability(cls, spec: ModelSpec | None = None) -> tuple[bool, str]:
        spec = spec or ModelSpec(backend="gemini")
        try:
            from google import genai  # noqa: F401
        except ImportError:
            return False, "pip install 'psychoalign[gemini]'"
        if spec.resolved_api_key() is None:
            return False, f"set ${spec.key_env_name()}"
        return True, f"${spec.key_env_name()} set"
