"""A lease per claimed cell: ``lease_until``, renewed by its runner's heartbeat (nullable: rows
claimed before leases existed keep the old reclaim rules)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"


def upgrade() -> None:
    op.add_column("psychoalign_experiment_cells", sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("psychoalign_experiment_cells", "lease_until")
