"""What the gateway returns for one negotiation: read by the /v1 API and counted by the metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..judges.outcome import REFUSING_DEFENSES, ReplyKind, reply_channels, reply_kind, reply_rules
from ..traces.model import Trace

FailureKind = Literal["shutdown", "timeout", "invalid_reply", "internal", "unavailable"]


def failure_kind(reason: str | None) -> FailureKind:
    """The class of a failed negotiation, read from the trace's public error line (the engine
    records the class of failure there: "<role>: <message>", "negotiation exceeded timeout_s",
    "internal error (<type>)", "cancelled: server shutting down …")."""
    text = reason or ""
    if "shutting down" in text:
        return "shutdown"
    if "timeout" in text or "timed out" in text:
        return "timeout"
    if any(s in text for s in ("did not match", "not a chat completion", "not usable JSON")):
        return "invalid_reply"
    if text.startswith(("internal error", "cancelled")):
        return "internal"
    return "unavailable"  # the endpoint refused, could not be reached, or answered 4xx/5xx


@dataclass
class GatewayOutcome:
    """What a client receives: ``text`` is gated model text or a fixed template, nothing else."""

    text: str
    trace: Trace | None
    trace_id: str | None
    deployment: str
    failed: bool
    reason: str | None = None
    usage: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def failure(self) -> FailureKind | None:
        return failure_kind(self.reason) if self.failed else None

    @property
    def gate_refused(self) -> bool:
        """The gates refused (a fixed template, the dual-gate fallback, or a refusing defense):
        what OpenAI's clients know as a content filter. A failed negotiation is not a refusal."""
        final = self.trace.final if self.trace is not None else None
        if self.failed or final is None:
            return False
        return final.composed_by in ("template", "fallback") or final.fallback or final.defense in REFUSING_DEFENSES

    @property
    def kind(self) -> ReplyKind:
        """What the client received (judges/outcome.reply_kind); a negotiation that failed is
        ``failed`` even when its trace did not record it (a stream cut short). A redirect written
        from framework text alone is also a content filter (:attr:`gate_refused`)."""
        return "failed" if self.failed else reply_kind(self.trace)

    @property
    def channels(self) -> list[str]:
        return [] if self.failed else reply_channels(self.trace)

    @property
    def rules(self) -> list[str]:
        return [] if self.failed else reply_rules(self.trace)

    @property
    def lead(self) -> int:
        """Characters at the start of ``text`` that a client's ``max_tokens`` or ``stop`` never
        cuts: through the last known-hazard warning the engine put there (they lead the reply, or
        follow a crisis message that opens it; docs/gateway.md). 0 when there is none."""
        final = self.trace.final if self.trace is not None else None
        if self.failed or final is None or final.response != self.text:
            return 0
        ends = [
            i + len(c.text)
            for c in final.channels or ()
            if c.placement == "warning"
            for i in (self.text.find(c.text),)
            if i >= 0
        ]
        return max(ends, default=0)

    @property
    def prompt_tokens(self) -> int:
        return sum(u["prompt_tokens"] for u in self.usage.values())

    @property
    def completion_tokens(self) -> int:
        return sum(u["completion_tokens"] for u in self.usage.values())
