"""The request body of ``POST /v1/chat/completions``: parsing and validation at the edge.

Every rejection is an :class:`~psychoalign.web.errors.APIError` (HTTP 400, OpenAI's shape) whose
``param`` names the field (``messages[2].content[0].type``) and whose message says the fix.
Sampling parameters are validated with OpenAI's ranges (:class:`Sampling`); ``max_tokens`` /
``max_completion_tokens`` and ``stop`` shape the text the client receives. The deployment's
role settings decide how each agent samples: the answer is negotiated, not one model's sample.
``response_format`` is validated here, its JSON Schema against its dialect's metaschema
(:func:`_response_format`); openai_api's format gate checks the answer against it.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal, cast

import jsonschema
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt, ValidationError

from ..jsonguard import JSONLimitError, NonFiniteError, loads_bounded
from .errors import APIError
from .openai_tools import ToolCall, Tools, parse_tool_calls, parse_tools

#: Accepted for compatibility and ignored (the deployment decides how each agent samples).
IGNORED_PARAMS = frozenset(
    {
        "logit_bias",
        "metadata",
        "store",
        "service_tier",
        "reasoning_effort",
        "verbosity",
        "parallel_tool_calls",
        "prompt_cache_key",
        "prompt_cache_retention",
        "prompt_cache_options",
        "safety_identifier",
    }
)
_LOGIT_BIAS_MAX = 300
_METADATA_PAIRS, _METADATA_KEY, _METADATA_VALUE = 16, 64, 512
#: The JSON type each ignored parameter must have (as OpenAI's API checks it): a value of another
#: type is a 400 naming the field, never silently dropped. Values of the right type are not
#: checked further (an enum value OpenAI adds later is accepted, and ignored like the rest).
_IGNORED_TYPES: dict[str, tuple[type, str]] = {
    "store": (bool, "a JSON boolean (true or false)"),
    "parallel_tool_calls": (bool, "a JSON boolean (true or false)"),
    "service_tier": (str, "a string such as 'auto'"),
    "reasoning_effort": (str, "a string such as 'low'"),
    "verbosity": (str, "a string such as 'medium'"),
    "prompt_cache_key": (str, "a string"),
    "prompt_cache_retention": (str, "a string such as '24h'"),
    "prompt_cache_options": (dict, 'an object such as {"ttl": "30m"}'),
    "safety_identifier": (str, "a string"),
}
_UNSUPPORTED = {
    "functions": "functions are deprecated and not supported: send tools",
    "function_call": "function_call is deprecated and not supported: send tool_choice",
    "audio": "audio output is not supported: send and receive text",
    "prediction": "predicted outputs are not supported",
    "web_search_options": "web search is not supported",
    # A safety request this server cannot honour as asked is refused, never silently dropped.
    "moderation": "OpenAI's moderated completions are not offered: every answer here is negotiated and gated by "
    "the deployment's framework (the reply's psychoalign.outcome and psychoalign.rules say what the gates decided); "
    "leave moderation out",
}
ROLES = ("system", "developer", "user", "assistant")
#: Validated into :class:`Sampling` (not fields of the request model itself).
_SAMPLING = frozenset(
    {
        "temperature",
        "top_p",
        "presence_penalty",
        "frequency_penalty",
        "seed",
        "max_tokens",
        "max_completion_tokens",
        "stop",
    }
)


class ChatMessage(BaseModel):
    """One message, content already flattened to text; an assistant's ``tool_calls`` and a tool
    result's ``tool_call_id`` (requests with ``tools`` only)."""

    model_config = ConfigDict(frozen=True)

    role: Literal["system", "developer", "user", "assistant", "tool"]
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    include_usage: StrictBool = False
    include_obfuscation: StrictBool = False


