"""Prometheus metrics of one app, in the app's own registry (no process-global state)."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from .outcome import GatewayOutcome

_TENSION_BUCKETS = (0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)


class GatewayMetrics:
    """HTTP requests and latency; negotiations (/v1 and A2A) by status, state and defense, and
    their final tension; fail-closed count; tokens per agent role; guardrail checks; in-flight
    negotiations (/v1)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "psychoalign_http_requests", "HTTP requests.", ["method", "route", "status"], registry=r
        )
        self.latency = Histogram(
            "psychoalign_http_request_duration_seconds",
            "HTTP request latency (streams: until the last byte).",
            ["route"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.negotiations = Counter(
            "psychoalign_negotiations", "Negotiations served by the gateway.", ["deployment", "status"], registry=r
        )
        self.states = Counter("psychoalign_negotiation_states", "Final system states.", ["state"], registry=r)
        self.defenses = Counter("psychoalign_negotiation_defenses", "Defense mechanisms used.", ["defense"], registry=r)
        self.fail_closed = Counter(
            "psychoalign_fail_closed", "Negotiations answered with the fixed fail-closed refusal.", registry=r
        )
        self.tokens = Counter(
            "psychoalign_agent_tokens", "Model tokens spent, per agent role.", ["role", "kind"], registry=r
        )
        self.tension = Histogram(
            "psychoalign_negotiation_tension",
            "Final tension T of completed negotiations (/v1 and A2A).",
            ["deployment"],
            buckets=_TENSION_BUCKETS,
            registry=r,
        )
        self.checks = Counter(
            "psychoalign_guardrail_checks",
            "Guardrail checks (/v1/guardrail/checks, LiteLLM's guardrail API) by what was checked and the outcome.",
            ["deployment", "checked", "status"],
            registry=r,
        )
        self.inflight = Gauge("psychoalign_negotiations_in_flight", "Negotiations running now.", registry=r)
        # (metric, label values) -> its child: labels() validates and locks on every call, and a
        # negotiation updates ten children. The values are bounded (deployments, roles, states).
        self._children: dict[tuple[int, tuple[str, ...]], Any] = {}

    def child(self, metric: Counter | Histogram, *values: str) -> Any:
        """``metric.labels(*values)``, made once per label values."""
        key = (id(metric), values)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*values)
        return child

    def observe_outcome(self, outcome: GatewayOutcome) -> None:
        self.child(self.negotiations, outcome.deployment, "failed" if outcome.failed else "completed").inc()
        if outcome.failed:
            self.fail_closed.inc()
        final = outcome.trace.final if outcome.trace is not None else None
        if final is not None and not outcome.failed:
            self.child(self.states, final.state.value if final.state else "none").inc()
            self.child(self.defenses, final.defense.value if final.defense else "none").inc()
            if final.tension is not None:
                self.child(self.tension, outcome.deployment).observe(final.tension)
        for role, usage in outcome.usage.items():
            self.child(self.tokens, role, "prompt").inc(usage["prompt_tokens"])
            self.child(self.tokens, role, "completion").inc(usage["completion_tokens"])

    def render(self) -> bytes:
        return generate_latest(self.registry)
