"""The one web application: pages under ``/``, the OpenAI-compatible API under ``/v1``, the A2A
system agent (card at ``/.well-known/agent-card.json``), ``/healthz`` and ``/metrics``.

``create_app`` is imported lazily: importing the package does not load FastAPI. The ``[serve]``
section of the settings is :class:`psychoalign.config.ServeSettings`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .app import create_app


__getattr__ = lazy_exports(__name__, {"create_app": ".app"})


__all__ = ["create_app"]
