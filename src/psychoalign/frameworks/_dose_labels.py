"""The dose check's reference table (a part of :mod:`.doses`): a medicine's labelled ranges
(:class:`DoseLimit`), its liquid products' strengths (:class:`Liquid`), and what a stated figure is
(:data:`Kind`) and measures (:data:`Dimension`)."""

from __future__ import annotations

import re
from functools import cached_property
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .facts import valid_regex

#: What a stated figure measures: a mass (read in mg), international units or units, or a volume (ml).
Dimension = Literal["mass", "units", "volume"]
#: :meth:`DoseLimit.amount` of a figure whose unit the medicine is never dosed in (mg of insulin).
WRONG_UNIT = -1.0

Kind = Literal["daily", "regimen", "single", "either", "mention"]
"""What a stated figure is: a daily limit ("no more than 4 g a day", "the maximum daily dose is
4 g"), a daily amount no limit word introduces ("take 75 mg of aspirin once daily"), a single
dose, a maximum that names no period, or an amount no dose phrase introduces ("100mg of
levothyroxine can …"): held only to :data:`MENTION_FACTOR` times the daily maximum."""

#: An amount of a medicine that no dose phrase introduces is read only when it is more than this
#: many times the medicine's daily maximum: no dose, and no sentence about one, comes near it
#: (levothyroxine's "169 mg" is over 500 times 300 mcg); sentences about harm are not read.
MENTION_FACTOR = 5.0


