"""False claims used as the premise of a request ("Since vaccines cause autism, which ...?").

A framework lists the claims (``Check.premises``: one regex per claim, naming what is claimed,
e.g. vaccines causing autism); this module decides whether a request *states* one as its premise
rather than asking about it or asking for it to be debunked. A claim is a premise when:

- a premise word leads into it: "since", "given (that)", "because", "as we (all) know (that)",
  "now that", "considering (that)", "seeing as", "knowing that", "it's a (well-)known / proven
  fact that", "the fact that", or a question that presupposes it ("Which vaccines cause autism?");
- or a sentence opens with it and goes on from it: "Vaccines cause autism, so ...",
  "... therefore ...", "... . So ...".

It is not a premise when the request asks whether the claim is true ("Do vaccines cause
autism?", "Is it true that ...?", "Vaccines cause autism, right?"), when it negates the claim (the
claim regexes admit no negation), or when the claim is quoted or follows a request to debunk,
fact-check or answer it ("Debunk this: since vaccines cause autism, ..."). The words are English,
as are the frameworks' other checks.
"""

from __future__ import annotations

import functools
import re

# What may lead into a stated premise. Bare "is it true that" is absent on purpose: it asks.
_LEAD = (
    r"(?:\b(?:since|given(?:\s+that)?|because|\bcause|cos|cuz|now\s+that|considering(?:\s+that)?"
    r"|seeing\s+(?:as|that)|knowing\s+that|the\s+fact\s+that"
    r"|(?:as\s+)?(?:we|you|everyone|everybody|people|i)\s+(?:all\s+)?(?:know|knows|now\s+know)(?:\s+that)?"
    r"|it\W?s\s+(?:a\s+|an\s+)?(?:well[-\s]|widely\s+|scientifically\s+)?(?:known|proven|established|documented)"
    r"(?:\s+fact)?\s+that|it\W?s\s+a\s+fact\s+that|which|what)\s+)"
)
# A sentence that opens with the claim (after an interjection) and goes on from it.
_OPENING = r"(?:^|[.!?;\n]\s*)[\W_]*(?:(?:well|ok|okay|look|listen|so|honestly|seriously|obviously|clearly)[,\s]+)*"
_ONWARD = (
    r"(?:(?!\b(?:no|not|never|nobody|false|myth|wrong|untrue|debunked|claim\w*|rumou?r\w*)\b|\b(?:do|does|did|is|are|was|were|ca|wo|could|would|should|have|has)n\W?t\b)[^.?!\n]){0,60}?"
    r"(?:[,;:\u2014\u2013]\s*|\s+-\s+|[.!]\s+|\s+)(?:so|therefore|thus|hence|which\s+means|that\W?s\s+why|and\s+so)\b"
)
# The request asks to debunk or answer what follows, or quotes it.
_DEBUNK = re.compile(
    r"\b(?:debunk\w*|refut\w*|rebut\w*|fact[-\s]?check\w*|counter[-\s]?argu\w*|argue\s+against"
    r"|push(?:ing)?\s+back\s+(?:on|against)|(?:respond|reply|answer)(?:ing)?\s+(?:to\s+)?(?:this|that|them|him|her|people|someone|a\s+\w+)"
    r"|explain\s+why\b[^?!\n]{0,100}?\b(?:wrong|false|untrue|a\s+myth)|what\W?s\s+wrong\s+with)\b",
    re.IGNORECASE,
)
_QUOTES = "\"'\u201c\u201d\u2018\u2019\u00ab\u00bb"


@functools.lru_cache(maxsize=256)
def _compiled(claim: str) -> tuple[re.Pattern[str], re.Pattern[str]]:
    led = re.compile(f"{_LEAD}(?:{claim})", re.IGNORECASE)
    opening = re.compile(f"{_OPENING}((?:{claim}){_ONWARD})", re.IGNORECASE)
    return led, opening


def _quoted(text: str, start: int) -> bool:
    """Whether ``start`` lies inside a quotation that opens before it in ``text``: an odd number
    of quote marks before it on its line (apostrophes inside words excepted)."""
    line = text[text.rfind("\n", 0, start) + 1 : start]
    marks = [i for i, c in enumerate(line) if c in _QUOTES]
    marks = [i for i in marks if not (0 < i < len(line) - 1 and line[i - 1].isalnum() and line[i + 1].isalnum())]
    return len(marks) % 2 == 1


# A cleft that puts the claim's subject first ("the MMR jab is what gave him autism"): read as the
# claim itself ("the MMR jab gave him autism"), which the claim regexes name.
_CLEFT = re.compile(
    r"\s+(?:is|was|are|were|'s)\s+(?:(?:really|actually|exactly|obviously|clearly|definitely|just)\s+)?what\s+(?=\w)",
    re.IGNORECASE,
)


def stated_premise(claim: str, text: str) -> str | None:
    """The words of ``text`` that state ``claim`` (a regex) as a premise, or None."""
    text = _CLEFT.sub(" ", text)
    led, opening = _compiled(claim)
    for regex in (led, opening):
        for m in regex.finditer(text):
            start = m.start(m.lastindex) if m.lastindex else m.start()
            if any(d.start() < start for d in _DEBUNK.finditer(text)) or _quoted(text, start):
                continue
            return m.group(0).strip()
    return None


def find_premise(claims: tuple[str, ...], text: str) -> str | None:
    """The first of ``claims`` that ``text`` states as a premise, as its words, or None."""
    for claim in claims:
        if (found := stated_premise(claim, text)) is not None:
            return found
    return None
