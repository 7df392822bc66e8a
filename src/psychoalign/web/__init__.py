"""The one web application: pages under ``/``, the OpenAI-compatible API under ``/v1``, the A2A
system agent (card at ``/.well-known/agent-card.json``), ``/healthz`` and ``/metrics``.

``create_app`` is imported lazily: importing the package does not load FastAPI. The ``[serve]``
section of the settings is :class:`psychoalign.config.ServeSettings`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .app import create_app


def __getattr__(name: str) -> object:
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(name)


__all__ = ["create_app"]
