"""The negotiation runtime: loop, gates, tension and states, defense mechanisms, message bus."""

from .bus import AgentTransport
from .defense import DefenseMechanism
from .engine import Negotiator
from .params import NegotiationParams
from .tension import SystemState, tension

__all__ = [
    "AgentTransport",
    "DefenseMechanism",
    "NegotiationParams",
    "Negotiator",
    "SystemState",
    "tension",
]
