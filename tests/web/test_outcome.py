"""What a gateway outcome says about itself: the class of a failure (from the trace's public error
line) and whether the gates refused."""

from __future__ import annotations

import pytest

from psychoalign.web.outcome import GatewayOutcome, failure_kind


@pytest.mark.parametrize(
    ("reason", "kind"),
    [
        ("server shutting down: negotiation failed closed", "shutdown"),
        ("cancelled: server shutting down: negotiation failed closed", "shutdown"),
        ("negotiation exceeded timeout_s=120", "timeout"),
        ("evaluator: openai:judge: model endpoint timed out (gave up after 3 attempts)", "timeout"),
        ("evaluator: openai:judge: connection refused by the model endpoint (gave up after 1 attempts)", "unavailable"),
        ("drive: openai:m: model endpoint returned HTTP 503 (gave up after 3 attempts)", "unavailable"),
        ("drive: scripted:m: reply did not match the 'drive_proposals' schema at proposals[0].text", "invalid_reply"),
        ("drive: scripted:m: reply did not match the 'x' schema: not usable JSON (JSON nested …)", "invalid_reply"),
        ("internal error (KeyError)", "internal"),
        (None, "unavailable"),
    ],
)
def test_failure_kind_reads_the_class_from_the_public_error(reason: str | None, kind: str) -> None:
    assert failure_kind(reason) == kind
    outcome = GatewayOutcome(text="x", trace=None, trace_id=None, deployment="d", failed=True, reason=reason)
    assert outcome.failure == kind and not outcome.gate_refused


def test_an_answer_has_no_failure() -> None:
    outcome = GatewayOutcome(text="x", trace=None, trace_id=None, deployment="d", failed=False)
    assert outcome.failure is None and not outcome.gate_refused
