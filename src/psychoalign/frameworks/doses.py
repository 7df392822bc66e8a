"""A deterministic check of the doses and daily limits a text states against the medicines' labels.

The EVALUATOR judges whether an answer is safe to give, not whether it is true; a small model
can state a wrong figure for a common medicine with full confidence ("the maximum daily dose of
paracetamol is 10 mg per kilogram", "the maximum allowable dose of Tylenol is 45 milligrams"),
and a wrong figure is a harm either way: too high poisons, too low leaves pain untreated and
invites doubling up. This check reads the figures a text *states* and compares each with the
range the framework's reference table allows.

What counts as a stated figure (each read within one sentence):

* a daily limit, compared with ``daily_mg``: an amount tied to a day (``4 g a day``,
  ``4,000 mg per day``, ``25 mg/kg/day``, ``3 grams in 24 hours``, ``4 g (8 tablets) daily``,
  ``8 g of acetaminophen a day``), or one a "maximum … daily" phrase introduces (``the maximum
  (safe) daily dose of paracetamol for an adult is 10 mg per kilogram``, ``max daily dose: 4 g``);
* a single dose, compared with ``single_mg``: an amount a dose phrase introduces (``the
  recommended dose is 45 mg``, ``a single dose of 5 g``, ``take 10 mg``) or one followed by
  ``per dose``, ``at a time`` or ``every 4 to 6 hours``;
* a maximum that names no period (``the maximum allowable dose of Tylenol is 45 milligrams``,
  ``take up to 2 g``, ``do not exceed 5,000 mg``): it may mean either, so it passes inside the
  single-dose range or the daily range and fails outside both.

Not compared: a tablet's strength (``a 200 mg tablet``), a count (``45 tablets``), a toxic or
lethal amount (``a toxic dose is above 7.5 g``), an amount of something else (``10 mg of
loratadine``). Figures per kilogram of body weight (``15 mg/kg per dose``, ``60 mg/kg a day``)
are compared with the table's ranges per kilogram (``single_per_kg``, ``per_kg``). A daily
amount that is no limit (``take 75 mg of aspirin once daily``) may be as small as one dose. The
ranges in mg are adults': in a sentence about a child (``for a 2-year-old, 120 mg``) only their
upper ends apply. The medicine is the one named right after the amount (``1 g of
paracetamol``), else the one named nearest before it in the sentence (else after it), or, when
the sentence names none, the only medicine the text names (else the only one the request names).
An amount whose medicine cannot be told is not compared.

The check runs on model text only (drafts and answers), never on a request: a user who asks "is
10 g a day too much?" is asking, not advising. The request is read as context
(:func:`read_request`, with the conversation's earlier user turns where the caller has them): who
the answer is for and the weight the request states. When it names a child ("my 2-year-old who
weighs 12 kg", "my toddler"), a figure in mg in a sentence that names no adult is the child's
dose: held to the ranges per kilogram x the weight (stated, else estimated from the age, or from
the youngest age of the band a word names: :func:`weight_for_age`, :data:`AGE_BANDS`) plus
:data:`WEIGHT_TOLERANCE` (never above the adult's) and down to :data:`UNDER_DOSE_SHARE` of the
lowest, else to the adult ranges' upper ends; a medicine whose label gives no dose at the child's
age (``min_age_years``) fails whatever the figure; a volume of syrup is read as the mg it holds
at the strength the answer states (``10 ml`` of ``120 mg/5 ml``), else at the usual strength of
the product it names, else at the strongest liquid of its medicine (``liquids``); and an answer
whose only figure for a medicine is an adult's dose above the child's limit fails (a parent who
asked about a toddler and reads "adults take 1 g" may give 1 g). An answer that says yes to a
request that states a dose, and states none itself, is checked as if it stated the request's.
"""

from __future__ import annotations

import bisect
import re

