"""Progress events of one negotiation, for observers such as the streaming gateway.

An event carries only a stage name from a closed vocabulary and numbers or ids: never DRIVE,
EVALUATOR or MEDIATOR text, so an observer can show progress to a user without any risk of
leaking an ungated draft. Observer failures are logged and never affect the negotiation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

__all__ = ["EventHook", "NegotiationEvent"]

_log = logging.getLogger(__name__)

Stage = Literal["started", "round", "evaluated", "deciding", "final_gate"]


class NegotiationEvent(BaseModel):
    """``started`` (trace_id), ``round`` (round), ``evaluated`` (round, proposals, admissible,
    tension), ``deciding``, ``final_gate``."""

    model_config = ConfigDict(frozen=True)

    stage: Stage
    trace_id: str
    round: int | None = None
    proposals: int | None = None
    admissible: int | None = None
    tension: float | None = None


EventHook = Callable[[NegotiationEvent], Awaitable[None]]


async def emit(hook: EventHook | None, event: NegotiationEvent) -> None:
    if hook is None:
        return
    try:
        await hook(event)
    except Exception:  # an observer must never change the outcome
        _log.warning("negotiation observer failed on %s", event.stage, exc_info=True)
