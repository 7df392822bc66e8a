"""Each store's tables as the code defines them, and how a database differs from them."""

from __future__ import annotations

from types import ModuleType
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import MetaData
from sqlalchemy.engine import Connection

from psychoalign.experiments.harness import store as results
from psychoalign.star import lab_store
from psychoalign.star.store import schema as star
from psychoalign.storage import Store
from psychoalign.traces import store as traces
from psychoalign.web import accounts

#: The module that defines each store's ``metadata``.
MODULES: dict[Store, ModuleType] = {
    "traces": traces,
    "star": star,
    "lab": lab_store,
    "accounts": accounts,
    "experiments": results,
}
MODELS: dict[Store, MetaData] = {store: module.metadata for store, module in MODULES.items()}


def schema_diff(sync_conn: Connection, store: Store) -> list[Any]:
    """What Alembic's autogenerate finds between ``store``'s tables in the database and the code
    (column types included), ignoring the tables of the other stores that share the database."""
    mine = {t.name for t in MODELS[store].sorted_tables}

    def include_name(name: str | None, type_: str, _parents: Any) -> bool:
        return type_ != "table" or name in mine

    opts = {"version_table": f"alembic_version_{store}", "compare_type": True, "include_name": include_name}
    context = MigrationContext.configure(sync_conn, opts=opts)
    return list(compare_metadata(context, MODELS[store]))


def versions(sync_conn: Connection, store: Store) -> list[str]:
    """The rows of ``store``'s version table."""
    rows = sync_conn.exec_driver_sql(f"SELECT version_num FROM alembic_version_{store}").all()
    return [row[0] for row in rows]


def heads(store: Store) -> list[str]:
    """``store``'s head revision(s) as its migrations define them: what its version table holds when current."""
    from alembic.script import ScriptDirectory

    from psychoalign.storage import migrations_config

    return list(ScriptDirectory.from_config(migrations_config(store)).get_heads())
