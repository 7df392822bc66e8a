"""Campaign lifecycle with a draft: a campaign is ``draft``, ``live``, ``paused`` or ``closed``.
What took claims was called ``open``; those campaigns are ``live`` now (a new campaign is a draft
only when its lead's form makes it one), and the column's default follows."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.execute("UPDATE star_campaigns SET status = 'live' WHERE status = 'open'")
    with op.batch_alter_table("star_campaigns") as batch:  # SQLite: a server default changes by a table copy
        batch.alter_column("status", existing_type=sa.String(16), existing_nullable=False, server_default="live")


def downgrade() -> None:
    # A draft took no claims, as a paused campaign; the older code knows no draft.
    op.execute("UPDATE star_campaigns SET status = 'paused' WHERE status = 'draft'")
    op.execute("UPDATE star_campaigns SET status = 'open' WHERE status = 'live'")
    with op.batch_alter_table("star_campaigns") as batch:
        batch.alter_column("status", existing_type=sa.String(16), existing_nullable=False, server_default="open")
