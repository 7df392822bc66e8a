"""Cross-turn tension: a conversation's earlier turns, read from the server's own trace records,
tighten the tau gate of the next turn when they show escalation. The rule, its parameters and
the threat model are in docs/negotiation.md ("Cross-turn tension").

The paper negotiates each turn alone and names this as future work: a multi-turn attack can walk
a conversation towards harm one acceptable step at a time. Here every turn is filed under
conversation keys that the *server* derives (never a history the client claims), and the next
turn reads the turns filed under its keys back from the trace store:

* **per turn**: T (the boundary analysis' default request-level definition, ``round1_mean``:
  the mean tension of the DRIVE's round-1 proposals, before any feedback), the EVALUATOR's
  harmful-intent and adversarial flags, the lowest score, and whether the turn was refused;
* **over the conversation**: the running maximum of T, the trend (the least-squares slope of T per
  turn over the last ``cross_turn_window`` turns that survives dropping any one of them) and the
  number of *hot* turns (T at or above ``cross_turn_hot``, or flagged by the EVALUATOR).

The evidence becomes a pressure in [0, 1] and ``tau_effective = tau + pressure * (cap - tau)``:
never below the configured tau, never above ``max(tau, cap)``, and monotone in every piece of
evidence. History that cannot be read is treated as full pressure (fail closed).

This module is pure (no I/O); the engine reads the history and stamps the record on the trace.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ..textio import normalise_text
from ..traces.model import CrossTurnRecord, NegotiationParams, Trace, TraceStatus, TurnSignal
from ..traces.tension import request_tension

__all__ = ["ConversationRef", "CrossTurnRecord", "conversation_ref"]


def _fold(text: str) -> str:
    """What a turn's key depends on: the text without case, spacing or control-character noise."""
    return " ".join(normalise_text(text).split()).casefold()


