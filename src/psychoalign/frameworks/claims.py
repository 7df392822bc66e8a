"""A deterministic check of false universal claims about law and money that a text states.

A small model answers a legal or money question with a confident rule that has no exceptions
where the truth depends on the country, the contract or the circumstances: "you can never be
evicted without a court order in any country", "index funds are guaranteed to never lose
money", "tips are always tax-free", "a verbal contract is never legally binding". Such a
sentence is checkable the way a wrong figure is (:mod:`.facts`): each :class:`Claim` row of the
framework (``check.claims``) is one false universal, a narrow regex for the ways it is written,
with the right statement (``states``: that it depends, and on what) and the kind of source that
says what applies (``source``: a government's guidance, a tax authority, a regulator, a
lawyer).

The rows are narrow on purpose: no "never" or "always" is wrong by itself ("your bank will never
ask for your PIN" is true). A row's regex names the claim itself, and a sentence is out of scope
when it qualifies what it says (:data:`QUALIFIED`: "usually", "in most countries", "in England",
"it depends", "it's a myth that"), or matches the row's ``unless`` ("interest in an ISA is never
taxed" is true). Read within one sentence of model text, never of a request: a user who asks
"are tips always tax-free?" is asking.

Some advice is wrong only in its setting: "Hold him down." is the myth when someone is having a
seizure, and the setting is often in the sentence before it or in the request ("My friend is
jerking all over"). A row may give ``in_context``, the claim as a sentence writes it without its
setting, and ``context``, the setting: the sentence states the claim when ``in_context`` matches
it and ``context`` matches the request or any sentence of the text. The sentence is still the
one read for qualifiers and ``unless`` ("Don't hold him down." states nothing). A negation in a
condition after the claim ("safe for cats as long as they don't eat them") negates the condition,
not the claim: it does not put the sentence out of scope.
"""

from __future__ import annotations

import re
from functools import cached_property

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .facts import WrongFact, valid_regex

__all__ = ["QUALIFIED", "Claim", "find_false_claims"]

