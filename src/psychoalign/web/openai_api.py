"""The OpenAI-compatible face: ``POST /v1/chat/completions`` and ``GET /v1/models``.

One call = one negotiation. The conversation before the last user message is the context (with
the framework's own deployment context and the client's system messages); the last user message
is the request. The reply is a normal chat completion whose content is the MEDIATOR's final,
gated text, plus the decision where unaware clients ignore it: ``x-psychoalign-*`` headers and a
``psychoalign`` object in the body (in streams: in the last chunk).

Streaming never sends text before the gates have passed it: while the negotiation runs the
stream carries only SSE comments (progress, keep-alive), then the final text in chunks. If
anything fails, the stream ends with the fixed fail-closed refusal.

With a JSON ``response_format`` the final text passes a format gate too (:func:`answer`): it is
released only if it parses (and validates against the schema); otherwise the client gets a
structured-outputs refusal. Streams already hold the text to the end, so they are checked whole.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import jsonschema
from fastapi import APIRouter, Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from ..jsonguard import loads_bounded
from ..negotiation.defense import template
from ..negotiation.events import NegotiationEvent
from ..negotiation.track import ConversationRef, conversation_ref
from .apikeys import KeyCheck, parse_bearer
from .checks import CheckResult, run_check
from .errors import APIError, error_body
from .gateway import Gateway
from .openai_schema import (
    ChatCompletionRequest,
    ChatMessage,
    CheckRequest,
    ResponseFormat,
    Sampling,
    parse_check,
    parse_litellm_check,
    parse_request,
)
from .ops import current_request_id
from .outcome import GatewayOutcome

CONVERSATION_HEADER = "x-psychoalign-conversation-id"
FRAMEWORK_HEADER = "x-psychoalign-framework"
#: Where LiteLLM's Generic Guardrail API posts: its ``api_base`` (here ``<server>/v1/guardrail``)
#: plus the path LiteLLM appends.
LITELLM_GUARDRAIL_PATH = "/guardrail/beta/litellm_basic_guardrail_api"
_VALID_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
_SPEAKER = {"user": "User", "assistant": "Assistant"}


def build_context(base: str, messages: list[ChatMessage], extra: tuple[str, ...] = ()) -> str | None:
    """The negotiation context for the last message of ``messages``: the framework's deployment
    context, the client's system/developer instructions (then ``extra`` ones, e.g. the requested
    response format), then the earlier turns. ``None`` when there is nothing beyond the
    deployment context (the engine then uses it as is)."""
    earlier = messages[:-1]
    system = [m.text.strip() for m in earlier if m.role in ("system", "developer") and m.text.strip()]
    system.extend(extra)
    turns = [f"{_SPEAKER[m.role]}: {m.text.strip()}" for m in earlier if m.role in _SPEAKER]
    if not system and not turns:
        return None
    parts = [base.strip()] if base.strip() else []
    if system:
        parts.append("Instructions from the application:\n" + "\n".join(system))
    if turns:
        parts.append("Earlier in this conversation:\n" + "\n".join(turns))
    return "\n\n".join(parts)


def _conversation(req: ChatCompletionRequest, request: Request, deployment: str) -> tuple[str | None, str | None]:
    """(conversation id, source). Client header, then ``psychoalign.conversation_id``, then
    derived from ``user`` and the conversation's first user message (each call resends the
    history, so that message identifies the conversation of that user)."""
    header = request.headers.get(CONVERSATION_HEADER)
    if header is not None:
        if not _VALID_ID.match(header):
            raise APIError(
                400,
                f"header {CONVERSATION_HEADER} must be 1-128 characters of A-Z a-z 0-9 . _ : -",
                param=CONVERSATION_HEADER,
                code="invalid_value",
            )
        return header, "header"
    if req.psychoalign is not None and req.psychoalign.conversation_id:
        return req.psychoalign.conversation_id, "body"
    if req.user:
        first = next(m.text for m in req.messages if m.role == "user")
        digest = hashlib.sha256("\x00".join((deployment, req.user, first)).encode()).hexdigest()
        return digest[:32], "user"
    return None, None


def _decision(outcome: GatewayOutcome, conversation_id: str | None, turn: int) -> dict[str, Any]:
    trace = outcome.trace
    final = trace.final if trace is not None else None
    fw = trace.framework if trace is not None else None
    failure = None
    if outcome.failed:
        failure = {"shutdown": "shutdown", "timeout": "timeout"}.get(outcome.failure or "", "error")
    return {
        "trace_id": outcome.trace_id,
        "status": "failed" if outcome.failed else "completed",
        "failure": failure,
        "state": final.state.value if final is not None and final.state and not outcome.failed else None,
        "tension": final.tension if final is not None and not outcome.failed else None,
        "defense": final.defense.value if final is not None and final.defense and not outcome.failed else None,
        "composed_by": final.composed_by if final is not None else "fallback",
        "framework": fw.model_dump(mode="json") if fw is not None else None,
        "rounds": len(trace.rounds) if trace is not None else 0,
        "converged": trace.converged if trace is not None else False,
        "conversation_id": conversation_id,
        "turn": turn,
        "usage": outcome.usage,
        "request_id": current_request_id(),
    }


def _headers(decision: dict[str, Any]) -> dict[str, str]:
    tension = decision["tension"]
    return {
        "x-psychoalign-trace-id": decision["trace_id"] or "",
        "x-psychoalign-status": decision["status"],
        "x-psychoalign-tension": f"{tension:.4f}" if tension is not None else "none",
        "x-psychoalign-state": decision["state"] or "none",
        "x-psychoalign-defense": decision["defense"] or "none",
    }


def _usage(outcome: GatewayOutcome) -> dict[str, int]:
    return {
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
    }


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()


def _pending(events: asyncio.Queue[NegotiationEvent]) -> bytes:
    """Every progress event already queued, as comments."""
    out = b""
    while not events.empty():
        out += _comment(events.get_nowait())
    return out


def _comment(event: NegotiationEvent) -> bytes:
    """Progress as an SSE comment: a stage name and numbers, never agent text."""
    fields = [
        f"{k}={v:.4f}" if isinstance(v, float) else f"{k}={v}"
        for k, v in (
            ("round", event.round),
            ("proposals", event.proposals),
            ("admissible", event.admissible),
            ("tension", event.tension),
        )
        if v is not None
    ]
    return (": psychoalign " + " ".join([event.stage, *fields]) + "\n\n").encode()


def openai_router(gateway: Gateway) -> APIRouter:
    router = APIRouter(prefix="/v1")
    keys = KeyCheck(gateway.deployments)
    serve = gateway.settings.serve

    def caller(request: Request, *, x_api_key: bool = False) -> dict[str, str]:
        """Deployments this caller may use (name -> key id); 401 when none. ``x_api_key``: an
        ``x-api-key`` header counts too when there is no ``Authorization`` (LiteLLM's guardrail
        hook sends its ``api_key`` so)."""
        token = parse_bearer(request.headers.get("authorization"))
        if token is None and x_api_key:
            token = request.headers.get("x-api-key") or None
        host = request.client.host if request.client else None
        allowed = keys.allowed(token, host)
        if not allowed:
            if token is None and not keys.keyless():
                message = "no API key: send 'Authorization: Bearer <API key>'"
            elif token is None:
                message = "no API key: keyless deployments answer loopback clients only; send a key"
            else:
                message = "invalid API key"
            raise APIError(401, message, code="invalid_api_key", headers={"WWW-Authenticate": "Bearer"})
        return allowed

    def model_card(name: str) -> dict[str, Any]:
        dep = gateway.deployments[name]
        return {
            "id": name,
            "object": "model",
            "created": 0,
            "owned_by": "psychoalign",
            "psychoalign": {"framework": dep.framework, "frameworks": dep.frameworks(), "description": dep.description},
        }

    @router.get("/models")
    async def list_models(request: Request) -> JSONResponse:
        """The deployments this key (or a loopback client, for keyless ones) may use."""
        allowed = caller(request)
        return JSONResponse({"object": "list", "data": [model_card(n) for n in sorted(allowed)]})

    @router.get("/models/{name}")
    async def get_model(name: str, request: Request) -> JSONResponse:
        allowed = caller(request)
        if name not in allowed:
            raise _unknown_model(name, allowed)
        return JSONResponse(model_card(name))

    @router.post("/chat/completions", response_model=None)
    async def chat_completions(request: Request) -> Response:
        if gateway.draining:
            raise _draining()
        # Authenticate before reading the body (it may be anything, of any size).
        allowed = caller(request)
        _require_json(request)
        body = await _read_body(request, serve.max_body_bytes)
        req = parse_request(body, max_body_bytes=serve.max_body_bytes)
        framework = _framework(
            gateway,
            req.model,
            allowed,
            (req.psychoalign.framework if req.psychoalign else None) or request.headers.get(FRAMEWORK_HEADER),
        )
        _limits(req, gateway, req.model)
        if gateway.inflight >= serve.max_inflight:
            raise APIError(
                429,
                f"{gateway.inflight} negotiations are running, the limit is {serve.max_inflight}: retry shortly",
                type="rate_limit_error",
                code="rate_limit_exceeded",
                headers={"Retry-After": "1"},
            )
        conversation_id, source = _conversation(req, request, req.model)
        turn = sum(1 for m in req.messages if m.role == "user")
        # The cross-turn track (docs/negotiation.md): keys the server derives from this caller's
        # scope (deployment + API key) and the user messages, plus the conversation id if any.
        # Earlier turns are read back from the trace store, never taken from the client's history.
        track = conversation_ref(
            f"v1\x00{req.model}\x00{allowed[req.model]}",
            [m.text for m in req.messages if m.role == "user"],
            conversation_id,
        )
        context = build_context(
            gateway.deployment_context(framework), req.messages, format_instruction(req.response_format)
        )
        metadata: dict[str, Any] = {
            "source": "openai",
            "deployment": req.model,
            "api_key": allowed[req.model],
            "request_id": current_request_id(),
            "conversation_id": conversation_id,
            "conversation_source": source,
            "turn": turn,
        }
        if req.sampling.sent():  # the trace records what the client asked for
            metadata["sampling"] = req.sampling.sent()
        if req.response_format is not None and req.response_format.wants_json:
            metadata["response_format"] = req.response_format.type
        if req.user:
            metadata["user_hash"] = hashlib.sha256(req.user.encode()).hexdigest()[:16]
        if not req.stream:
            outcome = await gateway.negotiate(
                req.model,
                req.messages[-1].text,
                framework=framework,
                context=context,
                metadata=metadata,
                conversation=track,
            )
            decision = _decision(outcome, conversation_id, turn)
            if outcome.failed and serve.on_failure == "error":
                raise failure_error(outcome, serve.failure_retry_after_s, _headers(decision))
            reply = answer(outcome, req.sampling, req.response_format)
            if reply.format is not None:
                decision["response_format"] = reply.format
            return JSONResponse(_completion(outcome, decision, reply), headers=_headers(decision))
        return await _stream(gateway, req, framework, context, metadata, conversation_id, turn, track)

    async def check_body(request: Request, *, x_api_key: bool = False) -> tuple[dict[str, str], bytes]:
        """The checks' common edge: draining, credentials, JSON only, bounded body."""
        if gateway.draining:
            raise _draining()
        allowed = caller(request, x_api_key=x_api_key)
        _require_json(request)
        return allowed, await _read_body(request, serve.max_body_bytes)

    async def check(request: Request, req: CheckRequest, allowed: dict[str, str]) -> CheckResult:
        framework = _framework(
            gateway, req.model, allowed, req.framework or request.headers.get(FRAMEWORK_HEADER) or None
        )
        _check_limits(req.messages, gateway, req.model)
        context = build_context(gateway.deployment_context(framework), req.messages)
        result = await run_check(gateway, req.model, req.messages, framework=framework, context=context)
        gateway.metrics.checks.labels(req.model, result.checked, "blocked" if result.blocked else "passed").inc()
        return result

    @router.post("/guardrail/checks")
    async def guardrail_checks(request: Request) -> JSONResponse:
        """Check a request (deterministic checks only: no generation) or an answer (the EVALUATOR
        and the dual gate) without negotiating: web/checks.py."""
        allowed, body = await check_body(request)
        req = parse_check(body, max_body_bytes=serve.max_body_bytes)
        result = await check(request, req, allowed)
        return JSONResponse(result.body(req.model, current_request_id()))

    @router.post(LITELLM_GUARDRAIL_PATH)
    async def litellm_guardrail(request: Request) -> JSONResponse:
        """LiteLLM's Generic Guardrail API (pre_call: input_type "request"; post_call: "response").
        ``action`` is "BLOCKED" (with ``blocked_reason``) or "NONE"; a failed check blocks."""
        allowed, body = await check_body(request, x_api_key=True)
        default = next(iter(sorted(allowed)), "")
        req, _ = parse_litellm_check(body, max_body_bytes=serve.max_body_bytes, default_model=default)
        result = await check(request, req, allowed)
        if not result.blocked:
            return JSONResponse({"action": "NONE"})
        rules = ", ".join(sorted({h["rule_id"] for h in result.rule_hits})) or "the deployment's framework"
        why = result.failure or f"{result.checked} blocked by PsychoAlign ({rules})"
        return JSONResponse({"action": "BLOCKED", "blocked_reason": why})

    return router


