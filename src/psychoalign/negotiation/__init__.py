"""The negotiation runtime: loop, gates, tension and states, defense mechanisms, message bus."""

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .defense import DefenseMechanism
from .params import PAPER_PROTOCOL, NegotiationParams
from .tension import SystemState, tension

if TYPE_CHECKING:
    from .bus import AgentTransport
    from .engine import Negotiator


# The engine and the bus pull in the agents, the model layer and the trace store (SQLAlchemy):
# loaded on first use, so that `negotiate` can read its parameters and start loading its models
# before paying for them.
__getattr__ = lazy_exports(__name__, {"Negotiator": ".engine", "AgentTransport": ".bus"})


__all__ = [
    "PAPER_PROTOCOL",
    "AgentTransport",
    "DefenseMechanism",
    "NegotiationParams",
    "Negotiator",
    "SystemState",
    "tension",
]
