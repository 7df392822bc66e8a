"""Normalising model output before any rule reads it, with a map back to the original text.

Model output is hostile input: curly apostrophes (``I can’t``), full-width letters, zero-width
characters, markdown emphasis and odd spacing must not change what a rule sees. :func:`normalise`
folds all of them into one plain, case-folded form and remembers, for every character it keeps,
where it came from, so a rule's match can be reported as an exact span of the original text.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

__all__ = ["NormalisedText", "normalise"]

# Typographic variants that NFKC leaves alone.
_FOLD = {
    "\u2018": "'",  # ‘
    "\u2019": "'",  # ’
    "\u201a": "'",  # ‚
    "\u201b": "'",  # ‛
    "\u02bc": "'",  # ʼ
    "\u02b9": "'",  # ʹ
    "\u2032": "'",  # ′
    "\u00b4": "'",  # ´
    "`": "'",
    "\u201c": '"',  # “
    "\u201d": '"',  # ”
    "\u201e": '"',  # „
    "\u201f": '"',  # ‟
    "\u2033": '"',  # ″
    "\u00ab": '"',  # «
    "\u00bb": '"',  # »
    "\u2010": "-",
    "\u2011": "-",
    "\u2012": "-",
    "\u2013": "-",
    "\u2014": "-",
    "\u2015": "-",
    "\u2212": "-",
    "\u2026": "...",
}
# Invisible characters (zero-width, soft hyphen, BOM, bidi controls) and markdown emphasis.
_DROP = set("\u200b\u200c\u200d\u2060\ufeff\u00ad\u200e\u200f\u202a\u202b\u202c\u202d\u202e*_")


@dataclass(frozen=True)
class NormalisedText:
    """``text`` is the normalised form; ``origin[i]`` is the index in ``original`` that produced
    ``text[i]`` (so ``len(origin) == len(text)``)."""

    original: str
    text: str
    origin: tuple[int, ...]

    def span(self, start: int, end: int) -> tuple[int, int]:
        """The original-text span ``[a, b)`` that produced ``text[start:end]`` (``end > start``)."""
        if not self.text or end <= start:
            return (0, 0)
        a = self.origin[min(start, len(self.origin) - 1)]
        b = self.origin[min(end, len(self.origin)) - 1] + 1
        # extend to cover a whole multi-character source (e.g. a ligature) and trailing dropped marks
        return (a, max(b, a))

    def excerpt(self, start: int, end: int) -> str:
        a, b = self.span(start, end)
        return self.original[a:b]


_NEWLINES = "\r\n\u2028\u2029\x0b\x0c\x85"


def _map_char(ch: str) -> str:
    """What one character becomes before runs of white space are collapsed: dropped (``""``),
    folded, NFKC-normalised and case-folded, with every line break as ``\\n`` and every other
    white space as ``" "``."""
    if ch in _DROP:
        return ""
    piece = _FOLD.get(ch)
    if piece is None:
        piece = unicodedata.normalize("NFKC", ch)
        piece = "".join(_FOLD.get(c, c) for c in piece if c not in _DROP).casefold()
    return "".join("\n" if c in _NEWLINES else " " if c.isspace() else c for c in piece)


# ASCII in one C-level pass: a translate table with _map_char's answer for each ASCII character
# (single characters only: every ASCII character maps to at most one).
_ASCII_MAP = {chr(c): _map_char(chr(c)) for c in range(128)}
_ASCII_TABLE = str.maketrans({k: (v or None) for k, v in _ASCII_MAP.items() if v != k})
_ASCII_KEPT = re.compile("[^" + re.escape("".join(k for k, v in _ASCII_MAP.items() if not v)) + "\x80-\U0010ffff]+")
_NON_ASCII = re.compile("[\x80-\U0010ffff]")
_WHITE_RUN = re.compile("[ \n]{2,}")


def normalise(text: str) -> NormalisedText:
    """NFKC, typographic quotes and dashes folded to ASCII, invisible characters and ``*``/``_``
    dropped, case-folded; runs of spaces become one space and runs of line breaks one ``\\n``
    (a run of both becomes one ``\\n``, mapped to its first line break).

    Runs of ASCII are mapped at once (a translate table) and only other characters one by one:
    the result is identical to mapping every character with :func:`_map_char` (a test checks it
    against that per-character definition), at a small fraction of the cost on model output.
    """
    parts: list[str] = []
    origin: list[int] = []

    def ascii_span(a: int, b: int) -> None:
        for m in _ASCII_KEPT.finditer(text, a, b):
            parts.append(m.group().translate(_ASCII_TABLE))
            origin.extend(range(m.start(), m.end()))

    pos = 0
    if not text.isascii():
        for m in _NON_ASCII.finditer(text):
            i = m.start()
            if i > pos:
                ascii_span(pos, i)
            piece = _map_char(m.group())
            if piece:
                parts.append(piece)
                origin.extend([i] * len(piece))
            pos = i + 1
    if pos < len(text):
        ascii_span(pos, len(text))
    mapped = "".join(parts)
    runs = list(_WHITE_RUN.finditer(mapped))
    if not runs:
        return NormalisedText(original=text, text=mapped, origin=tuple(origin))
    out: list[str] = []
    kept: list[int] = []
    last = 0
    for m in runs:
        a, b = m.span()
        out.append(mapped[last:a])
        kept.extend(origin[last:a])
        k = m.group().find("\n")
        out.append("\n" if k >= 0 else " ")
        kept.append(origin[a + k] if k >= 0 else origin[a])
        last = b
    out.append(mapped[last:])
    kept.extend(origin[last:])
    return NormalisedText(original=text, text="".join(out), origin=tuple(kept))
