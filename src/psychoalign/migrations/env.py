"""Alembic's environment for every store: :func:`psychoalign.storage.migrations_config` puts the
connection (already in the caller's transaction, which holds the store's migration lock), the
store's version table and, for autogenerate, its tables in ``config.attributes``."""

from __future__ import annotations

from alembic import context

config = context.config
context.configure(
    connection=config.attributes["connection"],
    target_metadata=config.attributes.get("metadata"),
    version_table=config.attributes["version_table"],
)
with context.begin_transaction():
    context.run_migrations()
