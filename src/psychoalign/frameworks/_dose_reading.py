"""The figures a sentence states, for the dose check (a part of :mod:`.doses`): the amounts it
reads (:data:`_DOSE_AMOUNT`, amounts in words as digits), what each is stated as (:data:`Stated`: a
daily limit, a single dose, a maximum, a mention), and the medicine an "of WORD" names."""

from __future__ import annotations

import re
from collections.abc import Iterator

from ._dose_labels import Dimension, Kind
from ._dose_measures import _to_mg

#: An amount with its unit, optionally per kilogram of body weight. Units: mg, g, mcg/µg.
_MASS_UNITS = r"milligrams?|mg|grams?|g|micrograms?|mcg|µg"
#: Units a dose figure may also be stated in: international units (vitamin D), insulin's units,
#: and a volume (insulin's ml, read at its usual strength). Read by the dose check only, and only
#: for a medicine whose table entry counts them (:meth:`._dose_labels.DoseLimit.amount`): "14 units of alcohol"
#: or "10 ml of water" beside a medicine are never read as its dose.
_OTHER_UNITS = r"IU|international\s+units?|units?|ml|mls|millilit(?:re|er)s?"


def _amount_regex(units: str) -> re.Pattern[str]:
    return re.compile(
        r"(?<![\w.,])(?P<num>\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)\s*"
        rf"(?P<unit>{units})\b"
        r"(?!\s*/\s*(?:dl|decilit\w*|l)\b)"  # a blood level ("180 mg/dL"), not a dose
        r"(?:\s*\((?:mg|g|mcg|milligrams?|grams?)\))?"
        # "per kilogram" may follow an aside in brackets ("4 grams (5 milligrams) per kilogram"): the
        # figure is per kilogram either way, and the aside's own amount is read as one too.
        r"(?P<perkg>(?:\s*\([^()]{0,40}\))?\)?\s*(?:/|per|a|for each|for every)\s*(?:kg|kilograms?)\b"
        r"(?:\s+of\s+body\s*weight)?)?",
        re.IGNORECASE,
    )


