"""The STAR store on SQLite or PostgreSQL: the parts by concern, composed."""

from __future__ import annotations

from .annotations import SQLAnnotations
from .campaigns import SQLCampaigns
from .claims import SQLClaims
from .dialogues import SQLDialogues
from .export import SQLExport
from .participants import SQLParticipants


class SQLStarStore(SQLParticipants, SQLCampaigns, SQLClaims, SQLDialogues, SQLAnnotations, SQLExport):
    """:class:`~psychoalign.star.store.StarStore` on SQLite or PostgreSQL (``url``: a plain
    SQLAlchemy URL, opened by :func:`psychoalign.storage.create_engine_for`; ``engine_kwargs`` go
    to the engine, e.g. pool sizes or ``connect_args``).

    Every operation is one transaction (a crash loses no submitted work and leaves nothing
    half-done), except closing a campaign, removing a member and expiring leases, which commit
    their change and then release each held task in its own transaction (running them again
    finishes what a crash interrupted). Several processes may share one database: claims stay
    exclusive across them (PostgreSQL row locks; SQLite's single writer).
    """