# the parts split off this module; every public name stays importable from here
from ._dose_judging import _EVIDENCE, _ONCE_A_WEEK, _child_ranges, _described, _judged, _no_dose, _reader, _too_young
from ._dose_judging import Range as Range
from ._dose_judging import Reader as Reader
from ._dose_labels import MENTION_FACTOR as MENTION_FACTOR
from ._dose_labels import WRONG_UNIT as WRONG_UNIT
from ._dose_labels import Dimension as Dimension
from ._dose_labels import DoseLimit, Liquid
from ._dose_labels import Kind as Kind
from ._dose_measures import Syrup as Syrup
from ._dose_measures import (
    _drops_in_ml,
    _in_mg,
    _mixed_units,
    _Products,
    _spoons_in_ml,
    _syrups,
    _tablet_strength,
    _tablets_in_mg,
)
from ._dose_reading import _CLAUSE, _DIGIT, _SENTENCE, _other_substance, _read_limits, _spelled_amounts
from ._dose_reading import Stated as Stated
from ._dose_request import ADULT_DOSING_AGE as ADULT_DOSING_AGE
from ._dose_request import ADULT_DOSING_KG as ADULT_DOSING_KG
from ._dose_request import AGE_BANDS as AGE_BANDS
from ._dose_request import UNDER_DOSE_SHARE as UNDER_DOSE_SHARE
from ._dose_request import WEIGHT_TOLERANCE as WEIGHT_TOLERANCE
from ._dose_request import DoseContext, read_request, weight_for_age
from ._dose_request import Who as Who
from ._dose_weekly import _taken_daily
from ._dose_yes import _asked_as_doses, _endorsed, opens_with_yes
from .facts import WrongFact

__all__ = [
    "DoseContext",
    "DoseLimit",
    "Liquid",
    "find_wrong_dose",
    "opens_with_yes",
    "read_request",
    "unit_slip_facts",
    "weekly_only_facts",
    "weight_for_age",
]


def find_wrong_dose(limits: tuple[DoseLimit, ...], text: str, request: DoseContext | None = None) -> str | None:
    """See :func:`_find_wrong_dose`; an answer that says yes to a request that states a dose ("Is it
    safe to give my son 1 g of paracetamol?" "Yes, that's fine.") and states no figure of its own
    is checked as if it stated the request's."""
    if not limits or not text:
        return None
    written = text
    text = _spelled_amounts(_drops_in_ml(_spoons_in_ml(text)))
    if request is not None and (asked := _endorsed(text, request)):
        # "Is 1 g of paracetamol okay for my 2-year-old?": a figure the question asks about with no
        # dose phrase is one dose (a daily figure says so: "8 g a day")
        found = _find_wrong_dose(limits, asked, request) or _find_wrong_dose(limits, _asked_as_doses(asked), request)
        if found is not None:
            return f"a yes to the request's {found}"
    # a weekly-only medicine is held to once a week unless the text or the request names a use
    # with another schedule ("methotrexate for my leukaemia")
    context = f"{text}\n{request.request}" if request is not None else text
    weekly = tuple(limit for limit in limits if limit.weekly_only_for(context))
    limits = tuple(
        limit.model_copy(update={"weekly_only": False}) if limit.weekly_only and limit not in weekly else limit
        for limit in limits
    )
    return (
        _find_wrong_dose(limits, text, request)
        or _mixed_units(limits, written, request)
        or (_taken_daily(weekly, text, limits, request) if weekly else None)
    )


def weekly_only_facts(limits: tuple[DoseLimit, ...], text: str) -> list[WrongFact]:
    """For each weekly-only medicine of ``limits`` that ``text`` tells to take daily (a figure tied
    to a day, or a daily schedule: :func:`find_wrong_dose`), the fact stated right, for a
    channel's ``{facts}``: the medicine is taken once a week."""
    found: list[WrongFact] = []
    for limit in limits:
        if limit.weekly_only_for(text) and (why := find_wrong_dose((limit,), text)) and _ONCE_A_WEEK in why:
            name = limit.drug[0][:1].upper() + limit.drug[0][1:]
            states = (
                f"{name} is taken once a week for most uses, on the same day each week, never daily ({limit.source})."
            )
            found.append(WrongFact(why, states))
    return found


#: A mass unit as written, and its name a thousand times smaller and larger ("mg" written for
#: micrograms, "g" for milligrams; "mcg" for milligrams).
_MASS_UNIT = re.compile(
    r"^(?P<num>[\d.,]+)\s*(?P<unit>kg|kilograms?|g|grams?|grammes?|mg|milligrams?|mcg|µg|μg|ug|micrograms?)$",
    re.IGNORECASE,
)
_SMALLER = {"kg": "grams", "g": "milligrams", "mg": "micrograms"}
_LARGER = {"mcg": "milligrams", "mg": "grams", "g": "kilograms"}


