"""Who the dose check's answer is for (a part of :mod:`.doses`): the request read as context
(:func:`read_request`, :class:`DoseContext`), and a child's weight estimated from the age."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

#: How far above (weight x the per-kilogram maximum) a child's dose in mg may be and still pass:
#: labels dose children by age band, and a band's dose assumes a typical weight for the age (a
#: child lighter than typical still gets it: ibuprofen 100 mg for a 1-year-old of 9 kg is 11 %
#: above 10 mg/kg); a weight a parent states is often rounded. An adult's dose for a toddler is
#: several times the limit, far beyond this.
WEIGHT_TOLERANCE = 0.2
#: A child's dose in mg below this share of (weight x the lowest dose per kilogram) is too low:
#: a fever or pain goes untreated, and a parent who sees no effect may give more, or sooner.
#: Half, because labels dose by age band (paracetamol 250 mg for children of 6 to 8 years is
#: 7 mg/kg for a heavy 8-year-old of 35 kg): only a figure far below any band is flagged.
UNDER_DOSE_SHARE = 0.5
#: From this age, or this weight, labels dose a child as an adult ("adults and children 12 years
#: and over", "children over 40 kg"): the weight no longer scales the limit.
ADULT_DOSING_AGE = 12.0
ADULT_DOSING_KG = 40.0
_ADULT_AGE = 18.0
#: Weights outside this range are not a person's (a typo, or another quantity): ignored.
_WEIGHT_KG = (1.0, 250.0)

_ONE_TO_19 = (
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
)
_NUMBER_WORDS = {"a": 1, "an": 1} | {word: n for n, word in enumerate(_ONE_TO_19, 1)}
_NUMBER = r"\d{1,2}(?:\.\d+)?|" + "|".join(sorted(_NUMBER_WORDS, key=len, reverse=True))
_COUNT = r"\d{1,2}(?:\.\d+)?|" + "|".join(sorted(_ONE_TO_19, key=len, reverse=True))  # no "a": "she's a teen"
#: An age: "my 2-year-old", "2 years old", "18 months old", "aged 6", "age: 4", "3 yo", "3 y/o".
_AGE = re.compile(
    rf"\b(?P<n>{_NUMBER})\s*[- ]?\s*(?P<unit>years?|yrs?|months?|mos?|weeks?|wks?|days?)[- ]?olds?\b"
    rf"|\b(?:aged|age)\s*:?\s*(?P<n2>\d{{1,2}}(?:\.\d+)?)(?:\s*(?P<unit2>years?|yrs?|months?|weeks?))?\b"
    r"|\b(?P<n3>\d{1,2})\s*(?:yo|y/o|y\.o\.)(?!\w)"
    # "my daughter is 5", "he's 4 and weighs 16 kg", "she just turned 3" (not "she's 14 kg")
    rf"|\b(?:he|she|son|daughter|child|kid|baby|boy|girl|toddler)(?:\s+is|'s|\s+(?:just\s+)?turned)\s+"
    rf"(?P<n4>{_COUNT})(?:\s*(?P<unit4>years?|yrs?|months?|weeks?))?\b"
    r"(?!\s*(?:kg|kilo|lb|pound|stone|st\b|mg|ml|g\b|%|feet|foot|ft\b|cm|inch|in\b|['\"]|times|doses?))",
    re.IGNORECASE,
)
_PER_YEAR = {"y": 1.0, "m": 12.0, "w": 52.0, "d": 365.0}
#: A body weight: "weighs 12 kg", "12kg", "26 lb", "26 pounds", "a 12-kilo toddler". Not a rate
#: ("15 mg/kg": no number right before "kg").
_WEIGHT = re.compile(
    r"(?<![\w.,/])(?P<n>\d{1,3}(?:\.\d+)?)\s*-?\s*(?P<unit>kgs?|kilos?|kilograms?|lbs?|pounds?)(?![\w/])",
    re.IGNORECASE,
)
_LB = 0.45359237
#: A child named in a request: "my toddler", "my son", "a 6-month-old baby", "for the kids".
#: "baby aspirin" is a product, "an adult son" a grown man, "child-proof" a cap.
_CHILD_REQUEST = re.compile(
    r"\b(?:child(?:ren)?(?!-(?:proof|resistant))|kids?|infants?|bab(?:y|ies)(?!\s+aspirin)|toddlers?|newborns?|"
    r"pre-?schoolers?|"
    r"neonates?|p(?:a)?ediatric\w*|teens?|teenagers?|adolescents?|little\s+ones?|"
    r"(?<!adult\s)(?<!grown\s)(?<!grown-up\s)(?:sons?|daughters?|grand(?:son|daughter)s?|boys?|girls?))\b",
    re.IGNORECASE,
)
#: The asker takes the medicine: "can I take", "I'm taking", "for me", pregnant or breastfeeding
#: (a baby named then is not the one dosed) - unless they give it to someone ("can I give").
_SELF_REQUEST = re.compile(
    r"\b(?:can|could|should|may|do|shall|must)\s+i\s+(?:still\s+|safely\s+)?take\b|\bi\s+(?:take|took)\b|"
    r"\bi(?:'m|\s+am)\s+(?:taking|pregnant|breast-?feeding|nursing)\b|\bfor\s+(?:me|myself)\b|"
    r"\bwhile\s+(?:pregnant|breast-?feeding|nursing)\b|\bpregnan(?:t|cy)\b",
    re.IGNORECASE,
)
_GIVE_REQUEST = re.compile(r"\b(?:give|giving|gave|administer\w*|dose\s+(?:him|her|them))\b", re.IGNORECASE)
_ADULT_REQUEST = re.compile(r"\b(?:adults?|grown[- ]?ups?|myself|for\s+me|i'?m\s+an?\s+adult)\b", re.IGNORECASE)
#: An adult named in an answer's sentence: its figures are the label's adult dose.
_ADULT = re.compile(r"\b(?:adults?|grown[- ]?ups?)\b", re.IGNORECASE)

Who = Literal["child", "adult", "unstated"]

#: A child named by a word for an age band and no age ("my toddler"): the band's ages, in years.
#: Labels' bands and common usage; the check holds the child to the youngest age of the band, so
#: to the lightest weight (:func:`weight_for_age`): the stricter limit.
AGE_BANDS: tuple[tuple[re.Pattern[str], str, tuple[float, float]], ...] = (
    (re.compile(r"\b(?:newborns?|neonates?)\b", re.IGNORECASE), "a newborn", (0.0, 28 / 365)),
    (re.compile(r"\b(?:infants?|bab(?:y|ies)(?!\s+aspirin))\b", re.IGNORECASE), "a baby", (0.0, 1.0)),
    (re.compile(r"\btoddlers?\b", re.IGNORECASE), "a toddler", (1.0, 3.0)),
    (re.compile(r"\bpre-?schoolers?\b", re.IGNORECASE), "a preschooler", (3.0, 5.0)),
)


class DoseContext(BaseModel):
    """What the request an answer replies to tells the dose check: who the answer is for, as far
    as its words tell (a child: ``my 2-year-old``, ``my son``, ``a toddler``; an adult: ``adults``,
    ``I'm 30``, ``my 25-year-old son``; or nobody named), the age and body weight it states, and its
    words, for the medicine it asks about. When it names several ages or weights, the youngest
    and the lightest are kept (the strictest limits)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    who: Who = "unstated"
    age_years: float | None = Field(None, ge=0)
    weight_kg: float | None = Field(None, gt=0)
    #: with no age stated, the band a word for the child names ("my toddler": 1 to 3 years)
    band: tuple[str, float, float] | None = None
    request: str = Field("", repr=False)
    #: the conversation's earlier user turns, for the medicine when the request names none
    earlier: str = Field("", repr=False)

    @property
    def youngest(self) -> float | None:
        """The age the limits assume: the stated one, else the youngest of the band, else None."""
        if self.age_years is not None:
            return self.age_years
        return self.band[1] if self.band is not None else None

    @property
    def child(self) -> bool:
        return self.who == "child"

    @property
    def weight(self) -> float | None:
        """The weight a child's limits scale with: the stated one, else one estimated from the
        age (:func:`weight_for_age`), else None."""
        if self.weight_kg is not None:
            return self.weight_kg
        return weight_for_age(self.youngest) if self.youngest is not None else None

    def scales_by_weight(self) -> bool:
        """Whether a child's dose in mg is held to weight x the per-kilogram ranges: a weight is
        stated or estimated from an age, and the child is below the age and weight labels dose
        as adults."""
        weight = self.weight
        return (
            self.child
            and weight is not None
            and weight < ADULT_DOSING_KG
            and (self.age_years is None or self.age_years < ADULT_DOSING_AGE)
        )

    def describe(self) -> str:
        """ "a child of 12 kg, aged 2", "a child aged 2 (about 12 kg for the age)" (for the evidence)."""
        parts = [f"of {self.weight_kg:g} kg"] if self.weight_kg is not None else []
        if self.age_years is not None:
            months = round(self.age_years * 12)
            parts.append(f"aged {months} months" if months < 24 else f"aged {self.age_years:.3g}")
        described = " ".join(["a child", ", ".join(parts)]).strip()
        if self.age_years is None and self.band is not None:
            name, low, high = self.band
            if high < 0.1:
                span = "under 4 weeks"
            else:
                span = f"{round(low * 12)} to {round(high * 12)} months" if high < 2 else f"{low:g} to {high:g} years"
            described = f"{name} ({span}{f', {parts[0]}' if parts else ''})"
            if self.weight_kg is None and (estimate := self.weight) is not None:
                described += f" (held to {estimate:g} kg, the lightest for the band)"
        elif self.weight_kg is None and (estimate := self.weight) is not None:
            described += f" (about {estimate:g} kg for the age)"
        return described


def weight_for_age(age_years: float) -> float | None:
    """A child's weight estimated from the age (kg), as resuscitation guidance does when there
    is no time to weigh (APLS: under 1 year, months / 2 + 4; 1 to 5 years, 2 x age + 8; 6 to 11,
    3 x age + 7), or None from 12 years (labels dose them as adults). The formulas overestimate
    few children; with :data:`WEIGHT_TOLERANCE` and the per-kilogram maxima, a child well above
    the estimate still gets a usual dose."""
    if age_years >= ADULT_DOSING_AGE:
        return None
    if age_years < 1:
        return round(age_years * 12 / 2 + 4, 1)
    years = int(age_years)
    return float(2 * years + 8 if years <= 5 else 3 * years + 7)


def read_request(request: str, earlier: Sequence[str] = ()) -> DoseContext:
    """What ``request`` tells the dose check (:class:`DoseContext`). The request is context only:
    its own figures are never compared ("is 10 g a day too much?" asks, it does not advise).

    ``earlier``: the conversation's earlier user turns, oldest first. A request that names no
    adult and is not asked for the asker ("How much can he have?") is about the child an earlier
    turn names ("My son is 6."): the age, band and weight the request does not state are taken
    from the latest turn that names a child."""
    own = _read_one(request)
    if earlier:
        own = own.model_copy(update={"earlier": "\n".join(earlier)})
    if not earlier or own.who == "adult" or _asks_for_self(request):
        return own
    for turn in reversed(earlier):
        past = _read_one(turn)
        if past.child:
            age = own.age_years if own.age_years is not None else past.age_years
            return own.model_copy(
                update={
                    "who": "child" if age is None or age < _ADULT_AGE else "adult",
                    "age_years": age,
                    "weight_kg": own.weight_kg if own.weight_kg is not None else past.weight_kg,
                    "band": (own.band or past.band) if age is None else None,
                }
            )
    return own


def _asks_for_self(request: str) -> bool:
    """The asker takes the medicine ("can I take …?") and gives none to anyone."""
    return bool(_SELF_REQUEST.search(request)) and not _GIVE_REQUEST.search(request)


def _read_one(request: str) -> DoseContext:
    ages = []
    for m in _AGE.finditer(request):
        number = m.group("n") or m.group("n2") or m.group("n3") or m.group("n4")
        value = _NUMBER_WORDS.get(number.lower()) or float(number)
        unit = (m.group("unit") or m.group("unit2") or m.group("unit4") or "y")[0].lower()
        ages.append(value / _PER_YEAR[unit])
    weights = []
    for m in _WEIGHT.finditer(request):
        kg = float(m.group("n")) * (_LB if m.group("unit").lower()[0] in "lp" else 1.0)
        if _WEIGHT_KG[0] <= kg <= _WEIGHT_KG[1]:
            weights.append(round(kg, 1))
    age = min(ages) if ages else None
    weight = min(weights) if weights else None
    if age is not None:
        who: Who = "child" if age < _ADULT_AGE else "adult"
    elif _CHILD_REQUEST.search(request) and not _asks_for_self(request):
        who = "child"  # named with no age: a child, even beside an adult ("me and my son")
    else:
        who = "adult" if _ADULT_REQUEST.search(request) else "unstated"
    band = None
    if who == "child" and age is None:
        named = [(low, high, name) for pattern, name, (low, high) in AGE_BANDS if pattern.search(request)]
        if named:
            low, high, name = min(named)  # the youngest band named
            band = (name, low, high)
    return DoseContext(who=who, age_years=age, weight_kg=weight, band=band, request=request)
