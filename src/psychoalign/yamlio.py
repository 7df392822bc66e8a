"""Load YAML into pydantic models with errors that name the file and line."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import ConfigError

__all__ = ["line_of", "load_yaml_model"]

M = TypeVar("M", bound=BaseModel)


def line_of(node: yaml.Node, loc: tuple[str | int, ...]) -> int:
    """1-based line of the YAML node at ``loc`` (the deepest node that exists)."""
    current = node
    for part in loc:
        if isinstance(current, yaml.MappingNode):
            match = next((v for k, v in current.value if k.value == part), None)
            if match is None:
                break
            current = match
        elif isinstance(current, yaml.SequenceNode) and isinstance(part, int) and part < len(current.value):
            current = current.value[part]
        else:
            break
    return int(current.start_mark.line) + 1


def load_yaml_model(
    text: str,
    source: str,
    model: type[M],
    *,
    error: type[ConfigError] = ConfigError,
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    yaml_loc: Callable[[tuple[str | int, ...]], tuple[str | int, ...]] | None = None,
) -> M:
    """Parse ``text`` and validate it as ``model``.

    ``prepare`` may reshape the parsed mapping before validation; ``yaml_loc`` maps a validation
    error location back to the location in the YAML document (for the line number).
    """
    try:
        node = yaml.compose(text)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        raise error(f"{source}{line}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    if not isinstance(data, dict) or node is None:
        raise error(f"{source}:1: expected a YAML mapping at the top level")
    try:
        return model.model_validate(prepare(data) if prepare else data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc: tuple[str | int, ...] = tuple(first["loc"])
        lineno = line_of(node, yaml_loc(loc) if yaml_loc else loc)
        where = ".".join(str(p) for p in loc) or "(top level)"
        more = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise error(f"{source}:{lineno}: {where}: {first['msg']}{more}") from None
