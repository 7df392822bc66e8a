"""Load frameworks from YAML (built-in by name, or any path), with file-and-line errors."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import ConfigError
from ..textio import read_text
from ..yamlio import MAX_YAML_CHARS, load_yaml_model
from .model import Framework


class FrameworkError(ConfigError):
    """A framework file is missing, unreadable or invalid."""


def builtin_names() -> list[str]:
    return list(_builtin_names())


# The package's built-in frameworks never change while it runs: listing and reading them once per
# process keeps `load_framework("general")` on every request to a lookup (the parse is cached by
# content below, so every caller gets the same object).
@functools.cache
def _builtin_names() -> tuple[str, ...]:
    root = resources.files(__package__) / "builtin"
    return tuple(sorted(p.name.removesuffix(".yaml") for p in root.iterdir() if p.name.endswith(".yaml")))


@functools.cache
def _builtin_text(name: str) -> str:
    return (resources.files(__package__) / "builtin" / f"{name}.yaml").read_text(encoding="utf-8")


def _flatten_layers(data: dict[str, Any]) -> dict[str, Any]:
    """Accept both ``layers: {universal: [...]}`` and top-level ``universal: [...]``."""
    layers = data.pop("layers", None)
    if isinstance(layers, dict):
        for key, value in layers.items():
            data.setdefault(key, value)
    return data


def parse_framework(text: str, source: str = "<string>") -> Framework:
    """Parse and validate framework YAML (cached by content: frameworks are immutable)."""
    return _parse_framework(text, source)


_LAYERS = ("universal", "contextual", "aspirational")


@functools.lru_cache(maxsize=64)
def _parse_framework(text: str, source: str) -> Framework:
    nested = "layers:" in text  # errors inside layers point at the nested YAML node

    def yaml_loc(loc: tuple[str | int, ...]) -> tuple[str | int, ...]:
        return ("layers", *loc) if nested and loc and loc[0] in _LAYERS else loc

    return load_yaml_model(
        text,
        source,
        Framework,
        error=FrameworkError,
        prepare=_flatten_layers,
        yaml_loc=yaml_loc,
        hint="a framework names itself and its version and lists its rules by layer: compare with "
        "`psychoalign frameworks show general` (docs/frameworks.md)",
    )


def load_framework(name_or_path: str | Path) -> Framework:
    """A built-in framework by name (``general``), or a YAML file by path."""
    if not str(name_or_path).strip():  # Path("") is ".", a folder: "cannot read ." named no mistake
        raise FrameworkError(
            "the framework name is empty",
            hint=f"built-in frameworks: {', '.join(builtin_names())}; or pass a path to a YAML file",
        )
    as_path = Path(name_or_path)
    if str(name_or_path) in _builtin_names():
        return parse_framework(_builtin_text(str(name_or_path)), f"builtin:{name_or_path}")
    if as_path.suffix in (".yaml", ".yml") or as_path.exists():
        text = read_text(as_path, what="framework file", error=FrameworkError, max_bytes=MAX_YAML_CHARS)
        return parse_framework(text, str(as_path))
    raise FrameworkError(
        f"unknown framework '{name_or_path}'",
        hint=f"built-in frameworks: {', '.join(builtin_names())}; or pass a path to a YAML file",
    )
