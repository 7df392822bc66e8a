"""The negotiation runtime: loop, gates, tension and states, defense mechanisms, message bus."""

from .bus import ROUTES, AgentTransport, InProcessTransport, MessageBus, RouteViolationError
from .defense import DefenseMechanism, select_mechanism
from .engine import Negotiator
from .gates import GateResult, Layer1Enforcer, TauFilter
from .params import NegotiationParams
from .tension import SystemState, classify_state, tension
from .track import ConversationRef, CrossTurnRecord, conversation_ref

__all__ = [
    "ROUTES",
    "AgentTransport",
    "ConversationRef",
    "CrossTurnRecord",
    "DefenseMechanism",
    "GateResult",
    "InProcessTransport",
    "Layer1Enforcer",
    "MessageBus",
    "NegotiationParams",
    "Negotiator",
    "RouteViolationError",
    "SystemState",
    "TauFilter",
    "classify_state",
    "conversation_ref",
    "select_mechanism",
    "tension",
]
