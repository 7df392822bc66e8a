"""Loading STAR's YAML data files (policy, parameter space): built-in package data or a user file."""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel

from ..errors import ConfigError
from ..textio import read_text
from ..yamlio import MAX_YAML_CHARS, load_yaml_model

__all__ = ["FORMULA_START", "spreadsheet_safe"]

#: A CSV cell starting with one of these is a formula to Excel, LibreOffice and Google Sheets; the
#: full-width forms too (U+FF1D ＝, U+FF0B ＋, U+FF0D －, U+FF20 ＠): a spreadsheet set for East
#: Asian input reads them as their ASCII forms.
FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20", "\t", "\r")

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


def spreadsheet_safe(value: object) -> object:
    """A CSV cell that a spreadsheet opens as text, never as a formula: a string starting with
    ``= + - @`` (or their full-width forms), tab or carriage return gets a leading apostrophe
    (OWASP's CSV-injection advice). Numbers and everything else pass unchanged. Participant text
    and model output are untrusted: ``=HYPERLINK(...)`` in a reasoning must not become a live link
    in the lead's spreadsheet."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value
