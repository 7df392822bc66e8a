"""Amounts written in other measures, for the dose check (a part of :mod:`.doses`): spoons and
drops as millilitres, volumes of syrup and counts of tablets as the mg they hold, and two figures
stated as one quantity that are not (a unit taken for another)."""

from __future__ import annotations

import re

from ._dose_labels import DoseLimit, Liquid
from ._dose_request import _COUNT, _NUMBER_WORDS, DoseContext

_TO_MG = {"mg": 1.0, "milligram": 1.0, "g": 1000.0, "gram": 1000.0, "mcg": 0.001, "microgram": 0.001, "µg": 0.001}


def _to_mg(number: str, unit: str) -> float:
    return float(number.replace(",", "")) * _TO_MG[unit.lower().rstrip("s")]  # every unit _AMOUNT reads is in _TO_MG


#: A measuring spoon: a medicine spoon holds 5 ml (teaspoon) or 15 ml (tablespoon), as labels
#: count them. The amount before it: a figure ("2 teaspoons", "1.5 tsp", "1/2 teaspoon"), a word
#: ("a teaspoon", "two tablespoons", "half a teaspoon").
_SPOON = re.compile(
    rf"(?<![\w.,/])(?P<n>\d+(?:\.\d+)?|\d/\d|half\s+an?|(?:{'|'.join(sorted(_NUMBER_WORDS, key=len, reverse=True))}))"
    r"(?:\s+and\s+a\s+half)?\s*(?:-\s*)?(?P<unit>teaspoon|tablespoon|tsp|tbsp|tbs)(?:s|fuls?|sful)?\b\.?",
    re.IGNORECASE,
)
_SPOON_ML = {"teaspoon": 5.0, "tsp": 5.0, "tablespoon": 15.0, "tbsp": 15.0, "tbs": 15.0}


def _spoken_count(number: str) -> float:
    """A count as written: "half a", "1/2", "two", "1,000" or "2.5"."""
    word = number.lower()
    if word.startswith("half"):
        return 0.5
    if "/" in word:
        top, bottom = word.split("/")
        return float(top) / float(bottom) if float(bottom) else 0.0
    return float(_NUMBER_WORDS.get(word) or word.replace(",", ""))


def _spoons_in_ml(text: str) -> str:
    """``text`` with each spoonful written as the millilitres it holds ("2 teaspoons": "10 ml"),
    so the volume check reads it as it reads "10 ml"."""

    def written(m: re.Match[str]) -> str:
        count = _spoken_count(m.group("n"))
        if "and a half" in m.group(0).lower():
            count += 0.5
        return f"{count * _SPOON_ML[m.group('unit').lower()]:g} ml"

    return _SPOON.sub(written, text)


#: A drop, as a standard dropper gives it (20 drops to 1 ml: the European Pharmacopoeia's
#: dropper); droppers vary from about 15 to 30 drops a ml, far less than a drop and a ml differ.
_DROP_ML = 0.05
_DROPS = re.compile(r"(?<![\w.,/])(?P<n>\d+(?:\.\d+)?)\s*(?:-\s*)?drops?\b", re.IGNORECASE)


def _drops_in_ml(text: str) -> str:
    """``text`` with each count of drops written as the millilitres it holds ("10 drops": "0.5 ml")."""
    return _DROPS.sub(lambda m: f"{float(m.group('n')) * _DROP_ML:g} ml", text)


#: Two figures a text states as the same quantity: "4 teaspoons (5 ml)", "100 mcg, which is 1 mg",
#: "1 ml = 1 drop", "a teaspoon is 15 ml". Each figure: a number (or a word for one, or a fraction)
#: and a unit of mass, volume (ml, litre, spoon, drop) or international units.
_QTY_UNITS = (
    r"mg|milligrams?|g|grams?|mcg|µg|micrograms?|ml|mls|millilit(?:re|er)s?|lit(?:re|er)s?|"
    r"teaspoons?|tsp|tablespoons?|tbsp|tbs|drops?|IU|international\s+units?"
)
_QTY_NUMBER = (
    rf"half\s+an?|\d{{1,3}}(?:,\d{{3}})+|\d+(?:\.\d+)?|\d/\d|{'|'.join(sorted(_NUMBER_WORDS, key=len, reverse=True))}"
)


