"""Bounds checked on untrusted JSON *before* it is parsed.

Python's parser recurses once per nesting level (a body nested 100,000 deep raises
``RecursionError``) and refuses integers over 4,300 digits with a bare ``ValueError``; neither is
a ``JSONDecodeError``, so both escaped the edges as internal errors. :func:`check_json` refuses
such text first, in linear time, with a one-line message naming what and where.

The scan strips string literals (their brackets and digits are text, not structure), then
follows the brackets that remain. On text that is not valid JSON it may refuse what the parser
would also refuse; it never lets through nesting the parser would recurse into past the bound.
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any

__all__ = ["JSONLimitError", "NonFiniteError", "check_finite", "check_json", "loads_bounded"]

#: Deepest nesting of arrays and objects accepted. OpenAI requests nest about 6 deep (a JSON
#: schema in ``response_format`` more); role replies 4.
MAX_JSON_DEPTH = 64
#: Longest run of digits in a number (an int64 has 19; a float mantissa rarely needs 20).
MAX_NUMBER_DIGITS = 100

# A JSON string literal, unrolled so matching stays linear on hostile text. The slow scan's
# tokens: a string (skipped whole), an opening or a closing bracket, a too-long run of digits.
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_PARENS = bytes.maketrans(b"[{]}", b"(())")
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")


@functools.lru_cache(maxsize=8)
def _tokens(max_digits: int) -> re.Pattern[str]:
    return re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|[\]}]|\d{' + str(max_digits + 1) + ",}")


class JSONLimitError(ValueError):
    """The text nests deeper or holds a longer number than the bounds allow. ``problem`` says
    what and where; ``str()`` adds the fix for a client that sent it."""

    def __init__(self, problem: str, fix: str) -> None:
        super().__init__(f"{problem}: {fix}")
        self.problem = problem


class NonFiniteError(ValueError):
    """The text holds ``NaN``, ``Infinity`` or ``-Infinity``: Python's parser takes them, JSON
    (RFC 8259) has no such values, and protobuf and most clients refuse them."""

    def __init__(self, name: str) -> None:
        super().__init__(f"{name} is not a JSON value (JSON has no NaN or Infinity): send finite numbers")


def _refuse_constant(name: str) -> Any:
    raise NonFiniteError(name)


def check_finite(text: str | bytes) -> None:
    """Raise :class:`NonFiniteError` when ``text`` parses only with a non-standard constant.
    Parses only text that holds ``NaN`` or ``Infinity`` somewhere (in a string, usually): most
    text is never parsed here. Text that is not JSON at all is left to the caller's parser."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if "NaN" not in text and "Infinity" not in text:
        return
    try:
        json.loads(text, parse_constant=_refuse_constant)
    except json.JSONDecodeError:
        return


def check_json(text: str | bytes, *, max_depth: int = MAX_JSON_DEPTH, max_digits: int = MAX_NUMBER_DIGITS) -> None:
    """Raise :class:`JSONLimitError` when ``text`` nests arrays/objects deeper than ``max_depth``
    or holds a number with more than ``max_digits`` digits in a row (outside strings)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    long_digits = re.compile(r"\d{" + str(max_digits + 1) + "}")
    if text.count("[") + text.count("{") <= max_depth and not long_digits.search(text):
        return  # too few brackets to nest that deep, no long digit run anywhere
    bare = _STRING.sub("", text)
    if not long_digits.search(bare) and not _depth_over(_brackets(bare), max_depth):
        return
    _locate(text, max_depth, max_digits)


def _brackets(text: str) -> bytes:
    """Only the brackets of ``text``, as ``(`` and ``)`` (one C pass; UTF-8 multi-byte sequences
    hold no ASCII bytes, so none is mistaken for a bracket)."""
    return text.encode("utf-8", "surrogatepass").translate(_PARENS, _NOT_BRACKET)


def _depth_over(s: bytes, max_depth: int) -> bool:
    """Whether brackets (as ``(`` and ``)``) nest deeper than ``max_depth`` (unclosed openers count: the
    parser recurses into them before it finds the end missing). Each pass deletes every innermost
    pair at C speed, so a megabyte takes milliseconds, not a Python step per byte."""
    if b"(" * (max_depth + 1) in s:
        return True  # the usual hostile shape, found in one pass
    passes = 0
    while b"()" in s:
        if passes == max_depth:
            return True
        s = s.replace(b"()", b"")
        passes += 1
    return passes + s.count(b"(") > max_depth


def _locate(text: str, max_depth: int, max_digits: int) -> None:
    """The slow scan, run only once the fast one found a violation: raise naming its offset."""
    depth = 0
    for match in _tokens(max_digits).finditer(text):
        token = match.group()
        if token[0] == '"':
            continue
        if token in "[{":
            depth += 1
            if depth > max_depth:
                raise JSONLimitError(
                    f"JSON nested more than {max_depth} levels deep at character {match.start()}", "flatten it"
                )
        elif token in "]}":
            depth = max(depth - 1, 0)
        else:
            raise JSONLimitError(
                f"a number at character {match.start()} has {len(token)} digits, over the limit of {max_digits}",
                "send shorter numbers",
            )
    raise JSONLimitError(
        f"JSON nested more than {max_depth} levels deep or with a number over {max_digits} digits",
        "flatten it and shorten its numbers",
    )


def loads_bounded(
    text: str | bytes,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    max_digits: int = MAX_NUMBER_DIGITS,
    strict: bool = False,
) -> Any:
    """``json.loads`` after :func:`check_json`. Raises ``JSONLimitError`` or ``json.JSONDecodeError``
    (both ``ValueError``). ``strict``: JSON as RFC 8259 has it, ``NaN`` and ``Infinity`` refused
    with :class:`NonFiniteError` (what a client sends, or what it is given as JSON)."""
    check_json(text, max_depth=max_depth, max_digits=max_digits)
    return json.loads(text, parse_constant=_refuse_constant) if strict else json.loads(text)
