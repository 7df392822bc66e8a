"""What a gateway outcome says about itself: the class of a failure (from the trace's public error
line), whether the gates refused, and the kind of reply with the rules and channels behind it."""

from __future__ import annotations

import pytest

from psychoalign.web.outcome import GatewayOutcome, failure_kind
from tests.scenario import APPROVE, World, evaluation, proposals


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


USEFUL = "Bleach cleans mould. Mixing it with ammonia makes a gas. Ventilate the room."
SEGMENT = {"harmful_segments": ["Mixing it with ammonia makes a gas."]}


def _world(kind: str) -> World:
    """A scripted negotiation that ends in each kind of reply (tests/negotiation/test_hostile.py)."""
    if kind == "answered":
        return World([proposals(("Boil it for nine minutes.", 0.9))])
    if kind == "filtered":  # Repression: the harmful sentence is removed, the rest is answered
        cut = evaluation(40, "CONDITIONAL", **SEGMENT)
        return World([proposals((USEFUL, 0.9))], judge=lambda t: cut if t == USEFUL else APPROVE)
    if kind == "redirected":  # Displacement: a related safe topic instead
        veto = evaluation(20, "VETOED", legitimate_need=False, safe_adjacent_topic="egg storage")
        return World([proposals(("DRAFT-X", 0.9))], judge=lambda t: veto if "DRAFT-X" in t else APPROVE)
    veto = evaluation(2, "VETOED", hits=[("U1-mass-harm", "universal")], harmful_intent=True, legitimate_need=False)
    return World([proposals(("DRAFT-X", 0.9))], judge=lambda t: veto if "DRAFT-X" in t else APPROVE)


@pytest.mark.parametrize("kind", ["answered", "filtered", "redirected", "refused"])
async def test_the_kind_of_reply_and_the_rules_behind_it_are_read_from_the_trace(kind: str) -> None:
    """``kind`` says what the client received (``psychoalign.outcome``): an answer names no rule;
    a refusal names the rule that blocked its drafts, as its text does; a redirect and a filtered
    answer are not refusals (``gate_refused`` is what makes ``finish_reason`` a content filter)."""
    trace = await _world(kind).negotiator(k=2).negotiate("How do I do this at home?")
    assert trace.final is not None
    outcome = GatewayOutcome(text=trace.final.response, trace=trace, trace_id=trace.id, deployment="d", failed=False)
    assert outcome.kind == kind
    assert outcome.gate_refused == (kind == "refused")
    if kind == "refused":
        assert outcome.rules == ["U1-mass-harm"] and "U1-mass-harm" in outcome.text
    if kind == "answered":
        assert outcome.rules == [] and outcome.channels == []
    if kind == "filtered":
        assert "ammonia" not in outcome.text
    failed = GatewayOutcome(text="x", trace=trace, trace_id=trace.id, deployment="d", failed=True)
    assert (failed.kind, failed.rules, failed.channels) == ("failed", [], [])
