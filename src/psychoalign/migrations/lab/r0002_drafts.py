"""Drafts: what a participant typed on a task page and has not submitted (autosaved)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_table(
        "web_drafts",
        sa.Column("task_id", sa.String(32), nullable=False),
        sa.Column("participant_id", sa.String(64), nullable=False),
        sa.Column("rating", sa.Integer(), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("task_id", "participant_id"),
    )


def downgrade() -> None:
    op.drop_table("web_drafts")
