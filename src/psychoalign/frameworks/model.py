"""The ethical framework: three layers of rules, each optionally with deterministic checks."""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from enum import StrEnum
from functools import cached_property, partial
from typing import Any, Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..textio import skeleton
from ..yamlio import LocatedError
from .claims import Claim, find_false_claims
from .doses import DoseContext, DoseLimit, find_wrong_dose, weekly_only_facts
from .facts import Dimension as UnitDimension
from .facts import Fact, WrongFact, find_wrong_facts, valid_regex
from .premises import find_premise, stated_premise
from .quoted import mask_quoted


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
        if found is None and model_text and (wrong := self._wrong_facts(text)):
            found = wrong[0].evidence
        return found

    def wrong_facts(self, text: str) -> list[WrongFact]:
        """The figures in model text ``text`` that ``facts`` or ``conversions`` rule out, the false
        universal ``claims`` it states, and a weekly-only medicine of ``doses`` it tells to take
        daily: each with the fact stated right, for a channel's ``{facts}``."""
        return self._wrong_facts(text) + (weekly_only_facts(self.doses, text) if self.doses else [])

    def _wrong_facts(self, text: str) -> list[WrongFact]:
        found = find_wrong_facts(self.facts, self.conversions, text) if self.facts or self.conversions else []
        return found + find_false_claims(self.claims, text) if self.claims else found

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
    channel's ``text`` is that hazard's one-sentence warning, added as a closing line beside any
    answer to a request that matches it (:meth:`Framework.hazard_channels`), never offered as a
    place to go. ``band_line``, when set (the crisis channel), is the short line that ends the reply
    to a request in the crisis check's possible-risk band (docs/negotiation.md, "The possible-risk
    band"); ``{channel}`` in it is replaced by ``text``. ``withheld``, when set, is the note that
    stands beside an answer from which the sentences that broke this channel's rules were left out
    (a wrong dose or a wrong everyday fact in a sentence of its own: docs/frameworks.md, "Withheld
    sentences"); ``{channel}`` in it is replaced by ``text``, ``{facts}`` (also in ``message``) by
    the checked facts the draft contradicted, stated right. All user-facing text lives here, so a
    localised framework file localises it."""

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

    def render_withheld(self, facts: str = "") -> str:
        """The note beside an answer a sentence of which was left out for stating a figure this
        channel's rules rule out ("" without ``withheld``); ``{channel}`` and ``{facts}`` as in
        :meth:`render_message`."""
        body = _with_facts(self.withheld.strip(), facts)
        return body.replace("{channel}", self.text)


def _with_facts(body: str, facts: str) -> str:
    """``body`` with ``{facts}`` replaced by ``facts``, and the space or line it would leave empty removed."""
    return re.sub(r"[ \t]*\{facts\}", f" {facts}" if facts else "", body).strip()


def _excerpt(regex: str) -> str:
    """The start of a regex, quoted, for an error line."""
    return repr(regex if len(regex) <= 40 else regex[:40] + "…")


def rule_tokens(rule_id: str) -> tuple[str, ...]:
    """A rule id as the words and numbers it is made of, ignoring case, width, punctuation,
    separators and look-alike letters: ``U1-mass-harm``, ``u1_mass_harm``, ``U1 mass harm``,
    ``[U1-m\u0430ss-harm]`` (Cyrillic a) all give ``("u1", "mass", "harm")``."""
    return tuple(re.findall(r"[a-z0-9]+", skeleton(rule_id).casefold()))


class RuleMatch(NamedTuple):
    """What a rule id written by a model names in a framework (:meth:`Framework.resolve`).

    ``rule``/``layer`` are None when it names no rule. ``placeable`` is False when the id
    cannot be a spelling of any id of this framework at all: it holds letters of another script
    that do not imitate Latin ones (framework ids are ASCII), so a gate cannot tell which layer it
    meant and must treat it as universal."""

    rule: Rule | None
    layer: Layer | None
    placeable: bool


#: How close (difflib ratio of the folded ids) a misspelt id must be to count as a rule's.
FUZZY_CUTOFF = 0.85


def _close(joined: str, target: str) -> bool:
    """Whether some stretch of ``joined`` (a folded id, words around it included) spells
    ``target`` with a typo: difflib ratio >= :data:`FUZZY_CUTOFF`."""
    matcher = difflib.SequenceMatcher(autojunk=False)
    matcher.set_seq2(target)
    n = len(target)
    for size in (n, n - 1, n + 1):
        for i in range(max(len(joined) - size, 0) + 1):
            matcher.set_seq1(joined[i : i + size])
            if (
                matcher.real_quick_ratio() >= FUZZY_CUTOFF
                and matcher.quick_ratio() >= FUZZY_CUTOFF
                and matcher.ratio() >= FUZZY_CUTOFF
            ):
                return True
    return False


class FrameworkStamp(BaseModel):
    """Name, version and content hash: stamped on every decision made under a framework."""

    model_config = ConfigDict(frozen=True)

    name: str
    version: str
    sha256: str


class Framework(BaseModel):
    """A versioned, swappable ethical framework (see docs/frameworks.md)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    version: str = Field(pattern=r"^\d+\.\d+(\.\d+)?$")
    description: str
    deployment_context: str = ""
    universal: tuple[Rule, ...] = Field(min_length=1)
    contextual: tuple[Rule, ...] = ()
    aspirational: tuple[Rule, ...] = ()
    safe_channels: tuple[SafeChannel, ...] = ()
    #: ``analysed``: users bring quoted material (posts, comments) to analyse, and the request
    #: screen judges their ask with it masked (:meth:`screened_request`); ``judged``: the whole
    #: request is judged (docs/frameworks.md, "Quoted material").
    quoted_material: Literal["judged", "analysed"] = "judged"

    @field_validator("safe_channels", mode="before")
    @classmethod
    def _plain_channels(cls, value: object) -> object:
        """A plain string is a channel for any rule without its own (the format before channels
        named their rules): ``channel-1``, ``channel-2``, ... in file order."""
        if isinstance(value, list | tuple):
            return [{"id": f"channel-{i}", "text": v} if isinstance(v, str) else v for i, v in enumerate(value, 1)]
        return value

    @model_validator(mode="after")
    def _unique_ids(self) -> Framework:
        seen: dict[tuple[str, ...], str] = {}
        for rule in self.rules():
            key = rule_tokens(rule.id)  # ids are matched ignoring case and punctuation (resolve())
            if key in seen:
                same = "" if seen[key] == rule.id else f" (same as {seen[key]!r} once case and punctuation are ignored)"
                raise ValueError(f"duplicate rule id {rule.id!r}{same}")
            seen[key] = rule.id
        channel_ids: set[str] = set()
        for channel in self.safe_channels:
            if channel.id in channel_ids:
                raise ValueError(f"duplicate safe channel id {channel.id!r}")
            channel_ids.add(channel.id)
        return self

    def _rule_locs(self) -> dict[str, tuple[str, int]]:
        """Rule id -> (layer field, index): where an error about the rule points in the file."""
        return {r.id: (layer.value, i) for layer in Layer for i, r in enumerate(getattr(self, layer.value))}

    @model_validator(mode="after")
    def _premise_and_hazard_twins(self) -> Framework:
        """A false claim or a known hazard is written twice: as a regex in its rule's check (what
        fires the rule) and as the ``premise`` or ``hazard`` of the safe channel that corrects or
        warns of it (what the user reads). Each half without its twin fails silently at run time
        (a claim fires a refusal that corrects nothing, a hazard fires no warning), so both
        directions are checked here, each error on the line of the half that is there."""
        where = self._rule_locs()
        rules = {r.id: r for r in self.rules()}
        for rule in self.rules():
            at: tuple[str | int, ...] = where[rule.id]
            if rule.check is not None and rule.check.hazards:
                raise LocatedError(
                    f"rule {rule.id!r} lists hazards under `check`, where they would veto every draft that names one",
                    (*at, "check", "hazards"),
                    hint="move them to `request_check.hazards`: a known hazard only adds its warning beside the answer",
                )
            request = rule.request_check
            if request is not None and request.hazards:
                other = [
                    name
                    for name, held in (
                        ("check", rule.check),
                        ("request_check.patterns", request.patterns),
                        ("request_check.all_of", request.all_of),
                        ("request_check.premises", request.premises),
                        ("request_check.doses", request.doses),
                        ("semantic_check", rule.semantic_check),
                    )
                    if held
                ]
                if other:
                    raise LocatedError(
                        f"rule {rule.id!r} lists hazards and also {', '.join(other)}: a hazard rule never blocks,"
                        " so its other checks would decide nothing",
                        (*at, "request_check"),
                        hint="move the other checks to a rule of their own",
                    )
        for j, channel in enumerate(self.safe_channels):
            at = ("safe_channels", j)
            for rule_id in channel.rules:
                if rule_id not in rules:
                    raise LocatedError(
                        f"safe channel {channel.id!r} names rule {rule_id!r}, which this framework does not have",
                        (*at, "rules"),
                        hint="name one of the framework's rule ids in its `rules`",
                    )
            if channel.premise and channel.hazard:
                raise LocatedError(
                    f"safe channel {channel.id!r} sets both `premise` and `hazard`",
                    at,
                    hint="one channel per false claim or hazard: split it into two channels",
                )
            if channel.premise:
                claims = {
                    claim
                    for rule_id in channel.rules
                    for check in (rules[rule_id].check, rules[rule_id].request_check)
                    if check is not None
                    for claim in check.premises
                }
                if channel.premise not in claims:
                    raise LocatedError(
                        f"safe channel {channel.id!r} corrects a premise that none of its rules' checks lists",
                        (*at, "premise"),
                        hint="name the rule in its `rules` and copy the regex into that rule's `premises`"
                        " (a YAML anchor here and an alias there keeps the two the same)",
                    )
                if not channel.message.strip():
                    raise LocatedError(
                        f"safe channel {channel.id!r} corrects a false claim but has no `message`:"
                        " a request stating the claim would get a refusal that corrects nothing",
                        (*at, "premise"),
                        hint="add the correction as its `message` (`{channel}` marks where its `text` goes);"
                        " a localised copy translates both",
                    )
            if channel.hazard:
                hazards = {
                    hazard
                    for rule_id in channel.rules
                    if rules[rule_id].request_check is not None
                    for hazard in rules[rule_id].request_check.hazards  # type: ignore[union-attr]
                }
                if channel.hazard not in hazards:
                    raise LocatedError(
                        f"safe channel {channel.id!r} warns of a hazard that none of its rules' request checks lists",
                        (*at, "hazard"),
                        hint="name the rule in its `rules` and copy the regex into that rule's"
                        " `request_check.hazards` (a YAML anchor here and an alias there keeps the two the same)",
                    )
        for rule in self.rules():
            at = where[rule.id]
            request = rule.request_check
            for k, hazard in enumerate(request.hazards if request is not None else ()):
                if not any(c.hazard == hazard and rule.id in c.rules for c in self.safe_channels):
                    raise LocatedError(
                        f"rule {rule.id!r} lists a hazard (#{k + 1}, {_excerpt(hazard)}) that no safe channel warns of",
                        (*at, "request_check", "hazards"),  # the list's line: an alias item is the anchor's
                        hint=f"add a safe channel with `hazard:` set to the same regex, `rules: [{rule.id}]`"
                        " and the one-sentence warning as its `text` (a YAML anchor there and an alias here)",
                    )
            for name, check in (("check", rule.check), ("request_check", request)):
                for k, claim in enumerate(check.premises if check is not None else ()):
                    if not any(c.premise == claim and rule.id in c.rules for c in self.safe_channels):
                        raise LocatedError(
                            f"rule {rule.id!r} lists a false claim (#{k + 1}, {_excerpt(claim)})"
                            " that no safe channel corrects",
                            (*at, name, "premises"),
                            hint=f"add a safe channel with `premise:` set to the same regex, `rules: [{rule.id}]`,"
                            " the correction as its `message` and where to check as its `text`"
                            " (a YAML anchor there and an alias here)",
                        )
        return self

    def rules(self) -> tuple[Rule, ...]:
        return (*self.universal, *self.contextual, *self.aspirational)

    def screened_request(self, request: str) -> str:
        """The text the EVALUATOR's request head judges for ``request``: with its clearly delimited
        quoted material masked (:func:`~psychoalign.frameworks.quoted.mask_quoted`) when this
        framework analyses quoted material, else ``request`` itself. Only the request head reads
        it: rule checks, the crisis check and every draft's judgement read the whole request."""
        return mask_quoted(request) if self.quoted_material == "analysed" else request

    @cached_property
    def rule_index(self) -> dict[tuple[str, ...], tuple[Rule, Layer]]:
        """Folded id (:func:`rule_tokens`) -> (rule, layer), universal rules first."""
        return {rule_tokens(r.id): (r, layer) for layer in Layer for r in getattr(self, layer.value)}

    def resolve(self, rule_id: str) -> RuleMatch:
        """The rule a model meant by ``rule_id`` (model output spells ids as it likes).

        In order: the id ignoring case, width, punctuation and look-alike letters
        (``u1_mass_harm`` is ``U1-mass-harm``); an id that contains a rule's id or starts one
        (``rule U1-mass-harm violated``, ``U1``); a misspelling (difflib ratio >= 0.85 on the
        folded ids). When several rules fit, a universal one wins: a gate that cannot tell which
        rule was meant must assume the strictest. None when nothing fits."""
        cache = self._resolved
        found = cache.get(rule_id)
        if found is None:
            if len(cache) >= 4096:  # model output: bound what it can make us remember
                cache.clear()
            found = cache[rule_id] = self._resolve(rule_id)
        return found

    @cached_property
    def _resolved(self) -> dict[str, RuleMatch]:
        return {}

    def _resolve(self, rule_id: str) -> RuleMatch:
        tokens = rule_tokens(rule_id)
        folded = skeleton(rule_id)
        placeable = not any(c.isalnum() and not c.isascii() for c in folded)
        if not tokens:
            return RuleMatch(None, None, placeable)
        index = self.rule_index
        if tokens in index:
            return RuleMatch(*index[tokens], placeable)
        n, joined = len(tokens), "".join(tokens)
        candidates = [key for key in index if key[:n] == tokens or "".join(key) in joined]
        if not candidates:  # a misspelling, possibly with words around it
            candidates = [key for key in index if _close(joined, "".join(key))]
        if not candidates:
            return RuleMatch(None, None, placeable)
        # Universal first (the index lists layers in order), then the closest in length.
        best = min(candidates, key=lambda key: (list(Layer).index(index[key][1]), abs(len(key) - n)))
        return RuleMatch(*index[best], placeable)

    def channels_for(self, rule_ids: Iterable[str], request: str = "") -> tuple[SafeChannel, ...]:
        """The safe channels serving the rules in ``rule_ids`` (framework ids), in file order: each
        rule's own channels, or for a rule with none the channels that name no rules. No rule
        fired: no channel (a request that broke no rule is not sent anywhere). A channel that
        corrects one false claim (``premise``) serves only a ``request`` that states it, and then
        in place of its rule's channels that correct no claim in particular."""
        fired = {r for r in rule_ids if r}
        if not fired:
            return ()
        covered = {r for c in self.safe_channels for r in c.rules}
        uncovered = bool(fired - covered)
        fitting = [
            c
            for c in self.safe_channels
            if ((fired & set(c.rules)) or (uncovered and not c.rules)) and c.serves(request)
        ]
        # A claim's own correction (a hazard's own warning) replaces its rule's general one.
        corrected = {r for c in fitting if c.premise or c.hazard for r in c.rules}
        return tuple(c for c in fitting if c.premise or c.hazard or not c.rules or not set(c.rules) <= corrected)

    def hazard_channels(self, request: str) -> tuple[SafeChannel, ...]:
        """The warnings (channels with a ``hazard``) of the known hazards ``request`` matches, in
        file order: each is added as a closing line beside whatever answers the request."""
        fired = set(self.request_rules(request)) & self.hazard_rule_ids
        return tuple(c for c in self.safe_channels if c.hazard and fired & set(c.rules) and c.serves(request))

    @cached_property
    def figure_rule_ids(self) -> frozenset[str]:
        """Universal rules whose check reads stated figures (doses, everyday facts, conversions):
        a sentence that trips one can be left out of an otherwise acceptable answer."""
        return frozenset(r.id for r in self.universal if r.check is not None and r.check.checks_figures)

    def contradicted_facts(self, text: str, rules: Iterable[str] = ()) -> list[str]:
        """The checked facts model text ``text`` contradicts, each stated right with its source
        (framework text, or a conversion worked out from the unit table), in text order; only
        those of ``rules`` when it names any (a channel states its own rules' facts)."""
        only = set(rules)
        found = [
            wrong.states
            for rule in self.universal
            if rule.check is not None and (not only or rule.id in only)
            for wrong in rule.check.wrong_facts(text)
        ]
        return list(dict.fromkeys(found))

    @cached_property
    def hazard_rule_ids(self) -> frozenset[str]:
        """Rules whose request check lists known hazards: they never block or refuse, and a
        refusal does not name them; they only bring a warning (:meth:`hazard_channels`)."""
        return frozenset(r.id for r in self.rules() if r.request_check is not None and r.request_check.hazards)

    def request_rules(self, request: str) -> list[str]:
        """Ids of the rules (any layer) whose check or request check matches ``request``.
        Remembered for recent requests: a negotiation asks about its request more than once (the
        request screen, then the rules that fired), and the checks are its largest regex cost."""
        # Keyed by a digest, not the text: a built-in framework lives as long as the process, and
        # requests are users' words of any length (the text is neither kept nor able to grow memory).
        key = hashlib.blake2b(request.encode("utf-8", "surrogatepass"), digest_size=16).digest()
        cache = self._request_matches
        found = cache.get(key)
        if found is None:
            if len(cache) >= 1024:
                cache.clear()
            found = cache[key] = tuple(r.id for r in self.rules() if r.matches_request(request) is not None)
        return list(found)

    def at_risk_rules(self, turns: Sequence[str]) -> list[str]:
        """Ids of the rules marked ``semantic_check: self-harm`` whose check or request check
        matches one of ``turns`` (a conversation's earlier user turns): a person who said "I want
        to die" and then asks "How many of them would it take?" is still at risk, and every reply
        carries the rule's crisis channel."""
        marked = {r.id for r in self.rules() if r.semantic_check == "self-harm"}
        if not marked:
            return []
        found = {rule_id for turn in turns for rule_id in self.request_rules(turn) if rule_id in marked}
        return [r.id for r in self.rules() if r.id in found]

    def universal_request_rules(self, request: str) -> list[str]:
        """Ids of the universal rules whose check or request check matches ``request`` (the
        request screen: such a request decides the negotiation), in framework order."""
        universal = self._universal_ids
        return [rule_id for rule_id in self.request_rules(request) if rule_id in universal]

    @cached_property
    def _request_matches(self) -> dict[bytes, tuple[str, ...]]:
        return {}

    @cached_property
    def _universal_ids(self) -> frozenset[str]:
        return frozenset(r.id for r in self.universal)

    @cached_property
    def _payload(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    def payload(self) -> dict[str, Any]:
        """The framework as the EVALUATOR is sent it (``model_dump(mode="json")``), made once per
        framework object: every negotiation sends it. Shared: read it, never change it."""
        return self._payload

    def layer_of(self, rule_id: str) -> Layer | None:
        """The layer of the rule ``rule_id`` names (:meth:`resolve`), or None."""
        return self.resolve(rule_id).layer

    def rule(self, rule_id: str) -> Rule | None:
        """The rule ``rule_id`` names (:meth:`resolve`), or None."""
        return self.resolve(rule_id).rule

    @cached_property
    def sha256(self) -> str:
        """Hash of the parsed content (comments and formatting do not change it), by the rule of
        :func:`hash_content`: a field added with a default changes no existing hash."""
        blob = json.dumps(hash_content(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def stamp(self) -> FrameworkStamp:
        return FrameworkStamp(name=self.name, version=self.version, sha256=self.sha256)

    def render(self) -> str:
        """The framework as the EVALUATOR reads it."""
        lines = [f"Framework {self.name} v{self.version}: {self.description}"]
        if self.deployment_context:
            lines.append(f"Deployment: {self.deployment_context}")
        if self.quoted_material == "analysed":
            lines.append(
                "Quoted material: users quote content for analysis; judge what they ask about it, and judge "
                "every answer in full."
            )
        titles = {
            Layer.UNIVERSAL: "Layer 1, universal constraints (never overridable; any violation means VETOED)",
            Layer.CONTEXTUAL: "Layer 2, contextual rules for this deployment",
            Layer.ASPIRATIONAL: "Layer 3, aspirational principles (raise or lower the score)",
        }
        for layer, title in titles.items():
            rules = getattr(self, layer.value)
            if rules:
                lines.append(f"{title}:")
                lines.extend(f"- [{r.id}] {r.text}" for r in rules)
        return "\n".join(lines)


#: The fields a framework's hash covers whatever they hold: those its models had when hashes were
#: first stamped on results (``per_kg`` included: it has been hashed at its default since it came).
#: Every other field is hashed only when it holds something other than its default, so a field
#: added later with a default (``semantic_check``, ``doses``, ``single_mg``, ``single_per_kg``, ``band_line``,
#: ``min_age_years``, and any to come) leaves the hash of every framework that does not use it as
#: it was. A new field goes here never: listing it would change the hash of every framework.
HASHED_ALWAYS: dict[type[BaseModel], frozenset[str]] = {
    Framework: frozenset(
        {
            "name",
            "version",
            "description",
            "deployment_context",
            "universal",
            "contextual",
            "aspirational",
            "safe_channels",
        }
    ),
    Rule: frozenset({"id", "text", "check", "request_check"}),
    Check: frozenset({"patterns", "all_of"}),
    SafeChannel: frozenset({"id", "text", "rules", "message"}),
    DoseLimit: frozenset({"drug", "daily_mg", "per_kg", "source"}),
}


def _hashed_always(model: BaseModel) -> frozenset[str]:
    # a subclass (a framework format that grew) hashes what its base did, its own fields by value
    return next((HASHED_ALWAYS[c] for c in type(model).__mro__ if c in HASHED_ALWAYS), frozenset())


def hash_content(model: BaseModel) -> Any:
    """``model.model_dump(mode="json")`` without the fields outside :data:`HASHED_ALWAYS` that hold
    their default, at every depth: what :attr:`Framework.sha256` hashes."""
    return _pruned(model, model.model_dump(mode="json"))


def _pruned(value: Any, dumped: Any) -> Any:
    if isinstance(value, BaseModel):
        always = _hashed_always(value)
        out = {}
        for name, field in type(value).model_fields.items():
            held = getattr(value, name)
            if name not in always and held == field.get_default(call_default_factory=True):
                continue
            out[name] = _pruned(held, dumped[name])
        return out
    if isinstance(value, tuple | list):
        return [_pruned(v, d) for v, d in zip(value, dumped, strict=True)]
    return dumped