def _qty(i: int) -> str:
    return rf"(?<![\w.,/])(?P<n{i}>{_QTY_NUMBER})\s*-?\s*(?P<u{i}>{_QTY_UNITS})(?:fuls?|sful)?\b"


_APPROX = (
    r"(?:(?:about|approx(?:\.|imately)?|around|roughly|~|≈|just\s+under|just\s+over|the\s+same\s+as|equal\s+to)\s*)?"
)
_EQUIVALENT = re.compile(
    _qty(1)
    + r"(?:(?P<paren>\s*\(\s*)(?:=\s*|i\.e\.,?\s*|or\s+|that\W?s\s+|which\s+is\s+)?"
    + r"|,?\s*(?:=|equals?|is\s+equal\s+to|is\s+the\s+same\s+as|(?:which|that)(?:\s+is|\W?s)|i\.e\.,?|is)\s+)"
    + _APPROX
    + _qty(2).replace("(?<![\\w.,/])", "")
    + r"(?(paren)\s*\))",
    re.IGNORECASE,
)
#: Each unit the check compares, as (what it measures, how many of the base unit: mg, ml, IU).
_QTY = {
    "mg": ("mass", 1.0),
    "milligram": ("mass", 1.0),
    "g": ("mass", 1000.0),
    "gram": ("mass", 1000.0),
    "mcg": ("mass", 0.001),
    "µg": ("mass", 0.001),
    "microgram": ("mass", 0.001),
    "ml": ("volume", 1.0),
    "millilitre": ("volume", 1.0),
    "milliliter": ("volume", 1.0),
    "litre": ("volume", 1000.0),
    "liter": ("volume", 1000.0),
    "teaspoon": ("volume", 5.0),
    "tsp": ("volume", 5.0),
    "tablespoon": ("volume", 15.0),
    "tbsp": ("volume", 15.0),
    "tbs": ("volume", 15.0),
    "drop": ("volume", _DROP_ML),
    "iu": ("units", 1.0),
    "international unit": ("units", 1.0),
}
#: How far apart two figures stated as equal may be: rounding ("half a teaspoon (2 ml)") and
#: droppers (15 to 30 drops a ml) stay inside it; a unit taken for another (mg for mcg: 1,000
#: times, a teaspoon for a ml: 5, a tablespoon for a teaspoon: 3) does not.
_SAME_WITHIN = 2.0


def _quantity(number: str, unit: str) -> tuple[str, float]:
    count = _spoken_count(number)
    key = " ".join(unit.lower().split())
    key = key if key in _QTY else key.rstrip("s")
    dimension, factor = _QTY[key]
    return dimension, count * factor


def _mixed_units(limits: tuple[DoseLimit, ...], text: str, request: DoseContext | None) -> str | None:
    """Two figures ``text`` states as the same quantity that are not (``"4 teaspoons (5 ml)"``,
    ``"100 mcg (1 mg)"``, ``"1 ml (1 drop)"``): a unit taken for another, which turns a right
    dose into a wrong one; checked where the text or the request names a medicine of the table.
    IU and a mass are compared for a medicine whose IU in a mg the table gives."""
    sources = [text] + ([request.request, request.earlier] if request is not None else [])
    named = [limit for limit in limits if any(limit._pattern.search(source) for source in sources)]
    if not named:
        return None
    for m in _EQUIVALENT.finditer(text):
        (dim1, one), (dim2, two) = _quantity(m["n1"], m["u1"]), _quantity(m["n2"], m["u2"])
        if dim1 != dim2:
            per_mg = next((limit.iu_per_mg for limit in named if limit.iu_per_mg is not None), None)
            if per_mg is None or {dim1, dim2} != {"mass", "units"}:
                continue
            one, two = (one * per_mg if dim1 == "mass" else one), (two * per_mg if dim2 == "mass" else two)
        if one > 0 and two > 0 and max(one, two) / min(one, two) > _SAME_WITHIN:
            said = m.group(0).strip()
            return f"{named[0].drug[0]}: {said!r} states two different amounts as one (a unit taken for another)"
    return None