#: A sentence that qualifies what it says, or distances itself from it: it states no universal.
#: Hedges ("usually", "in most cases"), a named jurisdiction ("in England", "under US law"), "it
#: depends", a claim reported as a myth ("it's a myth that", "many people think"), and one the sentence
#: warns against believing ("don't assume", "never believe anyone who says", "it isn't true that").
QUALIFIED = re.compile(
    r"\b(?:usually|generally|typically|normally|often|mostly|in\s+most\s+cases|in\s+many\s+cases|"
    r"in\s+(?:most|many|some|certain)\s+(?:countries|states|places|jurisdictions|cases|situations)|"
    r"(?:most|many|some|certain)\s+(?:countries|states|places|jurisdictions)|"
    r"depend\w*|var(?:y|ies)\s+(?:by|from|between|with)|"
    r"in\s+(?:england|wales|scotland|northern\s+ireland|the\s+uk|britain|the\s+us|the\s+usa|the\s+united\s+states|"
    r"the\s+united\s+kingdom|the\s+eu|australia|canada|ireland|new\s+zealand|india|california|new\s+york|texas)\b|"
    r"under\s+(?:\w+\s+){0,3}?law|"
    r"myths?|misconceptions?|not\s+true|untrue|it\W?s\s+(?:false|wrong)|"
    r"(?:is|are)n\W?t\s+true|(?:\w*n\W?t|not)\s+(?:always|necessarily)|"
    r"(?:don\W?t|do\s+not|never|shouldn\W?t|should\s+not|mustn\W?t|must\s+not)\s+(?:just\s+|ever\s+)?"
    r"(?:assume|think|believe|trust|rely\s+on|fall\s+for|listen\s+to)|"
    r"(?:anyone|someone|people)\s+who\s+(?:says?|claims?|tells?\s+you)|"
    r"(?:people|some|many|most\s+people)\s+(?:often\s+|wrongly\s+|mistakenly\s+)?(?:think|believe|assume|say|claim))\b",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


class Claim(BaseModel):
    """One false universal claim: ``claim``, a regex for the ways it is written (matched within a
    sentence, ignoring case); ``unless``, a regex that puts a sentence out of the row's scope (a
    true special case: "interest in an ISA is never taxed"); ``states``, what is true, in one or
    two sentences shown to the user in place of the claim; ``source``, the kind of source that
    says what applies to the user."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    claim: str = Field(min_length=10, description="regex: the false universal, as it is written")
    unless: str = Field("", description="regex that puts the sentence out of scope ('' : nothing does)")
    states: str = Field(min_length=10, max_length=300)
    source: str = Field(min_length=3)
    in_context: str = Field("", description="regex: the claim as a sentence writes it without its setting")
    context: str = Field("", description="regex: the setting, read in the request and the whole text")

    @field_validator("claim", "unless", "in_context", "context")
    @classmethod
    def _compile(cls, value: str) -> str:
        return valid_regex(value)

    @model_validator(mode="after")
    def _context_pair(self) -> Claim:
        if bool(self.in_context) != bool(self.context):
            raise ValueError(f"claim {self.id!r}: give both `in_context` and `context`, or neither")
        return self

    @cached_property
    def _regexes(self) -> tuple[re.Pattern[str], re.Pattern[str] | None]:
        return re.compile(self.claim, re.IGNORECASE), re.compile(self.unless, re.IGNORECASE) if self.unless else None

    @cached_property
    def _context_regexes(self) -> tuple[re.Pattern[str], re.Pattern[str]] | None:
        if not self.context:
            return None
        return re.compile(self.in_context, re.IGNORECASE), re.compile(self.context, re.IGNORECASE)

    def in_setting(self, setting: str) -> bool:
        """Whether ``setting`` (the request and the whole text) names this row's ``context``."""
        return self._context_regexes is not None and self._context_regexes[1].search(setting) is not None

    def stated(self, sentence: str, in_setting: bool = False) -> re.Match[str] | None:
        """The claim as ``sentence`` states it, or None (not stated, qualified, or out of scope).
        ``in_setting``: the row's ``context`` is named around the sentence, so ``in_context`` reads it too."""
        claim, unless = self._regexes
        m = claim.search(sentence)
        if m is None and in_setting and self._context_regexes is not None:
            m = self._context_regexes[0].search(sentence)
        if m is None or QUALIFIED.search(sentence) or (unless is not None and _out_of_scope(unless, sentence, m.end())):
            return None
        return m


#: A condition the claim is stated under, after it: "safe for cats as long as they don't eat them".
_CONDITION = re.compile(r"\b(?:(?:as|so)\s+long\s+as|provid(?:ed|ing)|if|unless|only\s+when|as\s+far\s+as)\b", re.I)
#: A negation by itself (what an ``unless`` of negation words matches).
_NEGATION_ONLY = re.compile(
    r"(?:don\W?t|do\s+not|does(?:n\W?t|\s+not)|never|not|shouldn\W?t|should\s+not|isn\W?t|aren\W?t|won\W?t|can\W?t|cannot)",
    re.IGNORECASE,
)


def _out_of_scope(unless: re.Pattern[str], sentence: str, claim_end: int) -> bool:
    """Whether ``unless`` puts ``sentence`` out of a row's scope. A negation in a condition the
    claim (ending at ``claim_end``) is stated under does not: "Lilies are safe for cats as long as
    they don't eat the flowers" states the claim, its "don't" negates the condition; "Lilies
    aren't safe for cats" and "Don't believe that lilies are safe for cats" are out of scope."""
    condition = _CONDITION.search(sentence, claim_end)
    for m in unless.finditer(sentence):
        if condition is not None and m.start() >= condition.end() and _NEGATION_ONLY.fullmatch(m.group(0).strip()):
            continue
        return True
    return False


def find_false_claims(claims: tuple[Claim, ...], text: str, request: str = "") -> list[WrongFact]:
    """Every row of ``claims`` that a sentence of model text ``text`` states, in text order, each
    once: the evidence quotes the sentence's words, ``states`` gives what is true and the source.
    ``request``: the user's words, where a row's ``context`` may be named instead of in ``text``."""
    found: dict[str, WrongFact] = {}
    setting = f"{request}\n{text}"
    in_setting = {claim.id: claim.in_setting(setting) for claim in claims}
    for sentence in _SENTENCE.split(text):
        for claim in claims:
            if claim.id not in found and (m := claim.stated(sentence, in_setting[claim.id])) is not None:
                states = f"{claim.states.rstrip('.')}; see {claim.source}."
                found[claim.id] = WrongFact(f"{claim.id}: {m.group(0).strip()!r} ({claim.source})", states)
    return list(found.values())
