"""The request body of ``POST /v1/chat/completions``: parsing and validation at the edge.

Every rejection is an :class:`~psychoalign.web.errors.APIError` (HTTP 400, OpenAI's shape) whose
``param`` names the field (``messages[2].content[0].type``) and whose message says the fix.
Sampling parameters are accepted and ignored: the deployment's role settings decide sampling,
and the negotiation's answer is not a sample of one model (docs/serve.md).
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from .errors import APIError

#: Accepted for compatibility and ignored (the deployment decides how each agent samples).
IGNORED_PARAMS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "logit_bias",
        "metadata",
        "store",
        "service_tier",
        "reasoning_effort",
        "verbosity",
        "parallel_tool_calls",
        "prompt_cache_key",
        "safety_identifier",
    }
)
_UNSUPPORTED = {
    "tools": "tools are not supported: the answer is negotiated text, never a tool call",
    "functions": "functions are not supported: the answer is negotiated text, never a function call",
    "function_call": "function_call is not supported: the answer is negotiated text",
    "audio": "audio output is not supported: send and receive text",
    "prediction": "predicted outputs are not supported",
    "web_search_options": "web search is not supported",
}
ROLES = ("system", "developer", "user", "assistant")


class ChatMessage(BaseModel):
    """One message, content already flattened to text."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "developer", "user", "assistant"]
    text: str


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_usage: StrictBool = False
    include_obfuscation: StrictBool = False


class PsychoAlignExtension(BaseModel):
    """The optional ``psychoalign`` object of the request body (clients that know us)."""

    model_config = ConfigDict(extra="forbid")

    framework: str | None = Field(None, max_length=200, description="One of the deployment's frameworks.")
    conversation_id: str | None = Field(None, pattern=r"^[A-Za-z0-9._:-]{1,128}$")


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage]
    # Strict: the OpenAI API takes only JSON booleans ("stream": "yes" is not true, it is an error).
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    n: int | None = None
    user: str | None = Field(None, max_length=512)
    logprobs: StrictBool | None = None
    top_logprobs: int | None = None
    tool_choice: Any = None
    response_format: dict[str, Any] | None = None
    modalities: list[str] | None = None
    psychoalign: PsychoAlignExtension | None = None


def _bad(param: str | None, message: str, code: str = "invalid_value") -> APIError:
    return APIError(400, message, param=param, code=code)


