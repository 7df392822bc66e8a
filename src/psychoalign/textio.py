"""Text at the edge: every request, file and stream is normalised or refused here, once.

Models, stores and JSON encoders downstream can then rely on well-formed text: no NUL (PostgreSQL
text cannot hold it), no lone surrogates (not encodable as UTF-8), no invisible control
characters, NFC-normalised.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import unicodedata
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .errors import InputError, PsychoAlignError

__all__ = [
    "FORMULA_START",
    "INVISIBLE",
    "csv_reader",
    "decode_utf8",
    "file_signature",
    "nonblank_lines",
    "normalise_text",
    "parse_jsonl_objects",
    "read_jsonl_objects",
    "read_text",
    "skeleton",
    "spreadsheet_safe",
    "terminal_text",
    "visible_marker",
]

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def normalise_text(text: str) -> str:
    """NFC text with lone surrogates replaced by U+FFFD and control characters other than tab,
    newline and carriage return (NUL included) removed."""
    text = _SURROGATE.sub("\ufffd", text)
    return unicodedata.normalize("NFC", _CONTROL.sub("", text))


#: Characters that change how the text around them displays (bidi embeddings, overrides, isolates
#: and marks) or that hide in it (zero-width space, word joiner, invisible operators, BOM, soft
#: hyphen, Mongolian vowel separator). Shown as visible markers wherever untrusted text is displayed
#: (web pages, the terminal) so a reader sees what is stored: ``Harmless \u202egnp.exe\u202c`` would
#: otherwise display as "Harmless exe.png". The joiners U+200C/U+200D stay: scripts (Persian,
#: Indic) and emoji sequences need them and they reorder nothing.
INVISIBLE = frozenset(
    [0x00AD, 0x061C, 0x180E, 0x200B, 0x200E, 0x200F, 0xFEFF, *range(0x202A, 0x202F), *range(0x2060, 0x206A)]
)

# What a terminal must not receive raw, besides INVISIBLE: C0 controls other than tab and newline
# (ESC starts escape sequences: clear the screen, move the cursor, retitle the window), DEL, and
# the C1 controls (U+009B is a one-character CSI on some terminals).
_TERMINAL_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f" + "".join(re.escape(chr(c)) for c in sorted(INVISIBLE)) + "]"
)


def visible_marker(char: str) -> str:
    """The visible stand-in for a hidden or control character: ``⟨U+202E⟩``."""
    return f"⟨U+{ord(char):04X}⟩"


def terminal_text(text: str) -> str:
    """``text`` safe to write to a terminal: every :data:`INVISIBLE` character and every control
    character other than tab and newline (ESC, CR, DEL, the C1 range) replaced by its
    ``⟨U+XXXX⟩`` marker, the same marker the web pages show. A stored request can then neither
    reorder what is printed around it nor send escape sequences to the terminal. CRLF line ends
    become newlines. For display only: machine output (JSON, YAML, CSV) keeps the exact text."""
    text = text.replace("\r\n", "\n")
    return _TERMINAL_UNSAFE.sub(lambda m: visible_marker(m.group()), text)


# Latin look-alikes from other scripts (Cyrillic, Greek, letter-like symbols) that NFKD leaves
# alone: enough to read an identifier or a keyword spelled with them as the Latin it imitates.
_CONFUSABLES = str.maketrans(
    {
        **dict(zip("АВЕКМНОРСТУХЅІЈԁаеорсуххѕіјһԛԝӏ", "ABEKMHOPCTYXSIJdaeopcyxxsijhqwl", strict=True)),
        **dict(zip("ΑΒΕΖΗΙΚΜΝΟΡΤΥΧαβεικνορτυχ", "ABEZHIKMNOPTYXabeiknoptux", strict=True)),
        **dict.fromkeys("\u2010\u2011\u2012\u2013\u2014\u2015\u2212\ufe58\ufe63\uff0d", "-"),
        "ı": "i",
        "ℓ": "l",
    }
)


def skeleton(text: str) -> str:
    """``text`` as the Latin it imitates, for matching identifiers and keywords against spellings
    meant to slip past them: compatibility forms folded (NFKD: fullwidth, ligatures, super- and
    subscripts), combining marks and invisible format characters (zero-width, bidi, soft hyphen)
    dropped, Cyrillic and Greek look-alikes mapped to Latin, dashes to ``-``. ASCII text is
    returned unchanged (no work on the common path). Not for display: it loses information."""
    if text.isascii():
        return text
    folded = unicodedata.normalize("NFKD", text).translate(_CONFUSABLES)
    return "".join(c for c in folded if c.isascii() or unicodedata.category(c) not in _INVISIBLE)


_INVISIBLE = frozenset({"Mn", "Me", "Cf"})


def decode_utf8(data: bytes, source: str, *, error: type[PsychoAlignError] = InputError) -> str:
    """``data`` as text (a UTF-8 BOM is dropped); otherwise ``error`` naming ``source``, the byte
    and its offset, and the fix."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        byte = data[exc.start : exc.start + 1].hex()
        raise error(
            f"{source} is not UTF-8 text (byte 0x{byte} at offset {exc.start})",
            hint="save it as UTF-8 (e.g. `iconv -f latin1 -t utf-8`)",
        ) from None


