"""How a negotiator reaches remote agents: the A2A transport when the configuration names a
role service for DRIVE, EVALUATOR and MEDIATOR (``a2a.urls``). The negotiation engine never
builds it (it only knows the :class:`~psychoalign.negotiation.bus.AgentTransport` protocol):
whoever builds a :class:`~psychoalign.negotiation.Negotiator` from settings passes it in."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..config import Settings
    from .transport import A2ATransport


def remote_transport(settings: Settings) -> A2ATransport | None:
    """The A2A transport to the role services of ``settings.a2a``, or None when the agents run
    in-process (``a2a.urls`` does not name all three roles)."""
    a2a = settings.a2a
    if not a2a.remote:
        return None
    from .transport import A2ATransport  # the A2A SDK only when the agents are remote

    return A2ATransport(a2a.urls, tokens=a2a.plain_tokens(), timeout_s=a2a.timeout_s, retries=a2a.retries)
