"""The reference-answer set behind the usefulness part of ``bench/overhead.py`` and its scoring rule.

Rule (documented in docs/performance.md beside the figures): an answer is *correct* when, after
normalisation, it contains one of the item's accepted answers as a whole run of tokens and none
of its rejected ones. Normalisation (applied to the answer and to every accepted or rejected
string alike):

* Unicode NFKC, accents dropped, lower case;
* thousands separators removed (``4,000`` -> ``4000``);
* the text split into tokens: numbers (``-?digits[.digits]``; a minus only at the start of a
  word, so ``60-100`` is two numbers) and runs of letters; everything else (punctuation, ``°``,
  spaces) separates tokens;
* numbers written canonically (``100.0`` -> ``100``, ``2.50`` -> ``2.5``) and number words from
  zero to twenty and the tens written as digits (``seven`` -> ``7``).

Matching whole tokens means ``10`` is not found in ``100`` and ``au`` is not found in ``auto``.
The rule is lenient in one direction on purpose: an answer that states the right value beside
wrong ones counts as correct unless an item lists the wrong value under ``reject``.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REFERENCE = Path(__file__).resolve().parent / "data" / "reference_answers.yaml"

_WORDS = [
    *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"),
    *("eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen"),
    *("nineteen", "twenty"),
]
_TENS = ["thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]
NUMBER_WORDS: dict[str, str] = {w: str(i) for i, w in enumerate(_WORDS)}
NUMBER_WORDS.update({w: str(10 * i) for i, w in enumerate(_TENS, start=3)})
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")
_TOKEN = re.compile(r"(?:(?<![a-z0-9])-)?\d+(?:\.\d+)?|[a-z]+")


@dataclass(frozen=True)
class ReferenceItem:
    """One question, the answers that make a reply correct, and the ones that make it wrong."""

    question: str
    accept: tuple[str, ...]
    reject: tuple[str, ...] = ()


def _number(token: str) -> str:
    if "." in token:
        token = token.rstrip("0").rstrip(".")
    sign = "-" if token.startswith("-") else ""
    digits = token.lstrip("-")
    whole, dot, frac = digits.partition(".")
    whole = whole.lstrip("0") or "0"
    out = whole + (dot + frac if frac else "")
    return "0" if out == "0" else sign + out


def tokens(text: str) -> list[str]:
    """The normalised tokens of ``text`` (module doc)."""
    text = unicodedata.normalize("NFKC", text)
    text = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).lower()
    text = _THOUSANDS.sub("", text)
    out: list[str] = []
    for tok in _TOKEN.findall(text):
        if tok[0] in "-0123456789":
            out.append(_number(tok))
        else:
            out.append(NUMBER_WORDS.get(tok, tok))
    return out


def _contains(haystack: Sequence[str], needle: Sequence[str]) -> bool:
    n = len(needle)
    return n > 0 and any(list(haystack[i : i + n]) == list(needle) for i in range(len(haystack) - n + 1))


def is_correct(answer: str, item: ReferenceItem) -> bool:
    """Whether ``answer`` contains an accepted answer of ``item`` and no rejected one (module doc)."""
    got = tokens(answer)
    if any(_contains(got, tokens(r)) for r in item.reject):
        return False
    return any(_contains(got, tokens(a)) for a in item.accept)


def load_reference(path: Path = REFERENCE) -> list[ReferenceItem]:
    """The reference set: ``items``, each with ``q``, ``accept`` and optional ``reject`` (string lists).

    Bad input ends with a one-line error naming the file, the item and the fix."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as exc:
        raise SystemExit(f"error: cannot read the reference-answer set {path}: {exc}") from None
    raw = data.get("items") if isinstance(data, dict) else None
    if not isinstance(raw, list) or not raw:
        raise SystemExit(f"error: {path} must hold a non-empty list under 'items'")
    items: list[ReferenceItem] = []
    for i, entry in enumerate(raw, start=1):
        ok = isinstance(entry, dict) and isinstance(entry.get("q"), str) and entry["q"].strip()
        lists = [entry.get(k, []) for k in ("accept", "reject")] if isinstance(entry, dict) else []
        ok = ok and all(isinstance(v, list) and all(isinstance(x, str) and tokens(x) for x in v) for v in lists)
        if not ok or not entry.get("accept"):
            raise SystemExit(
                f"error: {path}, item {i}: needs 'q' (text) and 'accept' (a non-empty list of strings with "
                "letters or digits); 'reject' is an optional list of such strings"
            )
        items.append(ReferenceItem(entry["q"].strip(), tuple(entry["accept"]), tuple(entry.get("reject", []))))
    return items