#: A count of tablets (caplets, capsules, pills), with the strength of one when it is written
#: beside it: "2 tablets", "1 to 2 caplets", "two 500 mg tablets", "2 x 200mg ibuprofen pills",
#: "16 of the 500 mg tablets", "six tablets of 500 mg". Not "a tablet": "a 200 mg tablet" names a
#: strength, and one tablet is no wrong count.
_TABLETS = re.compile(
    rf"(?<![\w.,])(?:(?P<low>{_COUNT})\s*(?:to|-|–|or)\s*)?(?P<n>{_COUNT})\s+(?:x\s*)?"
    r"(?:of\s+(?:the|your|my|these|those|his|her|their|our)\s+)?"
    r"(?:(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>mg|milligrams?|g|grams?|mcg)\s+)?"
    r"(?P<name>(?:[a-z][\w'-]*\s+){0,2}?)(?:tablets?|caplets?|capsules?|pills?|gel\s*caps?|gelcaps?|softgels?)\b"
    r"(?(num)|(?:\s+of\s+(?P<num2>\d+(?:\.\d+)?)\s*(?P<unit2>mg|milligrams?|g|grams?|mcg)\b)?)",
    re.IGNORECASE,
)
#: One tablet's strength, written as one: "500 mg tablets", "200mg ibuprofen pills", "a 500 mg caplet".
_TABLET_STRENGTH = re.compile(
    r"(?<![\w.,])(?P<num>\d+(?:\.\d+)?)\s*(?P<unit>mg|milligrams?|g|grams?|mcg)\s+(?:[a-z][\w'-]*\s+){0,2}?"
    r"(?:tablets?|caplets?|capsules?|pills?|gel\s*caps?|gelcaps?|softgels?)\b",
    re.IGNORECASE,
)


def _tablet_strength(text: str, request: DoseContext | None) -> float | None:
    """The strength (mg) of the tablets a count with no strength beside it is of: the one the
    answer writes, else the one the request or an earlier turn writes ("How many 500 mg
    paracetamol tablets …?"); None when there is none, or more than one (which is meant cannot
    be told)."""
    sources = [text] + ([request.request, request.earlier] if request is not None else [])
    for source in sources:
        found = {_to_mg(m.group("num"), m.group("unit")) for m in _TABLET_STRENGTH.finditer(source)}
        if found:
            return found.pop() if len(found) == 1 else None
    return None


def _count(word: str) -> float:
    return float(_NUMBER_WORDS.get(word.lower()) or word)


def _tablets_in_mg(sentence: str, strength: float | None) -> tuple[str, dict[str, str]]:
    """``sentence`` with each count of tablets written as the mg it holds ("36 tablets" of 500 mg:
    "18000 mg"; "1 to 2 tablets": "500 to 1000 mg"; "8 paracetamol tablets": "paracetamol 4000
    mg"; "16 of the 500 mg tablets": "8000 mg"; "six tablets of 500 mg": "3000 mg"); with what each
    figure was, for the evidence. A count takes the strength
    beside it, else ``strength`` (:func:`_tablet_strength`); with neither it is left as it is."""
    was: dict[str, str] = {}

    def written(m: re.Match[str]) -> str:
        if m.group("num") or m.group("num2"):
            each: float | None = _to_mg(m.group("num") or m.group("num2"), m.group("unit") or m.group("unit2"))
        else:
            each = strength
        if each is None:
            return m.group(0)
        figure = f"{round(_count(m.group('n')) * each, 1):g} mg"
        low = f"{round(_count(m.group('low')) * each, 1):g} to " if m.group("low") else ""
        was[figure] = f"{m.group(0)!r} ({figure} at {each:g} mg a tablet)"
        # the words between count and tablet ("paracetamol") go before the figure, where they name
        # its medicine without reading as "of" another substance
        name = m.group("name").strip()
        return f"{name} {low}{figure}" if name else f"{low}{figure}"

    return _TABLETS.sub(written, sentence), was


