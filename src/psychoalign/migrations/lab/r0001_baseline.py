"""Baseline: the lab's tables (beside the STAR store's) as they stood before migrations.

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
    "web_campaigns",
    tables,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "web_task_time",
    tables,
    sa.Column("task_id", sa.String(32), nullable=False),
    sa.Column("participant_id", sa.String(64), nullable=False),
    sa.Column("campaign", sa.String(64), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("active_since", sa.DateTime(timezone=True)),
    sa.Column("seconds", sa.Float, nullable=False),
    sa.Column("topic", sa.Text),
    sa.PrimaryKeyConstraint("task_id", "participant_id"),
)


def upgrade() -> None:
    bring_up(tables)
