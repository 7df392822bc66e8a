"""A yes to the request's own figure, for the dose check (a part of :mod:`.doses`): an answer
that opens with a plain yes and states no figure endorses the amount the request asks about."""

from __future__ import annotations

import re

from ._dose_measures import _VOLUME, _spoons_in_ml
from ._dose_reading import _AMOUNT, _DAILY_AFTER, _NEAR, _SENTENCE, _SINGLE_AFTER, _STRENGTH_AFTER
from ._dose_request import DoseContext


def _asked_as_doses(asked: str) -> str:
    """``asked`` with each amount or volume that no day or strength follows marked as one dose
    ("Is 1 g of paracetamol okay …?": "Is 1 g per dose of paracetamol okay …?")."""

    def marked(m: re.Match[str]) -> str:
        after = asked[m.end() : m.end() + _NEAR]
        if _DAILY_AFTER.match(after) or _STRENGTH_AFTER.match(after) or _SINGLE_AFTER.match(after):
            return m.group(0)
        return f"{m.group(0)} per dose"

    return _VOLUME.sub(marked, _AMOUNT.sub(marked, asked))


#: An answer that opens with a yes to the request.
_YES = re.compile(
    r"^\W*(?:yes|yeah|yep|yup|sure|of\s+course|absolutely|definitely|certainly|you\s+can|"
    r"(?:that|it|this)(?:'s|\s+is|\s+should\s+be|\s+would\s+be)\s+(?:(?:perfectly|quite|totally)\s+)?"
    r"(?:fine|ok(?:ay)?|safe|alright|all\s+right))\b",
    re.IGNORECASE,
)
#: A yes that corrects the figure or answers a question about harm ("yes, far too much"). "Over"
#: qualifies a yes when it speaks of a limit ("over the limit", "over the recommended dose",
#: "overdose"), not of time or place ("overnight", "over the next hour", "glance over now and then").
#: "Ask" and "check" qualify only when they send the user to someone or something that decides
#: ("but ask your pharmacist", "check with your doctor", "check the label first"), not when they
#: are part of what the yes tells to do ("Yes, switch the light on and check around the cooker").
_DOUBT = re.compile(
    r"\b(?:too|not|n't|never|no|unless|instead|only|less|lower|half|smaller|reduce\w*|overdo\w*|"
    r"over\s+(?:(?:the|your|a|that|this)\s+)?(?:(?:daily|recommended|maximum|max|safe|stated|usual)\s+)?"
    r"(?:limit|max\w*|dose|dosage|recommended|label|amount|that|this|it)|over\s+[$£€]?\d+|"
    r"harm\w*|danger\w*|toxic\w*|exceed\w*|consult\w*)\b"
    r"|\b(?:ask|check)\w*\s+(?:with\s+|first\b|before\b|(?:(?:your|a|the|their|his|her)\s+)?(?:\w+\s+)?"
    r"(?:doctors?|gps?|pharmacists?|nurses?|midwife|midwives|dentists?|vets?|prescribers?|clinic|surgery|specialists?|"
    r"consultants?|labels?|leaflets?|packets?|packs?|instructions|manufacturer|engineers?|electricians?|plumbers?|"
    r"professionals?|experts?|advisers?|advisors?|lawyers?|solicitors?|accountants?|landlord|bank|insurer|council|"
    r"poison\s+(?:control|centre|center|line)|111|nhs|dosage|dose)\b)",
    re.IGNORECASE,
)
#: A request sentence that asks about harm, not for permission: a yes to it is no approval.
_HARM_ASKED = re.compile(
    r"\b(?:too\s+(?:much|high|many|strong|often)|overdos\w*|toxic\w*|lethal|fatal|dangerous|harm\w*|kill)\b",
    re.IGNORECASE,
)


def opens_with_yes(text: str) -> bool:
    """Whether ``text`` opens with a plain yes ("Yes, that's fine.", "Sure, you can."): a first
    sentence with a yes and no word that qualifies or corrects it ("Yes, but never more than …",
    "Yes, that's too much")."""
    first = _SENTENCE.split(text.strip(), maxsplit=1)[0]
    return bool(_YES.match(first)) and not _DOUBT.search(first)


def _endorsed(text: str, request: DoseContext) -> str:
    """The request's questions that state an amount or a volume ("Can I take 8 g of paracetamol a
    day?", "Can I give him 20 ml of Calpol?"), when ``text`` says yes to them and states no amount
    or volume of its own; else ""."""
    if not opens_with_yes(text) or _AMOUNT.search(text) or _VOLUME.search(text):
        return ""
    asked = [
        sentence
        for sentence in _SENTENCE.split(_spoons_in_ml(request.request))
        if sentence.rstrip().endswith("?")
        and (_AMOUNT.search(sentence) or _VOLUME.search(sentence))
        and not _HARM_ASKED.search(sentence)
    ]
    return " ".join(asked)
