"""A framework's parts (a part of :mod:`.model`): the three layers, a rule with its deterministic
checks, and the safe channel that serves a need a rule blocks."""

from __future__ import annotations

import re
from collections.abc import Callable
from enum import StrEnum
from functools import cached_property, partial
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ..textio import skeleton
from .claims import Claim, find_false_claims
from .doses import DoseContext, DoseLimit, find_wrong_dose, opens_with_yes, unit_slip_facts, weekly_only_facts
from .facts import Dimension as UnitDimension
from .facts import Fact, WrongFact, find_wrong_facts, states_figures, valid_regex
from .premises import find_premise, stated_premise

#: A request sentence that doubts the figure it quotes ("my recipe says 350 °F is 100 °C, which
#: seems wrong?"): a yes to it agrees with the doubt, not with the figure.
_DOUBTED = re.compile(
    r"\b(?:wrong|mistaken?|mistakes?|incorrect|error|typo|not\s+right|isn['’]?t\s+right|myth|false|untrue|surely\s+not)\b",
    re.IGNORECASE,
)
_REQUEST_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


class Layer(StrEnum):
    """The paper's three layers. Only ``universal`` rules are enforced by the Layer-1 gate."""

    UNIVERSAL = "universal"  # non-overridable constraints
    CONTEXTUAL = "contextual"  # domain-specific rules for a deployment
    ASPIRATIONAL = "aspirational"  # principles that raise or lower the score, never veto


