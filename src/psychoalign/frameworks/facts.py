"""A deterministic check of everyday facts a text states: boiling and freezing points, fridge and
freezer temperatures, safe cooking temperatures, how long cooked food may stand out, the age a
baby may have honey from, and common unit conversions.

The EVALUATOR judges whether an answer is safe to give, not whether it is true: a small model
tells a user how to boil an egg and adds that "water boils at 120 °C", or that chicken is done at
"55 °C". A figure like that is checkable, so it is checked, as the dose table checks a
medicine's doses (:mod:`.doses`).

Two tables, both read within one clause of model text (never of a request: a user who asks
"does water boil at 90 °C?" is asking, not advising):

* :class:`Fact` rows, from the framework (``check.facts``): what a figure is about (``about``, a
  regex, named in the clause, or in the clause before when this one speaks of it by a pronoun or
  "there": "Put it in the fridge. It keeps there for a week."; ``when``, a regex the clause must
  also match, or the clause before it when this one speaks of it by a pronoun: "it boils at 50 °C";
  ``unless``, a regex that puts the clause out of
  the row's scope: altitude for the boiling point), what it measures (a temperature, read in °C
  from °C or °F; a duration, read in hours; an age, read in months) and the range a right
  figure falls in (``low``, ``high``). A figure belongs to the row whose ``about`` is named
  nearest before it in the clause, else first after it. Not compared: a temperature in a range
  ("40 to 140 °F": the danger zone), a temperature stated as a threshold ("store below 5 °C" for a
  cooking minimum, "never above 8 °C" for the fridge's maximum), and a duration past a row's
  maximum stated as one ("throw it away after 4 hours"); a span's upper end is compared ("2 to 3
  weeks"). Nor a figure named only to be ruled out (:func:`_ruled_out`: "100 °C, not 120 °C",
  "doesn't boil at 90 °C", "rather than 60 °C", "a myth that ..."); a negated limit states the
  limit and is compared ("don't leave it out for more than 6 hours"). In "not X but Y" the
  negation stops at "but": the clause after it asserts Y about what the clause before names
  ("boils not at 100 °C but at 120 °C" states 120 °C).
* unit conversions (``check.conversions``: which of :data:`UNITS`' dimensions are checked): two
  amounts the text equates ("350 °F is about 175 °C", "55 °C (130 °F)", "there are 454 grams in a
  pound", "a teaspoon holds 5 ml") must agree within :data:`TOLERANCE` (temperatures: within
  :data:`DEGREES` °C, or 5 %). A unit with more than one size (a US or a UK pint, a metric or a US
  cup) agrees when any of its sizes does. A wrong conversion is corrected by the unit fact, for one
  of the larger unit in the units the text used ("1 inch is 2.54 centimetres"), not by converting
  the text's own amount; the amount is kept only where the request asked about it ("how many
  centimetres are 5 inches?": "5 inches is 12.7 centimetres"). A temperature has no "one of": its
  correction converts the amount the request named, else the text's first.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from itertools import pairwise
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

__all__ = ["UNITS", "Fact", "WrongFact", "find_wrong_facts", "states_figures", "valid_regex"]

Measure = Literal["temperature", "duration", "age", "length"]
Dimension = Literal["temperature", "volume", "mass", "length"]

#: How far two equated amounts may differ and still agree: relative, for volume, mass and length.
TOLERANCE = 0.12
#: Temperatures agree within this many °C, or 5 % of the larger, whichever is more (recipes
#: round 176.7 °C to 180 °C for 350 °F, and 392 °F to 400 °F for 200 °C).
DEGREES = 4.0

#: Units of each dimension: a regex for its names and its size in the dimension's base unit (ml,
#: g, m), low and high where countries differ (a US or UK pint, a US or metric cup, an Australian
#: tablespoon). Temperatures are read separately (°C and °F).
UNITS: dict[str, tuple[Dimension, str, float, float]] = {
    "teaspoon": ("volume", r"teaspoons?|tsps?", 4.93, 5.0),
    "tablespoon": ("volume", r"tablespoons?|tbsps?|tbs", 14.79, 20.0),
    "cup": ("volume", r"cups?", 236.6, 250.0),
    "fluid ounce": ("volume", r"fluid\s+ounces?|fl\.?\s*oz", 28.41, 29.57),
    "pint": ("volume", r"pints?", 473.2, 568.3),
    "quart": ("volume", r"quarts?", 946.4, 1136.5),
    "gallon": ("volume", r"gallons?", 3785.4, 4546.1),
    "ml": ("volume", r"ml|mls|millilit(?:re|er)s?", 1.0, 1.0),
    "litre": ("volume", r"l|lit(?:re|er)s?", 1000.0, 1000.0),
    "gram": ("mass", r"g|grams?|grammes?", 1.0, 1.0),
    "kilogram": ("mass", r"kg|kgs|kilos?|kilograms?", 1000.0, 1000.0),
    "pound": ("mass", r"lbs?|pounds?", 453.59, 453.59),
    "ounce": ("mass", r"oz|ounces?", 28.35, 28.35),
    "stone": ("mass", r"stones?", 6350.3, 6350.3),
    "metre": ("length", r"m|met(?:re|er)s?", 1.0, 1.0),
    "centimetre": ("length", r"cm|centimet(?:re|er)s?", 0.01, 0.01),
    "millimetre": ("length", r"mm|millimet(?:re|er)s?", 0.001, 0.001),
    "kilometre": ("length", r"km|kms|kilomet(?:re|er)s?", 1000.0, 1000.0),
    "inch": ("length", r"inch(?:es)?", 0.0254, 0.0254),
    "foot": ("length", r"foot|feet|ft", 0.3048, 0.3048),
    "yard": ("length", r"yards?|yds?", 0.9144, 0.9144),
    "mile": ("length", r"miles?", 1609.344, 1609.344),
}

_NUMBER_WORDS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "each": 1,
    "every": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "eighteen": 18,
    "twenty": 20,
    "twenty-four": 24,
    "thirty": 30,
}
_NUM = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))

#: A temperature: a number with a degree sign or the word "degrees" and a scale (C or F); a minus
#: sign only where no digit stands before it ("-18 °C", not the "-140" of "40-140 °F").
_TEMPERATURE = re.compile(
    r"(?<![\w.,])(?P<sign>[-−–]\s?|minus\s+)?(?P<num>\d+(?:\.\d+)?)\s*"
    r"(?:°|º|˚|degrees?\s+|deg\.?\s*)\s*(?P<scale>celsius|centigrade|fahrenheit|c|f)\b",
    re.IGNORECASE,
)
#: A duration or an age: "2 hours", "two hours", "6 months", "a year", "12-month-old".
_SPAN = re.compile(
    rf"(?<![\w.,])(?P<num>{_NUM})(?:\s*|-)(?P<unit>minutes?|mins?|hours?|hrs?|days?|weeks?|months?|years?|yrs?)\b",
    re.IGNORECASE,
)
_IN_HOURS = {"min": 1 / 60, "hou": 1.0, "hrs": 1.0, "hr": 1.0, "day": 24.0, "wee": 168.0, "mon": 730.0}
_IN_HOURS |= {"yea": 8766.0, "yrs": 8766.0}
_IN_MONTHS = {"min": 0.0, "hou": 0.0, "hrs": 0.0, "hr": 0.0, "day": 1 / 30.44, "wee": 1 / 4.345, "mon": 1.0}
_IN_MONTHS |= {"yea": 12.0, "yrs": 12.0}

#: A pronoun that may stand for what the clause before named ("it boils at 100 °C").
_PRONOUN = re.compile(r"\b(?:it|they|this|that)\b", re.IGNORECASE)
#: A word that stands for what the clause before named, a thing or a place ("it keeps there").
_ANAPHOR = re.compile(r"\b(?:it|they|this|that|these|those|there)\b", re.IGNORECASE)
#: Where a clause ends: a figure belongs to what its own clause is about.
_CLAUSE = re.compile(r"(?<=[.!?;])\s+|\n+|,\s+(?=(?:but|while|whereas|although|though|and\s+then)\b)|\s+but\s+")
#: The first figure of a range ("40 to 140 °F", "70-75 °C", "between 5 and 60 °C"): not compared.
_RANGE_AFTER = re.compile(r"^\s*(?:°\s*[cf]\b\s*)?(?:-|–|to|and)\s*[-−]?\d", re.IGNORECASE)
_RANGE_BEFORE = re.compile(r"(?:\d\s*(?:°\s*[cf]\b)?\s*(?:-|–|to)\s*|between\s+[-−]?\d+\S*\s+and\s+)$", re.IGNORECASE)
#: A threshold below a figure ("store it below 5 °C", "bacteria survive under 60 °C").
_BELOW = re.compile(r"\b(?:below|under|less\s+than|lower\s+than|colder\s+than|cooler\s+than|beneath)\s*$", re.I)
#: A threshold above a figure ("if the fridge rises above 8 °C").
_ABOVE = re.compile(
    r"\b(?:above|over|more\s+than|higher\s+than|warmer\s+than|hotter\s+than|exceed\w*|beyond|after|longer\s+than)\s*$",
    re.I,
)

#: A negation: "not", "never", "-n't" (straight or curly apostrophe).
_NEGATION = re.compile(r"\b(?:not|never)\b|n['’]t\b", re.IGNORECASE)
#: What ends a negation's reach before a figure: punctuation, or a word that starts a new clause
#: ("Don't worry, it boils at 50 °C"; "You don't need a thermometer because it is done at 60 °C").
_SCOPE_END = re.compile(
    r"[,;:()\"“”—–]|\s-\s|\b(?:because|since|so|and|or|if|when|once|as|while|unless|though|although|whereas|yet|but)\b",
    re.IGNORECASE,
)
#: A negation that affirms what follows it, or negates a need rather than a figure ("don't forget
#: it boils at ...", "not only", "you don't need to cook it to ...", "is never unsafe at ...").
_NOT_RULING_OUT = re.compile(
    r"^\s*(?:only|just|forget\w*|worry\w*|fret\w*|panic\w*|doubt\w*|hesitat\w*|mind)\b|"
    r"\b(?:need\w*|have\s+to|has\s+to|had\s+to|got\s+to|must|necessar\w*|required?|bother\w*|"
    r"unsafe|dangerous|risky|harmful|wrong|problem\w*|issue)\b",
    re.IGNORECASE,
)
#: A word that states a figure as a limit rather than a value: a negation before it negates the
#: limit ("don't leave it out for more than 6 hours" states 6 hours as the most), not the figure.
_LIMIT = re.compile(
    r"\b(?:more|less|fewer|longer|shorter|warmer|colder|hotter|cooler|higher|lower)\s+than\b|"
    r"\b(?:above|over|under|below|beneath|beyond|past|after|until|till|before|within|exceed\w*|"
    r"at\s+(?:most|least)|up\s+to)\b",
    re.IGNORECASE,
)
#: After a figure, words that make it a limit too ("6 hours or more", "60 °C or less").
_LIMIT_AFTER = re.compile(
    r"^\s*(?:\+|(?:or|and)\s+(?:more|longer|over|above|higher|warmer|less|fewer|under|below|lower|colder|up)\b|plus\b)",
    re.IGNORECASE,
)
#: A figure named as the thing to avoid: "74 °C rather than 60 °C", "instead of 6 hours".
_CONTRAST_BEFORE = re.compile(r"\b(?:rather\s+than|instead\s+of)\s+(?:[\w'’]+\s+){0,4}$", re.IGNORECASE)
#: A figure reported as a myth: "it's a myth that water boils at 120 °C".
_MYTH_BEFORE = re.compile(
    r"\b(?:myths?|misconceptions?|old\s+wives['’]?\s+tales?|(?:false|untrue|wrong)\s+(?:to\s+(?:say|think|believe)\s+)?that)\b",
    re.IGNORECASE,
)
#: A figure reported as what others believe ("people think it boils at 120 °C"): ruled out only
#: where the sentence goes on to contradict it (:data:`_CONTRADICTED`).
_BELIEF_BEFORE = re.compile(
    r"\b(?:people|many|some|folks|others|everyone|lots\s+of\s+(?:people|us)|you\s+(?:may|might)(?:\s+have)?)\s+"
    r"(?:\w+\s+)?(?:think|thinks|thought|believe[sd]?|assume[sd]?|say|says|said|claim\w*|reckon\w*|heard)\b",
    re.IGNORECASE,
)
_CONTRADICTED = re.compile(
    r"\b(?:but|however|actually|in\s+fact|in\s+reality|really|wrong|mistaken|myth|not\s+true)\b", re.IGNORECASE
)
#: After a figure, a verdict that rules it out: "a fridge at 10 °C isn't cold enough", "chicken at
#: 60 °C is not safe", "a freezer at -5 °C is too warm".
_RULED_OUT_AFTER = re.compile(
    r"^[^,;:.!?]{0,30}?\b(?:is|are|was|were|['’]s)?\s*(?:n['’]t|\bnot|\bnever)\s+(?:\w+\s+)?"
    r"(?:enough|safe|normal|right|correct|ok|okay|fine|done|cooked|acceptable|healthy)\b|"
    r"^[^,;:.!?]{0,30}?\b(?:is|are|was|were|['’]s)\s+(?:much\s+|far\s+|way\s+)?"
    r"(?:too\s+(?:warm|cold|hot|cool|low|high|long)|unsafe|dangerous)\b",
    re.IGNORECASE,
)

#: A verdict a negation may deny: "not safe", "isn't a good idea".
_VERDICT = re.compile(
    r"\s*(?:(?:very|really|always|usually|generally|considered)\s+)?"
    r"(?:safe|good|fine|ok|okay|advisable|wise|recommended|healthy|a\s+good\s+idea)\b",
    re.IGNORECASE,
)


def _negates(text: str, *, limit: bool) -> bool:
    """Whether a negation in ``text`` reaches its end: the last negation, with no :data:`_SCOPE_END`
    and at most eight words after it, and none that makes it affirm or negate a need. ``limit``:
    ``text`` ends at a limit word, which the negation then negates; else a limit word between
    the negation and the end puts the figure out of its reach (the limit is negated instead)."""
    negations = list(_NEGATION.finditer(text))
    if not negations:
        return False
    gap = text[negations[-1].end() :]
    if _SCOPE_END.search(gap) or len(gap.split()) > 8 or _NOT_RULING_OUT.search(gap):
        return False
    return limit or not _LIMIT.search(gap)


def _ruled_out(before: str, after: str, rest: str) -> bool:
    """Whether a figure is named only to be ruled out, from the words of its clause ``before`` and
    ``after`` it and ``rest``, the remainder of its sentence after the clause. A figure is ruled
    out when a negation reaches it with no limit word between ("doesn't boil at 90 °C", "100 °C,
    not 120 °C", "isn't 39 °C", "never 38.5 °C", "don't leave it out for 6 hours"), when it is
    contrasted away ("rather than 60 °C", "instead of 6 hours"), reported as a myth ("it's a myth
    that it boils at 120 °C") or as a belief the sentence contradicts ("people think it boils at
    120 °C, but ..."), or judged after it ("a fridge at 10 °C isn't cold enough"). A figure made a
    limit ("for more than 6 hours", "6 hours or more") is not ruled out by a negation: "don't leave
    it out for more than 6 hours" states 6 hours as the most."""
    if _LIMIT_AFTER.match(after):
        return False
    if _CONTRAST_BEFORE.search(before) or _MYTH_BEFORE.search(before) or _negates(before, limit=False):
        return True
    if _BELIEF_BEFORE.search(before) and _CONTRADICTED.search(after + " " + rest):
        return True
    return bool(_RULED_OUT_AFTER.match(after))


def _negated_limit(before: str, limit: re.Match[str]) -> bool:
    """Whether the limit word ``limit`` at the end of ``before`` is negated: "don't leave it out for
    more than 6 hours", "never let the fridge get warmer than 10 °C", "no longer than 6 hours"."""
    head = before[: limit.start()]
    if re.search(r"\bno\s*$", head, re.IGNORECASE):
        return True
    negation = list(_NEGATION.finditer(head))
    # a verdict negated ("aren't safe after a week", "it's not safe to leave it out for more than
    # 2 hours") is true past any limit; only a negated action ("don't leave it out") sets one
    return _negates(head, limit=True) and not _VERDICT.match(head[negation[-1].end() :])


def valid_regex(pattern: str) -> str:
    """``pattern``, when it compiles as a regex; else a ValueError naming it (a row's validator)."""
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"invalid regex {pattern!r}: {exc}") from None
    return pattern


class Fact(BaseModel):
    """One checkable fact: what a figure is about and the range a right figure falls in.

    ``measure``: what the figure is: a ``temperature`` (compared in °C; a figure in °F is
    converted), a ``duration`` (in hours) or an ``age`` (in months). ``low``/``high``: the range,
    either may be open (a safe cooking temperature has only a lowest figure). ``states``: the
    fact in one sentence, shown to the user beside an answer a sentence of which was withheld
    for contradicting it; ``source``: where it comes from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    about: str = Field(min_length=2, description="regex: what a figure is about, named in its clause")
    when: str = Field("", description="regex the clause must also match ('' : none needed)")
    unless: str = Field("", description="regex that puts the clause out of scope ('' : nothing does)")
    measure: Measure
    low: float | None = None
    high: float | None = None
    high_when: str = Field(
        "", description="regex: `high` applies only to a figure these words lead up to ('' : to every figure)"
    )
    ranges: bool = Field(
        False,
        description="compare a temperature range too: wrong when both its ends fall on one side of low..high "
        "(off: a range is never compared, as in 'bacteria grow between 5 and 60 °C')",
    )
    states: str = Field(min_length=10, max_length=300)
    source: str = Field(min_length=3)

    @field_validator("about", "when", "unless", "high_when")
    @classmethod
    def _compile(cls, value: str) -> str:
        return valid_regex(value)

    @model_validator(mode="after")
    def _bounded(self) -> Fact:
        if self.low is None and self.high is None:
            raise ValueError(f"fact {self.id!r} needs `low`, `high` or both")
        if self.low is not None and self.high is not None and self.low > self.high:
            raise ValueError(f"fact {self.id!r}: low {self.low:g} is above high {self.high:g}")
        if self.high_when and self.high is None:
            raise ValueError(f"fact {self.id!r}: `high_when` needs a `high`")
        return self

    @cached_property
    def _regexes(self) -> tuple[re.Pattern[str], re.Pattern[str] | None, re.Pattern[str] | None]:
        return (
            re.compile(self.about, re.IGNORECASE),
            re.compile(self.when, re.IGNORECASE) if self.when else None,
            re.compile(self.unless, re.IGNORECASE) if self.unless else None,
        )

    def in_scope(self, clause: str, before: str = "") -> list[int]:
        """Where the clause names what this fact is about (empty: the clause is out of scope).
        ``before``: the clause before it, which may name what ``when`` asks for when this clause
        speaks of it by a pronoun ("Water boils when it gets hot. At sea level it boils at 50 °C.")."""
        about, when, unless = self._regexes
        if unless is not None and unless.search(clause):
            return []
        if when is not None and not when.search(clause) and not (_PRONOUN.search(clause) and when.search(before)):
            return []
        return [m.start() for m in about.finditer(clause)]

    def names(self, text: str) -> bool:
        """Whether ``text`` names what this fact is about (``about``), in scope or not."""
        return self._regexes[0].search(text) is not None

    def named_before(self, clause: str, before: str) -> list[int]:
        """Where ``clause`` speaks by a pronoun or "there" (:data:`_ANAPHOR`) of what this fact is
        about when only the clause ``before`` names it ("Put it in the fridge. It keeps there for a
        week."); empty when the clause names it itself, or is out of the row's scope."""
        about, _, _ = self._regexes
        if not before or about.search(clause) or not about.search(before) or not self.in_scope(before + " " + clause):
            return []
        return [m.start() for m in _ANAPHOR.finditer(clause)]

    def holds(self, value: float, lead: str | None = None) -> bool:
        """Whether ``value`` falls in the range. ``lead``: the words that lead up to the figure
        (from the figure before it in the clause, or the clause's start); with ``high_when``,
        ``high`` applies only where they match it ("the thickest part reaches 165 °C" is an
        inside temperature; the "200 °C" of "cook it at 200 °C" is the oven's)."""
        high = self.high
        if high is not None and self.high_when and (lead is None or not self._high_when.search(lead)):
            high = None
        return (self.low is None or value >= self.low) and (high is None or value <= high)

    @cached_property
    def _high_when(self) -> re.Pattern[str]:
        return re.compile(self.high_when, re.IGNORECASE)

    @property
    def one_sided(self) -> Literal["low", "high", ""]:
        """The one bound a figure is held to ("low": a least figure, "high": a most), "" for two; a
        row whose ``high`` applies only with ``high_when`` is read as one with a least figure."""
        return "low" if self.high is None or self.high_when else "high" if self.low is None else ""


@dataclass(frozen=True)
class WrongFact:
    """A figure a text states that a fact or a conversion rules out: ``evidence`` for the trace
    (the figure quoted), ``states`` the right fact for the user (framework text, or a conversion
    worked out from :data:`UNITS`)."""

    evidence: str
    states: str


def find_wrong_facts(
    facts: tuple[Fact, ...],
    conversions: tuple[Dimension, ...],
    text: str,
    *,
    asked: bool = False,
    request: str = "",
) -> list[WrongFact]:
    """Every figure in ``text`` that a row of ``facts`` or a conversion of the ``conversions``
    dimensions rules out, in text order of clauses. ``asked``: ``text`` is a question a plain yes
    answered, where two amounts side by side are equated ("Is a kilometre 100 metres?"); in a
    statement they are not ("5 km 200 m"). ``request``: what ``text`` answers; a wrong conversion
    of an amount it names is corrected for that amount, any other for one of the larger unit."""
    if not re.search(r"\d|\b(?:a|an|one|two|six|twelve)\b", text, re.IGNORECASE):
        return []
    found: dict[str, WrongFact] = {}  # by the fact it states: "10 °C (50 °F)" is one wrong figure
    before = ""
    at = 0
    asked_about = _asked_amounts(request) if conversions else frozenset()  # the request's amounts, read once
    for clause in _CLAUSE.split(text):
        if not clause or not clause.strip():
            continue
        start = text.find(clause, at)
        joined = _contrast_of(before, text[at:start], clause)
        at = start + len(clause)
        rest = re.split(r"(?<=[.!?])\s|\n", text[at:], maxsplit=1)[0]  # the rest of the sentence
        wrong = list(_wrong_in_clause(facts, clause, before, rest))
        if not wrong and joined and not any(fact.in_scope(clause, before) for fact in facts):
            # "boils not at 100 °C but at 120 °C": the clause after "but" asserts its figure about
            # what the negated clause before it names
            wrong = list(_wrong_in_clause(facts, joined, "", rest))
        before = clause
        if not wrong and conversions:
            # a clause a fact already corrects needs no conversion worked out beside it ("water
            # freezes at 0 °F, the same as 0 °C": the fact states 0 °C and 32 °F)
            wrong = list(_wrong_conversions(conversions, clause, asked=asked, asked_about=asked_about))
            wrong += _wrong_ratios(conversions, clause, request)
        for one in wrong:
            found.setdefault(one.states, one)
    # an amount the request names other than one is corrected for itself already ("5 km in miles")
    counted = any(count != 1 for _, count in asked_about)
    asked_pair = _asked_units(request, conversions) if found and not counted else None
    if asked_pair is not None and any(one.evidence.startswith("conversion:") for one in found.values()):
        # The user asked between two units ("How many centimetres are in a metre?"): a correction
        # that states only the draft's own units ("1 metre is 39.4 inches") leaves the question
        # unanswered, so the asked conversion is stated first.
        big, small = asked_pair
        asked_fact = _by_definition(f"conversion asked: {big} to {small}", _unit_statement(_one(big), small))
        if asked_fact.states not in found:
            return [asked_fact, *found.values()]
    return list(found.values())


def _asked_units(request: str, conversions: tuple[Dimension, ...]) -> tuple[str, str] | None:
    """The two units of one checked dimension a request asks between ("how many centimetres are in
    a metre?", "convert cups to millilitres"), the larger first; None unless exactly two are named.
    Temperatures are left out: "1 °C" is no unit fact."""
    named: list[str] = []
    for m in _UNIT_WORD.finditer(request):
        name = _unit_of(m)
        if name is not None and name not in named:
            named.append(name)
    if len(named) != 2:
        return None
    first, second = named
    dimension = UNITS[first][0]
    if dimension != UNITS[second][0] or dimension not in conversions or dimension == "temperature":
        return None
    return (first, second) if UNITS[first][2] >= UNITS[second][2] else (second, first)


def _contrast_of(before: str, sep: str, clause: str) -> str:
    """The clause before, the "but" and ``clause`` as one clause when ``clause`` is the "but" half
    of "not X but Y" (``before`` has a negation; ``sep`` is what the split left between them), else
    ""."""
    if not _NEGATION.search(before) or not re.fullmatch(r"\s+but\s+|,\s+", sep):
        return ""
    if sep.startswith(",") and not re.match(r"but\b", clause, re.IGNORECASE):
        return ""
    return before + sep + clause


def states_figures(text: str) -> bool:
    """Whether ``text`` states a figure of its own that a fact or a conversion could read (an
    amount with a unit, a temperature, a duration or an age)."""
    return bool(_AMOUNT.search(text) or _TEMPERATURE.search(text) or _SPAN.search(text))


def _figures(clause: str, measure: Measure) -> Iterator[tuple[re.Match[str], float]]:
    """Each figure of ``measure`` in ``clause`` with its value in the measure's unit (°C, hours,
    months); the figures of a range are not read."""
    if measure == "temperature":
        for m in _TEMPERATURE.finditer(clause):
            yield m, _celsius(float(m.group("num")) * (-1 if m.group("sign") else 1), m)
        return
    if measure == "length":  # in metres
        for m in _AMOUNT.finditer(clause):
            amount = _amount(m)
            if amount is not None and amount.dimension == "length":
                yield m, amount.value
        return
    scale = _IN_HOURS if measure == "duration" else _IN_MONTHS
    for m in _SPAN.finditer(clause):
        unit = m.group("unit").lower()
        factor = scale.get(unit[:3], scale.get(unit[:2], 0.0))
        if factor:
            yield m, _number(m.group("num")) * factor


def _number(word: str) -> float:
    return float(_NUMBER_WORDS.get(word.lower(), 0) or word.replace(",", ""))


def _wrong_in_clause(facts: tuple[Fact, ...], clause: str, before: str = "", rest: str = "") -> Iterator[WrongFact]:
    scoped = [(fact, at) for fact in facts for at in fact.in_scope(clause, before)]
    if not scoped and before:
        # a clause that names nothing speaks of the clause before by a pronoun; read only where one
        # row of a measure is named there ("Put the chicken in the fridge. It should reach 74 °C." may
        # mean the fridge or the chicken: neither is read)
        named = [fact for fact in facts if fact.names(before) and not fact.names(clause)]
        scoped = [
            (fact, at)
            for fact in named
            if len({other.about for other in named if other.measure == fact.measure}) == 1
            for at in fact.named_before(clause, before)
        ]
    if not scoped:
        return
    for measure in {fact.measure for fact, _ in scoped}:
        mentions = sorted(((at, fact) for fact, at in scoped if fact.measure == measure), key=lambda p: p[0])
        led_from = 0  # where the words leading up to the next figure start
        for m, value in _figures(clause, measure):
            before, after = clause[: m.start()], clause[m.end() :]
            lead, led_from = clause[led_from : m.start()], m.end()
            if measure == "temperature" and (_RANGE_AFTER.match(after) or _RANGE_BEFORE.search(before)):
                # "between 40 and 140 °F": the danger zone, no figure for a row (a span's end is); a row
                # with `ranges` reads a range at its last figure, wrong when both ends miss on one side
                fact = _owner(mentions, m.start())
                start = _range_start(before, m) if fact is not None and fact.ranges else None
                if (
                    fact is not None
                    and start is not None
                    and _misses_on_one_side(fact, (start[1], value), lead)
                    and not _ruled_out(before, after, rest)
                ):
                    yield _wrong_fact(fact, clause[start[0] : m.end()])
                continue
            fact = _owner(mentions, m.start())
            if fact is None or fact.holds(value, lead) or _ruled_out(before, after, rest):
                continue
            below, above = _BELOW.search(before), _ABOVE.search(before)
            if measure == "temperature":
                side = fact.one_sided
                # "store it below 5 °C" is no cooking temperature; "never above 8 °C" no fridge
                # setting; "never let the fridge get warmer than 10 °C" states 10 °C as its most
                if side != "high" and below is not None and not (side == "low" and _negated_limit(before, below)):
                    continue
                if side != "low" and above is not None and not _negated_limit(before, above):
                    continue
            elif fact.one_sided == "high" and above is not None and not _negated_limit(before, above):
                continue  # "throw it away after 4 hours": a limit past the fact's, not a claim
            yield _wrong_fact(fact, m.group(0))


def _wrong_fact(fact: Fact, quoted: str) -> WrongFact:
    """What a row rules out: the figure quoted for the trace, the row's fact for the user."""
    return WrongFact(f"{fact.id}: {quoted.strip()!r} ({fact.source})", f"{fact.states.rstrip('.')} ({fact.source}).")


def _celsius(value: float, temperature: re.Match[str]) -> float:
    """``value`` in °C, read in the scale ``temperature`` (a :data:`_TEMPERATURE` match) names."""
    return (value - 32) * 5 / 9 if temperature.group("scale").lower().startswith("f") else value


#: The first figure of a range that ends at the next figure: "20-", "70 °C to ", "between 5 and ".
_RANGE_START = re.compile(
    r"(?:(?<![\w.])(?P<a>[-−]?\d+(?:\.\d+)?)\s*(?:°\s*[cf]\b)?\s*(?:-|–|to)\s*"
    r"|between\s+(?P<b>[-−]?\d+(?:\.\d+)?)\S*\s+and\s+)$",
    re.IGNORECASE,
)


def _range_start(before: str, end: re.Match[str]) -> tuple[int, float] | None:
    """Where the range ending at the temperature ``end`` starts in the clause, and its first figure
    (in °C, read in the end's scale: "68-95 °F"); None when ``end`` is not the last figure of a range."""
    m = _RANGE_START.search(before)
    if m is None:
        return None
    return m.start(), _celsius(float((m.group("a") or m.group("b")).replace("−", "-")), end)


def _misses_on_one_side(fact: Fact, ends: tuple[float, float], lead: str) -> bool:
    """Whether both ends of a range fall below the row's least figure, or both above its most (a
    range that spans the right one, "0 to 200 °C", is vague, not wrong)."""
    if any(fact.holds(v, lead) for v in ends):
        return False
    below = fact.low is not None and all(v < fact.low for v in ends)
    return below or (fact.high is not None and all(v > fact.high for v in ends))


def _owner(mentions: list[tuple[int, Fact]], at: int) -> Fact | None:
    """The fact named nearest before position ``at``, else the first named after it."""
    before = [fact for position, fact in mentions if position <= at]
    if before:
        return before[-1]
    return mentions[0][1] if mentions else None


# -- conversions --------------------------------------------------------------------------------------
_HEDGE = r"(?:(?:about|around|approximately|approx\.?|roughly|nearly|almost|exactly|just\s+(?:over|under)|some)\s+)?"
_LINK = (
    r"\s*(?:is|are|=|equals|equal\s+to|is\s+equal\s+to|makes|make|holds|hold|comes\s+to|works\s+out\s+(?:at|to)|"
    r"converts\s+to|(?:is\s+)?(?:the\s+)?same\s+as|corresponds\s+to|which\s+is|that\s+is|or)\s+" + _HEDGE
)


@dataclass(frozen=True)
class _Amount:
    value: float  # in the dimension's base unit (low size), or °C
    high: float  # the high size (the same as value for a unit of one size)
    dimension: Dimension
    unit: str
    text: str
    count: float = 1.0  # how many of ``unit`` (the temperature itself for °C and °F)


def _unit_regex() -> str:
    names = [(name, spec[1]) for name, spec in UNITS.items()]
    return "|".join(f"(?P<u_{name.replace(' ', '_')}>{regex})" for name, regex in names)


_AMOUNT = re.compile(
    rf"(?<![\w.,])(?P<num>{_NUM})\s*(?:-\s*)?(?:{_unit_regex()})(?![\w])"
    rf"|(?<![\w.,])(?P<tsign>[-−]\s?|minus\s+)?(?P<tnum>\d+(?:\.\d+)?)\s*(?:°|º|˚|degrees?\s+)\s*"
    r"(?P<scale>celsius|centigrade|fahrenheit|c|f)\b",
    re.IGNORECASE,
)


def _amount(m: re.Match[str]) -> _Amount | None:
    if m.group("scale"):
        value = float(m.group("tnum")) * (-1 if m.group("tsign") else 1)
        scale = "°F" if m.group("scale").lower().startswith("f") else "°C"
        celsius = (value - 32) * 5 / 9 if scale == "°F" else value
        return _Amount(celsius, celsius, "temperature", scale, m.group(0).strip(), value)
    name = _unit_of(m)
    if name is None:
        return None
    dimension, _, low, high = UNITS[name]
    count = _number(m.group("num"))
    return _Amount(count * low, count * high, dimension, name, m.group(0).strip(), count)


#: "one mile is 1.6 km", "a teaspoon holds 5 ml", "350 °F is about 175 °C", "55 °C (130 °F)",
#: "180 °C/350 °F", "0 °C, the same as 32 °F".
_EQUATED = re.compile(rf"^,?(?:{_LINK}|\s*[(/]\s*{_HEDGE})$", re.IGNORECASE)
#: A unit stated as made of another ("a metre has 100 centimetres", "a litre contains 1,000 ml", "a
#: foot is made up of 12 inches"): read only after one of the unit ("a", "one", "1", "each"), so
#: "a 2 litre bottle has 500 ml left" equates nothing.
_HAS = re.compile(
    rf"^\s*(?:has|have|contains?|holds?|is\s+(?:made\s+up\s+of|made\s+of|divided\s+into|split\s+into|equal\s+to)|"
    rf"consists\s+of|is\s+comprised\s+of|comprises|is\s+worth|equals|has\s+got|is\s+the\s+same\s+as)\s+{_HEDGE}$",
    re.IGNORECASE,
)
_ONE = {"a", "an", "one", "1", "each", "every"}
#: Two amounts side by side in a question ("Is a kilometre 100 metres?", "is a mile really 3 km?").
_SIDE_BY_SIDE = re.compile(rf"^\s*(?:(?:really|actually|truly|just|definitely)\s+)?{_HEDGE}$", re.IGNORECASE)
#: "there are 454 grams in a pound", "16 ounces to the pound".
#: A unit named in a request, with or without a number ("how many centimetres in a metre?").
_UNIT_WORD = re.compile(rf"(?<![\w])(?:{_unit_regex()})(?![\w])", re.IGNORECASE)
_IN_A = re.compile(rf"^\s*(?:in|to)\s+(?:a|an|one|1|the|every|each)\s+(?P<unit>{_unit_regex()})\b", re.IGNORECASE)


def _asked_amounts(request: str) -> frozenset[tuple[str, float]]:
    """The amounts ``request`` names, as (unit, count): a conversion of one is corrected for it."""
    return frozenset((a.unit, round(a.count, 6)) for m in _AMOUNT.finditer(request) if (a := _amount(m)) is not None)


def _wrong_conversions(
    dimensions: tuple[Dimension, ...],
    clause: str,
    *,
    asked: bool = False,
    asked_about: frozenset[tuple[str, float]] = frozenset(),
) -> Iterator[WrongFact]:
    amounts = [(m, a) for m in _AMOUNT.finditer(clause) if (a := _amount(m)) is not None and a.dimension in dimensions]
    for (m1, first), (m2, second) in pairwise(amounts):
        if first.unit != second.unit and first.dimension == second.dimension:
            between = clause[m1.end() : m2.start()]
            if len(between) <= 40 and (
                _EQUATED.search(between)
                or (_HAS.search(between) and (m1.group("num") or "").lower() in _ONE)
                or (asked and _SIDE_BY_SIDE.match(between))
            ):
                yield from _disagree(first, second, asked_about)
    for m, amount in amounts:
        if (unit := _IN_A.match(clause[m.end() :])) is not None:  # "454 grams in a pound"
            one = _unit_amount(unit)
            if one is not None and one.dimension == amount.dimension and one.unit != amount.unit:
                yield from _disagree(one, amount, asked_about)


#: A conversion stated as an operation: "multiply by 1/100", "divide it by 2.2", "times 2.54".
_OPERATION = re.compile(
    rf"\b(?P<op>multipl\w*|times|divid\w*)\s+(?:(?:it|them|that|this|the\s+(?:number|amount|figure|value)"
    rf"(?:\s+of\s+\w+)?)\s+)?(?:by\s+)?{_HEDGE}(?P<factor>\d+\s*/\s*[\d,]+|\d{{1,3}}(?:,\d{{3}})+(?:\.\d+)?|\d+(?:\.\d+)?)(?![\w/])",
    re.IGNORECASE,
)
#: Between two units, the direction of a conversion: "centimetres to metres", "from feet into inches".
_INTO = re.compile(r"\s+(?:in)?to\s+(?:(?:get|find|give)\s+)?")


def _wrong_ratios(dimensions: tuple[Dimension, ...], clause: str, request: str = "") -> list[WrongFact]:
    """A conversion stated as an operation on a number ("to convert centimetres to metres,
    multiply by 1/100, which equals 0.01 metre"; "divide by 2.2 to go from pounds to kilograms")
    that the unit table rules out, corrected by the unit fact. The two units are read from the
    clause ("A to B", "from A into B"), else the target from the amount the operation comes to
    ("... which equals 0.01 metre") and the source from the two units the ``request`` asks between."""
    found: list[WrongFact] = []
    for op in _OPERATION.finditer(clause):
        pair = _direction(clause) or _direction_by_result(clause[op.end() :], request, dimensions)
        if pair is None:
            continue
        source, target = pair
        if UNITS[source][0] != UNITS[target][0] or UNITS[source][0] not in dimensions:
            continue
        number = op.group("factor")
        if "/" in number:
            top, bottom = (float(part.replace(",", "")) for part in number.split("/"))
            if not bottom:
                continue
            factor = top / bottom
        else:
            factor = _number(number)
        if not factor:
            continue
        if op.group("op").lower().startswith("divid"):
            factor = 1 / factor
        # one of the source unit is ``factor`` of the target: within the sizes, give or take the tolerance
        low, high = UNITS[source][2] / UNITS[target][3], UNITS[source][3] / UNITS[target][2]
        if low / (1 + TOLERANCE) <= factor <= high * (1 + TOLERANCE):
            continue
        big, small = (source, target) if UNITS[source][2] >= UNITS[target][2] else (target, source)
        evidence = f"conversion: {op.group(0).strip()!r} from {source} to {target}"
        found.append(_by_definition(evidence, _unit_statement(_one(big), small)))
    return found


def _direction(clause: str) -> tuple[str, str] | None:
    """The two units ``clause`` converts between, source first ("centimetres to metres"), or None."""
    for first, second in pairwise(_UNIT_WORD.finditer(clause)):
        if _INTO.fullmatch(clause[first.end() : second.start()]):
            source, target = _unit_of(first), _unit_of(second)
            if source is not None and target is not None and source != target:
                return source, target
    return None


def _direction_by_result(after: str, request: str, dimensions: tuple[Dimension, ...]) -> tuple[str, str] | None:
    """The units of an operation that names none: the target is the unit of the first amount after
    it ("which equals 0.01 metre"), the source the other unit the request asks between."""
    asked = _asked_units(request, dimensions) if request else None
    result = next((a for m in _AMOUNT.finditer(after) if (a := _amount(m)) is not None), None)
    if asked is None or result is None or result.unit not in asked:
        return None
    source = asked[0] if result.unit == asked[1] else asked[1]
    return source, result.unit


def _unit_of(m: re.Match[str]) -> str | None:
    """The unit a match of :func:`_unit_regex`'s named groups names, as a key of :data:`UNITS`."""
    return next((n[2:].replace("_", " ") for n, v in m.groupdict().items() if n.startswith("u_") and v), None)


def _unit_amount(m: re.Match[str]) -> _Amount | None:
    name = _unit_of(m)
    return None if name is None else _one(name)


def _one(unit: str) -> _Amount:
    """One of ``unit``, the amount a unit fact is stated for ("1 inch is 2.54 centimetres")."""
    dimension, _, low, high = UNITS[unit]
    return _Amount(low, high, dimension, unit, f"1 {unit}")


def _disagree(
    first: _Amount, second: _Amount, asked_about: frozenset[tuple[str, float]] = frozenset()
) -> Iterator[WrongFact]:
    """A :class:`WrongFact` when ``first`` and ``second`` disagree. The correction states the unit
    fact, not the text's amount converted: "1 inch is 2.54 centimetres" for "0.39 inches is 1
    cm"; for an amount the request asked about ("how many cm in 5 inches?"), that amount
    converted: "5 inches is 12.7 centimetres"."""
    asked = [a for a in (first, second) if (a.unit, round(a.count, 6)) in asked_about]
    if first.dimension == "temperature":
        allowed = max(DEGREES, 0.05 * max(abs(first.value), abs(second.value)))
        if abs(first.value - second.value) <= allowed:
            return
        given = asked[0] if asked else first
        other = second if given is first else first
        right = given.value * 9 / 5 + 32 if other.unit == "°F" else given.value
        states = f"{given.text} is {right:.0f} {other.unit}"
    else:
        # agree when the ranges of sizes overlap, give or take the tolerance
        if first.value <= second.high * (1 + TOLERANCE) and second.value <= first.high * (1 + TOLERANCE):
            return
        if asked and asked[0].count != 1:
            given = asked[0]
        else:  # the unit fact, for one of the larger unit
            given = _one(max(first, second, key=lambda a: UNITS[a.unit][2]).unit)
        other = second if given.unit == first.unit else first
        states = _unit_statement(given, other.unit)
    yield _by_definition(f"conversion: {first.text!r} equated with {second.text!r}", states)


def _by_definition(evidence: str, states: str) -> WrongFact:
    """A wrong conversion's :class:`WrongFact`: ``states`` as a sentence, sourced to the unit definitions."""
    return WrongFact(evidence, f"{states[0].upper()}{states[1:]} (unit definitions).")


def _unit_statement(given: _Amount, other: str) -> str:
    """``given`` in ``other`` units: "1 inch is 2.54 centimetres", "1 cup is 236.6 to 250 millilitres"
    (the given amount's sizes over the other unit's: every pairing of a US and a UK size)."""
    _, _, size_low, size_high = UNITS[other]
    low, high = given.value / size_high, given.high / size_low
    figure = f"{_round(low)}" if abs(high - low) < 0.01 * low else f"{_round(low)} to {_round(high)}"
    return f"{_count(given)} is {figure} {_unit_name(other, high)}"


def _count(amount: _Amount) -> str:
    """``amount`` as the correction states it: "1 inch", "5 inches", "0.5 litres"."""
    return f"{_round(amount.count)} {_unit_name(amount.unit, amount.count)}"


def _unit_name(unit: str, count: float) -> str:
    return unit if count == 1 else _PLURALS.get(unit, unit + "s")


_PLURALS = {"ml": "ml", "inch": "inches", "foot": "feet"}


def _round(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}".rstrip("0").rstrip(".")
    return f"{value:.2f}".rstrip("0").rstrip(".")
