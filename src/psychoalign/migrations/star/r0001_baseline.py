"""Baseline: the STAR store as it stood before migrations. Older stores lack what was added in
place since: star_tasks.lease_expires_at, star_turns.refused, star_campaigns.status (existing
campaigns open) and .members_only (off), the tables star_campaigns, star_target_failures,
star_declines and star_members, and the claim-queue, lease, holder and participant indexes.

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
    "star_participants",
    tables,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("body", sa.Text, nullable=False),
    sa.Column("simulated", sa.Boolean, nullable=False),
)
sa.Table(
    "star_instructions",
    tables,
    sa.Column("id", sa.String(64), primary_key=True),
    sa.Column("campaign", sa.String(64), nullable=False, index=True),
    sa.Column("rule", sa.String(64), nullable=False),
    sa.Column("cell", sa.Text, nullable=False),
    sa.Column("record", sa.Text, nullable=False),
)
sa.Table(
    "star_tasks",
    tables,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("campaign", sa.String(64), nullable=False, index=True),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("instruction_id", sa.String(64)),
    sa.Column("dialogue_id", sa.String(32), index=True),
    sa.Column("participant_id", sa.String(64)),
    sa.Column("requirement", sa.Text, nullable=False),
    sa.Column("relaxed", sa.Text),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("lease_expires_at", sa.DateTime(timezone=True)),
    sa.Index("ix_star_tasks_queue", "kind", "status", "created_at", "id"),
    sa.Index("ix_star_tasks_lease", "status", "lease_expires_at"),
    sa.Index("ix_star_tasks_holder", "participant_id", "status"),
)
sa.Table(
    "star_campaigns",
    tables,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("settings", sa.Text, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, server_default="open"),
    sa.Column("members_only", sa.Boolean, nullable=False, server_default=sa.false()),
)
sa.Table(
    "star_members",
    tables,
    sa.Column("campaign", sa.String(64), nullable=False),
    sa.Column("participant_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint("campaign", "participant_id"),
    sa.Index("ix_star_members_participant", "participant_id"),
)
sa.Table(
    "star_target_failures",
    tables,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("dialogue_id", sa.String(32), nullable=False, index=True),
    sa.Column("turn_index", sa.Integer, nullable=False),
    sa.Column("attempt", sa.Integer, nullable=False),
    sa.Column("reason", sa.Text, nullable=False),
    sa.Column("trace_id", sa.String(32)),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "star_dialogues",
    tables,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("campaign", sa.String(64), nullable=False, index=True),
    sa.Column("instruction_id", sa.String(64), nullable=False),
    sa.Column("task_id", sa.String(32), nullable=False, unique=True),
    sa.Column("red_teamer_id", sa.String(64), nullable=False),
    sa.Column("target", sa.String(200), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("pre_annotation", sa.Text),
    sa.Column("refused", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "star_turns",
    tables,
    sa.Column("dialogue_id", sa.String(32), nullable=False),
    sa.Column("idx", sa.Integer, nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("text", sa.Text, nullable=False),
    sa.Column("tension", sa.Float),
    sa.Column("state", sa.String(40)),
    sa.Column("trace_id", sa.String(32)),
    sa.Column("refused", sa.Boolean),
    sa.PrimaryKeyConstraint("dialogue_id", "idx"),
)
sa.Table(
    "star_annotations",
    tables,
    sa.Column("dialogue_id", sa.String(32), nullable=False),
    sa.Column("participant_id", sa.String(64), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("rating", sa.Integer, nullable=False),
    sa.Column("reasoning", sa.Text, nullable=False),
    sa.Column("task_id", sa.String(32), nullable=False, unique=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint("dialogue_id", "participant_id"),
)
sa.Table(
    "star_exposures",
    tables,
    sa.Column("dialogue_id", sa.String(32), nullable=False),
    sa.Column("participant_id", sa.String(64), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.PrimaryKeyConstraint("dialogue_id", "participant_id"),
    sa.Index("ix_star_exposures_participant", "participant_id"),
)
sa.Table(
    "star_declines",
    tables,
    sa.Column("instruction_id", sa.String(64), nullable=False),
    sa.Column("participant_id", sa.String(64), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint("instruction_id", "participant_id"),
)


def upgrade() -> None:
    bring_up(tables)