def _unit_key(unit: str) -> str:
    unit = unit.lower()
    if unit.startswith(("mcg", "µg", "μg", "ug", "micro")):
        return "mcg"
    if unit.startswith(("mg", "milli")):
        return "mg"
    if unit.startswith(("kg", "kilo")):
        return "kg"
    return "g"


def unit_slip_facts(limits: tuple[DoseLimit, ...], text: str) -> list[WrongFact]:
    """For each adult's dose or daily amount in ``text`` that its label's range rules out but that
    falls inside it read in the unit a thousand times smaller or larger ("10 mg of vitamin D a
    day": the label's 10 micrograms; "200 g of caffeine": 200 mg), the figure stated in the right
    unit, for a channel's ``{facts}``: a unit slip is corrected, not only refused. Figures per
    kilogram, for a child, or of a medicine dosed in units are left to :func:`find_wrong_dose`."""
    text = _spelled_amounts(text)
    patterns = [(limit, limit._pattern) for limit in limits if limit.unit == "mg"]
    names = [pattern for _, pattern in patterns]
    named = [limit for limit, pattern in patterns if pattern.search(text)]
    only = named[0] if len(named) == 1 else None
    found: dict[str, WrongFact] = {}
    for sentence in _SENTENCE.split(text):
        mentions = sorted(
            ((m.start(), limit) for limit, pattern in patterns for m in pattern.finditer(sentence)), key=lambda x: x[0]
        )
        for evidence, at, value, dimension, per_kg, kind, weekly, _ in _read_limits(sentence, names):
            written = _MASS_UNIT.match(evidence.strip())
            if dimension != "mass" or per_kg or kind == "mention" or written is None:
                continue
            for limit in _medicines_for(mentions, at) or ((only,) if only is not None and not mentions else ()):
                ranges = limit.bounds(kind, False)
                if weekly and limit.weekly_mg is not None:
                    ranges = (*ranges, (*limit.weekly_mg, "mg a week"))
                if not ranges or any(low <= value <= high for low, high, _ in ranges):
                    continue
                unit = _unit_key(written.group("unit"))
                for factor, names_by in ((1000.0, _SMALLER), (0.001, _LARGER)):
                    right = names_by.get(unit)
                    if right is None or not any(low <= value / factor <= high for low, high, _ in ranges):
                        continue
                    fact = _slip_fact(limit, written.group("num"), right, value / factor, ranges)
                    found.setdefault(fact.states, fact)
                    break
    return list(found.values())


def _slip_fact(limit: DoseLimit, number: str, right: str, mg: float, ranges: tuple[Range, ...]) -> WrongFact:
    """The :class:`WrongFact` of a unit slip: the figure in the ``right`` unit (``mg`` in mg), with
    IU where the label gives them, and the label's range."""
    name = limit.drug[0]
    iu = f" ({mg * limit.iu_per_mg:,.0f} IU)" if limit.iu_per_mg is not None else ""
    label = " or ".join(f"{_in_words(low)} to {_in_words(high)} {unit.split(' ', 1)[1]}" for low, high, unit in ranges)
    states = (
        f"The figure for {name} is in {right}: {number} {right}{iu}; the label's range is {label} ({limit.source})."
    )
    return WrongFact(f"{name}: {number} written in a unit a thousand times off (a slip for {right})", states)


def _in_words(mg: float) -> str:
    """An amount in mg as a reader expects it: micrograms under 1 mg ("10 micrograms")."""
    return f"{mg * 1000:g} micrograms" if mg < 1 else f"{mg:g} mg"


