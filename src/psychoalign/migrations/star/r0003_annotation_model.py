"""Each rating names the model that wrote it when an LLM persona did: ``star_annotations.model``
(the persona model's label with its digest; null for a person's rating and for every rating
stored before this revision, whose writer the campaign's recorded persona models describe)."""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"


def upgrade() -> None:
    # a store without a version table is brought up to the baseline and upgraded from there: one
    # written by code that already had this column (its version table lost) has it
    columns = {c["name"] for c in sa.inspect(op.get_bind()).get_columns("star_annotations")}
    if "model" not in columns:
        op.add_column("star_annotations", sa.Column("model", sa.String(300), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("star_annotations") as batch:  # SQLite: a column is dropped by a table copy
        batch.drop_column("model")