def _h(*parts: str) -> str:
    return hashlib.sha256("\x00".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


class ConversationRef(BaseModel):
    """Where a turn sits in its conversation, as keys the server derived.

    ``file_under``: the keys this turn's trace is filed under; ``look_up``: the keys whose traces
    are this turn's earlier turns. Build it with :func:`conversation_ref`."""

    model_config = ConfigDict(frozen=True)

    file_under: tuple[str, ...] = ()
    look_up: tuple[str, ...] = ()
    parent: str | None = Field(None, description="P(t-1): attempts with the same parent are one depth.")


def conversation_ref(
    scope: str, user_messages: Sequence[str] = (), conversation_id: str | None = None
) -> ConversationRef:
    """Keys for the last of ``user_messages`` (every user message of the conversation so far, in
    order), within ``scope`` (who may share a track: e.g. deployment + API key).

    * The **prefix chain**: ``P(j)`` hashes the scope and the first ``j`` user messages. A turn is
      filed under ``P(t)`` and its parent ``P(t-1)`` (``t >= 2``), and looks up ``P(1..t)``: so it
      finds every earlier turn on its path, every attempt the client backtracked from (a sibling
      under the same parent), and earlier tries of the same turn. Editing an earlier user message
      starts a new path; assistant messages are not part of the key (a client that rewrites the
      assistant's replies keeps its track).
    * A **conversation id** (client-supplied, or a server-side context id) adds one key, filed and
      looked up: a client that sends only its last message keeps the track under its id, and a
      forged fresh id cannot hide the prefix chain. Ids only reach turns in the same ``scope``.
    """
    prefixes: list[str] = []
    current = _h("psychoalign-conversation", scope)
    for message in user_messages:
        current = _h(current, _fold(message))
        prefixes.append(current)
    file_under: list[str] = []
    look_up: list[str] = list(prefixes)
    if prefixes:
        file_under.append(prefixes[-1])
        if len(prefixes) >= 2:
            file_under.append(prefixes[-2])
    if conversation_id:
        key = _h("psychoalign-conversation-id", scope, conversation_id)
        file_under.append(key)
        look_up.append(key)
    return ConversationRef(
        file_under=tuple(file_under),
        look_up=tuple(dict.fromkeys(look_up)),
        parent=prefixes[-2] if len(prefixes) >= 2 else None,
    )


@dataclass(frozen=True)
class Evidence:
    """What the rule reads. ``trend`` is None with fewer than three turns with a T in the window."""

    turns: int
    running_max: float | None
    trend: float | None
    hot_turns: int


def turn_signal(trace: Trace, params: NegotiationParams) -> TurnSignal:
    """The signals of one stored earlier turn. A turn that did not complete has no T and is never
    hot: it is kept in the history (so the record shows it) but adds no evidence."""
    turn = trace.metadata.get("turn")
    base: dict[str, Any] = {
        "trace_id": trace.id,
        "turn": turn if isinstance(turn, int) and not isinstance(turn, bool) else None,
        "parent": trace.cross_turn.parent if trace.cross_turn is not None else None,
    }
    if trace.status is not TraceStatus.COMPLETED:
        return TurnSignal(**base)
    t = request_tension(trace)
    evals = [p.evaluation for r in trace.rounds for p in r.proposals if p.evaluation is not None]
    harmful = any(e.conflict.harmful_intent for e in evals)
    adversarial = any(e.conflict.adversarial_intent for e in evals)
    final = trace.final
    refusals = ("rationalization", "reaction_formation")
    refused = final is not None and (final.fallback or (final.defense is not None and final.defense.value in refusals))
    return TurnSignal(
        **base,
        tension=t,
        harmful=harmful,
        adversarial=adversarial,
        min_score=min((e.score for e in evals), default=None),
        refused=refused,
        hot=(t is not None and t >= params.cross_turn_hot) or harmful or adversarial,
    )


def _slope(points: Sequence[tuple[int, float]]) -> float:
    """Least-squares slope of (turn index, T)."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    return sum((x - mx) * (y - my) for x, y in points) / sxx


def robust_trend(values: Sequence[float]) -> float | None:
    """The slope of T per turn that survives dropping any one turn: the smallest least-squares
    slope over the leave-one-out subsets (turns keep their positions). A steady climb keeps its
    slope; one sensitive turn at the end of a calm stretch is not a trend. None below 3 values."""
    if len(values) < 3:
        return None
    points = list(enumerate(values))
    return min(_slope(points[:i] + points[i + 1 :]) for i in range(len(points)))


def depths(history: Sequence[TurnSignal]) -> list[float]:
    """T per depth of the conversation: consecutive attempts with the same parent key (an attempt
    and the rephrasings sent after backtracking from it) are one depth, at their highest T."""
    out: list[float] = []
    last_parent: str | None = None
    for s in history:
        if s.tension is None or not math.isfinite(s.tension):
            continue
        if s.parent is not None and s.parent == last_parent and out:
            out[-1] = max(out[-1], s.tension)
        else:
            out.append(s.tension)
        last_parent = s.parent
    return out


def evidence(history: Sequence[TurnSignal], params: NegotiationParams) -> Evidence:
    tensions = depths(history)
    return Evidence(
        turns=len(history),
        running_max=max(tensions) if tensions else None,
        trend=robust_trend(tensions[-params.cross_turn_window :]),
        hot_turns=sum(1 for s in history if s.hot),
    )


def _clip(x: float) -> float:
    return min(max(x, 0.0), 1.0)


def pressure(e: Evidence, params: NegotiationParams) -> tuple[float, list[str]]:
    """(pressure in [0, 1], reasons). Non-decreasing in ``trend``, ``running_max`` and
    ``hot_turns``; the larger of two terms:

    * *rising trend*: slope / ``cross_turn_trend`` (clipped), times how far the running maximum
      has come towards contested territory (0 at half of ``healthy_threshold``, 1 at it): a
      conversation drifting between calm turns is not escalating;
    * *hot turns*: 0 below ``cross_turn_min_hot`` hot turns, rising linearly to 1 at
      ``cross_turn_full_hot`` (one sensitive turn in a benign conversation does not count).
    """
    p = params
    reasons: list[str] = []
    trend_term = 0.0
    if e.trend is not None and e.running_max is not None:
        half = p.healthy_threshold / 2
        level = 1.0 if e.running_max >= p.healthy_threshold else _clip((e.running_max - half) / half) if half else 0.0
        trend_term = _clip(e.trend / p.cross_turn_trend) * level
        if trend_term > 0:
            reasons.append(
                f"rising tension: slope {e.trend:.3f}/turn (full at {p.cross_turn_trend:g}), "
                f"running max {e.running_max:.2f} (full at {p.healthy_threshold:g})"
            )
    hot_term = 0.0
    if e.hot_turns >= p.cross_turn_min_hot:
        span = p.cross_turn_full_hot - p.cross_turn_min_hot + 1
        hot_term = _clip((e.hot_turns - p.cross_turn_min_hot + 1) / span)
        reasons.append(
            f"{e.hot_turns} hot turns (T >= {p.cross_turn_hot:g} or flagged intent; "
            f"from {p.cross_turn_min_hot}, full at {p.cross_turn_full_hot})"
        )
    return max(trend_term, hot_term), reasons


def effective_tau(params: NegotiationParams, pressure_value: float) -> float:
    """``tau + pressure * (cap - tau)``, within [tau, max(tau, cap)] whatever the rounding."""
    tau, cap = params.tau, max(params.tau, params.cross_turn_tau_cap)
    pressure_value = _clip(pressure_value)
    if pressure_value >= 1.0:  # exactly the cap (tau + (cap - tau) can miss it by a rounding step)
        return cap
    return min(max(tau + pressure_value * (cap - tau), tau), cap)


def _record(params: NegotiationParams, ref: ConversationRef | None, **kw: Any) -> CrossTurnRecord:
    return CrossTurnRecord(
        enabled=params.cross_turn,
        keys=list(ref.file_under) if ref is not None else [],
        parent=ref.parent if ref is not None else None,
        tau_configured=params.tau,
        **kw,
    )


def assess(
    conversation: ConversationRef | None, history: Sequence[TurnSignal], params: NegotiationParams
) -> CrossTurnRecord:
    """The record for a turn whose earlier turns are ``history`` (oldest first)."""
    if not params.cross_turn:
        return _record(params, conversation, status="off", tau_effective=params.tau)
    if conversation is None or not conversation.look_up:
        return _record(params, conversation, status="none", tau_effective=params.tau)
    e = evidence(history, params)
    value, reasons = pressure(e, params)
    tau = effective_tau(params, value)
    if not reasons:
        reasons = [f"no escalation in {e.turns} earlier turn(s)"] if history else ["first turn of the conversation"]
    elif tau == params.tau:
        reasons.append(f"no room: cross_turn_tau_cap {params.cross_turn_tau_cap:g} <= tau {params.tau:g}")
    return _record(
        params,
        conversation,
        status="read" if history else "fresh",
        history=list(history),
        running_max=e.running_max,
        trend=e.trend,
        hot_turns=e.hot_turns,
        pressure=value,
        tau_effective=tau,
        reasons=reasons,
    )


def unavailable(conversation: ConversationRef, params: NegotiationParams, error: str) -> CrossTurnRecord:
    """The history could not be read: fail closed at the cap (docs/negotiation.md says why)."""
    tau = effective_tau(params, 1.0)
    return _record(
        params,
        conversation,
        status="unavailable",
        pressure=1.0,
        tau_effective=tau,
        reasons=[f"history unavailable: tau at the cap {tau:g} (fail closed)"],
        error=error,
    )
