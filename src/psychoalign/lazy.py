"""Names a package exports but imports on first use (PEP 562 module ``__getattr__``).

A package whose public names pull in heavy dependencies (SQLAlchemy, FastAPI, the A2A SDK) lists
them here, so that importing the package, or a light sibling of theirs, does not pay for them."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping


def lazy_exports(package: str, where: Mapping[str, str]) -> Callable[[str], object]:
    """A module ``__getattr__`` for ``package`` that imports ``where[name]`` (a module relative
    to the package, e.g. ``".engine"``) when ``name`` is first read, and returns its ``name``."""

    def getattr_(name: str) -> object:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(module, package), name)

    return getattr_
