"""The one web application: pages under ``/``, the OpenAI-compatible API under ``/v1``, the A2A
system agent (card at ``/.well-known/agent-card.json``), ``/healthz`` and ``/metrics``.

``create_app`` is imported lazily: importing the package (e.g. for :class:`ServeSettings`, the
``[serve]`` section, defined in :mod:`psychoalign.config`) does not load FastAPI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..config import ServeSettings

if TYPE_CHECKING:
    from .app import create_app


def __getattr__(name: str) -> object:
    if name == "create_app":
        from .app import create_app

        return create_app
    raise AttributeError(name)


__all__ = ["ServeSettings", "create_app"]
