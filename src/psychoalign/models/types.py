"""Value types shared by every backend: the request, one raw completion, the final result."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MessageRole = Literal["system", "user", "assistant"]


class Message(BaseModel):
    """One chat message."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: MessageRole
    content: str


class Usage(BaseModel):
    """Token counts for one or more calls."""

    model_config = ConfigDict(frozen=True)

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class ChatRequest(BaseModel):
    """Everything that determines a reply. Its canonical JSON is the cache key."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    messages: tuple[Message, ...]
    json_schema: dict[str, Any] | None = None
    schema_name: str = "reply"
    temperature: float = Field(0.0, ge=0.0, le=2.0)
    max_tokens: int = Field(512, ge=1)
    seed: int | None = None
    stop: tuple[str, ...] = ()
    inputs: dict[str, str] | None = Field(
        None,
        description=(
            "The structured task behind the prompt (e.g. request, proposal, framework JSON), for backends "
            "that judge inputs instead of reading prompts (the classifier). LLM backends ignore it."
        ),
    )


class Completion(BaseModel):
    """One backend attempt's raw output (before schema validation)."""

    model_config = ConfigDict(frozen=True)

    text: str
    usage: Usage = Usage()
    model: str = ""
    finish_reason: str | None = None


class ChatResult(BaseModel):
    """What callers get: the text, the validated object (for structured calls), and accounting."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    text: str
    data: Any = None
    usage: Usage = Usage()
    latency_s: float = 0.0
    backend: str
    model: str
    attempts: int = 1
    cached: bool = False
    cost_usd: float = 0.0
    #: Why the backend stopped (``stop``, ``length`` when the token limit cut the reply), if it says.
    finish_reason: str | None = None