class PsychoAlignExtension(BaseModel):
    """The optional ``psychoalign`` object of the request body (clients that know us)."""

    model_config = ConfigDict(extra="forbid")

    framework: str | None = Field(None, max_length=200, description="One of the deployment's frameworks.")
    conversation_id: str | None = Field(None, pattern=r"^[A-Za-z0-9._:-]{1,128}$")


MAX_STOP_SEQUENCES = 4
#: name -> (lowest, highest) accepted, as OpenAI's API documents them.
_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (0.0, 2.0),
    "top_p": (0.0, 1.0),
    "presence_penalty": (-2.0, 2.0),
    "frequency_penalty": (-2.0, 2.0),
}
_INT64 = 2**63


class Sampling(BaseModel):
    """The client's sampling parameters, validated. ``max_tokens`` is the smaller of
    ``max_tokens`` and ``max_completion_tokens`` when both are sent."""

    model_config = ConfigDict(frozen=True)

    temperature: float | None = None
    top_p: float | None = None
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    seed: int | None = None
    max_tokens: int | None = None
    stop: tuple[str, ...] = ()

    def sent(self) -> dict[str, object]:
        """What the client sent (for the trace's metadata)."""
        return {k: v for k, v in self.model_dump(mode="json").items() if v not in (None, [])}


def _sampling(data: dict[str, Any]) -> Sampling:
    """Validate the sampling fields of the raw body; 400 naming the field, its range and the fix."""
    values: dict[str, Any] = {}
    for name, (low, high) in _RANGES.items():
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
            got = json.dumps(value)[:40]
            raise _bad(name, f"{name} must be a number from {low:g} to {high:g}; got {got}", _kind(value))
        values[name] = float(value)
    seed = data.get("seed")
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or not -_INT64 <= seed < _INT64:
            raise _bad("seed", f"seed must be a 64-bit integer; got {json.dumps(seed)[:40]}", _kind(seed, int))
        values["seed"] = seed
    limits = []
    for name in ("max_tokens", "max_completion_tokens"):
        value = data.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            got = json.dumps(value)[:40]
            raise _bad(name, f"{name} must be an integer of at least 1; got {got}", _kind(value, int))
        limits.append(value)
    if limits:
        values["max_tokens"] = min(limits)
    stop = data.get("stop")
    if stop is not None:
        sequences = [stop] if isinstance(stop, str) else stop
        if not isinstance(sequences, list) or not all(isinstance(x, str) for x in sequences):
            raise _bad("stop", "stop must be a string or a list of strings", "invalid_type")
        if len(sequences) > MAX_STOP_SEQUENCES:
            raise _bad("stop", f"stop has {len(sequences)} sequences; send at most {MAX_STOP_SEQUENCES}")
        for i, seq in enumerate(sequences):
            if not seq:
                where = "stop" if isinstance(stop, str) else f"stop[{i}]"  # as the client sent it
                raise _bad("stop", f"{where} is empty: send non-empty stop sequences or none")
            _check_text(seq, f"stop[{i}]")
        values["stop"] = tuple(sequences)
    return Sampling(**values)


