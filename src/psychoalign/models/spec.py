"""Model specification: which backend and model a role runs on, and how calls behave."""

from __future__ import annotations

import os
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, model_validator

__all__ = ["DEFAULT_KEY_ENV"]

BackendName = Literal["local", "classifier", "openai", "anthropic", "gemini", "scripted"]
BACKENDS: tuple[BackendName, ...] = ("local", "classifier", "openai", "anthropic", "gemini", "scripted")

#: The providers' usual environment variables, used when ``api_key_env`` is not set.
DEFAULT_KEY_ENV: dict[str, str] = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "gemini": "GEMINI_API_KEY",
}


def backend_of(model: object) -> str | None:
    """The backend a ``backend:model`` id names (``local:smollm2-135m-instruct``, the spelling of
    traces and ``psychoalign models list``), or None: a plain name, or one whose colon is its own
    (``qwen3:8b``, ``C:/models/x.gguf``)."""
    if not isinstance(model, str):
        return None
    prefix, colon, _ = model.partition(":")
    return prefix if colon and prefix in BACKENDS else None


class ModelSpec(BaseModel):
    """One model endpoint and its call policy. Frozen so a run can be rebuilt from its log.

    ``model`` may be given as ``backend:model`` (what ``psychoalign models list`` and traces show):
    the prefix sets the backend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _backend_in_model(cls, data: Any) -> Any:
        if not isinstance(data, dict) or (backend := backend_of(data.get("model"))) is None:
            return data
        given = data.get("backend")
        if given is not None and given != backend:
            raise ValueError(
                f"model '{data['model']}' names backend '{backend}' but backend is '{given}': "
                f"drop the backend, or the '{backend}:' prefix"
            )
        return {**data, "backend": backend, "model": data["model"].split(":", 1)[1] or None}

    backend: BackendName = "local"
    model: str | None = Field(None, description="Model name; the backend's default when unset.")
    base_url: str | None = Field(None, description="Endpoint root, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str | None = Field(None, description="Environment variable holding the API key.")
    api_key: SecretStr | None = Field(None, description="Key given directly (prefer api_key_env).")
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(512, ge=1, le=131072)
    seed: int | None = 0
    timeout_s: float = Field(120.0, gt=0)
    max_retries: int = Field(3, ge=0, le=10, description="Retries on 429/5xx/connection errors.")
    schema_retries: int = Field(2, ge=0, le=5, description="Re-asks when a reply breaks the schema.")
    backoff_base_s: float = Field(0.5, ge=0)
    backoff_max_s: float = Field(20.0, ge=0)
    input_cost_per_mtok: float = Field(0.0, ge=0, description="USD per million prompt tokens.")
    output_cost_per_mtok: float = Field(0.0, ge=0, description="USD per million completion tokens.")
    n_ctx: int = Field(4096, ge=256, description="Context size (local backend).")
    n_threads: int | None = Field(
        None,
        ge=1,
        le=256,
        description="CPU threads (local backend); unset: the cores idle when the model loads "
        "(Linux; elsewhere half the usable cores), at least 1.",
    )
    script: str | None = Field(None, description="Reply file for the scripted backend (YAML/JSON).")
    max_prompt_chars: int = Field(100_000, ge=1, description="Longest prompt accepted.")

    def resolved_api_key(self) -> str | None:
        """The key from ``api_key`` or the environment, or None."""
        if self.api_key is not None:
            return self.api_key.get_secret_value()
        env = self.api_key_env or DEFAULT_KEY_ENV.get(self.backend)
        return os.environ.get(env) if env else None

    def key_env_name(self) -> str | None:
        return self.api_key_env or DEFAULT_KEY_ENV.get(self.backend)

    def label(self) -> str:
        return f"{self.backend}:{self.model or 'default'}"