#: A syrup's strength: "120 mg/5 ml", "100mg per 5mL", "250 mg in 5 ml", "40 mg/ml".
_STRENGTH_ML = re.compile(
    r"(?<![\w.,])(?P<mg>\d+(?:\.\d+)?)\s*(?:mg|milligrams?)\s*(?:/|per|in|every)\s*(?P<ml>\d+(?:\.\d+)?)?\s*"
    r"(?:ml|millilit(?:re|er)s?)\b",
    re.IGNORECASE,
)
#: A volume of a liquid medicine: "7.5 ml", "10 mL", "5 millilitres".
_VOLUME = re.compile(r"(?<![\w.,/])(?P<ml>\d+(?:\.\d+)?)\s*(?:ml|millilit(?:re|er)s?)\b", re.IGNORECASE)
Syrup = tuple[float, str]  # mg per ml, as written


def _syrups(text: str) -> tuple[Syrup, ...]:
    """The strengths of liquid medicines ``text`` states, in order."""
    return tuple(_syrup(m) for m in _STRENGTH_ML.finditer(text) if float(m.group("ml") or 1) > 0)


def _syrup(m: re.Match[str]) -> Syrup:
    return float(m.group("mg")) / float(m.group("ml") or 1), m.group(0)


def _in_mg(sentence: str, syrups: tuple[Syrup, ...], products: _Products) -> tuple[str, dict[str, str]]:
    """``sentence`` with each volume of syrup written as the mg it holds ("10 ml" of 120 mg/5 ml:
    "240 mg"), and the strengths themselves out of the way (a strength is not a dose); with what
    each converted figure was, for the evidence. A volume takes the strength stated nearest before
    it in the sentence, else the first after it, else the only strength the text states; with
    none, the usual strength of the product it names (:meth:`_Products.strength`); else it is
    left as it is (not an amount the check reads)."""
    strengths = [m for m in _STRENGTH_ML.finditer(sentence) if float(m.group("ml") or 1) > 0]
    only = syrups[0] if len({per_ml for per_ml, _ in syrups}) == 1 else None
    was: dict[str, str] = {}
    out: list[str] = []
    last, following = 0, 0  # end of the text written so far; the first strength not yet passed
    stated: Syrup | None = None  # the strength stated last before the current volume
    for volume in _VOLUME.finditer(sentence):
        while following < len(strengths) and strengths[following].start() < volume.end():
            strength = strengths[following]
            if strength.start() >= last:  # the strength itself: out of the way
                out.append(f"{sentence[last : strength.start()]}medicine")  # "of the medicine suspension"
                last = strength.end()
            stated = _syrup(strength)
            following += 1
        if volume.start() < last:
            continue  # the volume inside a strength ("5 ml" of "120 mg/5 ml")
        if _MG_BEFORE.search(sentence, last, volume.start()):
            continue  # "120 mg (5 ml)": the mg before it is read
        if beside := _MG_AFTER.match(sentence[volume.end() :]):
            # "2.5 ml (50 mg) of children's ibuprofen": read as "50 mg of children's ibuprofen"
            out.append(f"{sentence[last : volume.start()]}{beside.group('mg')}")
            last = volume.end() + beside.end()
            continue
        chosen = stated or (_syrup(strengths[following]) if following < len(strengths) else only)
        if chosen is None:
            chosen = products.strength(sentence, volume)
        if chosen is None:
            continue  # no strength: left as it is
        per_ml, label = chosen
        figure = f"{round(float(volume.group('ml')) * per_ml, 1):g} mg"
        was[figure] = f"{volume.group(0)!r} ({figure} at {label})"
        out.append(f"{sentence[last : volume.start()]}{figure}")
        last = volume.end()
    for strength in strengths[following:]:
        if strength.start() >= last:
            out.append(f"{sentence[last : strength.start()]}medicine")
            last = strength.end()
    out.append(sentence[last:])
    return "".join(out), was


