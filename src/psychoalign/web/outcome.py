"""What the gateway returns for one negotiation: read by the /v1 API and counted by the metrics."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..traces.model import Trace


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
    def prompt_tokens(self) -> int:
        return sum(u["prompt_tokens"] for u in self.usage.values())

    @property
    def completion_tokens(self) -> int:
        return sum(u["completion_tokens"] for u in self.usage.values())
