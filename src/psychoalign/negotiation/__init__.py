"""The negotiation runtime: loop, gates, tension and states, defense mechanisms, message bus."""

from typing import TYPE_CHECKING

from .defense import DefenseMechanism
from .params import NegotiationParams
from .tension import SystemState, tension

if TYPE_CHECKING:
    from .bus import AgentTransport
    from .engine import Negotiator


def __getattr__(name: str) -> object:
    # The engine and the bus pull in the agents, the model layer and the trace store
    # (SQLAlchemy): loaded on first use, so that `negotiate` can read its parameters and start
    # loading its models before paying for them.
    if name == "Negotiator":
        from .engine import Negotiator

        return Negotiator
    if name == "AgentTransport":
        from .bus import AgentTransport

        return AgentTransport
    raise AttributeError(f"module 'psychoalign.negotiation' has no attribute '{name}'")


__all__ = [
    "AgentTransport",
    "DefenseMechanism",
    "NegotiationParams",
    "Negotiator",
    "SystemState",
    "tension",
]
