"""The reply of ``/v1/chat/completions``: the decision the client is shown, failures as HTTP
errors, and the assistant message built from a negotiation's outcome under the client's
sampling (``stop``, ``max_tokens``), ``response_format`` and ``tools`` (the answer's gates)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from ..frameworks import Framework, FrameworkStamp
from ..jsonguard import loads_bounded
from ..negotiation.events import EventHook
from ..negotiation.progressive import WindowStream
from ..negotiation.track import ConversationRef
from .errors import APIError
from .gateway import Gateway
from .openai_schema import ChatCompletionRequest, ResponseFormat, Sampling
from .openai_tools import Tools, gated_call
from .ops import current_request_id
from .outcome import GatewayOutcome


@dataclass
class Prepared:
    """One request, checked and ready to negotiate: what the negotiation and the reply need.
    ``answer_check``: the tool-call gate; ``extra_usage``: the EVALUATOR calls that screened
    tool results before the negotiation (counted in the answer's usage)."""

    req: ChatCompletionRequest
    framework: str
    context: str | None
    metadata: dict[str, Any]
    conversation_id: str | None
    turn: int
    track: ConversationRef | None = None
    answer_check: Callable[[str], list[str]] | None = None
    extra_usage: dict[str, int] | None = None

    async def run(
        self, gateway: Gateway, *, on_event: EventHook | None = None, stream: WindowStream | None = None
    ) -> GatewayOutcome:
        outcome = await gateway.negotiate(
            self.req.model,
            self.req.request_text,
            framework=self.framework,
            context=self.context,
            metadata=self.metadata,
            on_event=on_event,
            conversation=self.track,
            answer_check=self.answer_check,
            stream=stream,
            # the user turns before the request (a dose is checked for the child one of them names);
            # a client that sends only its last message: the conversation's stored turns
            earlier=[m.text for m in self.req.messages[: self.req.request_index] if m.role == "user"] or None,
        )
        if self.extra_usage:
            spent = outcome.usage.setdefault("evaluator", {"prompt_tokens": 0, "completion_tokens": 0, "calls": 0})
            for key, value in self.extra_usage.items():
                spent[key] = spent.get(key, 0) + value
        return outcome


def public_models(models: dict[str, str]) -> dict[str, str]:
    """Role -> ``backend:model`` as a client may see it: a model file's name without its folder,
    and a remote agent as ``a2a`` (its address is the deployment's business)."""
    out: dict[str, str] = {}
    for role, label in models.items():
        backend, _, model = label.partition(":")
        if backend == "a2a":
            out[role] = "a2a"
        elif backend in ("local", "classifier"):
            name = model.replace("\\", "/").rsplit("/", 1)[-1]
            out[role] = f"{backend}:{name}"
        else:
            out[role] = label
    return out


def decision_body(outcome: GatewayOutcome, conversation_id: str | None, turn: int) -> dict[str, Any]:
    trace = outcome.trace
    final = trace.final if trace is not None else None
    fw = trace.framework if trace is not None else None
    failure = None
    if outcome.failed:
        failure = {"shutdown": "shutdown", "timeout": "timeout"}.get(outcome.failure or "", "error")
    return {
        "trace_id": outcome.trace_id,
        "status": "failed" if outcome.failed else "completed",
        # what the client received, machine-readable (the text may be a fixed refusal or redirect)
        "outcome": outcome.kind,
        "rules": outcome.rules,
        "channels": outcome.channels,
        "failure": failure,
        "state": final.state.value if final is not None and final.state and not outcome.failed else None,
        "tension": final.tension if final is not None and not outcome.failed else None,
        "defense": final.defense.value if final is not None and final.defense and not outcome.failed else None,
        "composed_by": final.composed_by if final is not None else "fallback",
        "framework": fw.model_dump(mode="json") if fw is not None else None,
        # which DRIVE, EVALUATOR and MEDIATOR models produced the answer
        "models": public_models(trace.models) if trace is not None else {},
        "rounds": len(trace.rounds) if trace is not None else 0,
        "converged": trace.converged if trace is not None else False,
        "conversation_id": conversation_id,
        "turn": turn,
        "usage": outcome.usage,
        "request_id": current_request_id(),
    }


def decision_headers(decision: dict[str, Any]) -> dict[str, str]:
    tension = decision["tension"]
    return {
        "x-psychoalign-trace-id": decision["trace_id"] or "",
        "x-psychoalign-status": decision["status"],
        "x-psychoalign-outcome": decision["outcome"],
        "x-psychoalign-tension": f"{tension:.4f}" if tension is not None else "none",
        "x-psychoalign-state": decision["state"] or "none",
        "x-psychoalign-defense": decision["defense"] or "none",
    }


def usage_body(outcome: GatewayOutcome) -> dict[str, int]:
    return {
        "prompt_tokens": outcome.prompt_tokens,
        "completion_tokens": outcome.completion_tokens,
        "total_tokens": outcome.prompt_tokens + outcome.completion_tokens,
    }


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


def completion_body(outcome: GatewayOutcome, decision: dict[str, Any], reply: Answer) -> dict[str, Any]:
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
                "message": reply.message(),
                "logprobs": None,
                "finish_reason": reply.finish,
            }
        ],
        "usage": usage_body(outcome),
        "psychoalign": decision,
    }