def read_text(
    path: str | Path,
    *,
    what: str = "file",
    error: type[PsychoAlignError] = InputError,
    max_bytes: int | None = None,
) -> str:
    """The UTF-8 text of ``path``; one-line ``error`` naming the file when it cannot be read, is
    not UTF-8 (a binary file, a Latin-1 file) or is larger than ``max_bytes`` (checked before
    reading it: a huge file costs nothing)."""
    path = Path(path)
    try:
        if max_bytes is not None and path.is_file() and (size := path.stat().st_size) > max_bytes:
            raise error(
                f"{what} {path} is {size / 2**20:.0f} MB, more than the {max_bytes // 2**20} MB read",
                hint="split the file",
            )
        data = path.read_bytes()
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}", hint="check the path") from None
    return decode_utf8(data, f"{what} {path}", error=error)


def csv_reader(path: str | Path, *, what: str = "file") -> csv.DictReader[str]:
    """The rows of a CSV file with a header, read as :func:`read_text` reads (the first row is line 2)."""
    return csv.DictReader(io.StringIO(read_text(path, what=what), newline=""))


def file_signature(st: os.stat_result) -> tuple[int, int, int, int]:
    """(size, mtime_ns, inode, device): a file whose signature is unchanged need not be read again
    (the readers that keep what they read compare it before trusting their copy)."""
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


def nonblank_lines(path: str | Path, *, what: str = "file") -> Iterator[tuple[int, str]]:
    """(line number, line) of a text file read as :func:`read_text` reads, blank lines skipped."""
    return _nonblank(read_text(path, what=what))


def _nonblank(text: str) -> Iterator[tuple[int, str]]:
    return ((n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip())


def read_jsonl_objects(path: str | Path, *, what: str = "file") -> list[tuple[int, dict[str, Any]]]:
    """The JSON objects of a JSON-lines file with their line numbers (blank lines skipped), read
    as :func:`read_text` reads; a line that is not a JSON object is a one-line ``InputError``
    naming ``path:line``."""
    return parse_jsonl_objects(read_text(path, what=what), str(path))


def parse_jsonl_objects(text: str, source: str) -> list[tuple[int, dict[str, Any]]]:
    """:func:`read_jsonl_objects` of text already read (``source`` names it in errors)."""
    rows = []
    for n, line in _nonblank(text):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(f"{source}:{n}: invalid JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise InputError(f"{source}:{n}: expected a JSON object")
        rows.append((n, row))
    return rows


#: A CSV cell whose text starts with one of these is a formula to Excel, LibreOffice and Google
#: Sheets; the full-width forms too (U+FF1D ＝, U+FF0B ＋, U+FF0D －, U+FF20 ＠): a spreadsheet set
#: for East Asian input reads them as their ASCII forms. A leading tab or carriage return is
#: neutralised on its own (OWASP's list).
FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20", "\t", "\r")


def _skipped_before_formula(ch: str) -> bool:
    # spreadsheets trim leading blanks (and never show control or format characters), so
    # " =cmd", "\n=cmd" and "\u200b=cmd" run as formulas too
    return ch.isspace() or unicodedata.category(ch) in ("Cc", "Cf")


def spreadsheet_safe(value: object) -> object:
    """A CSV cell that a spreadsheet opens as text, never as a formula (OWASP CSV injection): a
    string whose first character that is not whitespace, a control or a format character is one
    of :data:`FORMULA_START` (or that starts with a tab or carriage return) gets a leading
    apostrophe, unless it is a number written as text ("-1.5": a spreadsheet reads a number).
    Everything else passes unchanged. The one check of every CSV the package writes: participant
    text, data-folder text and model output are untrusted (``=HYPERLINK(...)`` must not become a
    live link in the reader's spreadsheet)."""
    if not isinstance(value, str) or not value:
        return value
    if not value.startswith(("\t", "\r")):
        start = next((i for i, ch in enumerate(value) if not _skipped_before_formula(ch)), len(value))
        if not value.startswith(FORMULA_START[:8], start):
            return value
        try:
            float(value)
            return value
        except ValueError:
            pass
    return "'" + value