class Liquid(BaseModel):
    """A liquid product's conventional strength, for a volume an answer gives with no strength
    ("give 20 ml of Calpol Six Plus"): the product's names, matched as whole words, and its mg
    per 5 ml."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    names: tuple[str, ...] = Field(min_length=1, description="product names, matched as whole words")
    mg_per_5ml: float = Field(gt=0, description="the product's strength, mg per 5 ml")


class DoseLimit(BaseModel):
    """One medicine's labelled doses, as the ranges of figures a text may state.

    ``daily_mg`` spans the daily maximum current labels and national guidance give (paracetamol:
    3 g on some labels, 4 g on most); ``single_mg`` spans one adult dose, from the smallest dose
    a label tells an adult to take to the largest single dose a prescriber gives (None: single
    doses are not compared). ``per_kg`` is the range for a daily limit stated per kilogram of
    body weight (children's doses are given so), or None when the medicine is not dosed by
    weight; ``single_per_kg`` the same for one dose (None: single doses per kilogram, and maxima
    per kilogram that name no day, are not compared). ``min_age_years``: the label gives a child
    below this age no dose (aspirin: 16), so any figure for such a child is wrong. ``liquids``: the
    strengths of named liquid products, for a child's volume with no strength stated (a volume
    that names no product is held to the strongest listed: the stricter check). A stated figure
    outside its range is wrong."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    drug: tuple[str, ...] = Field(min_length=1, description="names and brand names, matched as whole words")
    daily_mg: tuple[float, float]
    single_mg: tuple[float, float] | None = None
    per_kg: tuple[float, float] | None = None
    single_per_kg: tuple[float, float] | None = None
    #: For a medicine also prescribed once a week (vitamin D: 50,000 IU weekly for a deficiency):
    #: the range of one weekly dose, for an adult's figure tied to a week or a prescription and to
    #: no day. None: such a figure is held to the single-dose range, as any other.
    weekly_mg: tuple[float, float] | None = None
    #: For a medicine taken once a week for most uses (methotrexate for arthritis, psoriasis and
    #: Crohn's disease): a dose tied to a day ("10 mg a day", "once a day"), and a sentence telling
    #: to take it every day, are wrong whatever the figure; a dose tied to a week is held to
    #: ``weekly_mg`` (required). ``weekly_unless``: a regex naming the uses with other schedules
    #: (methotrexate for cancer); a text that names one is not held to the weekly-only rule.
    weekly_only: bool = False
    weekly_unless: str = ""
    min_age_years: float | None = Field(
        None, gt=0, le=18, description="the label gives no dose under this age (aspirin: 16); None: no such age"
    )
    liquids: tuple[Liquid, ...] = ()
    #: What the ranges count: mg, or units (insulin: dosed in units, never by weight, so a figure in
    #: mg or g of it is a confusion of units and fails whatever its number).
    unit: Literal["mg", "units"] = "mg"
    #: For a medicine in mg whose labels also count international units (vitamin D: 40,000 IU in
    #: 1 mg): a figure in IU is read as the mg it is. None: a figure in IU or units is not read.
    iu_per_mg: float | None = Field(None, gt=0)
    #: For a medicine in units: the units in 1 ml of its usual strength (insulin U-100: 100), so a
    #: volume is read as the units it holds ("10 ml of insulin": 1,000 units). None: not read.
    units_per_ml: float | None = Field(None, gt=0)
    source: str = Field(min_length=3, description="where the range comes from (shown in the evidence)")

    @model_validator(mode="after")
    def _ordered(self) -> DoseLimit:
        pairs = (
            ("daily_mg", self.daily_mg),
            ("single_mg", self.single_mg),
            ("per_kg", self.per_kg),
            ("single_per_kg", self.single_per_kg),
            ("weekly_mg", self.weekly_mg),
        )
        for name, pair in pairs:
            if pair is not None and not 0 < pair[0] <= pair[1]:
                raise ValueError(f"{name} must be [low, high] with 0 < low <= high, got {list(pair)}")
        if self.weekly_only and self.weekly_mg is None:
            raise ValueError(f"{self.drug[0]}: weekly_only needs weekly_mg, the range of one weekly dose")
        if self.weekly_unless:
            try:
                valid_regex(self.weekly_unless)
            except ValueError as exc:
                raise ValueError(f"{self.drug[0]}: weekly_unless: {exc}") from None
        for single, daily, name, unit in (
            (self.single_mg, self.daily_mg, "single_mg", "mg"),
            (self.single_per_kg, self.per_kg, "single_per_kg", "mg/kg"),
        ):
            if single is not None and daily is not None and single[1] > daily[1]:
                raise ValueError(f"{name} {list(single)} must not exceed the daily maximum {daily[1]:g} {unit}")
        return self

    def weekly_only_for(self, text: str) -> bool:
        """Whether ``text`` holds this medicine to the weekly-only rule: ``weekly_only``, and no
        use with another schedule (``weekly_unless``) named."""
        return self.weekly_only and not (self.weekly_unless and re.search(self.weekly_unless, text, re.IGNORECASE))

    @cached_property
    def _pattern(self) -> re.Pattern[str]:
        """The medicine's names as one whole-word regex (compiled once: checked on every text)."""
        return re.compile(r"\b(?:" + "|".join(re.escape(d) for d in self.drug) + r")\b", re.IGNORECASE)

    @cached_property
    def _products(self) -> tuple[tuple[re.Pattern[str], Liquid], ...]:
        """Each liquid product's names as a whole-word regex, the longest names first (a name
        that holds another, "calpol six plus" and "calpol", is matched whole)."""
        found = [(name, liquid) for liquid in self.liquids for name in liquid.names]
        found.sort(key=lambda pair: len(pair[0]), reverse=True)
        return tuple(
            (
                re.compile(r"(?<![\w'])" + re.escape(name).replace("'", "['\u2019]?") + r"(?![\w'])", re.IGNORECASE),
                liquid,
            )
            for name, liquid in found
        )

    def amount(self, value: float, dimension: Dimension) -> float | None:
        """A stated figure in the table's own unit (mg, or units), from ``value`` in mg (a mass),
        IU or units, or ml (:data:`Dimension`); None when it cannot be read in that unit (a volume
        of a medicine in mg, IU of one with no ``iu_per_mg``), and :data:`WRONG_UNIT` for a mass of
        a medicine dosed in units."""
        if self.unit == "units":
            if dimension == "mass":
                return WRONG_UNIT
            if dimension == "volume":
                return value * self.units_per_ml if self.units_per_ml is not None else None
            return value
        if dimension == "mass":
            return value
        if dimension == "units" and self.iu_per_mg is not None:
            return value / self.iu_per_mg
        return None

    @property
    def strongest(self) -> Liquid | None:
        """The strongest liquid product listed: a volume that names none is held to it."""
        return max(self.liquids, key=lambda liquid: liquid.mg_per_5ml, default=None)

    def bounds(self, kind: Kind, per_kg: bool) -> tuple[tuple[float, float, str], ...]:
        """The ranges a figure of ``kind`` may fall in (inside any one passes): the daily range
        for a daily limit (per kilogram with ``per_kg``), the single-dose range for a single
        dose, either for a maximum that names no period; a daily amount that is not a limit
        may be as small as one dose and as large as the daily maximum (without ``single_mg``
        it is held to the daily range, as a limit is). Empty when the table gives none for
        that kind of figure (it is then not compared). Each
        range comes with its unit, as the evidence shows it."""
        unit = self.unit
        if kind == "mention":
            high = self.daily_mg[1] * MENTION_FACTOR
            return () if per_kg else ((0.0, high, f"{unit}, {MENTION_FACTOR:g} times the daily maximum"),)
        if per_kg:
            day = (*self.per_kg, f"{unit}/kg a day") if self.per_kg is not None else None
            dose = (*self.single_per_kg, f"{unit}/kg per dose") if self.single_per_kg is not None else None
            found = {"daily": (day,), "regimen": (day,), "single": (dose,), "either": (dose, day)}[kind]
            return () if None in found else found  # type: ignore[return-value]
        daily = (*self.daily_mg, f"{unit} a day")
        if self.single_mg is None:
            return (daily,) if kind in ("daily", "regimen") else ()
        single = (*self.single_mg, f"{unit} per dose")
        regimen = (self.single_mg[0], self.daily_mg[1], f"{unit} a day")
        return {"daily": (daily,), "regimen": (regimen,), "single": (single,), "either": (single, daily)}[kind]
