"""A weekly-only medicine told to be taken daily, for the dose check (a part of :mod:`.doses`):
a daily schedule that belongs to the medicine and is advice, not a warning."""

from __future__ import annotations

import re

from ._dose_judging import _ONCE_A_WEEK
from ._dose_labels import DoseLimit
from ._dose_reading import _CLAUSE
from ._dose_request import DoseContext

#: A schedule of every day: "every day", "each morning", "daily", "once a day", "twice a day",
#: "three times a day", "every 12 hours".
_DAILY_SCHEDULE = re.compile(
    r"\b(?:every|each)\s+(?:single\s+)?(?:day|morning|evening|night)\b|\bdaily\b|\bday\s+after\s+day\b"
    r"|\b(?:once|twice|(?:two|three|four|\d)\s+times)\s+(?:a|per|each|every)\s+day\b"
    r"|\bevery\s+(?:\d{1,2}|four|six|eight|twelve)\s+hours\b",
    re.IGNORECASE,
)
#: Words before a daily schedule that make it no advice: "never daily", "not every day", "instead
#: of daily", "daily by mistake".
_NOT_DAILY = re.compile(r"(?:\b(?:not|never|no|instead\s+of|rather\s+than)\b|n't)(?:\s+\w+){0,3}\s*$", re.IGNORECASE)
#: A sentence that warns of daily dosing rather than advising it.
_DAILY_WARNING = re.compile(
    r"\b(?:mistak\w*|errors?|accident\w*|overdos\w*|fatal\w*|deaths?|died|harm\w*|danger\w*|toxic\w*|"
    r"poison\w*|serious|never|instead\s+of)\b",
    re.IGNORECASE,
)
#: Another substance, the nearest named before a daily schedule: the schedule is its ("folic acid
#: every day except your methotrexate day"), not the weekly medicine's.
_OTHER_DAILY = re.compile(
    r"\b(?:folic\s+acid|folate|folinic\s+acid|leucovorin|vitamins?|supplements?|water|fluids?|"
    r"(?:other|your\s+other)\s+(?:medicines?|medications?|tablets?|pills?)|painkillers?|steroids?|prednisolone|"
    r"ibuprofen|paracetamol|acetaminophen|naproxen|aspirin|sunscreen|cream|ointment)\b",
    re.IGNORECASE,
)
#: A pronoun for the medicine, with a verb of taking: "take it every day", "have your tablets daily".
_TAKE_IT = re.compile(
    r"\b(?:take|taking|takes|have|having|use|using)\s+(?:it|them|your\s+(?:tablets?|pills?|doses?|dose|"
    r"medicine|medication|injection|injections))\b",
    re.IGNORECASE,
)


def _taken_daily(
    limits: tuple[DoseLimit, ...], text: str, table: tuple[DoseLimit, ...], request: DoseContext | None
) -> str | None:
    """The first sentence of ``text`` that tells to take a weekly-only medicine of ``limits``
    every day ("take 10 mg of methotrexate every day", "methotrexate works best taken daily",
    "take it every morning" in a text whose only medicine is that one, or that names none of
    ``table`` when the request names that one), described for the evidence; None when none
    does. A negated or warned-against schedule ("never take it every day", "taking it daily by
    mistake can kill") is not advice, and a schedule that belongs to another substance named
    nearer before it ("folic acid every day") is not the medicine's."""
    named = [limit for limit in limits if limit._pattern.search(text)]
    if not named and request is not None and not any(limit._pattern.search(text) for limit in table):
        named = [limit for limit in limits if limit._pattern.search(request.request)]  # the one asked about
    if not named:
        return None
    for clause in _CLAUSE.split(text):
        for m in _DAILY_SCHEDULE.finditer(clause):
            before = clause[: m.start()]
            if _NOT_DAILY.search(before) or _DAILY_WARNING.search(clause):
                continue
            mentions = [(x.start(), limit) for limit in named for x in limit._pattern.finditer(clause)]
            others = [x.start() for x in _OTHER_DAILY.finditer(before)]
            ahead = [(at, limit) for at, limit in mentions if at < m.start()]
            if ahead:
                at, limit = max(ahead, key=lambda pair: pair[0])
                if others and max(others) > at:
                    continue
            elif mentions and not others:
                at, limit = min(mentions, key=lambda pair: pair[0])
            elif len(named) == 1 and not others and _TAKE_IT.search(before):
                limit = named[0]
            else:
                continue
            return f"{limit.drug[0]}: {m.group(0)!r}: {limit.drug[0]} {_ONCE_A_WEEK} ({limit.source})"
    return None
