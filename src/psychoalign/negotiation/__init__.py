"""The negotiation runtime: loop, gates, tension and states, defense mechanisms, message bus."""

from .bus import ROUTES, AgentTransport, InProcessTransport, MessageBus, RouteViolationError
from .defense import DefenseMechanism, select_mechanism
from .gates import GateResult, Layer1Enforcer, TauFilter
from .params import NegotiationParams
from .tension import SystemState, classify_state, tension
from .track import ConversationRef, CrossTurnRecord, conversation_ref

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .engine import Negotiator


def __getattr__(name: str) -> object:
    # The engine imports the trace model, which imports this package's value types:
    # load the engine lazily so either package can be imported first.
    if name == "Negotiator":
        from .engine import Negotiator

        return Negotiator
    raise AttributeError(name)


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