class Check(BaseModel):
    """Deterministic test the Layer-1 gate applies to text, with no model involved.

    A check fires when any regex in ``patterns`` matches, or when every word of any entry in
    ``all_of`` occurs (case-insensitive, whole words), or, on model text only, when the text
    states a dose or a daily limit that ``doses`` rules out (:mod:`~psychoalign.frameworks.doses`),
    or when the text states one of the false claims in ``premises`` (a regex each) as the premise
    of what it asks (:mod:`~psychoalign.frameworks.premises`), not when it asks whether the claim
    is true or asks for it to be debunked, or when any regex in ``hazards`` (one known hazard
    each: carbon monoxide indoors, bleach with ammonia) matches: a request check of a rule that
    never blocks, only brings the matching hazard's warning beside the answer. On model text
    only, it also fires when the text states a figure that a row of ``facts`` rules out (water
    boiling at 120 °C, chicken done at 55 °C) or equates two amounts of a dimension listed in
    ``conversions`` that do not agree (a teaspoon "is 15 ml"): :mod:`~psychoalign.frameworks.facts`;
    or when it states one of the false universal claims about law or money in ``claims`` ("tips
    are always tax-free"): :mod:`~psychoalign.frameworks.claims`.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    patterns: tuple[str, ...] = ()
    all_of: tuple[tuple[str, ...], ...] = ()
    doses: tuple[DoseLimit, ...] = ()
    premises: tuple[str, ...] = ()
    hazards: tuple[str, ...] = ()
    facts: tuple[Fact, ...] = ()
    conversions: tuple[UnitDimension, ...] = ()
    claims: tuple[Claim, ...] = ()

    @field_validator("patterns", "premises", "hazards")
    @classmethod
    def _compile(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for pattern in value:
            valid_regex(pattern)
        return value

    def find(self, text: str, *, model_text: bool = True, request: DoseContext | None = None) -> str | None:
        """The matched evidence, or None. Text spelled to slip past the check (look-alike letters
        from other scripts, fullwidth forms, zero-width characters, combining marks) is checked
        as the Latin it imitates too (:func:`~psychoalign.textio.skeleton`). ``model_text``:
        ``text`` is a draft or an answer, not a user's words; only then are dose limits read
        (a question that names a wrong dose asks, it does not advise). ``request``: what the
        request ``text`` answers tells (:func:`~psychoalign.frameworks.doses.read_request`): whom
        the doses are for and the medicine asked about; None reads them as before, for an adult."""
        found = self._find(text)
        if found is None and not text.isascii():
            found = self._find(skeleton(text))
        if found is None and model_text and self.doses:
            found = find_wrong_dose(self.doses, text, request)
        setting = f"{request.earlier}\n{request.request}" if request is not None else ""
        if found is None and model_text and (wrong := self._wrong_facts(text, setting=setting)):
            found = wrong[0].evidence
        if (
            found is None
            and model_text
            and request is not None
            and (wrong := self.endorsed_facts(text, request.request))
        ):
            found = f"a plain yes to a wrong figure the request states: {wrong[0].evidence}"
        return found

    def endorsed_facts(self, text: str, request: str) -> list[WrongFact]:
        """The wrong figures ``request`` states (a fact or a conversion of this check rules them
        out) when model text ``text`` opens with a plain yes and states no figure of its own: "My
        sister says a metre is 10 centimetres. Is she right?" "Yes, she's right!" approves the
        request's figure as surely as stating it would. A request sentence that doubts its figure
        ("which seems wrong?") is not read; a text that states figures is read on its own words."""
        if not (self.facts or self.conversions) or not request or not opens_with_yes(text) or states_figures(text):
            return []
        kept = " ".join(s for s in _REQUEST_SENTENCE.split(request) if not _DOUBTED.search(s))
        return find_wrong_facts(self.facts, self.conversions, kept, asked=True) if kept else []

    def wrong_facts(self, text: str, request: str = "") -> list[WrongFact]:
        """The figures in model text ``text`` that ``facts`` or ``conversions`` rule out, the false
        universal ``claims`` it states, and a weekly-only medicine of ``doses`` it tells to take
        daily: each with the fact stated right, for a channel's ``{facts}`` (a conversion for the
        amount the ``request`` asked about, else for one of the larger unit: facts.find_wrong_facts)."""
        return self._wrong_facts(text, request, setting=request) + (
            weekly_only_facts(self.doses, text) + unit_slip_facts(self.doses, text) if self.doses else []
        )

    def _wrong_facts(self, text: str, request: str = "", *, setting: str = "") -> list[WrongFact]:
        # ``setting``: the user's words, where a claim row reads the setting a sentence leaves
        # unsaid ("He's having a seizure. Hold him down."); figures read ``request`` as before.
        found = (
            find_wrong_facts(self.facts, self.conversions, text, request=request)
            if self.facts or self.conversions
            else []
        )
        return found + find_false_claims(self.claims, text, setting) if self.claims else found

    @property
    def checks_figures(self) -> bool:
        """Whether this check reads stated figures or claims (doses, facts, conversions, false
        universal claims): a sentence that trips it can be withheld from an otherwise acceptable
        answer."""
        return bool(self.doses or self.facts or self.conversions or self.claims)

    @cached_property
    def _regexes(self) -> tuple[re.Pattern[str], ...]:
        # Compiled once per check: the gates run every check on every draft and answer.
        return tuple(re.compile(pattern, re.IGNORECASE) for pattern in self.patterns)

    @cached_property
    def _word_sets(self) -> tuple[tuple[str, tuple[re.Pattern[str], ...]], ...]:
        return tuple(
            (" + ".join(words), tuple(re.compile(rf"\b{re.escape(w.lower())}\b") for w in words))
            for words in self.all_of
        )

    def _find(self, text: str) -> str | None:
        for regex in self._regexes:
            m = regex.search(text)
            if m:
                return m.group(0)
        if self.all_of:
            lowered = text.lower()
            for evidence, regexes in self._word_sets:
                if all(regex.search(lowered) for regex in regexes):
                    return evidence
        if self.premises and (found := find_premise(self.premises, text)) is not None:
            return found
        for regex in self._hazard_regexes:
            if m := regex.search(text):
                return m.group(0)
        return None

    @cached_property
    def _hazard_regexes(self) -> tuple[re.Pattern[str], ...]:
        return tuple(re.compile(pattern, re.IGNORECASE) for pattern in self.hazards)


class Rule(BaseModel):
    """One rule. ``check`` runs on every text (drafts, the final answer, the request);
    ``request_check`` runs on the request only: it recognises a request that asks for what the
    rule forbids (a first-person suicide method) without blocking drafts that merely talk about
    the area (a draft that points to a crisis line).

    ``semantic_check: self-harm`` marks the rule the crisis check fires (docs/negotiation.md, "The
    semantic crisis check"): a request whose meaning is close to a person at risk asking for a way
    to die, or saying they want to, fires this rule as a request check match would, however it is
    worded. The embedded EVALUATOR runs it; with any other EVALUATOR the negotiation runs it on the
    request ("The crisis check on every backend"); without the encoder its explicit phrases and
    the patterns decide. On a contextual or aspirational rule the firing
    blocks nothing: it only brings the rule's channel (a crisis line beside the answer), for a
    framework whose users quote such words as their work (content moderation)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$")
    text: str = Field(min_length=3)
    semantic_check: Literal["self-harm"] | None = None
    check: Check | None = None
    request_check: Check | None = None

    def matches_request(self, request: str) -> str | None:
        """The evidence either check finds in ``request``, or None."""
        for check in (self.check, self.request_check):
            if check is not None and (found := check.find(request, model_text=False)) is not None:
                return found
        return None


class SafeChannel(BaseModel):
    """Where a need a rule blocks is served instead (docs/frameworks.md, "Safe channels").

    ``rules`` names the rules it serves: a refusal or redirect offers the channels of the rules
    that fired, never another's. A channel with no ``rules`` serves any rule that fired without a
    channel of its own. ``message``, when set, *replaces* the structured refusal for these rules
    (self-harm: a supportive, non-judgemental message, never "rephrase and I'll help");
    ``{channel}`` in it is replaced by ``text``, else ``text`` follows it on its own line.
    ``premise``, when set, is one of its rules' ``premises`` (a false claim): the channel serves
    those rules only for a request that states that claim as its premise, so each claim gets its
    own correction. ``hazard``, when set, is one of its rules' ``hazards`` (a known hazard): the
    channel's ``text`` is that hazard's one-sentence warning, leading any reply to a request that
    matches it (:meth:`.model.Framework.hazard_channels`), never offered as a place to go.
    ``band_line``, when set (the crisis channel), is the short line that ends the reply
    to a request in the crisis check's possible-risk band (docs/negotiation.md, "The possible-risk
    band"); ``{channel}`` in it is replaced by ``text``. ``withheld``, when set, is the note that
    stands beside an answer from which the sentences that broke this channel's rules were left out
    (a wrong dose or a wrong everyday fact in a sentence of its own: docs/frameworks.md, "Withheld
    sentences"); ``{channel}`` in it is replaced by ``text``, ``{facts}`` (also in ``message``) by
    the checked facts the draft contradicted, stated right, ``{sentences}`` by how many sentences
    were left out ("a sentence", "2 sentences") and ``{it}`` by the pronoun for them ("it",
    "they"). All user-facing text lives here, so a localised framework file localises it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$")
    text: str = Field(min_length=3, max_length=200)
    rules: tuple[str, ...] = ()
    message: str = Field("", max_length=1000)
    band_line: str = Field("", max_length=300)
    premise: str = ""
    hazard: str = ""
    withheld: str = Field("", max_length=500)

    def serves(self, request: str) -> bool:
        """Whether this channel fits ``request``: always, unless it corrects one claim
        (``premise``) that ``request`` does not state as its premise, or warns of one hazard
        (``hazard``) that ``request`` does not match."""
        found: Callable[[str], object]
        if self.hazard:
            found = re.compile(self.hazard, re.IGNORECASE).search
        elif self.premise:
            found = partial(stated_premise, self.premise)
        else:
            return True
        # look-alike letters from other scripts are read as the Latin ones they imitate
        return found(request) is not None or (not request.isascii() and found(skeleton(request)) is not None)

    def render_band_line(self) -> str:
        """The possible-risk band's line with the channel in it ("" without one)."""
        body = self.band_line.strip()
        if not body:
            return ""
        return body.replace("{channel}", self.text) if "{channel}" in body else f"{body} {self.text}"

    def render_message(self, facts: str = "") -> str:
        """The supportive message with the channel in it ("" without a message); ``{facts}`` in it
        is replaced by ``facts``: the checked facts a blocked draft contradicted, stated right."""
        if not self.message.strip():
            return ""
        body = _with_facts(self.message.strip(), facts)
        return body.replace("{channel}", self.text) if "{channel}" in body else f"{body}\n{self.text}"

    def render_withheld(self, facts: str = "", count: int = 1) -> str:
        """The note beside an answer ``count`` sentences of which were left out for stating a
        figure this channel's rules rule out ("" without ``withheld``); ``{channel}`` and
        ``{facts}`` as in :meth:`render_message`, ``{sentences}`` and ``{it}`` for ``count``
        ("a sentence" and "it", or "2 sentences" and "they")."""
        body = _with_facts(self.withheld.strip(), facts)
        sentences, it = ("a sentence", "it") if count <= 1 else (f"{count} sentences", "they")
        return body.replace("{channel}", self.text).replace("{sentences}", sentences).replace("{it}", it)


def _with_facts(body: str, facts: str) -> str:
    """``body`` with ``{facts}`` replaced by ``facts``, and the space or line it would leave empty removed."""
    return re.sub(r"[ \t]*\{facts\}", f" {facts}" if facts else "", body).strip()