def _count_limit(messages: list[ChatMessage], gateway: Gateway) -> None:
    most = gateway.settings.serve.max_messages
    if len(messages) > most:
        raise APIError(
            400,
            f"messages has {len(messages)} entries, over the limit of {most}: "
            "drop earlier turns or raise serve.max_messages",
            param="messages",
            code="context_length_exceeded",
        )


def _check_limits(messages: list[ChatMessage], gateway: Gateway, deployment: str) -> None:
    """The chat endpoint's size limits, for checks (the last message is the text checked)."""
    serve = gateway.settings.serve
    _count_limit(messages, gateway)
    limit = gateway.negotiator(deployment).params.max_request_chars
    total = sum(len(m.text) for m in messages)
    if total > limit + serve.max_conversation_chars:
        raise APIError(
            400,
            f"the messages hold {total} characters, over the limit of {limit + serve.max_conversation_chars}: "
            "shorten them or raise negotiation.max_request_chars / serve.max_conversation_chars",
            param="messages",
            code="context_length_exceeded",
        )


def _require_json(request: Request) -> None:
    """415 unless the body is declared JSON: a page can POST ``text/plain`` without a preflight,
    never ``application/json``."""
    declared = request.headers.get("content-type", "")
    media = declared.split(";", 1)[0].strip().lower()
    if media != "application/json":
        got = f"'{declared[:60]}'" if declared else "none"
        raise APIError(
            415,
            f"Content-Type must be application/json (got {got}): send the body as JSON with that header",
            param="Content-Type",
            code="unsupported_media_type",
        )


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused as soon as it is over ``limit`` bytes (never read whole first)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise _too_large(limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_large(limit: int) -> APIError:
    return APIError(
        413,
        f"request body is larger than the limit of {limit} bytes: shorten the conversation or raise "
        "serve.max_body_bytes",
        code="request_too_large",
    )


def _unknown_model(name: str, allowed: dict[str, str]) -> APIError:
    return APIError(
        404,
        f"The model '{name[:80]}' does not exist or you do not have access to it; "
        f"available: {', '.join(sorted(allowed))} (GET /v1/models)",
        param="model",
        code="model_not_found",
    )


def _draining() -> APIError:
    return APIError(
        503,
        "the server is shutting down: retry on another instance",
        type="server_error",
        code="server_shutting_down",
    )


def _framework(gateway: Gateway, model: str, allowed: dict[str, str], chosen: str | None) -> str:
    """The framework a request to ``model`` runs under: ``chosen`` (body or header) if that
    deployment lets clients select it, the deployment's own when none was chosen."""
    if model not in allowed:
        raise _unknown_model(model, allowed)
    deployment = gateway.deployments[model]
    if chosen is None:
        return deployment.framework
    if chosen not in deployment.frameworks():
        raise APIError(
            400,
            f"framework '{chosen[:80]}' is not selectable on model '{model}'; "
            f"choose one of: {', '.join(deployment.frameworks())}",
            param="psychoalign.framework",
            code="invalid_value",
        )
    return chosen


def _limits(req: ChatCompletionRequest, gateway: Gateway, deployment: str) -> None:
    serve = gateway.settings.serve
    _count_limit(req.messages, gateway)
    limit = gateway.negotiator(deployment).params.max_request_chars
    last = req.messages[-1]
    if len(last.text) > limit:
        raise APIError(
            400,
            f"messages[{len(req.messages) - 1}].content is {len(last.text)} characters, over the limit of {limit}: "
            "shorten it or raise negotiation.max_request_chars",
            param=f"messages[{len(req.messages) - 1}].content",
            code="context_length_exceeded",
        )
    earlier = sum(len(m.text) for m in req.messages[:-1])
    if earlier > serve.max_conversation_chars:
        raise APIError(
            400,
            f"the earlier messages hold {earlier} characters, over the limit of {serve.max_conversation_chars}: "
            "drop earlier turns or raise serve.max_conversation_chars",
            param="messages",
            code="context_length_exceeded",
        )


#: on_failure = "error": (HTTP status, code, what to tell the client) per failure class.
_FAILURES: dict[str, tuple[int, str, str]] = {
    "unavailable": (503, "upstream_unavailable", "the model endpoint is unavailable"),
    "timeout": (503, "upstream_timeout", "the negotiation ran out of time"),
    "shutdown": (503, "server_shutting_down", "the server is shutting down"),
    "invalid_reply": (502, "upstream_invalid_reply", "a model sent a reply that failed its schema"),
    "internal": (500, "internal_error", "the negotiation failed on the server"),
}


def failure_error(outcome: GatewayOutcome, retry_after_s: int, headers: dict[str, str]) -> APIError:
    """A failed negotiation as an HTTP error in OpenAI's shape (serve.on_failure = "error"):
    503 + Retry-After when retrying may help, 502 for a model's invalid reply, 500 for a bug."""
    status, code, what = _FAILURES[outcome.failure or "internal"]
    extra = dict(headers)
    if status == 503:
        extra["Retry-After"] = str(retry_after_s)
    # The class only: the trace's error line names model labels, which are the deployment's business.
    hint = "retry later" if status == 503 else f"trace {outcome.trace_id or '-'} has the details"
    return APIError(status, f"{what}; nothing was answered: {hint}", type="server_error", code=code, headers=extra)


def _completion(outcome: GatewayOutcome, decision: dict[str, Any], reply: Answer) -> dict[str, Any]:
    trace = outcome.trace
    created = int(trace.created_at.timestamp()) if trace is not None else int(time.time())
    return {
        "id": f"chatcmpl-{outcome.trace_id or 'failed'}",
        "object": "chat.completion",
        "created": created,
        "model": outcome.deployment,
        "system_fingerprint": _fingerprint(decision),
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": reply.content, "refusal": reply.refusal},
                "logprobs": None,
                "finish_reason": reply.finish,
            }
        ],
        "usage": _usage(outcome),
        "psychoalign": decision,
    }


