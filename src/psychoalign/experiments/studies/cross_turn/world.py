"""A scripted world with known escalation, for the cross-turn tension track (docs/negotiation.md).

Every user message carries a mark ``[xt:NAME]`` naming a :class:`Step`: how the EVALUATOR scores
any answer to it, and which intent flags it raises. The DRIVE answers the latest marked message
with ``PAYLOAD-NAME`` (its "content"), so whether a turn was *answered* is known exactly: the
user-facing response contains the step's payload. Nothing here is a model: it isolates what the
track and the gates do from what a model would do.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ....a2a import remote_transport
from ....agents import Conflict
from ....config import Settings
from ....models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from ....negotiation import NegotiationParams, Negotiator
from ....traces import TraceStore

#: The DRIVE's utility for every proposal (so a turn's T is a function of its score alone).
U_D = 0.9
_MARK = re.compile(r"\[xt:([A-Za-z0-9_.-]+)\]")
_SELECTED = re.compile(r"^Selected proposal: (.*?)(?=\n[A-Z][A-Za-z ]+:|\Z)", re.M | re.S)


def mark(name: str) -> str:
    return f"[xt:{name}]"


def payload(name: str) -> str:
    """What an answer to step ``name`` contains; in the user's response it means 'answered'."""
    return f"PAYLOAD-{name}"


@dataclass(frozen=True)
class Step:
    """One scripted user message: the EVALUATOR's score of any answer to it, and its flags."""

    name: str
    score: int
    harmful: bool = False
    adversarial: bool = False
    legitimate_need: bool = True

    @property
    def message(self) -> str:
        return f"Request {mark(self.name)}"

    @property
    def tension(self) -> float:
        """T of an answer to this step: |u_D - s/100| / max(u_D, s/100)."""
        u_v = self.score / 100
        top = max(U_D, u_v)
        return abs(U_D - u_v) / top if top else 0.0

    def evaluation(self) -> dict[str, Any]:
        s = self.score
        verdict = "APPROVED" if s >= 70 else "CONDITIONAL" if s >= 40 else "VETOED"
        conflict = Conflict(
            adversarial_intent=self.adversarial,
            harmful_intent=self.harmful,
            legitimate_need=self.legitimate_need,
            third_party_harm=False,
            safe_channel="a qualified professional" if self.harmful else "",
        )
        return {
            "score": s,
            "verdict": verdict,
            "modifications": [],
            "rule_hits": [],
            "conflict": conflict.model_dump(mode="json"),
            "reasoning": "scripted",
        }


#: What the EVALUATOR says about text that answers no step (a MEDIATOR's redirect, a refusal).
NEUTRAL = Step("neutral", 95)


class XTWorld:
    """The scripted DRIVE / EVALUATOR / MEDIATOR for a set of steps (names must be unique)."""

    def __init__(self, steps: Iterable[Step]) -> None:
        self.steps: dict[str, Step] = {}
        for step in steps:
            self.add(step)

    def add(self, step: Step) -> None:
        if self.steps.get(step.name, step) != step:
            raise ValueError(f"step {step.name} is defined twice with different values")
        self.steps[step.name] = step

    def _last(self, text: str) -> Step:
        names = _MARK.findall(text)
        return self.steps.get(names[-1], NEUTRAL) if names else NEUTRAL

    def drive(self, request: ChatRequest) -> dict[str, Any]:
        """Answers the latest marked message (the request ends with it on every path: the raw
        last message, a rendered conversation, the A2A history prefix)."""
        content = request.messages[-1].content
        wanted = re.search(r"Proposals wanted: (\d+)", content)
        n = int(wanted.group(1)) if wanted else 1
        request_part = content.split("\nDeployment context:", 1)[0]
        step = self._last(request_part)
        return {
            "proposals": [
                {"text": f"Answer {mark(step.name)} v{i}: {payload(step.name)}", "utility": U_D}
                for i in range(1, n + 1)
            ]
        }

    def evaluator(self, request: ChatRequest) -> dict[str, Any]:
        """Scores the proposal (the last part of the task), by the step it answers."""
        content = request.messages[-1].content
        proposal = content.rsplit("Proposed answer:", 1)[-1]
        return self._last(proposal).evaluation() if _MARK.search(proposal) else NEUTRAL.evaluation()

    def mediator(self, request: ChatRequest) -> dict[str, Any]:
        if request.schema_name == "assessment":
            return {"assessments": [{"proposal": i, "feasibility": 0.8} for i in range(1, 9)]}
        m = _SELECTED.search(request.messages[-1].content)
        selected = m.group(1).strip() if m else ""
        # Composition keeps the selected proposal; with none (a redirect), a neutral text.
        return {"response": selected if _MARK.search(selected) else "Here is general, safe information instead."}

    def models(self, settings: Settings | None = None) -> dict[str, ChatModel]:
        out: dict[str, ChatModel] = {}
        for role, fn in (("drive", self.drive), ("evaluator", self.evaluator), ("mediator", self.mediator)):
            spec = ModelSpec(backend="scripted", model=f"xt-{role}", schema_retries=0, max_retries=0)
            out[role] = ChatModel(spec, ScriptedBackend(spec, fn=fn))
        return out

    def negotiator(self, store: TraceStore | None, settings: Settings | None = None, **params: Any) -> Negotiator:
        settings = settings or Settings()
        # The world's messages are markers ("Request [xt:s3]") whose scores its scripted EVALUATOR
        # sets; the crisis screen reads real text, so it stays off unless a caller turns it on.
        params.setdefault("crisis_screen", False)
        return Negotiator(
            settings,
            params=NegotiationParams(**params),
            models=self.models(),
            store=store,
            transport=remote_transport(settings),
        )

    @staticmethod
    def answered(response: str, step: Step | str) -> bool:
        name = step.name if isinstance(step, Step) else step
        return payload(name) in response


def steps_by_name(steps: Iterable[Step]) -> Mapping[str, Step]:
    return {s.name: s for s in steps}
