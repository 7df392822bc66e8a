"""A stated figure against its label, for the dose check (a part of :mod:`.doses`): whose figure
it is (:data:`Reader`: an adult's, a child's the sentence names, the request's own child's), the
ranges it is held to (:data:`Range`: an adult's, or a child's by weight), and the verdict with its
evidence."""

from __future__ import annotations

import re
from typing import Literal

from ._dose_labels import WRONG_UNIT, Dimension, DoseLimit, Kind
from ._dose_request import (
    _ADULT,
    ADULT_DOSING_AGE,
    ADULT_DOSING_KG,
    UNDER_DOSE_SHARE,
    WEIGHT_TOLERANCE,
    DoseContext,
    read_request,
)

_CHILD = re.compile(
    r"\b(?:child\w*|kids?|infants?|bab(?:y|ies)|toddlers?|newborns?|neonat\w*|p(?:a)?ediatric\w*|"
    r"teens?|teenagers?|adolescen\w*|junior|\d+[- ]?(?:years?|yrs?|months?|weeks?)[- ]old|aged\s+\d+|"
    r"under\s+(?:the\s+age\s+of\s+)?\d+)\b",
    re.IGNORECASE,
)
#: A band of ages or weights a label's table gives a dose for: "children 6 to 8 years", "aged
#: 2-4", "under 6 years", "over 12", "10 to 15 kg".
_BAND = re.compile(
    r"\b(?:(?P<bound>under|over|below|above|from)\s+(?:the\s+age\s+of\s+)?)?"
    r"(?:(?P<aged>aged|ages)\s+)?(?P<low>\d{1,3}(?:\.\d+)?)(?:\s*(?:-|–|to)\s*(?P<high>\d{1,3}(?:\.\d+)?))?"
    r"(?!\d|\.\d|\s*(?:mg|g|mcg|µg|milligram|gram|microgram|ml|millilit|%|hours?|hrs?|times?|doses?|tablets?)\b)"
    r"\s*(?P<unit>years?|yrs?|months?|kgs?|kilos?|kilograms?)?\b(?!\s*(?:-|\s)\s*old)",
    re.IGNORECASE,
)
#: "adults and children 12 years and over": the label's adult dose, not a child's.
_OVER_12 = re.compile(
    r"\bchildren\s+(?:aged\s+)?(?:(?:over|above|from)\s+1[2-8]|1[2-8]\s+(?:years?\s+)?(?:(?:old\s+)?(?:and|or)\s+(?:over|older|above)|\+))",
    re.IGNORECASE,
)


_EVIDENCE = {
    "daily": "a day",
    "regimen": "a day",
    "single": "per dose",
    "either": "as a maximum",
    "mention": "as an amount",
}
Range = tuple[float, float, str]
#: Whom a sentence's figures are for: an adult, a child the sentence names itself (an age band of
#: a label's table: "children 6 to 8 years: 240 mg"), or the request's own child.
Reader = Literal["adult", "child", "patient"]
#: How the evidence says a weekly-only medicine was told to be taken daily.
_ONCE_A_WEEK = "is taken once a week for most uses, never daily"


def _judged(
    limit: DoseLimit,
    value: float,
    dimension: Dimension,
    evidence: str,
    per_kg: bool,
    stated_as: tuple[Kind, bool],
    lower_only: bool,
    reader: Reader,
    patient: DoseContext | None,
    volumes: dict[str, str],
) -> tuple[str | None, float | None]:
    """What a stated figure of ``limit``'s medicine comes to: (why it is wrong, None) or (None, the
    figure in the table's unit), or (None, None) when it cannot be read in that unit (a volume
    of a medicine dosed in mg: :meth:`DoseLimit.amount`). ``stated_as``: the figure's kind, and
    whether it is tied to a week or a prescription: for an adult, a medicine with a weekly range
    (``weekly_mg``: vitamin D's 50,000 IU once a week) holds such a figure that no day is tied
    to to that range instead."""
    kind, weekly = stated_as
    stated = f"{limit.drug[0]}: {volumes.get(evidence, repr(evidence))} {_EVIDENCE[kind]}"
    amount = limit.amount(value, dimension)
    if amount is None:
        return None, None
    if amount == WRONG_UNIT:
        return f"{stated}: {limit.drug[0]} is dosed in {limit.unit}, never by weight ({limit.source})", None
    if limit.weekly_only and kind in ("daily", "regimen"):
        return f"{stated}: {limit.drug[0]} {_ONCE_A_WEEK} ({limit.source})", None
    weekly_kind = kind in ("single", "either", "mention") and not per_kg
    if weekly and weekly_kind and limit.weekly_mg is not None and reader == "adult":
        low, high = limit.weekly_mg
        if low <= amount <= high:
            return None, amount
        return f"{stated} once a week, label range {low:g}-{high:g} {limit.unit} a week ({limit.source})", None
    young = patient is not None and _too_young(limit, patient)
    if kind == "mention":  # whoever it is for: only far above any day's maximum
        ranges = limit.bounds(kind, per_kg)
    elif reader == "patient" and patient is not None:
        if young:
            return f"{stated} for {patient.describe()}, {_no_dose(limit)} ({limit.source})", None
        ranges = _child_ranges(limit, kind, per_kg, patient)
    elif reader == "child" and not per_kg:
        # the ranges are adults': in a sentence about a child only their upper ends apply
        ranges = tuple((0.0, high, f"{unit}, an adult's") for _, high, unit in limit.bounds(kind, False))
    else:
        ranges = limit.bounds(kind, per_kg)
    if ranges and not any(low <= amount <= high or (lower_only and amount <= high) for low, high, _ in ranges):
        if reader == "patient" and all(amount < low for low, _, _ in ranges):
            return (
                f"{stated} is too little: the label's range is {_described(ranges)} ({limit.source}); check the label",
                None,
            )
        return f"{stated}, label range {_described(ranges)} ({limit.source}){_mix_up(amount, ranges)}", None
    return None, amount