#: One token of the length estimate: up to four word characters (with the whitespace before
#: them) or one other character, about what OpenAI's tokenizers make of English text.
_TOKEN = re.compile(r"\s*(?:\w{1,4}|[^\w\s])")


def shape_text(text: str, sampling: Sampling) -> tuple[str, str | None]:
    """The text the client receives under ``stop`` and ``max_tokens``, and why it was cut
    (``"stop"``, ``"length"``, or ``None``). As generation would: the text ends before the first
    stop sequence, and after ``max_tokens`` tokens (estimated, see ``_TOKEN``) if that comes first."""
    cut: str | None = None
    if sampling.stop:
        found = [i for i in (text.find(seq) for seq in sampling.stop) if i >= 0]
        if found:
            text, cut = text[: min(found)], "stop"
    if sampling.max_tokens is not None:
        for n, match in enumerate(_TOKEN.finditer(text), start=1):
            if n == sampling.max_tokens:
                if text[match.end() :].strip():
                    text, cut = text[: match.end()], "length"
                break
    return text, cut


def deliver(outcome: GatewayOutcome, sampling: Sampling) -> tuple[str, str]:
    """(text, finish_reason) for the client: a gate refusal is ``content_filter`` (cut or not),
    a text cut at ``max_tokens`` is ``length``, anything else ``stop``."""
    text, cut = shape_text(outcome.text, sampling)
    if outcome.gate_refused:
        return text, "content_filter"
    return text, "length" if cut == "length" else "stop"


