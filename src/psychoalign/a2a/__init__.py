"""PsychoAlign over the A2A protocol (a2a-sdk 1.3, protocol 1.0): role services, transport, system agent."""

from .server import build_role_app, role_card
from .transport import A2ATransport

__all__ = ["A2ATransport", "build_role_app", "role_card"]