def _find_wrong_dose(limits: tuple[DoseLimit, ...], text: str, request: DoseContext | None = None) -> str | None:
    """The first stated dose or daily limit in ``text`` that a limit in ``limits`` rules out,
    described for the trace's evidence ("paracetamol: '10 milligrams (mg) per kilogram' a day,
    label range 50-90 mg/kg (source)"), or None.

    ``request``: what the request ``text`` answers tells (:func:`read_request`). When ``text``
    names no medicine of the table, the one the request names is the medicine ("How much Calpol
    …?" "Give 1,000 mg"). For a child, a figure in a clause that names no adult is the child's:
    held to weight x the per-kilogram ranges (plus :data:`WEIGHT_TOLERANCE`) when a weight is
    stated, else to the adult ranges' upper ends, and refused outright for a medicine the label
    gives no dose for at the child's age; a volume of syrup counts as the mg it holds when the
    text states the strength. A clause about adults keeps the adult ranges, but an answer whose
    only figure for a medicine is an adult's dose above the child's limit fails: a parent who
    asked about a toddler and reads "adults take 1 g" may give 1 g."""
    if _DIGIT.search(text) is None:  # no digit, no amount (_AMOUNT): nothing stated
        return None
    patterns = [(limit, limit._pattern) for limit in limits]
    # "360 mg of Infant Calpol" is the medicine's amount: a product's name counts as one of its names
    names = [pattern for _, pattern in patterns] + [product for limit in limits for product, _ in limit._products]
    named = [limit for limit, pattern in patterns if pattern.search(text)]
    if not named and request is not None and not _other_substance(request.request, names):
        named = [limit for limit, pattern in patterns if pattern.search(request.request)]  # the one asked about
        if not named and request.earlier and not _other_substance(request.earlier, names):
            named = [limit for limit, pattern in patterns if pattern.search(request.earlier)]  # an earlier turn's
    only = named[0] if len(named) == 1 else None
    patient = request if request is not None and request.child else None
    adults_only: dict[str, str] = {}  # medicine -> the evidence of an adult's dose above the child's limit
    given_child: set[str] = set()  # medicines the answer gives the child a figure for
    # for a child, clause by clause: "adults take 1 g; for your toddler, 180 mg" names both
    pieces = _SENTENCE.split(text) if patient is None else _CLAUSE.split(text)
    # a strength the answer states, else the one the request or an earlier turn states ("How many
    # ml of 120mg/5ml syrup …?" "Give 5 ml"): the bottle the parent holds, not the strongest listed
    syrups = (_syrups(text) or _syrups(f"{patient.request}\n{patient.earlier}")) if patient is not None else ()
    products = _Products(limits, text, patient, only)
    tablet = _tablet_strength(text, request)
    for sentence in pieces:
        volumes: dict[str, str] = {}
        if patient is not None:
            sentence, volumes = _in_mg(sentence, syrups, products)
        sentence, counted = _tablets_in_mg(sentence, tablet)
        volumes |= counted
        reader = _reader(sentence, patient)
        found = ((m.start(), limit) for limit, pattern in patterns for m in pattern.finditer(sentence))
        mentions = sorted(found, key=lambda mention: mention[0])
        for evidence, at, value, dimension, per_kg, kind, weekly, lower_only in _read_limits(sentence, names):
            # a name several medicines share (Benadryl: diphenhydramine in the US, cetirizine or
            # acrivastine in the UK) gives several: the figure is wrong only when wrong for each
            candidates = _medicines_for(mentions, at) or ((only,) if only is not None and not mentions else ())
            judged = [
                (
                    limit,
                    *_judged(
                        limit, value, dimension, evidence, per_kg, (kind, weekly), lower_only, reader, patient, volumes
                    ),
                )
                for limit in candidates
            ]
            read = [(limit, verdict, amount) for limit, verdict, amount in judged if verdict or amount is not None]
            passing = [(limit, amount) for limit, verdict, amount in read if verdict is None and amount is not None]
            if read and not passing:
                return read[0][1]
            for limit, mg in passing[:1] if kind != "mention" else ():
                if reader != "adult" or per_kg:  # a figure per kilogram is a child's whoever the sentence names
                    given_child.add(limit.drug[0])
                elif patient is not None and limit.drug[0] not in adults_only:
                    young = _too_young(limit, patient)
                    child = _child_ranges(limit, kind, per_kg, patient)
                    if young or (child and not any(mg <= high for _, high, _ in child)):
                        stated = f"{limit.drug[0]}: {volumes.get(evidence, repr(evidence))} {_EVIDENCE[kind]}"
                        adults_only[limit.drug[0]] = (
                            f"{stated} is an adult's dose, and the answer gives the child none"
                            f" (the child's: {_no_dose(limit) if young else _described(child)}; {limit.source})"
                        )
    return next((found for drug, found in adults_only.items() if drug not in given_child), None)


def _medicines_for(mentions: list[tuple[int, DoseLimit]], at: int) -> tuple[DoseLimit, ...]:
    """The medicines named nearest before ``at`` in the sentence (``mentions``: sorted by
    position), else first after it: one, or several when one name belongs to several."""
    if not mentions:
        return ()
    i = bisect.bisect_left(mentions, at, key=lambda mention: mention[0])
    where = mentions[i - 1][0] if i else mentions[0][0]
    return tuple(limit for position, limit in mentions if position == where)