#: The refusal a client gets when the negotiated answer does not fit its ``response_format``.
FORMAT_REFUSAL = "I can't provide an answer in the requested format."


def format_instruction(fmt: ResponseFormat | None) -> tuple[str, ...]:
    """The application instruction that asks the agents for JSON (added to the context)."""
    if fmt is None or not fmt.wants_json:
        return ()
    if fmt.type == "json_object":
        return ("Answer with one JSON object only: no prose before or after it, no code fence.",)
    schema = json.dumps(fmt.schema_, ensure_ascii=False, separators=(",", ":"))
    return (
        f"Answer with one JSON value only (no prose, no code fence) that validates against the JSON Schema "
        f"'{fmt.name}': {schema}",
    )


def format_problem(text: str, fmt: ResponseFormat) -> str | None:
    """Why ``text`` does not fit ``fmt`` (a class: ``not_json``, ``not_object``,
    ``schema_mismatch``, ``schema_error``), or ``None`` when it does. Parsed with the bounds of
    psychoalign.jsonguard; a schema that cannot be applied (an unresolvable ``$ref``, a pattern
    Python cannot compile) fails closed."""
    try:
        value = loads_bounded(text)
    except ValueError:  # JSONDecodeError, JSONLimitError, an over-long integer
        return "not_json"
    if fmt.type == "json_object":
        return None if isinstance(value, dict) else "not_object"
    schema = fmt.schema_ or {}
    try:
        error = next(iter(jsonschema.validators.validator_for(schema)(schema).iter_errors(value)), None)
    except Exception:  # whatever the schema makes the validator raise: the answer is withheld
        return "schema_error"
    return None if error is None else "schema_mismatch"


