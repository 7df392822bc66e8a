"""Load frameworks from YAML (built-in by name, or any path), with file-and-line errors."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..errors import ConfigError
from .model import Framework

__all__ = ["FrameworkError", "builtin_names", "load_framework", "parse_framework"]


class FrameworkError(ConfigError):
    """A framework file is missing, unreadable or invalid."""


def builtin_names() -> list[str]:
    root = resources.files(__package__) / "builtin"
    return sorted(p.name.removesuffix(".yaml") for p in root.iterdir() if p.name.endswith(".yaml"))


def _line_of(node: yaml.Node, loc: tuple[str | int, ...]) -> int:
    """1-based line of the YAML node at ``loc`` (the deepest node that exists)."""
    current = node
    for part in loc:
        if isinstance(current, yaml.MappingNode):
            match = next((v for k, v in current.value if k.value == part), None)
            if match is None:
                match = next((k for k, _ in current.value if k.value == part), None)
                if match is None:
                    break
            current = match
        elif isinstance(current, yaml.SequenceNode) and isinstance(part, int) and part < len(current.value):
            current = current.value[part]
        else:
            break
    return int(current.start_mark.line) + 1


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


@functools.lru_cache(maxsize=64)
def _parse_framework(text: str, source: str) -> Framework:
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise FrameworkError(f"{source}{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict) or node is None:
        raise FrameworkError(f"{source}:1: a framework must be a YAML mapping")
    had_layers = "layers" in data
    try:
        return Framework.model_validate(_flatten_layers(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc: tuple[str | int, ...] = tuple(first["loc"])
        in_layer = had_layers and bool(loc) and loc[0] in ("universal", "contextual", "aspirational")
        yaml_loc: tuple[str | int, ...] = ("layers", *loc) if in_layer else loc
        lineno = _line_of(node, yaml_loc)  # 1-based line of the offending node
        where = ".".join(str(p) for p in loc) or "(top level)"
        more = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise FrameworkError(f"{source}:{lineno}: {where}: {first['msg']}{more}") from None


def load_framework(name_or_path: str | Path) -> Framework:
    """A built-in framework by name (``general``), or a YAML file by path."""
    as_path = Path(name_or_path)
    if str(name_or_path) in builtin_names():
        text = (resources.files(__package__) / "builtin" / f"{name_or_path}.yaml").read_text(encoding="utf-8")
        return parse_framework(text, f"builtin:{name_or_path}")
    if as_path.suffix in (".yaml", ".yml") or as_path.exists():
        try:
            text = as_path.read_text(encoding="utf-8")
        except OSError as exc:
            raise FrameworkError(f"cannot read framework file {as_path}: {exc.strerror}") from None
        return parse_framework(text, str(as_path))
    raise FrameworkError(
        f"unknown framework '{name_or_path}'",
        hint=f"built-in frameworks: {', '.join(builtin_names())}; or pass a path to a YAML file",
    )
