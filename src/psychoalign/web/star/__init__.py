"""The STAR lab pages: participants red-team, annotate and arbitrate; leads run campaigns.

:func:`install_lab` plugs the pages, the security layer and the shared services into the one app.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI

from ...config import Settings
from ...negotiation.engine import Negotiator
from ..auth import install_security
from .lab import StarLab

__all__ = ["StarLab", "install_lab"]


def install_lab(
    app: FastAPI,
    settings: Settings,
    *,
    url: str | None = None,
    negotiator: Negotiator | None = None,
    **engine_kwargs: Any,
) -> StarLab:
    """Add the lab to ``app``: security (headers, sessions, CSRF, login), ``/static``, the
    participant pages (``/tasks``, ``/profile``) and the lead pages (``/lead``). One database
    (``url``, default ``settings.effective_store_url()``) holds accounts, lab state and the STAR store.
    ``negotiator`` is what campaigns with a PsychoAlign target talk to (default: one built from
    ``settings``; the served app passes its deployment's). Call :meth:`StarLab.close` at shutdown."""
    from . import lead, lead_people, participant, results

    url = url or settings.effective_store_url()
    if not engine_kwargs and not url.startswith("sqlite"):  # [lab] pool settings, per worker
        engine_kwargs = {
            "pool_size": settings.lab.db_pool_size,
            "max_overflow": settings.lab.db_max_overflow,
            "pool_timeout": settings.lab.db_pool_timeout_s,
        }
    lab = StarLab(settings, url, negotiator=negotiator, **engine_kwargs)
    install_security(app, lab.accounts, settings.lab)
    app.state.star_lab = lab
    app.include_router(participant.router)
    app.include_router(lead.router)
    app.include_router(lead_people.router)
    app.include_router(results.router)
    return lab
