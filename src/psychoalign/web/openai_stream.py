"""``stream: true`` on ``/v1/chat/completions``: OpenAI's chunk format, gated.

By default no text is sent before the gates have passed all of it: while the negotiation runs the
stream carries only SSE comments (progress, keep-alive), then the final text in chunks. If
anything fails, the stream ends with the fixed fail-closed refusal.

With progressive streaming (``serve.stream_window``; negotiation/progressive.py) the DRIVE's draft
goes out window by window, each as soon as the gates passed it with its look-ahead: the stream
sends exactly the windows the engine released, in order, and nothing else of the draft. A veto
mid-way ends the stream with the refusal (``finish_reason: "content_filter"``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import StreamingResponse

from ..errors import ConfigError
from ..negotiation.defense import template
from ..negotiation.events import NegotiationEvent
from ..negotiation.progressive import WindowStream
from .errors import error_body
from .gateway import Gateway
from .openai_reply import (
    Prepared,
    answer,
    decision_body,
    decision_headers,
    failure_error,
    fingerprint,
    usage_body,
)
from .outcome import GatewayOutcome


@dataclass(frozen=True)
class Released:
    """A window of the draft the gates passed (progressive streaming); ``written`` is set once
    the stream has handed it to the server."""

    text: str
    written: asyncio.Event = field(default_factory=asyncio.Event, compare=False)


Item = NegotiationEvent | Released


def _chunks(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return f"data: {payload}\n\n".encode()


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


async def stream_reply(gateway: Gateway, prepared: Prepared, *, progressive: bool) -> StreamingResponse:
    serve = gateway.settings.serve
    req = prepared.req
    items: asyncio.Queue[Item] = asyncio.Queue()

    releases: list[Released] = []

    async def release(text: str) -> None:
        item = Released(text)
        releases.append(item)
        await items.put(item)
        if len(releases) == 1:
            # The first window is written before the checks of the later ones start: with an
            # in-process EVALUATOR they would otherwise take the CPU its write waits for. Bounded:
            # a stream that is not being read does not hold up the negotiation.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(serve.keepalive_s):
                    await item.written.wait()
        else:
            await asyncio.sleep(0)  # let the stream write it before the negotiation goes on checking

    window = WindowStream(serve.stream_window, serve.stream_lookahead, release) if progressive else None
    run = asyncio.create_task(prepared.run(gateway, on_event=items.put, stream=window))
    # Wait until the trace exists (its id goes in the headers) or the negotiation is over.
    first: Item | None = None
    getter = asyncio.ensure_future(items.get())
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
    started = first.trace_id if isinstance(first, NegotiationEvent) else None
    trace_id = started or (run.result().trace_id if run.done() else None)
    if run.done() and first is None and run.result().failed and serve.on_failure == "error":
        # Failed before the stream began: the error can still be an HTTP status.
        early = run.result()
        headers = decision_headers(decision_body(early, prepared.conversation_id, prepared.turn))
        raise failure_error(early, serve.failure_retry_after_s, headers)
    completion_id = f"chatcmpl-{trace_id or 'failed'}"
    created = int(time.time())
    include_usage = bool(req.stream_options and req.stream_options.include_usage)
    json_format = req.response_format is not None and req.response_format.wants_json
    tooled = req.tools is not None and req.tools.active
    sent: list[str] = []  # released windows written to the client, in order
    try:  # every chunk names it, as the unstreamed completion does (a built-in: parsed once)
        system_fingerprint: str | None = fingerprint(gateway.loaded_framework(prepared.framework).stamp)
    except ConfigError:  # a framework file gone bad: the negotiation fails closed on it too
        system_fingerprint = None

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        body: dict[str, Any] = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": req.model,
            "system_fingerprint": system_fingerprint,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
        if include_usage:
            body["usage"] = None
        body.update(extra)
        return _sse(body)

    rendered: list[Released] = []  # windows in the write under way

    def render(item: Item) -> bytes:
        if isinstance(item, Released):
            sent.append(item.text)
            rendered.append(item)
            return chunk({"content": item.text})
        return _comment(item)

    def written() -> None:
        """The last write was handed to the server: the windows in it are out."""
        for item in rendered:
            item.written.set()
        rendered.clear()

    def pending() -> bytes:
        """Everything already queued, in order (one write)."""
        out = b""
        while not items.empty():
            out += render(items.get_nowait())
        return out

    async def body() -> AsyncIterator[bytes]:
        outcome: GatewayOutcome | None = None
        getter: asyncio.Future[Item] | None = None
        try:
            # With a JSON format the content may end up null (a refusal), with tools null (a call,
            # as unstreamed and as OpenAI streams one): it starts null, not "".
            opening = {"role": "assistant", "content": None if json_format or tooled else "", "refusal": None}
            yield chunk(opening) + (render(first) if first is not None else b"")
            written()
            while not run.done():
                getter = asyncio.ensure_future(items.get())
                done, _ = await asyncio.wait(
                    {getter, run}, timeout=serve.keepalive_s, return_when=asyncio.FIRST_COMPLETED
                )
                if getter in done:
                    yield render(getter.result()) + pending()
                    written()
                    continue
                getter.cancel()
                if getter.done() and not getter.cancelled():  # it got an item as it was cancelled
                    yield render(getter.result())
                    written()
                elif not done:
                    yield b": keepalive\n\n"
            tail = pending()  # what arrived with the end of the negotiation
            if tail:
                yield tail
            outcome = run.result()
        except Exception:  # a bug on our side: the stream still ends closed
            outcome = None
        finally:
            if getter is not None:  # the client went away mid-wait: no reader left behind
                getter.cancel()
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
        decision = decision_body(outcome, prepared.conversation_id, prepared.turn)
        if outcome.failed and serve.on_failure == "error":
            # The status line is sent: an error event, as OpenAI streams do (its clients raise on it).
            failure = failure_error(outcome, serve.failure_retry_after_s, {})
            yield _sse({**error_body(failure), "psychoalign": decision}) + _sse("[DONE]")
            return
        yield b"".join(_tail(outcome, decision, "".join(sent)))

    def _tail(outcome: GatewayOutcome, decision: dict[str, Any], released: str) -> list[bytes]:
        """The gated text (what was not released already) as separate SSE chunks, written
        together, after the format gate has checked all of it. A refusal goes out as refusal
        deltas, and without a JSON format as content too (chat apps read only that); an
        admissible tool call as one ``tool_calls`` delta."""
        reply = answer(outcome, req.sampling, req.response_format, req.tools, prepared.framework)
        if reply.format is not None:
            decision["response_format"] = reply.format
        if reply.tool_calls:
            pieces: list[dict[str, Any]] = [{"tool_calls": [{"index": i, **c} for i, c in enumerate(reply.tool_calls)]}]
        elif reply.content is None:
            pieces = [{"refusal": p} for p in _chunks(reply.refusal or "", serve.stream_chunk_chars)]
        else:
            content = reply.content
            if released:  # the rest after the windows already sent (a cut stream: the refusal)
                content = content[len(released) :] if content.startswith(released) else f"\n\n{content}"
            pieces = [
                {"content": p, "refusal": p} if reply.refusal is not None else {"content": p}
                for p in (_chunks(content, serve.stream_chunk_chars) if content or not released else [])
            ]
        tail = [chunk(piece) for piece in pieces]
        tail.append(chunk({}, reply.finish, psychoalign=decision))
        if include_usage:
            usage = {"id": completion_id, "object": "chat.completion.chunk", "created": created, "model": req.model}
            tail.append(
                _sse({**usage, "system_fingerprint": system_fingerprint, "choices": [], "usage": usage_body(outcome)})
            )
        tail.append(_sse("[DONE]"))
        return tail

    headers = {"x-psychoalign-trace-id": trace_id or "", "cache-control": "no-cache", "x-accel-buffering": "no"}
    return StreamingResponse(body(), media_type="text/event-stream", headers=headers)
