"""Deterministic scripted agents for negotiation tests: a tiny world described by data."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from psychoalign.config import Settings
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.models.crisis_check import CrisisCheck, CrisisScreen
from psychoalign.models.heads import Head
from psychoalign.negotiation import NegotiationParams, Negotiator
from psychoalign.traces import TraceStore


def conflict(**kw: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "adversarial_intent": False,
        "harmful_intent": False,
        "legitimate_need": True,
        "harmful_segments": [],
        "third_party_harm": False,
        "stakeholders": [],
        "safe_adjacent_topic": "",
        "safe_channel": "",
    }
    base.update(kw)
    return base


def evaluation(
    score: int, verdict: str, *, hits: Sequence[tuple[str, str]] = (), mods: Sequence[str] = (), **c: Any
) -> dict[str, Any]:
    return {
        "score": score,
        "verdict": verdict,
        "modifications": list(mods),
        "rule_hits": [{"rule_id": r, "layer": layer} for r, layer in hits],
        "conflict": conflict(**c),
        "reasoning": "scripted",
    }


APPROVE = evaluation(95, "APPROVED")


def proposals(*items: tuple[str, float]) -> dict[str, Any]:
    return {"proposals": [{"text": t, "utility": u} for t, u in items]}


def _field(request: ChatRequest, name: str, until: str | None = None) -> str:
    """The value after ``name:`` in the last user message: to ``until`` or to the end."""
    last = request.messages[-1].content
    end = rf"(?=\n{until}:)" if until else r"\Z"
    m = re.search(rf"^{name}: (.*?){end}", last, re.M | re.S)
    return m.group(1).strip() if m else ""


@dataclass
class World:
    """``drive_rounds[i]`` is the DRIVE's reply in round i+1 (the last repeats).
    ``judge(text)`` gives the evaluation of any text (proposals and final responses)."""

    drive_rounds: list[dict[str, Any]]
    judge: Callable[[str], dict[str, Any]] = lambda text: APPROVE
    feasibility: float = 0.8
    compose: Callable[[str, str], str] = lambda proposal, instruction: f"Final: {proposal}"
    calls: dict[str, int] = field(default_factory=lambda: {"drive": 0, "evaluator": 0, "assess": 0, "compose": 0})
    _round: int = 0
    _rest: list[Any] = field(default_factory=list)

    def drive(self, request: ChatRequest) -> dict[str, Any]:
        """Round replies in order. The engine's fast path asks for one proposal first, then for
        the rest of the round (a call with a later seed): both come from the same round reply."""
        self.calls["drive"] += 1
        m = re.search(r"Proposals wanted: (\d+)", request.messages[-1].content)
        wanted = int(m.group(1)) if m else 8
        if request.seed:  # the rest of the current round
            rest, self._rest = self._rest[:wanted], []
            return {"proposals": rest}
        reply = self.drive_rounds[min(self._round, len(self.drive_rounds) - 1)]
        self._round += 1
        items = list(reply["proposals"])
        self._rest = items[wanted:]
        return {"proposals": items[:wanted]}

    def evaluator(self, request: ChatRequest) -> dict[str, Any]:
        self.calls["evaluator"] += 1
        return self.judge(_field(request, "Proposed answer"))

    def mediator(self, request: ChatRequest) -> dict[str, Any]:
        if request.schema_name == "assessment":
            self.calls["assess"] += 1
            n = len(re.findall(r"^Proposal \d+ ", request.messages[-1].content, re.M))
            return {"assessments": [{"proposal": i, "feasibility": self.feasibility} for i in range(1, n + 1)]}
        self.calls["compose"] += 1
        system = request.messages[0].content
        return {"response": self.compose(_field(request, "Selected proposal", "Required modifications"), system)}

    def models(self, latency_s: float = 0.0) -> dict[str, ChatModel]:
        out = {}
        for role, fn in (("drive", self.drive), ("evaluator", self.evaluator), ("mediator", self.mediator)):
            spec = ModelSpec(backend="scripted", model=role, schema_retries=0, max_retries=0)
            out[role] = ChatModel(spec, ScriptedBackend(spec, fn=fn, latency_s=latency_s))
        return out

    def negotiator(
        self,
        store: TraceStore | None = None,
        *,
        settings: Settings | None = None,
        crisis: CrisisScreen | None = None,
        **params: Any,
    ) -> Negotiator:
        """Scenario tests script whole rounds (one reply = the round's proposals), so the fast path
        is off unless a test asks for it (its own tests do: test_negotiation_states.py). The scripted
        EVALUATOR stands for the whole evaluating side: the negotiation's own crisis screen is a
        scripted one that fires on nothing unless a test gives another (:func:`scripted_crisis`)."""
        params.setdefault("fast_path", False)
        return Negotiator(
            settings or Settings(),
            params=NegotiationParams(**params),
            models=self.models(),
            store=store,
            crisis=crisis or scripted_crisis(),
        )


def scripted_crisis(fire: Sequence[str] = (), band: Sequence[str] = (), vote: Sequence[str] = ()) -> CrisisScreen:
    """A deterministic crisis check: its head fires on a request holding a word of ``fire`` (score
    0.99) and scores one holding a word of ``band`` 0.38, else 0.007 (version ``scripted-crisis``:
    a test that wants the band gives it a floor in ``CRISIS_BAND_FLOORS``). No phrases, no guard.
    With ``vote``: a band vote (version ``scripted-vote``, :data:`CRISIS_BAND_VOTES`' role) that
    fires on a request holding a word of ``vote``."""

    def encoder(texts: Sequence[str]) -> NDArray[np.float32]:
        rows = [[sum(w in t.lower() for w in words) for words in (fire, band, vote)] + [1.0] for t in texts]
        return np.asarray(rows, dtype=np.float32)

    head = Head(coef=[10.0, 4.5, 0.0, 0.0], intercept=-5.0, threshold=0.5)
    check = CrisisCheck(version="scripted-crisis", encoder="scripted", dim=4, head=head, exemplars_sha256="0" * 64)
    voting = Head(coef=[0.0, 0.0, 10.0, 0.0], intercept=-5.0, threshold=0.5)
    second = CrisisCheck(version="scripted-vote", encoder="scripted", dim=4, head=voting, exemplars_sha256="1" * 64)
    return CrisisScreen(check, encoder, vote=second if vote else None)