#: One token of the length estimate: up to four word characters (with the whitespace before
#: them) or one other character, about what OpenAI's tokenizers make of English text.
_TOKEN = re.compile(r"\s*(?:\w{1,4}|[^\w\s])")


def shape_text(text: str, sampling: Sampling, lead: int = 0) -> tuple[str, str | None]:
    """The text the client receives under ``stop`` and ``max_tokens``, and why it was cut
    (``"stop"``, ``"length"``, or ``None``), as generation would: a stop sequence ends the text
    (before it) only when it is complete within the first ``max_tokens`` tokens (estimated, see
    ``_TOKEN``); one that completes later is never generated, so the text ends after
    ``max_tokens`` tokens with ``"length"``. Of several stop sequences, the one completed first
    wins (ties: the one starting first). The first ``lead`` characters (a known hazard's vetted
    warning, GatewayOutcome.lead) are never cut: their tokens count against ``max_tokens`` and the
    budget left applies after them; when they use it all, they go whole with ``"length"`` (a
    deliberate deviation from generation, docs/gateway.md), and a stop sequence is looked for
    after them only."""
    head, body = text[:lead], text[lead:]
    limit_end: int | None = None
    if sampling.max_tokens is not None:
        budget = sampling.max_tokens - sum(1 for _ in _TOKEN.finditer(head))
        if budget <= 0:
            if body.strip():
                return head, "length"
        else:
            for n, match in enumerate(_TOKEN.finditer(body), start=1):
                if n == budget:
                    if body[match.end() :].strip():
                        limit_end = match.end()
                    break
    found = [(i + len(seq), i) for seq in sampling.stop for i in (body.find(seq),) if i >= 0]
    if found:
        stop_end, stop_start = min(found)
        if limit_end is None or stop_end <= limit_end:
            return head + body[:stop_start], "stop"
    if limit_end is not None:
        return head + body[:limit_end], "length"
    return text, None


def deliver(outcome: GatewayOutcome, sampling: Sampling) -> tuple[str, str]:
    """(text, finish_reason) for the client: a gate refusal is ``content_filter`` (cut or not),
    a text cut at ``max_tokens`` is ``length``, anything else ``stop``. A leading known-hazard
    warning is never cut (:func:`shape_text`)."""
    text, cut = shape_text(outcome.text, sampling, outcome.lead)
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
        value = loads_bounded(text, strict=True)  # NaN would reach the client as content it cannot parse
    except ValueError:  # JSONDecodeError, JSONLimitError, NonFiniteError, an over-long integer
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
    tool_calls: list[dict[str, Any]] = field(default_factory=list)

    def message(self) -> dict[str, Any]:
        out: dict[str, Any] = {"role": "assistant", "content": self.content, "refusal": self.refusal}
        if self.tool_calls:
            out["tool_calls"] = self.tool_calls
        return out


def answer(
    outcome: GatewayOutcome,
    sampling: Sampling,
    fmt: ResponseFormat | None,
    tools: Tools | None = None,
    framework: str | Framework = "general",
) -> Answer:
    """The delivered text (``deliver``) under the format gate. Without a JSON format a gate
    refusal is both content (chat apps read only that) and refusal. With one, the text must
    validate; anything else (a gate refusal, the fail-closed answer, text that is not JSON or
    does not match the schema, JSON cut by ``stop``/``max_tokens``) is a structured-outputs
    refusal: ``content`` null, ``refusal`` set, ``finish_reason`` as without a format
    (``content_filter`` for a gate refusal, ``length`` for a cut at ``max_tokens``, else
    ``stop``, OpenAI's for a refusal). With
    ``tools``, a gated final text that is an admissible call is returned as ``tool_calls``
    (``finish_reason: "tool_calls"``); ``stop`` and ``max_tokens`` never cut a call."""
    if tools is not None and tools.active and not outcome.failed and not outcome.gate_refused:
        call = gated_call(outcome.text, tools, framework, outcome.trace_id)
        if call is not None:
            return Answer(None, None, "tool_calls", tool_calls=[call])
    text, finish = deliver(outcome, sampling)
    if fmt is None or not fmt.wants_json:
        return Answer(text, text if outcome.gate_refused else None, finish)
    if outcome.gate_refused or outcome.failed:
        why = "refused" if outcome.gate_refused else "failed"
        return Answer(None, text, finish, {"type": fmt.type, "valid": False, "problem": why})
    problem = format_problem(text, fmt)
    if problem is not None:
        # OpenAI's structured-outputs refusal: finish "stop" (the client's parse returns parsed None
        # and the refusal), "length" when max_tokens cut the JSON (its parse raises for that).
        return Answer(None, FORMAT_REFUSAL, finish, {"type": fmt.type, "valid": False, "problem": problem})
    return Answer(text, None, finish, {"type": fmt.type, "valid": True, "problem": None})


def _fingerprint(decision: dict[str, Any]) -> str | None:
    fw = decision.get("framework")
    return fingerprint(FrameworkStamp.model_validate(fw)) if fw else None


def fingerprint(stamp: FrameworkStamp) -> str:
    """``system_fingerprint``: what decided the answer is the framework, by version and hash."""
    return f"psychoalign-{stamp.name}-{stamp.version}-{stamp.sha256[:12]}"