#: A volume the mg beside it states ("120 mg (5 ml)", "7.5 ml (180 mg)"): that figure is read.
_MG_BEFORE = re.compile(r"\d\s*(?:mg|milligrams?|g|grams?|mcg)\s*\(\s*(?:or\s+|i\.e\.\s*)?$", re.IGNORECASE)
_MG_AFTER = re.compile(
    r"^\s*\(\s*(?:about\s+|=\s*)?(?P<mg>\d[\d.,]*\s*(?:mg|milligrams?|g|grams?|mcg))\s*\)", re.IGNORECASE
)
#: What a volume of no medicine is followed by: a spoon, a syringe, a bottle, a drink.
_NOT_A_DOSE_AFTER = re.compile(
    r"^\s*(?:(?:oral|measuring|dosing|plastic)\s+)?(?:spoons?|syringes?|bottles?|cups?|packs?|sachets?|droppers?)\b"
    r"|^\s*of\s+(?:(?:water|milk|juice|fluids?|formula|saline|squash|liquid\s+to\s+drink)\b)",
    re.IGNORECASE,
)


class _Products:
    """The strengths an answer's volume may be read at when the answer states none: the product
    it names (in the sentence, else anywhere in the answer, else in the request: "How much Calpol
    Six Plus …?" "Give 20 ml"), else the strongest liquid of the medicine the sentence, the answer
    or the request names ("20 ml of Calpol": 250 mg/5 ml, not 120): the stricter check."""

    def __init__(self, limits: tuple[DoseLimit, ...], text: str, patient: DoseContext | None, only: DoseLimit | None):
        self.limits = tuple(limit for limit in limits if limit.liquids)
        self.text = text
        self.request = patient.request if patient is not None else ""
        self.only = only if only is not None and only.liquids else None

    def _mentions(self, text: str) -> list[tuple[int, int, Liquid, str]]:
        """(start, end, product, its name as written) for each product ``text`` names, the longest
        name kept where two overlap ("Calpol Six Plus", not "Calpol")."""
        found: list[tuple[int, int, Liquid, str]] = []
        for limit in self.limits:
            for pattern, liquid in limit._products:
                for m in pattern.finditer(text):
                    if not any(start < m.end() and m.start() < end for start, end, _, _ in found):
                        found.append((m.start(), m.end(), liquid, m.group(0)))
        return sorted(found, key=lambda mention: mention[0])

    def strength(self, sentence: str, volume: re.Match[str]) -> Syrup | None:
        if not self.limits:
            return None
        after = sentence[volume.end() :]
        if _NOT_A_DOSE_AFTER.match(after):
            return None
        mentions = self._mentions(sentence)
        close_after = [m for m in mentions if m[0] >= volume.end() and m[0] - volume.end() <= 25]
        before = [m for m in mentions if m[1] <= volume.start()]
        chosen = close_after[:1] or before[-1:] or mentions[:1] or self._mentions(self.text)[:1]
        chosen = chosen or self._mentions(self.request)[:1]
        if chosen:
            _, _, liquid, name = chosen[0]
            return liquid.mg_per_5ml / 5, f"{liquid.mg_per_5ml:g} mg/5 ml, the usual strength of {name}"
        limit = self._medicine(sentence)
        strongest = limit.strongest if limit is not None else None
        if limit is None or strongest is None:
            return None
        strength = f"{strongest.mg_per_5ml:g} mg/5 ml, the strongest {limit.drug[0]} liquid"
        return strongest.mg_per_5ml / 5, f"{strength}: no strength stated, check the label"

    def _medicine(self, sentence: str) -> DoseLimit | None:
        """The medicine with liquids the sentence names (only one), else the answer's or request's."""
        named = [limit for limit in self.limits if limit._pattern.search(sentence)]
        if len(named) == 1:
            return named[0]
        return self.only if not named else None