_AMOUNT = _amount_regex(_MASS_UNITS)
#: :data:`_AMOUNT` with the other units a dose may be stated in: what the dose check reads.
_DOSE_AMOUNT = _amount_regex(f"{_MASS_UNITS}|{_OTHER_UNITS}")
#: What may follow an amount to make it a daily figure: "a day", "/day", "in 24 hours", with
#: an aside in brackets allowed between ("4 g (8 tablets) a day").
_DAILY_AFTER = re.compile(
    r"^\)?(?:\s*\([^()]{0,40}\))?"
    # "8 g of acetaminophen a day": the medicine's name may stand between, but not a count of
    # doses ("1 g of paracetamol four times a day" is a single dose).
    r"(?:\s+of\s+(?:(?!(?:times|every|each|per|at|up|to|one|two|three|four|five|six|twice|thrice)\b)[a-z-]+\s+){1,3}?)?"
    r"\s*(?:/\s*(?:day|24\s*h)\b|(?:per|a|each|every)\s+day\b|daily\b|"
    r"(?:in|per|over|within)\s+(?:a|any|one|each|every)?\s*24[- ]?(?:hours?|hrs?|h)\b|a\s+24[- ]hour)",
    re.IGNORECASE,
)
#: A hedge between a dose phrase and its amount ("the maximum daily dose is typically 10 g"): the
#: figure is stated all the same.
_HEDGE = r"(?:about|around|approximately|roughly|up\s+to|typically|usually|generally|normally|commonly|often"
_HEDGE += r"|considered|thought\s+to\s+be|said\s+to\s+be|set\s+at|listed\s+as|given\s+as)"
#: A "maximum daily" phrase that introduces the amount right after it.
_MAX_DAILY_BEFORE = re.compile(
    r"(?:\b(?:max(?:imum)?|highest|upper\s+limit|limit)\b[^.;:!?]{0,60}?"
    # up to 90 characters on to the amount: a hedge ("is currently unknown, but it's estimated
    # to be around 10 milligrams") does not turn a stated limit into no limit; a single dose
    # named between ("… but a typical single dose is 500 mg") does
    r"\b(?:daily|per\s+day|a\s+day|in\s+24\s+hours|24[- ]hour)\b"
    # the day named first: "the daily limit for ibuprofen is 10 g", "the 24-hour maximum is"
    r"|\b(?:daily|24[- ]hour)\s+(?:max(?:imum)?|limit|cap)\b)"
    r"(?:(?!\b(?:single|one|each|per|a)\s+(?:dose|tablet|pill)|\bat\s+a\s+time\b)[^.;!?]){0,90}?"
    rf"(?:\bis\b|\bof\b|\bat\b|\bbe\b|\bare\b|:|=)(?:\s*{_HEDGE}\b){{0,3}}\s*$",
    re.IGNORECASE,
)
#: A dose phrase that introduces the amount right after it, for figures that name no day: a
#: noun ("the maximum allowable dose of Tylenol is", "a single dose of", "max:") or a verb ("take",
#: "do not take more than", "never exceed"), then an optional lead ("up to", "about") and the
#: bare first number of a range ("200 to" 400 mg). No digit stands between the phrase and the
#: amount, so the phrase belongs to this amount and not to an earlier one.
_DOSE_BEFORE = re.compile(
    r"(?:\b(?:doses?|dosage|dosing|amount|max(?:imum)?)\b[^.;:!?\d]{0,60}?(?:\bis\b|\bare\b|\bof\b|\bbe\b|\bat\b|:|=)"
    r"|\bmax(?:imum)?\b\.?"
    r"|(?P<neg>\b(?:not|never|no)\s+|n't\s+)?\b(?:take|taking|takes|give|giving|swallow|inject|injecting)\b"
    r"(?:\s+(?!(?:more|than|over|above|with|every|after|before|for|if|when)\b)(?:\d{1,2}-)?[a-z-]+){0,2}"
    r"|\b(?:not|never|n't|without)\s+(?:to\s+)?(?:exceed|exceeding|go\s+over|going\s+over)\b)"
    r"\s*(?P<lead>(?:(?:about|around|approximately|roughly|up\s+to|between|from|only|just|at\s+most|"
    r"typically|usually|generally|normally|commonly|"
    r"(?:no|not)\s+more\s+than|more\s+than|over|above|in\s+excess\s+of|a\s+max(?:imum)?\s+of|a\s+total\s+of)\s+){0,2})"
    r"(?P<bare>(?P<first>\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)\s*(?:to|-|–|or)\s*)?$",
    re.IGNORECASE,
)
#: What may follow an amount to make it a single dose: "per dose", "at a time", "every 4 to 6
#: hours", "dose" ("a 45 mg dose of Tylenol").
_SINGLE_AFTER = re.compile(
    r"^\)?(?:\s*\([^()]{0,40}\))?(?:\s+of\s+(?:[a-z-]+\s+){1,3}?)?\s*(?:"
    r"(?:per|each|a|every|one|in\s+one|in\s+a\s+single|as\s+a\s+single|as\s+one)\s+(?:single\s+)?dose\b"
    r"|at\s+(?:a|one|any\s+one)\s+time\b|at\s+once\b|doses?\b"
    r"|every\s+(?:\d+|one|two|three|four|five|six|eight|twelve|few)\b[^.;:!?]{0,20}?\bhours?\b)",
    re.IGNORECASE,
)
#: A dose taken so many times a day: "100 mg of levothyroxine, taken once a day", "5 mg twice
#: daily" (one dose each time; the day's total is the count's business, not this figure's).
_TIMES_A_DAY_AFTER = re.compile(
    r"^\)?(?:\s+of\s+(?:[a-z-]+\s+){0,2}?[a-z-]+)?,?\s*(?:(?:taken|given|used)\s+)?"
    r"(?:once|twice|three\s+times|four\s+times|two\s+times|\d\s+times)\s+(?:a\s+day|daily|per\s+day|every\s+day)\b",
    re.IGNORECASE,
)
#: An amount that is a product's strength, not a dose: "a 200 mg tablet", "500 mg paracetamol caplets".
_STRENGTH_AFTER = re.compile(
    r"^(?:\s*-)?\s*(?:[a-z]+\s+)?(?:tablets?|caplets?|capsules?|pills?|gel\s*caps?|gelcaps?|softgels?|"
    r"liquid\s*gels?|suppositor(?:y|ies)|sachets?|packets?|chewables?|strength|effervescent|formulation|"
    r"(?:extended|modified|slow|sustained|immediate)[- ]release)\b",
    re.IGNORECASE,
)
#: "N mg of <something>": the amount belongs to what follows "of".
_OF_WHAT = re.compile(
    r"^\s*(?:\([^()]{0,40}\)\s*)?of\s+(?:(?:the|this|that|your|each|an?)\s+)?(?P<word>[a-z][\w-]*)", re.IGNORECASE
)
_GENERIC = frozenset(
    {"it", "drug", "drugs", "medicine", "medicines", "medication", "medications", "active", "ingredient"}
    | {"dose", "doses"}
    # a liquid's form: "20 ml of the syrup" is the medicine asked about
    | {"syrup", "syrups", "liquid", "suspension", "solution", "drops", "mixture", "elixir", "oral"}
)
#: Words that make a dose figure something other than a recommendation: a toxic or lethal amount,
#: a study's doses.
_NOT_ADVICE = re.compile(
    r"\b(?:toxic\w*|toxicity|lethal|fatal\w*|overdos\w*|poison\w*|deadly|dangerous\w*|harmful|damage\w*|"
    r"stud(?:y|ies)|trials?|research\w*|experiment\w*)\b",
    re.IGNORECASE,
)
#: A condition under which labels give lower limits (liver or kidney disease, alcohol): a figure
#: below the usual range is right there, one above it is wrong there too ("an adult taking 16
#: grams of paracetamol per day … for liver function" is no lower limit).
_LOWER_LIMITS = re.compile(r"\b(?:liver|hepatic|kidney|renal|alcohol\w*)\b", re.IGNORECASE)
_NOT_ADVICE_OR_LOWER = re.compile(f"{_NOT_ADVICE.pattern}|{_LOWER_LIMITS.pattern}", re.IGNORECASE)
_DAY_WORDS = re.compile(r"\b(?:daily|per\s+day|a\s+day|24[- ]hours?|in\s+24\s+hours)\b", re.IGNORECASE)
_JOIN = re.compile(r"^\s*(?:to|-|–|or|and)\s*$", re.IGNORECASE)
_SINGLE_WORDS = re.compile(
    r"\b(?:single|one|each|per|individual)\s+(?:dose|time)\b|\bat\s+(?:a|one)\s+time\b|\bat\s+once\b", re.IGNORECASE
)
_LIMIT_WORDS = re.compile(
    r"\b(?:max(?:imum)?|allowable|allowed|highest|upper|limit|up\s+to|(?:no|not)\s+more|at\s+most|exceed\w*|"
    r"go(?:ing)?\s+over|more\s+than|over|above|in\s+excess|a\s+total)\b",
    re.IGNORECASE,
)
#: A limit word shortly before a daily amount: "no more than 4 g a day" is a limit, "take 75 mg
#: of aspirin once daily" is not ("more", "over" count only after a negation: "adults over 60").
_DAILY_LIMIT = re.compile(
    r"(?:\b(?:max(?:imum)?|allowable|allowed|highest|upper|limit|up\s+to|at\s+most|exceed\w*|a\s+total)\b"
    r"|(?:\b(?:no|not|never)|n't)\s+(?:\w+\s+){0,2}?(?:more|over|above)\b)[^.;!?]{0,60}$",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")
#: An amount an answer approves: "1 g is fine", "500 mg would be safe", "240 mg is the right dose".
_FINE_AFTER = re.compile(
    # "400 mg of ibuprofen is considered safe": the medicine's name and a hedge may stand between
    r"^\)?(?:\s+of\s+(?:[a-z-]+\s+){1,3}?)?\s*(?:is|are|would\s+be|should\s+be|will\s+be|sounds)\s+"
    r"(?:(?:considered|generally|usually|normally|perfectly|quite|totally|completely)\s+){0,2}"
    r"(?:fine|ok(?:ay)?|safe|alright|all\s+right|right|correct|good|appropriate|acceptable|"
    r"(?:a|the)\s+(?:safe|normal|usual|standard|right|correct|recommended)\s+(?:dose|amount))\b",
    re.IGNORECASE,
)
#: What may follow an amount to make it a weekly dose: "50,000 IU once a week", "1.25 mg of
#: vitamin D weekly", "20,000 IU every 7 days".
_WEEKLY_AFTER = re.compile(
    r"^\)?(?:\s*\([^()]{0,40}\))?(?:\s+of\s+(?:[a-z0-9-]+\s+){1,3}?)?\s*,?\s*(?:(?:taken|given|used)\s+)?"
    r"(?:once\s+(?:a|per|every|each)\s+week|once\s+weekly|weekly|a\s+week|per\s+week|each\s+week|every\s+week|"
    r"every\s+(?:7|seven)\s+days|/\s*week)\b",
    re.IGNORECASE,
)
#: A weekly dose phrase that introduces the amount: "a weekly dose of 50,000 IU", "once a week, take 1.25 mg".
_WEEKLY_BEFORE = re.compile(r"\b(?:weekly|once\s+a\s+week|each\s+week|every\s+week)\b[^.;!?\d]{0,40}$", re.IGNORECASE)
#: A sentence about a prescription: "your doctor prescribed 50,000 IU", "a prescription dose".
_PRESCRIBED = re.compile(r"\bprescri(?:be|bed|bes|bing|ption|ptions)\b", re.IGNORECASE)
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_CLAUSE = re.compile(r"(?<=[.!?;])\s+|\n+")


def _measure(number: str, unit: str) -> tuple[float, Dimension]:
    """A figure :data:`_DOSE_AMOUNT` reads, as (value, what it measures): mg, IU or units, or ml."""
    word = unit.lower()
    if word.startswith(("ml", "millilit")):
        return float(number.replace(",", "")), "volume"  # ml, mls, millilitre
    if word.startswith(("iu", "unit", "international")):
        return float(number.replace(",", "")), "units"
    return _to_mg(number, unit), "mass"


def _dose_kind(before: str, after: str) -> tuple[Kind, re.Match[str] | None] | None:
    """What an amount that no day follows is stated as, with the dose phrase before it (None when
    only the words after it tell), or None when it is not a dose at all; ``before`` and ``after``:
    the sentence's words next to the amount (:func:`_near`)."""
    if _STRENGTH_AFTER.match(after):
        return None
    phrase = _DOSE_BEFORE.search(before)
    if phrase is None:
        found = _SINGLE_AFTER.match(after) or _FINE_AFTER.match(after) or _TIMES_A_DAY_AFTER.match(after)
        return ("single", None) if found else None
    if phrase.group("neg") and not phrase.group("lead").strip():
        return None  # "do not give 1,000 mg": a warning against the amount, not a dose
    # the phrase with the words just before it: "the single dose is", "the daily dose is"
    words = before[max(0, phrase.start() - 25) : phrase.end()]
    if re.search(r"more\s+than|\bover\b|\babove\b|in\s+excess", phrase.group("lead"), re.I) and not re.search(
        r"exceed|go(?:ing)?\s+over|\b(?:not|never|no)\b|n't", words, re.I
    ):
        return None  # "taking more than 4 g can harm": a threshold, not advice
    if _SINGLE_WORDS.search(words) or _SINGLE_AFTER.match(after):
        return "single", phrase
    if _DAY_WORDS.search(words):
        return "regimen", phrase  # "the daily dose of paracetamol is 45 mg" (a limit word would make it daily)
    return ("either" if _LIMIT_WORDS.search(words) else "single"), phrase


Stated = tuple[str, int, float, Dimension, bool, Kind, bool]
"""(evidence, position, value, what it measures, per kg, kind, weekly): a figure a sentence
states; ``weekly``: a dose tied to a week or to a prescription (:data:`_WEEKLY_AFTER`)."""


def _read_limits(
    sentence: str, names: list[re.Pattern[str]]
) -> Iterator[tuple[str, int, float, Dimension, bool, Kind, bool, bool]]:
    """:func:`_stated_limits`, each with whether only a figure above its range is wrong: in a
    sentence about liver or kidney disease or alcohol, the figures read only once those words
    are set aside (a lower figure is the label's advice there, a higher one never is)."""
    strict = list(_stated_limits(sentence, names, _NOT_ADVICE_OR_LOWER))
    yield from ((*item, False) for item in strict)
    if _LOWER_LIMITS.search(sentence):
        seen = {(at, value, kind) for _, at, value, _, _, kind, _ in strict}
        for item in _stated_limits(sentence, names, _NOT_ADVICE):
            if (item[1], item[2], item[5]) not in seen:
                yield (*item, True)


def _stated_limits(sentence: str, names: list[re.Pattern[str]], not_advice: re.Pattern[str]) -> Iterator[Stated]:
    """:data:`Stated` for every dose or daily limit ``sentence`` states;
    ``names``: the medicines' names, to tell "1 g of paracetamol" from "10 mg of loratadine";
    ``not_advice``: the words that make a figure near them no advice."""
    previous: tuple[int, Kind | None] = (-1, None)
    # where the sentence speaks of toxicity, disease or studies: found once, not once per amount
    spots = [x.span() for x in not_advice.finditer(sentence)]
    prescribed = bool(_PRESCRIBED.search(sentence))
    for m in _DOSE_AMOUNT.finditer(sentence):
        before, after = _near(sentence, m)
        weekly = prescribed or bool(_WEEKLY_AFTER.match(after) or _WEEKLY_BEFORE.search(before))
        not_advice_before = bool(spots) and spots[0][1] <= m.start()
        not_advice_after = bool(spots) and spots[-1][0] >= m.end()
        per_kg = bool(m.group("perkg"))
        of_what = _OF_WHAT.match(after)
        # the medicine is looked for before this position: "1 g of paracetamol" is paracetamol's
        # even after "400 mg of ibuprofen" in the same sentence
        at = m.end() + of_what.end("word") if of_what is not None else m.start()
        kind: Kind | None = None
        if of_what is not None and not _names_medicine(after, of_what, names):
            pass  # "10 mg of loratadine": another substance's amount
        elif _MAX_DAILY_BEFORE.search(before):
            kind = "daily"
        elif _DAILY_AFTER.match(after):
            # "take 75 mg of aspirin once daily" is a regimen; "no more than 4 g a day" a limit
            if per_kg or _DAILY_LIMIT.search(before):
                kind = "daily"
            elif not spots:  # not "10 g a day can damage the liver"
                kind = "regimen"
        elif previous[1] is not None and _JOIN.match(sentence[previous[0] : m.start()]):
            kind = previous[1]  # the second figure of a range: "500 mg to 1 g" every 4 hours
        elif not not_advice_before and (found := _dose_kind(before, after)) is not None:
            kind, phrase = found
            if kind != "either" and not_advice_after:
                # "taking 10 g at once can damage the liver" states a fact; a stated maximum ("the
                # maximum dose is 45 mg, as more can damage the liver") stays a maximum
                previous = (m.end(), None)
                continue
            first = phrase.group("first") if phrase is not None else None
            # "200 to 400 mg": the first figure, in the same unit ("500 to 1 g" is not 500 g)
            if first and float(first.replace(",", "")) <= float(m.group("num").replace(",", "")):
                evidence = f"{phrase.group('bare')}{m.group(0).strip()}"  # type: ignore[union-attr]
                yield evidence, at, *_measure(first, m.group("unit")), per_kg, kind, weekly
        previous = (m.end(), kind)
        if kind is None:
            if _is_mention(sentence, m, after, of_what, names, spots, per_kg):
                yield m.group(0).strip(), at, *_measure(m.group("num"), m.group("unit")), per_kg, "mention", weekly
            continue
        yield m.group(0).strip(), at, *_measure(m.group("num"), m.group("unit")), per_kg, kind, weekly


#: Words near which a large amount is a harm, not advice ("20 g can kill", "taken to hospital").
_HARM_NEAR = re.compile(
    r"\b(?:kill\w*|die|dies|died|death|dead|hospital\w*|emergency|liver|kidney|harm\w*|more\s+than|over|above)\b", re.I
)


def _is_mention(
    sentence: str,
    m: re.Match[str],
    after: str,
    of_what: re.Match[str] | None,
    names: list[re.Pattern[str]],
    spots: list[tuple[int, int]],
    per_kg: bool,
) -> bool:
    """Whether an amount no dose phrase introduces is still one of the medicine the sentence
    names, to be held to :data:`._dose_labels.MENTION_FACTOR` times its daily maximum ("100mg of
    levothyroxine can …", "typically between 25-169 mg"): not a strength, not another
    substance's, not per kilogram, and not in a sentence about toxicity, studies or harm."""
    if per_kg or spots or _STRENGTH_AFTER.match(after) or _HARM_NEAR.search(sentence):
        return False
    return of_what is None or _names_medicine(after, of_what, names)


#: How far around an amount the phrases that say what it is are read. Every such phrase is far
#: shorter; the bound keeps a long sentence of many amounts (model output) linear to check.
_NEAR = 400


def _near(sentence: str, m: re.Match[str]) -> tuple[str, str]:
    """The sentence's text before and after the amount ``m``, up to :data:`_NEAR` characters, cut
    at a space (a word cut in half could read as another word: "in|take")."""
    start = max(0, m.start() - _NEAR)
    if start:
        space = sentence.find(" ", start, m.start())
        start = space if space >= 0 else m.start()
    return sentence[start : m.start()], sentence[m.end() : m.end() + _NEAR]


def _names_medicine(after: str, of_what: re.Match[str], names: list[re.Pattern[str]]) -> bool:
    """Whether the "of WORD" after an amount names a medicine of the table or a generic word for
    one ("1 g of paracetamol", "500 mg of the drug"), not another substance ("10 mg of loratadine")."""
    word = of_what.group("word")
    return word.lower() in _GENERIC or any(name.match(after, of_what.start("word")) for name in names)


def _other_substance(request: str, names: list[re.Pattern[str]]) -> bool:
    """Whether ``request`` states an amount of something not in the table ("ibuprofen with my
    10 mg of amlodipine"): an answer's bare "keep taking 10 mg" may then be that other medicine's."""
    for m in _AMOUNT.finditer(request):
        after = request[m.end() : m.end() + _NEAR]
        of_what = _OF_WHAT.match(after)
        if of_what is not None and not _names_medicine(after, of_what, names):
            return True
    return False


_ONES = [
    *("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve"),
    *("thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen"),
]
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80, "ninety": 90}
_WORD_VALUES = {word: n for n, word in enumerate(_ONES)} | _TENS
#: An amount spelled out in words: "two thousand milligrams", "five hundred mg", "forty-five grams".
_SPELLED = re.compile(
    r"\b(?P<words>(?:(?:" + "|".join([*_WORD_VALUES, "hundred", "thousand"]) + r")(?:[\s-]+(?:and[\s-]+)?|(?=\s)))+)"
    r"(?=\s*(?:milligrams?|mg|grams?|micrograms?|mcg|IU|international\s+units?)\b)",
    re.IGNORECASE,
)


def _spelled_amounts(text: str) -> str:
    """``text`` with amounts spelled out in words written in digits ("two thousand milligrams":
    "2000 milligrams"), so they are read as any other amount."""

    def digits(m: re.Match[str]) -> str:
        total, current = 0, 0
        for word in re.findall(r"[a-z]+", m.group("words").lower()):
            if word in _WORD_VALUES:
                current += _WORD_VALUES[word]
            elif word == "hundred":
                current = (current or 1) * 100
            elif word == "thousand":
                total, current = total + (current or 1) * 1000, 0
        return f"{total + current} "

    return _SPELLED.sub(digits, text) if _SPELLED.search(text) else text
