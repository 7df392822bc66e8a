"""Loading STAR's YAML data files (policy, parameter space): built-in package data or a user file."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from ..errors import ConfigError
from ..textio import FORMULA_START, read_text, spreadsheet_safe
from ..yamlio import MAX_YAML_CHARS, load_yaml_model

# re-exported: the CSV check lives in textio, shared by every CSV writer
__all__ = ["FORMULA_START", "spreadsheet_safe"]


M = TypeVar("M", bound=BaseModel)


class PolicyError(ConfigError):
    """A policy or parameter file is missing or invalid."""


def load_star_yaml(path: str | Path | None, builtin: str, model: type[M], what: str) -> M:
    """A built-in STAR file (``path`` None) or the user's, validated as ``model`` with file:line errors."""
    if path is None:
        text = (resources.files(__package__) / "builtin" / builtin).read_text(encoding="utf-8")
        return load_yaml_model(text, f"builtin:{builtin}", model, error=PolicyError)
    p = Path(path)
    text = read_text(p, what=f"{what} file", error=PolicyError, max_bytes=MAX_YAML_CHARS)
    return load_yaml_model(text, str(p), model, error=PolicyError)