def _check_ignored(data: dict[str, Any]) -> None:
    """The ignored parameters' types: ``logit_bias`` a map of token ids to numbers from -100 to
    100, ``metadata`` at most 16 string pairs, the others as :data:`_IGNORED_TYPES` says."""
    for name, (kind, words) in _IGNORED_TYPES.items():
        value = data.get(name)
        if value is not None and (not isinstance(value, kind) or (kind is str and isinstance(value, bool))):
            raise _bad(name, f"{name} must be {words}; got {json.dumps(value)[:40]}", "invalid_type")
    bias = data.get("logit_bias")
    if bias is not None:
        if not isinstance(bias, dict):
            raise _bad("logit_bias", 'logit_bias must be an object such as {"50256": -100}', "invalid_type")
        if len(bias) > _LOGIT_BIAS_MAX:
            raise _bad("logit_bias", f"logit_bias has {len(bias)} entries; send at most {_LOGIT_BIAS_MAX}")
        for token, value in bias.items():
            if not token.isascii() or not token.isdigit():
                got = json.dumps(token)[:40]
                raise _bad("logit_bias", f"logit_bias keys must be token ids (digits); got {got}")
            if isinstance(value, bool) or not isinstance(value, int | float) or not -100 <= value <= 100:
                got = json.dumps(value)[:40]
                raise _bad(f"logit_bias.{token}", f"logit_bias.{token} must be a number from -100 to 100; got {got}")
    metadata = data.get("metadata")
    if metadata is not None:
        if not isinstance(metadata, dict):
            raise _bad("metadata", 'metadata must be an object of strings such as {"team": "search"}', "invalid_type")
        if len(metadata) > _METADATA_PAIRS:
            raise _bad("metadata", f"metadata has {len(metadata)} keys; send at most {_METADATA_PAIRS}")
        for key, value in metadata.items():
            if len(key) > _METADATA_KEY:
                raise _bad("metadata", f"metadata key {json.dumps(key[:40])}... is over {_METADATA_KEY} characters")
            if not isinstance(value, str) or len(value) > _METADATA_VALUE:
                got = json.dumps(value)[:40]
                raise _bad(
                    f"metadata.{key}",
                    f"metadata.{key} must be a string of at most {_METADATA_VALUE} characters; got {got}",
                    "invalid_value" if isinstance(value, str) else "invalid_type",
                )


def _kind(value: Any, expected: type = float) -> str:
    """``invalid_type`` for a value of the wrong JSON type, ``invalid_value`` for one out of range."""
    numeric = isinstance(value, int | float) and not isinstance(value, bool)
    if expected is int:
        return "invalid_value" if isinstance(value, int) and not isinstance(value, bool) else "invalid_type"
    return "invalid_value" if numeric else "invalid_type"


_FORMAT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_RF = "response_format"


class ResponseFormat(BaseModel):
    """``response_format``, validated: ``text`` (no constraint), ``json_object`` (the answer is
    one JSON object) or ``json_schema`` (the answer validates against ``schema``)."""

    model_config = ConfigDict(frozen=True)

    type: Literal["text", "json_object", "json_schema"] = "text"
    name: str | None = None
    description: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    strict: bool | None = None

    @property
    def wants_json(self) -> bool:
        return self.type != "text"


