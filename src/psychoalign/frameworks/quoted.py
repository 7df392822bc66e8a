"""Quoted material in a request, for frameworks whose users bring content to analyse.

A framework that sets ``quoted_material: analysed`` (content moderation) has its requests screened
with their clearly delimited quoted material replaced by :data:`PLACEHOLDER`, so the classifier
EVALUATOR's request head judges what the user asks about the material, not the material
(docs/frameworks.md, "Quoted material"). Only the request head reads the masked text: the
framework's checks, the crisis check and the adversarial head read the whole request, and every
draft is judged in full.

What counts as quoted material (conservative: a delimiter must be closed, and an ambiguous one is
left as it is):

* a fenced code block, from a line opening with three backticks or tildes to the line closing it;
* a blockquote: consecutive lines starting with ``>``;
* text between paired double quotes (``"..."``, ``\u201c...\u201d``, ``\u00ab...\u00bb``) on one
  paragraph; single quotes only where a colon opens them and they close the paragraph
  (``Classify this post: 'they are vermin'``), since elsewhere they are apostrophes as often as
  quotes;
* the rest of a paragraph after a ``Post:``, ``Comment:`` or ``Message:`` label that starts a line
  or follows the end of a sentence (``... policy? Post: ...``).

A request that is nothing but quoted material (fewer than :data:`MIN_OWN_WORDS` words of its own
outside it) is left whole: there is no ask to judge apart from the material, so it is judged as
any request is.
"""

from __future__ import annotations

import re

__all__ = ["MIN_OWN_WORDS", "PLACEHOLDER", "mask_quoted"]

#: What replaces each stretch of quoted material: plain words that name the material's role and
#: no topic (the embedded request head reads bracketed template slots as a jailbreak's).
PLACEHOLDER = "the content under review"

#: Words of its own (outside quoted material) a request needs for its material to be masked.
MIN_OWN_WORDS = 2

_FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})[^\n]*\n.*?^[ \t]*\1[ \t]*$", re.MULTILINE | re.DOTALL)
_BLOCKQUOTE = re.compile(r"(?:^[ \t]*>[^\n]*(?:\n|$))+", re.MULTILINE)
# Paired double quotes within one paragraph (no blank line inside); at least one character.
_QUOTES = (
    re.compile(r'"(?:(?!\n[ \t]*\n)[^"])+"'),
    re.compile(r"\u201c(?:(?!\n[ \t]*\n)[^\u201c\u201d])+\u201d"),
    re.compile(r"\u00ab(?:(?!\n[ \t]*\n)[^\u00ab\u00bb])+\u00bb"),
)
# Single quotes a colon opens that close the paragraph (a final stop allowed): "Classify this post:
# 'they are vermin'". An apostrophe inside ("it's") does not end it; the closing mark must.
_COLON_SINGLE = re.compile(r"(?<=:)[ \t]*['\u2018](?:(?!\n[ \t]*\n).)+?['\u2019][ \t]*[.?!]?[ \t]*(?=\n|$)", re.DOTALL)
# A label at the start of a line or after a sentence end, then the rest of its paragraph.
_LABEL = re.compile(
    r"(?:^|(?<=[.?!:])[ \t]+)[ \t]*(post|comment|message)[ \t]*:[ \t]*(?:(?!\n[ \t]*\n).)+",
    re.IGNORECASE | re.MULTILINE | re.DOTALL,
)
_WORD = re.compile(r"\w+")


def mask_quoted(text: str) -> str:
    """``text`` with each stretch of quoted material (module doc) replaced by :data:`PLACEHOLDER`;
    ``text`` itself when it has none, or when fewer than :data:`MIN_OWN_WORDS` of its words lie
    outside it."""
    masked = _FENCE.sub(PLACEHOLDER, text)
    masked = _BLOCKQUOTE.sub(lambda m: PLACEHOLDER + ("\n" if m.group(0).endswith("\n") else ""), masked)
    masked = _LABEL.sub(lambda m: m.group(0)[: m.end(1) - m.start(0)] + ": " + PLACEHOLDER, masked)
    for quotes in _QUOTES:
        masked = quotes.sub(PLACEHOLDER, masked)
    masked = _COLON_SINGLE.sub(" " + PLACEHOLDER, masked)
    if masked == text:
        return text
    own = _WORD.findall(masked.replace(PLACEHOLDER, " "))
    return masked if len(own) >= MIN_OWN_WORDS else text
