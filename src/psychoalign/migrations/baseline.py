"""Each store's tables as they stood before migrations: what the store's revision 0001 creates
where missing (:func:`~psychoalign.migrations.bring_up`), one ``MetaData`` per store, built from
their description in ``baseline.yaml``.

History, like every revision: never edit it (neither the description nor how it is read here). A
change to a store's tables is a new revision of that store (CONTRIBUTING.md), and the store's code
defines its tables as they are now. tests/migrations/test_baseline.py checks that these tables
compile to the DDL frozen from the last commit before migrations, statement for statement.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from ..yamlio import parse_yaml

_DESCRIPTION = Path(__file__).with_name("baseline.yaml")

#: A column's type in the description: makes its SQLAlchemy type (every time the stores keep is aware).
_TYPES: dict[str, Callable[[], sa.types.TypeEngine[Any]]] = {
    "Text": sa.Text,
    "Integer": sa.Integer,
    "Float": sa.Float,
    "Boolean": sa.Boolean,
    "DateTime": lambda: sa.DateTime(timezone=True),
}
#: A column's flag in the description: the ``Column`` argument it stands for.
_FLAGS: dict[str, dict[str, Any]] = {
    "primary_key": {"primary_key": True},
    "not_null": {"nullable": False},
    "index": {"index": True},
    "unique": {"unique": True},
    "autoincrement": {"autoincrement": True},
}


def _type(word: str, where: str) -> sa.types.TypeEngine[Any]:
    string = re.fullmatch(r"String\((\d+)\)", word)
    if string:
        return sa.String(int(string[1]))
    if word not in _TYPES:
        raise ValueError(f"{_DESCRIPTION.name}: {where}: unknown type {word!r}")
    return _TYPES[word]()


def _column(name: str, spec: str, where: str) -> sa.Column[Any]:
    """The column ``name`` as ``spec`` ("Type flag...") describes it."""
    type_word, *flags = spec.split()
    kwargs: dict[str, Any] = {}
    for flag in flags:
        if flag.startswith("server_default="):
            value = flag.removeprefix("server_default=")
            kwargs["server_default"] = sa.false() if value == "false()" else value
        elif flag in _FLAGS:
            kwargs.update(_FLAGS[flag])
        else:
            raise ValueError(f"{_DESCRIPTION.name}: {where}: unknown flag {flag!r}")
    return sa.Column(name, _type(type_word, where), **kwargs)


def _metadata(tables: dict[str, Any]) -> sa.MetaData:
    """One store's tables, in the description's order: columns, then the composite primary key, then indexes."""
    metadata = sa.MetaData()
    for table, parts in tables.items():
        columns = [_column(name, spec, f"{table}.{name}") for name, spec in parts["columns"].items()]
        key = [sa.PrimaryKeyConstraint(*parts["primary_key"])] if "primary_key" in parts else []
        indexes = [sa.Index(index, *names) for index, names in parts.get("indexes", {}).items()]
        sa.Table(table, metadata, *columns, *key, *indexes)
    return metadata


_stores = parse_yaml(_DESCRIPTION.read_text(encoding="utf-8"), _DESCRIPTION.name)
traces = _metadata(_stores["traces"])
star = _metadata(_stores["star"])
lab = _metadata(_stores["lab"])
accounts = _metadata(_stores["accounts"])
experiments = _metadata(_stores["experiments"])