def _response_format(raw: Any) -> ResponseFormat | None:
    """The raw ``response_format`` -> :class:`ResponseFormat`, or a 400 naming the field. The schema
    itself is checked against its JSON Schema dialect's metaschema (``jsonschema``)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise _bad(_RF, f'{_RF} must be an object such as {{"type": "json_object"}}', "invalid_type")
    kind = raw.get("type")
    if kind not in ("text", "json_object", "json_schema"):
        got = json.dumps(kind)[:40]
        raise _bad(f"{_RF}.type", f"{_RF}.type must be 'text', 'json_object' or 'json_schema'; got {got}")
    allowed = {"type", "json_schema"} if kind == "json_schema" else {"type"}
    for key in raw:
        if key not in allowed:
            raise _bad(
                f"{_RF}.{key}", f"unrecognized field {_RF}.{key} for type '{kind}': remove it", "unknown_parameter"
            )
    if kind != "json_schema":
        return ResponseFormat(type=kind)
    where = f"{_RF}.json_schema"
    spec = raw.get("json_schema")
    if not isinstance(spec, dict):
        raise _bad(
            where,
            f'{where} is required for type \'json_schema\': send {{"name": ..., "schema": {{...}}}}',
            "missing_required_parameter" if spec is None else "invalid_type",
        )
    for key in spec:
        if key not in ("name", "description", "schema", "strict"):
            raise _bad(f"{where}.{key}", f"unrecognized field {where}.{key}: remove it", "unknown_parameter")
    name = spec.get("name")
    if not isinstance(name, str) or not _FORMAT_NAME.match(name):
        raise _bad(
            f"{where}.name", f"{where}.name must be 1-64 characters of a-z A-Z 0-9 _ -; got {json.dumps(name)[:40]}"
        )
    description = spec.get("description")
    if description is not None and not isinstance(description, str):
        raise _bad(f"{where}.description", f"{where}.description must be a string", "invalid_type")
    strict = spec.get("strict")
    if strict is not None and not isinstance(strict, bool):
        raise _bad(f"{where}.strict", f"{where}.strict must be a JSON boolean (true or false)", "invalid_type")
    schema = spec.get("schema")
    if not isinstance(schema, dict):
        raise _bad(
            f"{where}.schema",
            f"{where}.schema must be a JSON Schema object: the answer is validated against it",
            "missing_required_parameter" if schema is None else "invalid_type",
        )
    dialect = schema.get("$schema")
    # Only dialects jsonschema knows (an unknown one would be validated as another, with a warning).
    no_default = cast("Any", None)  # validator_for returns it for an unknown dialect
    known = isinstance(dialect, str) and jsonschema.validators.validator_for(schema, default=no_default) is not None
    if dialect is not None and not known:
        got = json.dumps(dialect)[:80]
        raise _bad(
            f"{where}.schema.$schema",
            f"{where}.schema.$schema {got} is not a JSON Schema dialect this server knows: name draft 4, 6, 7, "
            "2019-09 or 2020-12 by its URI, or leave $schema out (2020-12)",
        )
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        at = "/".join(str(p) for p in exc.path) or "(root)"
        why = exc.message.splitlines()[0][:200]
        raise _bad(f"{where}.schema", f"{where}.schema is not a valid JSON Schema at {at}: {why}") from None
    except Exception as exc:  # the metaschema check itself failed on this schema: refuse, never a 500
        raise _bad(f"{where}.schema", f"{where}.schema cannot be checked ({type(exc).__name__}): simplify it") from None
    return ResponseFormat(type=kind, name=name, description=description, schema=schema, strict=strict)


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage]
    # Strict: the OpenAI API takes only JSON booleans ("stream": "yes" is not true, it is an error).
    stream: StrictBool = False
    stream_options: StreamOptions | None = None
    n: StrictInt | None = None  # "n": "1", true or 1.0 is an error, as in the OpenAI API
    user: str | None = Field(None, max_length=512)
    logprobs: StrictBool | None = None
    top_logprobs: StrictInt | None = None
    tools: Tools | None = None
    response_format: ResponseFormat | None = None
    modalities: list[str] | None = None
    psychoalign: PsychoAlignExtension | None = None
    sampling: Sampling = Field(default_factory=Sampling)

    @property
    def request_index(self) -> int:
        """The message that is negotiated: the last user message (tool calls and their results
        may follow it)."""
        return max(i for i, m in enumerate(self.messages) if m.role == "user")

    @property
    def request_text(self) -> str:
        return self.messages[self.request_index].text


def _bad(param: str | None, message: str, code: str | None = "invalid_value") -> APIError:
    return APIError(400, message, param=param, code=code)


def _check_text(text: str, param: str) -> str:
    if "\x00" in text:
        raise _bad(param, f"{param} contains a NUL character: remove it")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad(param, f"{param} contains an unpaired surrogate (invalid Unicode): send valid UTF-8") from None
    return text


_TEXT_FIELDS = frozenset({"role", "content", "name"})
#: The fields a message of each role may carry. An assistant's ``annotations`` (a response
#: message's citations, resent with it) are accepted and ignored: they are not text. Only an
#: assistant message has a ``refusal`` (as in OpenAI's API).
_MESSAGE_FIELDS = {
    "system": _TEXT_FIELDS,
    "developer": _TEXT_FIELDS,
    "user": _TEXT_FIELDS,
    "assistant": _TEXT_FIELDS | {"annotations", "refusal"},
    "tool": frozenset({"role", "content", "tool_call_id"}),
}
_ASSISTANT_WITH_TOOLS = _MESSAGE_FIELDS["assistant"] | {"tool_calls"}
#: The fields of a content part: a text part's ``prompt_cache_breakpoint`` (OpenAI's prompt
#: caching; an object) is accepted and ignored.
_PART_FIELDS = {
    "text": frozenset({"type", "text", "prompt_cache_breakpoint"}),
    "refusal": frozenset({"type", "refusal"}),
}


def _message(raw: Any, i: int, tools: bool = False) -> ChatMessage:
    where = f"messages[{i}]"
    if not isinstance(raw, dict):
        raise _bad(where, f"{where} must be an object with 'role' and 'content'", "invalid_type")
    # A field sent as null is the field left out (a response message dumped whole and resent
    # carries "tool_calls": null, "audio": null); content keeps its own rule below.
    if None in raw.values():  # rare: copy only then (this runs for every message of every request)
        raw = {k: v for k, v in raw.items() if v is not None or k == "content"}
    role = raw.get("role")
    if role == "function" or (role == "tool" and not tools):
        why = "send the request's tools with it" if role == "tool" else "function messages are deprecated: use tools"
        raise _bad(f"{where}.role", f"{where}.role '{role}' is not supported here: {why}")
    if role not in (*ROLES, "tool"):
        raise _bad(f"{where}.role", f"{where}.role must be one of {', '.join(ROLES)}; got {json.dumps(role)[:60]}")
    allowed = _ASSISTANT_WITH_TOOLS if tools and role == "assistant" else _MESSAGE_FIELDS[role]
    if not raw.keys() <= allowed:  # the common case is one set comparison; the loop names the field
        for key in raw:
            if key in ("tool_calls", "function_call") and key not in allowed:
                raise _bad(f"{where}.{key}", f"{where}.{key} is not supported here: send the request's tools with it")
            if key == "audio" and role == "assistant":  # OpenAI's id of an earlier audio reply: never ours
                raise _bad(
                    f"{where}.audio",
                    f"{where}.audio is not supported: this server answers in text; send the assistant's words as "
                    "content",
                    "unsupported_parameter",
                )
            if key not in allowed:
                raise _bad(f"{where}.{key}", f"unrecognized field {where}.{key}: remove it", "unknown_parameter")
    name = raw.get("name")
    if name is not None and not isinstance(name, str):  # accepted and not used: the participant's name
        raise _bad(f"{where}.name", f"{where}.name must be a string; got {json.dumps(name)[:40]}", "invalid_type")
    if "annotations" in raw and not isinstance(raw["annotations"], list):
        raise _bad(
            f"{where}.annotations", f"{where}.annotations must be a list (as this API returned it)", "invalid_type"
        )
    calls = parse_tool_calls(raw["tool_calls"], f"{where}.tool_calls") if "tool_calls" in raw else ()
    call_id = raw.get("tool_call_id")
    if role == "tool" and (not isinstance(call_id, str) or not call_id):
        raise _bad(f"{where}.tool_call_id", f"{where}.tool_call_id is required: the id of the call this answers")
    content = raw.get("content")
    refusal = raw.get("refusal")
    if refusal is not None and not isinstance(refusal, str):
        raise _bad(f"{where}.refusal", f"{where}.refusal must be a string or null", "invalid_type")
    if content is None and calls:
        return ChatMessage(role=role, text="", tool_calls=calls)
    if content is None and role == "assistant" and refusal is not None:
        # A refusal without content (as a JSON response_format refusal comes back), resent as history.
        return ChatMessage(role=role, text=_check_text(refusal, f"{where}.refusal"))
    if content is None:
        raise _bad(f"{where}.content", f"{where}.content is missing: send the message text")
    if isinstance(content, str):
        text = _check_text(content, f"{where}.content")
        return ChatMessage(role=role, text=text, tool_calls=calls, tool_call_id=call_id)
    if not isinstance(content, list):
        raise _bad(f"{where}.content", f"{where}.content must be a string or a list of text parts", "invalid_type")
    texts = []
    for j, part in enumerate(content):
        pwhere = f"{where}.content[{j}]"
        if not isinstance(part, dict):
            raise _bad(pwhere, f"{pwhere} must be an object {{'type': 'text', 'text': ...}}", "invalid_type")
        # An assistant's content may hold refusal parts (OpenAI's assistant message): text too.
        kind = "refusal" if role == "assistant" and part.get("type") == "refusal" else "text"
        if part.get("type") != kind:
            got = json.dumps(part.get("type"))[:40]
            raise _bad(f"{pwhere}.type", f"{pwhere}.type must be 'text' (only text is supported); got {got}")
        if not isinstance(part.get(kind), str):
            raise _bad(f"{pwhere}.{kind}", f"{pwhere}.{kind} must be a string", "invalid_type")
        if len(part) > 2:  # as for a message: a field sent as null is the field left out
            extra = next((k for k, v in part.items() if k not in _PART_FIELDS[kind] and v is not None), None)
            if extra is not None:
                raise _bad(f"{pwhere}.{extra}", f"unrecognized field {pwhere}.{extra}: remove it", "unknown_parameter")
            mark = part.get("prompt_cache_breakpoint")
            if mark is not None and not isinstance(mark, dict):
                raise _bad(
                    f"{pwhere}.prompt_cache_breakpoint",
                    f'{pwhere}.prompt_cache_breakpoint must be an object such as {{"mode": "explicit"}}',
                    "invalid_type",
                )
        texts.append(_check_text(part[kind], f"{pwhere}.{kind}"))
    return ChatMessage(role=role, text="\n".join(texts), tool_calls=calls, tool_call_id=call_id)


def _param(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load_body(body: bytes, *, max_body_bytes: int) -> dict[str, Any]:
    """Bytes -> a JSON object, bounded before parsing (psychoalign.jsonguard); 413/400 otherwise."""
    if len(body) > max_body_bytes:
        raise APIError(
            413,
            f"request body is larger than the limit of {max_body_bytes} bytes: shorten the conversation or raise "
            "serve.max_body_bytes",
            code="request_too_large",
        )
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        where = f"byte 0x{body[exc.start : exc.start + 1].hex()} at offset {exc.start}"
        message = f"the request body is not UTF-8 ({where}): send JSON encoded as UTF-8"
        raise _bad(None, message, "invalid_json") from None
    try:
        data = loads_bounded(text, strict=True)
    except (JSONLimitError, NonFiniteError) as exc:
        raise _bad(None, f"the request body is refused: {exc}", "invalid_json") from None
    except json.JSONDecodeError as exc:
        raise _bad(None, f"the request body is not valid JSON ({exc}): send a JSON object", "invalid_json") from None
    if not isinstance(data, dict):
        raise _bad(None, "the request body must be a JSON object", "invalid_json")
    return data


def parse_messages(raw_messages: Any, param: str = "messages", *, tools: bool = False) -> list[ChatMessage]:
    """A non-empty list of message objects -> messages, or a 400 naming the entry."""
    if raw_messages is None:
        raise _bad(param, f"{param} is required: send at least one user message", "missing_required_parameter")
    if not isinstance(raw_messages, list):
        raise _bad(param, f"{param} must be a list of message objects", "invalid_type")
    if not raw_messages:
        raise _bad(param, f"{param} is empty: send at least one user message", "empty_array")
    return [_message(m, i, tools) for i, m in enumerate(raw_messages)]


def parse_request(body: bytes, *, max_body_bytes: int) -> ChatCompletionRequest:
    """Bytes -> validated request, or a 400 naming the field."""
    data = load_body(body, max_body_bytes=max_body_bytes)
    for key, why in _UNSUPPORTED.items():
        if data.get(key) is not None:
            raise _bad(key, f"{key}: {why}", "unsupported_parameter")
    if data.get("stream", False) is None:  # nullable in OpenAI's API: null is not streamed
        del data["stream"]
    options = data.get("stream_options")
    if isinstance(options, dict) and None in options.values():  # as everywhere: null is the field left out
        data["stream_options"] = {k: v for k, v in options.items() if v is not None}
    if "sampling" in data:  # our own field for the validated parameters, not a request argument
        raise _bad("sampling", "Unrecognized request argument supplied: sampling", "unknown_parameter")
    sampling = _sampling(data)
    _check_ignored(data)
    fields = {k: v for k, v in data.items() if k not in IGNORED_PARAMS and k not in _UNSUPPORTED and k not in _SAMPLING}
    fields["sampling"] = sampling
    fields["tools"] = parse_tools(fields.get("tools"), fields.pop("tool_choice", None), data.get("parallel_tool_calls"))
    fields["messages"] = parse_messages(fields.get("messages"), tools=fields["tools"] is not None)
    fields["response_format"] = _response_format(fields.get("response_format"))
    if fields.get("model") in (None, ""):  # left out, null or "": OpenAI's "you must provide a model"
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
        kind = "invalid_type" if err["type"].endswith("_type") else "invalid_value"  # "model": 3 is a type error
        raise _bad(param, _fix(param, err["msg"]), kind) from None
    _semantics(req)
    return req


def _fix(param: str, problem: str) -> str:
    """One line for a field pydantic refused: what is wrong and the fix (``model`` and
    ``messages``, the required fields, have their own messages; every other field may be left out)."""
    fix = f"send a valid {param}" if param == "model" else f"send a valid {param} or leave it out"
    return f"{param}: {problem[:1].lower()}{problem[1:]}: {fix}"


def _semantics(req: ChatCompletionRequest) -> None:
    if req.stream_options is not None and not req.stream:
        raise _bad(
            "stream_options",
            'stream_options is only allowed with stream: true: send "stream": true or leave stream_options out',
        )
    if req.n is not None and req.n < 1:  # out of OpenAI's own range, not a request for several answers
        raise _bad("n", f"n must be an integer of at least 1; got {req.n}: send n=1 or leave it out")
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
    if req.modalities not in (None, ["text"]):
        raise _bad("modalities", "only the 'text' modality is supported", "unsupported_parameter")
    fmt = req.response_format
    if fmt is not None and fmt.type == "json_object" and not any("json" in m.text.lower() for m in req.messages):
        # OpenAI's API refuses JSON mode unless a message asks for JSON (param messages, code null).
        raise _bad(
            "messages",
            "messages must contain the word 'json' in some form to use response_format of type 'json_object': "
            "ask for JSON in a message, or send a json_schema",
            None,
        )
    last = req.messages[-1]
    where = f"messages[{len(req.messages) - 1}]"
    if last.role not in ("user", "tool") or not any(m.role == "user" for m in req.messages):
        raise _bad(
            f"{where}.role",
            f"the last message must be the user's request (role 'user'), or tool results after it; got '{last.role}'",
        )
    _tool_turns(req.messages)
    request = req.messages[req.request_index]
    if not request.text.strip():
        raise _bad(
            f"messages[{req.request_index}].content",
            f"messages[{req.request_index}].content is empty: send the user's request",
        )


def _tool_turns(messages: list[ChatMessage]) -> None:
    """Tool results answer calls: each ``tool`` message follows an assistant message with
    ``tool_calls`` (or another result) and names one of its calls."""
    calls: set[str] = set()
    for i, m in enumerate(messages):
        if m.role == "assistant":
            calls = {c.id for c in m.tool_calls}
        elif m.role == "tool":
            if m.tool_call_id not in calls:
                raise _bad(
                    f"messages[{i}].tool_call_id",
                    f"messages[{i}].tool_call_id does not answer a tool call of the assistant message before it",
                )
        else:
            calls = set()


# -- checks (web/checks.py) --------------------------------------------------------------------------


class CheckRequest(BaseModel):
    """A check: the deployment, the messages (ending with the user's request, or with the
    assistant's answer after it), and optionally a framework of the deployment's."""

    model_config = ConfigDict(frozen=True)

    model: str
    messages: list[ChatMessage]
    framework: str | None = None


def _check_messages(messages: list[ChatMessage], param: str) -> list[ChatMessage]:
    last = messages[-1]
    where = f"{param}[{len(messages) - 1}]"
    if last.role not in ("user", "assistant"):
        raise _bad(
            f"{where}.role", f"the last message must be the user's request or the assistant's answer; got '{last.role}'"
        )
    if not last.text.strip():
        raise _bad(f"{where}.content", f"{where}.content is empty: send the text to check")
    if last.role == "assistant" and not any(m.role == "user" for m in messages[:-1]):
        raise _bad(param, f"{param}: an answer is checked against its request: send the user's message before it")
    return messages


def parse_check(body: bytes, *, max_body_bytes: int) -> CheckRequest:
    """``POST /v1/guardrail/checks``: ``{"model", "messages", "psychoalign": {"framework"}}``;
    NeMo Guardrails' ``guardrails`` object is accepted and ignored (the deployment decides)."""
    data = load_body(body, max_body_bytes=max_body_bytes)
    for key in data:
        if key not in ("model", "messages", "guardrails", "psychoalign"):
            raise _bad(key, f"Unrecognized request argument supplied: {key}", "unknown_parameter")
    model = data.get("model")
    if not isinstance(model, str) or not 1 <= len(model) <= 200:
        raise _bad(
            "model", "model is required: name a deployment (GET /v1/models lists them)", "missing_required_parameter"
        )
    messages = _check_messages(parse_messages(data.get("messages")), "messages")
    try:
        ext = PsychoAlignExtension.model_validate(data.get("psychoalign") or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        param = "psychoalign." + _param(tuple(err["loc"]))
        raise _bad(param, _fix(param, err["msg"])) from None
    return CheckRequest(model=model, messages=messages, framework=ext.framework)


def parse_litellm_check(body: bytes, *, max_body_bytes: int, default_model: str) -> tuple[CheckRequest, str]:
    """LiteLLM's Generic Guardrail API request -> (check, input_type). ``input_type`` "request":
    the request's messages (``structured_messages``, else ``texts`` as one user message);
    "response": those messages plus ``texts`` as the assistant's answer. The deployment is
    ``additional_provider_specific_params.deployment``, else ``default_model``."""
    data = load_body(body, max_body_bytes=max_body_bytes)
    input_type = data.get("input_type")
    if input_type not in ("request", "response"):
        raise _bad("input_type", f"input_type must be 'request' or 'response'; got {json.dumps(input_type)[:40]}")
    texts = data.get("texts") or []
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise _bad("texts", "texts must be a list of strings", "invalid_type")
    extra = data.get("additional_provider_specific_params") or {}
    if not isinstance(extra, dict):
        raise _bad(
            "additional_provider_specific_params",
            "additional_provider_specific_params must be an object",
            "invalid_type",
        )
    model = extra.get("deployment", default_model)
    framework = extra.get("framework")
    if not isinstance(model, str) or (framework is not None and not isinstance(framework, str)):
        raise _bad("additional_provider_specific_params", "deployment and framework must be strings", "invalid_type")
    structured = data.get("structured_messages")
    messages = parse_messages(structured, "structured_messages") if structured else []
    joined = "\n".join(_check_text(t, "texts") for t in texts)
    if input_type == "request":
        if not messages or messages[-1].role != "user":
            messages = [*messages, ChatMessage(role="user", text=joined)]
    else:
        messages = [*messages, ChatMessage(role="assistant", text=joined)]
    return CheckRequest(
        model=model, messages=_check_messages(messages, "structured_messages"), framework=framework
    ), input_type
