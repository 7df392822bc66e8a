"""Write a store's next migration: ``python -m tests.migrations.new_migration STORE "what changes"``
(from the repository root) after changing the store's tables in the code.

A scratch SQLite database is brought to the store's head revision and Alembic's autogenerate
compares it with the code's tables; the differences become ``upgrade()`` / ``downgrade()`` in
``src/psychoalign/migrations/<store>/r<NNNN>_<slug>.py``. Read the file before committing it:
autogenerate misses renames (it drops and adds) and server defaults, and a new NOT NULL column
needs one for the rows already stored (CONTRIBUTING.md)."""

from __future__ import annotations

import subprocess
import sys
from typing import cast

from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine

from psychoalign.storage import STORES, Store, migrations_config

from .stores import MODELS


def new_migration(store: Store, message: str) -> None:
    engine = create_engine("sqlite://")
    with engine.begin() as conn:
        config = migrations_config(store, conn)
        command.upgrade(config, "head")
        config.attributes["metadata"] = MODELS[store]
        known = [s.revision for s in ScriptDirectory.from_config(config).walk_revisions()]
        script = command.revision(config, message, autogenerate=True, rev_id=f"{max(int(r) for r in known) + 1:04d}")
    engine.dispose()
    assert script is not None and not isinstance(script, list)
    subprocess.run([sys.executable, "-m", "ruff", "format", "--quiet", script.path], check=True)


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in STORES:
        sys.exit(f"usage: python -m tests.migrations.new_migration {{{','.join(STORES)}}} MESSAGE")
    new_migration(cast("Store", sys.argv[1]), sys.argv[2])
