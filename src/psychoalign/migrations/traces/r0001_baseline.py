"""Baseline: the trace store as it stood before migrations. Databases from before the cross-turn
track lack psychoalign_trace_keys.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa

from psychoalign.migrations import bring_up

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

tables = sa.MetaData()
sa.Table(
    "psychoalign_traces",
    tables,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False, index=True),
    sa.Column("finished_at", sa.DateTime(timezone=True)),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("owner", sa.String(300), nullable=False),
    sa.Column("request", sa.Text, nullable=False),
    sa.Column("framework", sa.String(200)),
    sa.Column("state", sa.String(40)),
    sa.Column("tension", sa.Float),
    sa.Column("defense", sa.String(40)),
    sa.Column("error", sa.Text),
    sa.Column("body", sa.Text, nullable=False),
)
sa.Table(
    "psychoalign_trace_keys",
    tables,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("trace_id", sa.String(32), primary_key=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)


def upgrade() -> None:
    bring_up(tables)
