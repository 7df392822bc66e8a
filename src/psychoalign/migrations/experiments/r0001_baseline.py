"""Baseline: the experiment result store as it stood before migrations.

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
    "psychoalign_experiment_runs",
    tables,
    sa.Column("id", sa.String(120), primary_key=True),
    sa.Column("name", sa.String(120), nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("spec", sa.Text, nullable=False),
    sa.Column("meta", sa.Text, nullable=False),
)
sa.Table(
    "psychoalign_experiment_cells",
    tables,
    sa.Column("run_id", sa.String(120), primary_key=True),
    sa.Column("key", sa.String(400), primary_key=True),
    sa.Column("system", sa.String(80), nullable=False),
    sa.Column("benchmark", sa.String(80), nullable=False),
    sa.Column("status", sa.String(16), nullable=False, index=True),
    sa.Column("owner", sa.String(300), nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False),
    sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("body", sa.Text, nullable=False),
)


def upgrade() -> None:
    bring_up(tables)
