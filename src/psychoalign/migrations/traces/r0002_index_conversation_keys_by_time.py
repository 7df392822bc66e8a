"""Index conversation keys by (key, created_at): the cross-turn lookup reads a key's newest rows
with an index scan that stops at its limit, however long the conversation."""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.create_index(
        "ix_psychoalign_trace_keys_key_created_at", "psychoalign_trace_keys", ["key", "created_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index("ix_psychoalign_trace_keys_key_created_at", table_name="psychoalign_trace_keys")