@dataclass(frozen=True)
class Answer:
    """The assistant message the client receives. ``format``: for a JSON ``response_format``,
    what the format gate found (``{"type", "valid", "problem"}``), else ``None``."""

    content: str | None
    refusal: str | None
    finish: str
    format: dict[str, Any] | None = None


def answer(outcome: GatewayOutcome, sampling: Sampling, fmt: ResponseFormat | None) -> Answer:
    """The delivered text (``deliver``) under the format gate. Without a JSON format a gate
    refusal is both content (chat apps read only that) and refusal. With one, the text must
    validate; anything else (a gate refusal, the fail-closed answer, text that is not JSON or
    does not match the schema, JSON cut by ``stop``/``max_tokens``) is a structured-outputs
    refusal: ``content`` null, ``refusal`` set, ``finish_reason: "content_filter"``."""
    text, finish = deliver(outcome, sampling)
    if fmt is None or not fmt.wants_json:
        return Answer(text, text if outcome.gate_refused else None, finish)
    if outcome.gate_refused or outcome.failed:
        why = "refused" if outcome.gate_refused else "failed"
        return Answer(None, text, "content_filter", {"type": fmt.type, "valid": False, "problem": why})
    problem = format_problem(text, fmt)
    if problem is not None:
        return Answer(None, FORMAT_REFUSAL, "content_filter", {"type": fmt.type, "valid": False, "problem": problem})
    return Answer(text, None, finish, {"type": fmt.type, "valid": True, "problem": None})


