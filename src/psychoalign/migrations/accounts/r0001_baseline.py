"""Baseline: the lab's accounts, invitations, sessions, login failures and server secrets as they
stood before migrations.

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
    "web_accounts",
    tables,
    sa.Column("id", sa.String(32), primary_key=True),
    sa.Column("username", sa.String(64), unique=True),
    sa.Column("display_name", sa.String(200), nullable=False),
    sa.Column("role", sa.String(16), nullable=False),
    sa.Column("participant_id", sa.String(64), unique=True),
    sa.Column("password_hash", sa.Text),
    sa.Column("active", sa.Boolean, nullable=False),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "web_invites",
    tables,
    sa.Column("token_hash", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.String(32), nullable=False, index=True),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("used_at", sa.DateTime(timezone=True)),
)
sa.Table(
    "web_sessions",
    tables,
    sa.Column("token_hash", sa.String(64), primary_key=True),
    sa.Column("account_id", sa.String(32), nullable=False, index=True),
    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
    sa.Column("last_seen", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "web_login_failures",
    tables,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("key", sa.String(200), nullable=False, index=True),
    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
)
sa.Table(
    "web_secrets",
    tables,
    sa.Column("name", sa.String(64), primary_key=True),
    sa.Column("value", sa.String(128), nullable=False),
)


def upgrade() -> None:
    bring_up(tables)
