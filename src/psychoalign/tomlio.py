"""TOML reading with one-line errors that name the file, the line and the column, like YAML's
(:mod:`psychoalign.yamlio`): ``tomllib`` puts the place inside its message ("(at line 3, column
7)"), or says "(at end of document)" when something opened earlier (a bracket, a brace, a quote)
is never closed, and there is no line to go to."""

from __future__ import annotations

import re
import tomllib
from typing import Any

from .errors import ConfigError, PsychoAlignError

_AT_LINE = re.compile(r"\s*\(at line (?P<line>\d+), column (?P<column>\d+)\)\s*$")
_AT_END = re.compile(r"\s*\(at end of document\)\s*$")


def toml_error(
    exc: tomllib.TOMLDecodeError, source: str, error: type[PsychoAlignError] = ConfigError
) -> PsychoAlignError:
    """One line: ``source:line:column: invalid TOML: what``, and the fix for that kind of place."""
    message = " ".join(str(exc).split())
    at = _AT_LINE.search(message)
    if at is not None:
        problem = message[: at.start()]
        return error(f"{source}:{at['line']}:{at['column']}: invalid TOML: {problem}", hint="fix the TOML at that line")
    end = _AT_END.search(message)
    if end is not None:
        problem = message[: end.start()]
        return error(
            f"{source}: invalid TOML: {problem} at the end of the file",
            hint="a bracket, brace or quote opened earlier is never closed, or the last value is missing: "
            "close it, or finish the value",
        )
    return error(f"{source}: invalid TOML: {message}", hint="fix the TOML syntax")


def parse_toml(text: str, source: str, *, error: type[PsychoAlignError] = ConfigError) -> dict[str, Any]:
    """``tomllib.loads`` whose errors are one line naming ``source`` and the place (see module doc).
    A key defined twice is an error too ("Cannot overwrite a value")."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise toml_error(exc, source, error) from None