def _mix_up(amount: float, ranges: tuple[Range, ...]) -> str:
    """A note for the evidence when a figure is off by a unit's factor (mg written for mcg, g for
    mg): 1000 times the range, or a thousandth of it."""
    for factor, what in ((1000.0, "1000 times the range: mg for mcg, or g for mg?"), (0.001, "a thousandth of it")):
        if any(low <= amount / factor <= high for low, high, _ in ranges):
            return f"; {what}"
    return ""


def _too_young(limit: DoseLimit, patient: DoseContext) -> bool:
    """Whether the label gives the request's child no dose of ``limit``'s medicine (an unknown age
    is taken as too young: the request named a child)."""
    age = patient.youngest
    return limit.min_age_years is not None and (age is None or age < limit.min_age_years)


def _no_dose(limit: DoseLimit) -> str:
    return f"label: no dose under {limit.min_age_years:g} years"


def _reader(sentence: str, patient: DoseContext | None) -> Reader:
    """Whose figures ``sentence`` states (:data:`Reader`); ``patient``: the request's child, if any."""
    without_over_12 = _OVER_12.sub(" ", sentence)
    if patient is None:
        return "child" if _CHILD.search(without_over_12) else "adult"
    if (_ADULT.search(sentence) and not _CHILD.search(without_over_12)) or _OVER_12.search(sentence):
        return "adult"  # "adults take 1 g", "adults and children 12 and over: ..."
    own = read_request(sentence)
    if (own.age_years is not None and own.age_years >= ADULT_DOSING_AGE) or (
        own.weight_kg is not None and own.weight_kg >= ADULT_DOSING_KG
    ):
        # "400 mg is safe for a 18-year old" in an answer about a 5-year-old: whoever the model
        # took the patient for, the figure is an adult's dose, which a parent may give the child
        return "adult"
    return "child" if _another_child(sentence, patient) else "patient"


def _another_child(sentence: str, patient: DoseContext) -> bool:
    """Whether ``sentence`` names an age or a weight that is not the request's child's: another row
    of a label's table ("children 10 to 12 years: 480 mg" in an answer about a 2-year-old). A band
    with no age of the child to place it is another row too; one that holds the child's is not."""
    own = read_request(sentence)  # "a 2-year-old", "12 kg", "18 months old"
    if own.age_years is not None and (patient.age_years is None or abs(own.age_years - patient.age_years) > 0.5):
        return True
    if own.weight_kg is not None and (patient.weight_kg is None or abs(own.weight_kg - patient.weight_kg) > 0.5):
        return True
    for m in _BAND.finditer(sentence):
        unit, bound = (m.group("unit") or "").lower(), (m.group("bound") or "").lower()
        if not unit and not m.group("aged") and not (bound and _CHILD.search(sentence)):
            continue  # not an age or a weight: "every 4 to 6 hours", "over 4 g"
        kg = unit.startswith("k")
        known = patient.weight_kg if kg else patient.age_years
        if known is None:
            return True
        scale = 1.0 if kg or not unit.startswith("m") else 12.0
        low, high = float(m.group("low")) / scale, float(m.group("high") or m.group("low")) / scale
        if bound in ("under", "below"):
            low, high = 0.0, low
        elif bound in ("over", "above", "from"):
            high = 200.0
        if not low <= known <= high:
            return True
    return False


def _child_ranges(limit: DoseLimit, kind: Kind, per_kg: bool, patient: DoseContext) -> tuple[Range, ...]:
    """The ranges a figure for the request's child may fall in: per kilogram, the per-kilogram
    ranges; in mg with a weight, the per-kilogram ranges x the weight plus :data:`WEIGHT_TOLERANCE`,
    never above the adult's; else (or when the table gives no range per kilogram for this kind of
    figure) the adult ranges' upper ends."""
    if per_kg:
        return limit.bounds(kind, True)
    adult = limit.bounds(kind, False)
    by_weight = limit.bounds(kind, True) if patient.scales_by_weight() else ()
    weight = patient.weight
    if not by_weight or len(by_weight) != len(adult) or weight is None:
        return tuple((0.0, high, f"{unit}, an adult's") for _, high, unit in adult)
    lowest = limit.single_per_kg[0] if kind == "regimen" and limit.single_per_kg is not None else None
    return tuple(
        (
            round((lowest or low) * weight * UNDER_DOSE_SHARE, 1),
            round(min(high * weight * (1 + WEIGHT_TOLERANCE), cap), 1),
            f"{unit.replace('mg/kg', 'mg')} for {patient.describe()} ({high:g} mg/kg + {WEIGHT_TOLERANCE:.0%})",
        )
        for (low, high, unit), (_, cap, _) in zip(by_weight, adult, strict=True)
    )


def _described(ranges: tuple[Range, ...]) -> str:
    return " or ".join(f"{low:g}-{high:g} {unit}" if low else f"at most {high:g} {unit}" for low, high, unit in ranges)
