"""Checks without an answer: ``POST /v1/guardrail/checks`` and LiteLLM's Generic Guardrail API.

PsychoAlign can join a gateway a team already runs instead of replacing it. A check reuses the
negotiation's own gates, outside a negotiation:

* **input** (the messages end with the user's): the framework's deterministic universal-rule
  checks on the request, and the embedded crisis check (a universal self-harm rule it fires
  blocks; a contextual one is reported). No model is called, nothing is generated.
* **output** (the messages end with the assistant's answer): that answer is scored as the
  negotiation scores a DRIVE draft: one EVALUATOR call against the deployment's framework, then
  the dual gate (Layer-1: the EVALUATOR's universal-rule hits and the deterministic checks; tau:
  score and verdict). The answer passes unchanged or is replaced by the fixed refusal naming the
  rules (``gated_text``). Tension and state follow the engine's definitions, with the answer
  taken as the DRIVE's (u_D = 1): T = 1 - u_V, u_V = 0 when the gate refused.

Nothing the EVALUATOR wrote in free text (reasoning, modifications) is returned: it can quote
the text it judged. A failure (the EVALUATOR unreachable, its reply invalid) fails closed:
status ``blocked`` with ``failure`` set, never a pass.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any, Literal

from ..agents.messages import EvaluateTask
from ..agents.schemas import Evaluation
from ..errors import PsychoAlignError, public_message
from ..frameworks import Framework
from ..negotiation.bus import MessageBus
from ..negotiation.defense import template
from ..negotiation.gates import Layer1Enforcer, TauFilter, apply_gates, canonical_hits
from ..negotiation.tension import classify_state, tension
from ..traces.model import SystemState
from .gateway import Gateway
from .openai_schema import ChatMessage
from .outcome import failure_kind

_log = logging.getLogger(__name__)

Checked = Literal["input", "output"]
#: What a client is told when the EVALUATOR could not judge (the check then blocks).
_FAILED = {
    "unavailable": "the evaluator is unavailable: the check failed closed",
    "timeout": "the evaluator timed out: the check failed closed",
    "shutdown": "the server is shutting down: the check failed closed",
    "invalid_reply": "the evaluator's reply failed its schema: the check failed closed",
    "internal": "the check failed on the server: it failed closed",
}


@dataclass
class CheckResult:
    """What one check decided. ``gated_text`` is what a user may be shown: the answer when it
    passed, the fixed refusal when it did not (output checks); ``None`` for input checks."""

    checked: Checked
    blocked: bool
    framework: dict[str, str]
    reasons: list[str] = field(default_factory=list)
    rule_hits: list[dict[str, str]] = field(default_factory=list)
    verdict: str | None = None
    score: int | None = None
    tension: float | None = None
    state: str | None = None
    gated_text: str | None = None
    failure: str | None = None
    usage: dict[str, int] = field(default_factory=dict)

    def body(self, deployment: str, request_id: str) -> dict[str, Any]:
        """The response of ``/v1/guardrail/checks`` (``status`` and ``rails_status`` as NeMo
        Guardrails' checks API names them)."""
        status = "blocked" if self.blocked else "success"
        return {
            "status": status,
            "rails_status": {f"psychoalign {self.checked}": {"status": status}},
            "checked": self.checked,
            "verdict": self.verdict,
            "score": self.score,
            "tension": self.tension,
            "state": self.state,
            "rule_hits": self.rule_hits,
            "reasons": self.reasons,
            "gated_text": self.gated_text,
            "failure": self.failure,
            "psychoalign": {
                "deployment": deployment,
                "framework": self.framework,
                "usage": self.usage,
                "request_id": request_id,
            },
        }


async def run_check(
    gateway: Gateway, deployment: str, messages: list[ChatMessage], *, framework: str, context: str | None
) -> CheckResult:
    """Check the last message of ``messages`` (see the module doc). Never raises for a model
    failure: the result is then ``blocked`` with ``failure`` set."""
    negotiator = gateway.negotiator(deployment)
    fw = gateway.loaded_framework(framework)
    stamp = fw.stamp.model_dump(mode="json")
    last = messages[-1]
    users = [m.text for m in messages[:-1] if m.role == "user"]
    request = users[-1] if users else ""
    # an answer is checked in its request's context (a dose for the child the request, or an
    # earlier user turn, names)
    layer1 = Layer1Enforcer(fw, request, users[:-1]) if last.role != "user" else Layer1Enforcer(fw)
    if last.role == "user":
        hits = layer1.matches(last.text, model_text=False)
        rule_hits = [{"rule_id": rule_id, "layer": "universal"} for rule_id, _ in hits]
        reasons = layer1.deterministic(last.text, model_text=False)  # remembered: not matched again
        # The crisis check on the request (no model call): a person at risk is flagged under the
        # framework's self-harm rule whatever the deployment's EVALUATOR is; a universal one blocks.
        crisis = await negotiator.screen_crisis(last.text, fw, always=True)
        for rule_id in crisis.rules if crisis is not None else []:
            layer = fw.layer_of(rule_id)
            hit = {"rule_id": rule_id, "layer": layer.value if layer is not None else "universal"}
            if hit not in rule_hits:
                rule_hits.append(hit)
                reasons.append(f"{rule_id}: the crisis check fired (a person may be at risk)")
        return CheckResult(
            checked="input",
            blocked=any(h["layer"] == "universal" for h in rule_hits),
            framework=stamp,
            reasons=reasons,
            rule_hits=rule_hits,
        )
    answer = last.text
    bus = MessageBus(negotiator.transport)
    task = EvaluateTask(
        request=request,
        context=context or fw.deployment_context,
        proposal=answer,
        earlier=layer1.earlier,
        framework=fw.payload(),
    )
    evaluation: Evaluation | None = None
    failure: str | None = None
    try:
        reply = await bus.send("mediator", "evaluator", task)
        evaluation = canonical_hits(reply.output, fw)
    except PsychoAlignError as exc:  # the class only (the error line names model labels)
        _log.warning("guardrail check failed closed: %s", public_message(exc))
        failure = _FAILED[failure_kind(public_message(exc))]
    except Exception as exc:  # a bug: fail closed
        _log.warning("guardrail check failed: %r", exc)
        failure = _FAILED["internal"]
    stats = bus.stats["evaluator"]
    usage = {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.completion_tokens, "calls": stats.calls}
    tau = TauFilter(negotiator.params.tau)
    gate = apply_gates(layer1, tau, answer, evaluation)
    blocked = not gate.admissible
    u_v = 0.0 if blocked or evaluation is None else evaluation.score / 100
    t = tension(1.0, u_v)
    state = classify_state(
        final_tension=t,
        u_d=1.0,
        u_v=u_v,
        round_tensions=[t],
        converged=True,
        threshold=negotiator.params.healthy_threshold,
    )
    if blocked:  # as the engine does for an answer overruled at the gate: never an equilibrium
        state = SystemState.DRIVE_DOMINANT
    deterministic = [rule_id for rule_id, _ in layer1.matches(answer)]  # as apply_gates matched it (remembered)
    rule_hits = [{"rule_id": h.rule_id, "layer": h.layer.value} for h in (evaluation.rule_hits if evaluation else [])]
    rule_hits += [{"rule_id": rule_id, "layer": "universal"} for rule_id in deterministic]
    return CheckResult(
        checked="output",
        blocked=blocked,
        framework=stamp,
        reasons=gate.reasons,
        rule_hits=rule_hits,
        verdict=evaluation.verdict.value if evaluation is not None else None,
        score=evaluation.score if evaluation is not None else None,
        tension=round(t, 4) if evaluation is not None else None,  # no judgement: no tension to report
        state=state.value if evaluation is not None else None,
        gated_text=(_refusal(fw, [h["rule_id"] for h in rule_hits]) if evaluation else template("fail_closed"))
        if blocked
        else answer,
        failure=failure,
        usage=usage,
    )


def _refusal(fw: Framework, rule_ids: list[str]) -> str:
    """The fixed refusal (no model text), naming the framework's rules the answer conflicted
    with, as the negotiation's own refusal does."""
    rules: list[str] = []
    for rule_id in rule_ids:
        rule = fw.rule(rule_id)
        if rule is not None and f"{rule.id} ({rule.text})" not in rules:
            rules.append(f"{rule.id} ({rule.text})")
    named = "; ".join(rules[:3]) or "the safety rules of this deployment"
    return template("rationalization", rules=named, alternative=template("default_alternative"))
