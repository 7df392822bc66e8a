"""Freeze the DDL an earlier commit's stores created (before they had migrations), for the
upgrade tests: ``python tests/migrations/freeze_schema.py COMMIT...`` writes
``premigration/<commit>.<dialect>.sql`` for SQLite and PostgreSQL.

The commit's ``src`` is unpacked to a scratch folder and every module there that defines a
``metadata = MetaData()`` is imported from it, in a fresh interpreter, and its tables and indexes
compiled with ``CREATE TABLE`` / ``CREATE INDEX`` as that code's ``create_all`` issued them."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
REPO = HERE.parent.parent
DIALECTS = ("sqlite", "postgresql")

#: Run inside the old code: argv = dialect, module names.
COMPILE = """
import importlib, sys
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.schema import CreateIndex, CreateTable
dialect = {"sqlite": sqlite, "postgresql": postgresql}[sys.argv[1]].dialect()
for name in sys.argv[2:]:
    for table in importlib.import_module(name).metadata.sorted_tables:
        print(str(CreateTable(table).compile(dialect=dialect)).strip() + ";\\n")
        for index in sorted(table.indexes, key=lambda i: str(i.name)):
            print(str(CreateIndex(index).compile(dialect=dialect)).strip() + ";\\n")
"""


def modules(src: Path) -> list[str]:
    """The modules under ``src`` that define a store's ``metadata``, as dotted names."""
    found = [p for p in src.rglob("*.py") if "\nmetadata = MetaData()" in p.read_text(encoding="utf-8")]
    return sorted(".".join(p.relative_to(src).with_suffix("").parts) for p in found)


def freeze(commit: str) -> None:
    git = ["git", "-C", str(REPO)]
    name = subprocess.run([*git, "rev-parse", "--short", commit], check=True, capture_output=True, text=True).stdout
    name = name.strip()
    with tempfile.TemporaryDirectory() as scratch:
        archive = subprocess.run([*git, "archive", commit, "src"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", scratch], input=archive.stdout, check=True)
        src = Path(scratch) / "src"
        for dialect in DIALECTS:
            ddl = subprocess.run(
                [sys.executable, "-c", COMPILE, dialect, *modules(src)],
                env={"PYTHONPATH": str(src), "PATH": ""},
                check=True,
                capture_output=True,
                text=True,
            )
            out = HERE / "premigration" / f"{name}.{dialect}.sql"
            text = "\n".join(line.rstrip() for line in ddl.stdout.splitlines())
            out.write_text(f"-- The stores' tables at commit {name} ({dialect}), by freeze_schema.py\n\n{text}\n")
            print(out.relative_to(REPO))


if __name__ == "__main__":
    for commit in sys.argv[1:]:
        freeze(commit)
