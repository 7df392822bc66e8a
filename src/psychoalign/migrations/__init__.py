"""Each SQL store's schema history as Alembic migrations, run on open by
:func:`psychoalign.storage.migrate` (there is no alembic.ini and no command to run).

One folder per store (``traces``, ``star``, ``lab``, ``accounts``, ``experiments``), each with its
own version table ``alembic_version_<store>``, so stores that share a database upgrade apart. A
store's first revision is its baseline, :func:`bring_up` of its tables in :mod:`.baseline`: the
schema as it stood before migrations, created where missing. A revision declares what Alembic
reads (``revision``, ``down_revision``, ``upgrade`` and, past the baseline, ``downgrade``);
CONTRIBUTING.md tells how to add one.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


def bring_up(tables: sa.MetaData) -> None:
    """Create each table, column and index of ``tables`` that the database lacks, keeping every
    row. A new database lacks all of them; one written before migrations existed may lack the
    tables, columns and indexes added since it was created (every column added so far is
    nullable or has a server default, so existing rows take it without a value)."""
    conn = op.get_bind()
    inspector = sa.inspect(conn)
    for table in tables.sorted_tables:
        if not inspector.has_table(table.name):
            table.create(conn)  # with its indexes
            continue
        columns = {c["name"] for c in inspector.get_columns(table.name)}
        for column in table.columns:
            if column.name not in columns:
                op.add_column(table.name, column._copy())
        indexes = {i["name"] for i in inspector.get_indexes(table.name)}
        for index in table.indexes:
            if index.name not in indexes:
                index.create(conn)