def _check_text(text: str, param: str) -> str:
    if "\x00" in text:
        raise _bad(param, f"{param} contains a NUL character: remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad(param, f"{param} contains an unpaired surrogate (invalid Unicode): send valid UTF-8") from None
    return text


def _message(raw: Any, i: int) -> ChatMessage:
    where = f"messages[{i}]"
    if not isinstance(raw, dict):
        raise _bad(where, f"{where} must be an object with 'role' and 'content'", "invalid_type")
    role = raw.get("role")
    if role in ("tool", "function"):
        raise _bad(f"{where}.role", f"{where}.role '{role}' is not supported: this endpoint does not call tools")
    if role not in ROLES:
        raise _bad(f"{where}.role", f"{where}.role must be one of {', '.join(ROLES)}; got {json.dumps(role)[:60]}")
    for key in raw:
        if key in ("tool_calls", "function_call"):
            raise _bad(f"{where}.{key}", f"{where}.{key} is not supported: this endpoint does not call tools")
        if key not in ("role", "content", "name", "refusal"):
            raise _bad(f"{where}.{key}", f"unrecognized field {where}.{key}: remove it", "unknown_parameter")
    content = raw.get("content")
    if content is None:
        raise _bad(f"{where}.content", f"{where}.content is missing: send the message text")
    if isinstance(content, str):
        return ChatMessage(role=role, text=_check_text(content, f"{where}.content"))
    if not isinstance(content, list):
        raise _bad(f"{where}.content", f"{where}.content must be a string or a list of text parts", "invalid_type")
    texts = []
    for j, part in enumerate(content):
        pwhere = f"{where}.content[{j}]"
        if not isinstance(part, dict):
            raise _bad(pwhere, f"{pwhere} must be an object {{'type': 'text', 'text': ...}}", "invalid_type")
        if part.get("type") != "text":
            got = json.dumps(part.get("type"))[:40]
            raise _bad(f"{pwhere}.type", f"{pwhere}.type must be 'text' (only text is supported); got {got}")
        if not isinstance(part.get("text"), str):
            raise _bad(f"{pwhere}.text", f"{pwhere}.text must be a string", "invalid_type")
        texts.append(_check_text(part["text"], f"{pwhere}.text"))
    return ChatMessage(role=role, text="\n".join(texts))


def _param(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def parse_request(body: bytes, *, max_body_bytes: int) -> ChatCompletionRequest:
    """Bytes -> validated request, or a 400 naming the field."""
    if len(body) > max_body_bytes:
        raise APIError(
            413,
            f"request body is larger than the limit of {max_body_bytes} bytes: shorten the conversation or raise "
            "serve.max_body_bytes",
            code="request_too_large",
        )
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise _bad(None, f"the request body is not valid JSON ({exc}): send a JSON object", "invalid_json") from None
    if not isinstance(data, dict):
        raise _bad(None, "the request body must be a JSON object", "invalid_json")
    for key, why in _UNSUPPORTED.items():
        if data.get(key) not in (None, []):
            raise _bad(key, f"{key}: {why}", "unsupported_parameter")
    fields = {k: v for k, v in data.items() if k not in IGNORED_PARAMS and k not in _UNSUPPORTED}
    raw_messages = fields.get("messages")
    if raw_messages is None:
        raise _bad("messages", "messages is required: send at least one user message", "missing_required_parameter")
    if not isinstance(raw_messages, list):
        raise _bad("messages", "messages must be a list of message objects", "invalid_type")
    if not raw_messages:
        raise _bad("messages", "messages is empty: send at least one user message", "empty_array")
    fields["messages"] = [_message(m, i) for i, m in enumerate(raw_messages)]
    if "model" not in fields:
        raise _bad(
            "model", "model is required: name a deployment (GET /v1/models lists them)", "missing_required_parameter"
        )
    try:
        req = ChatCompletionRequest.model_validate(fields)
    except ValidationError as exc:
        err = exc.errors()[0]
        param = _param(tuple(err["loc"]))
        if err["type"] == "extra_forbidden":
            raise _bad(param, f"Unrecognized request argument supplied: {param}", "unknown_parameter") from None
        if err["type"] == "bool_type":
            got = json.dumps(err["input"])[:40]
            raise _bad(param, f"{param} must be a JSON boolean (true or false); got {got}", "invalid_type") from None
        raise _bad(param, f"{param}: {err['msg']}", "invalid_value") from None
    _semantics(req)
    return req


def _semantics(req: ChatCompletionRequest) -> None:
    if req.n not in (None, 1):
        raise _bad(
            "n", f"n={req.n} is not supported: a negotiation yields one answer; send n=1", "unsupported_parameter"
        )
    if req.logprobs:
        raise _bad(
            "logprobs", "logprobs are not supported: the answer is negotiated, not sampled", "unsupported_parameter"
        )
    if req.top_logprobs is not None:
        raise _bad("top_logprobs", "top_logprobs is not supported", "unsupported_parameter")
    if req.tool_choice not in (None, "none"):
        raise _bad(
            "tool_choice", "tool_choice is not supported: this endpoint does not call tools", "unsupported_parameter"
        )
    if req.response_format is not None and req.response_format.get("type", "text") != "text":
        got = json.dumps(req.response_format.get("type"))[:40]
        raise _bad(
            "response_format.type",
            f"response_format.type {got} is not supported: the answer is the MEDIATOR's text; use 'text'",
            "unsupported_parameter",
        )
    if req.modalities not in (None, ["text"]):
        raise _bad("modalities", "only the 'text' modality is supported", "unsupported_parameter")
    last = req.messages[-1]
    where = f"messages[{len(req.messages) - 1}]"
    if last.role != "user":
        raise _bad(f"{where}.role", f"the last message must be the user's request (role 'user'), got '{last.role}'")
    if not last.text.strip():
        raise _bad(f"{where}.content", f"{where}.content is empty: send the user's request")