def _fingerprint(decision: dict[str, Any]) -> str | None:
    fw = decision.get("framework")
    return f"psychoalign-{fw['name']}-{fw['version']}-{fw['sha256'][:12]}" if fw else None


async def _stream(
    gateway: Gateway,
    req: ChatCompletionRequest,
    framework: str,
    context: str | None,
    metadata: dict[str, Any],
    conversation_id: str | None,
    turn: int,
    track: ConversationRef | None = None,
) -> StreamingResponse:
    serve = gateway.settings.serve
    events: asyncio.Queue[NegotiationEvent] = asyncio.Queue()
    run = asyncio.create_task(
        gateway.negotiate(
            req.model,
            req.messages[-1].text,
            framework=framework,
            context=context,
            metadata=metadata,
            on_event=events.put,
            conversation=track,
        )
    )
    # Wait until the trace exists (its id goes in the headers) or the negotiation is over.
    first: NegotiationEvent | None = None
    getter = asyncio.ensure_future(events.get())
    try:
        await asyncio.wait({getter, run}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        getter.cancel()
        run.cancel(msg="client disconnected")
        raise
    if getter.done():
        first = getter.result()
    else:
        getter.cancel()
    trace_id = first.trace_id if first is not None else (run.result().trace_id if run.done() else None)
    if run.done() and first is None and run.result().failed and serve.on_failure == "error":
        # Failed before the stream began: the error can still be an HTTP status.
        early = run.result()
        raise failure_error(early, serve.failure_retry_after_s, _headers(_decision(early, conversation_id, turn)))
    completion_id = f"chatcmpl-{trace_id or 'failed'}"
    created = int(time.time())
    include_usage = bool(req.stream_options and req.stream_options.include_usage)
    json_format = req.response_format is not None and req.response_format.wants_json

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        body: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": req.model,
            "system_fingerprint": None,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        body.update(extra)
        return _sse(body)

    async def body() -> AsyncIterator[bytes]:
        outcome: GatewayOutcome | None = None
        try:
            # With a JSON format the content may end up null (a refusal): it starts null, not "".
            opening = {"role": "assistant", "content": None if json_format else "", "refusal": None}
            yield chunk(opening) + (_comment(first) if first is not None else b"")
            while not run.done():
                getter = asyncio.ensure_future(events.get())
                done, _ = await asyncio.wait(
                    {getter, run}, timeout=serve.keepalive_s, return_when=asyncio.FIRST_COMPLETED
                )
                if getter in done:
                    yield _comment(getter.result()) + _pending(events)  # one write for what is queued
                else:
                    getter.cancel()
                    if not done:
                        yield b": keepalive\n\n"
            pending = _pending(events)  # progress that arrived with the end of the negotiation
            if pending:
                yield pending
            outcome = run.result()
        except Exception:  # a bug on our side: the stream still ends closed
            outcome = None
        finally:
            if not run.done():  # the client went away: stop negotiating, the trace is marked failed
                run.cancel(msg="client disconnected")
        if outcome is None:
            outcome = GatewayOutcome(
                text=template("fail_closed"),
                trace=None,
                trace_id=trace_id,
                deployment=req.model,
                failed=True,
                reason="error",
            )
        decision = _decision(outcome, conversation_id, turn)
        if outcome.failed and serve.on_failure == "error":
            # The status line is sent: an error event, as OpenAI streams do (its clients raise on it).
            failure = failure_error(outcome, serve.failure_retry_after_s, {})
            yield _sse({**error_body(failure), "psychoalign": decision}) + _sse("[DONE]")
            return
        # The gated text as separate SSE chunks, written together (one send for the whole tail),
        # after the format gate has checked all of it. A refusal goes out as refusal deltas, and
        # without a JSON format as content too (chat apps read only that).
        reply = answer(outcome, req.sampling, req.response_format)
        if reply.format is not None:
            decision["response_format"] = reply.format
        if reply.content is None:
            pieces = [{"refusal": p} for p in _chunks(reply.refusal or "", serve.stream_chunk_chars)]
        else:
            pieces = [
                {"content": p, "refusal": p} if reply.refusal is not None else {"content": p}
                for p in _chunks(reply.content, serve.stream_chunk_chars)
            ]
        tail = [chunk(piece) for piece in pieces]
        tail.append(chunk({}, reply.finish, psychoalign=decision))
        if include_usage:
            tail.append(
                _sse(
                    {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": req.model,
                        "system_fingerprint": None,
                        "choices": [],
                        "usage": _usage(outcome),
                    }
                )
            )
        tail.append(_sse("[DONE]"))
        yield b"".join(tail)

    headers = {"x-psychoalign-trace-id": trace_id or "", "cache-control": "no-cache", "x-accel-buffering": "no"}
    return StreamingResponse(body(), media_type="text/event-stream", headers=headers)
