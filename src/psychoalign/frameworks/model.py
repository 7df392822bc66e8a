"""The ethical framework: three layers of rules, each optionally with deterministic checks."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..textio import skeleton

# the parts split off this module; every public name stays importable from here
from ._channel_twins import check_twins
from ._rule_ids import FUZZY_CUTOFF as FUZZY_CUTOFF
from ._rule_ids import RuleMatch as RuleMatch
from ._rule_ids import _close
from ._rule_ids import rule_tokens as rule_tokens
from ._rules import Check as Check
from ._rules import Layer as Layer
from ._rules import Rule as Rule
from ._rules import SafeChannel as SafeChannel
from .doses import DoseLimit
from .quoted import mask_quoted


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
        """Each false claim and known hazard has both its halves, a rule's regex and the safe channel
        that corrects or warns of it (:func:`._channel_twins.check_twins`)."""
        check_twins(self.rules(), self.safe_channels, self._rule_locs())
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

    def hazard_channels(self, request: str, earlier: Sequence[str] = ()) -> tuple[SafeChannel, ...]:
        """The warnings (channels with a ``hazard``) of the known hazards ``request`` matches, in
        file order: each leads whatever answers the request (after a crisis message that opens it;
        negotiation.decision.with_hazard_warnings). ``earlier``: the conversation's earlier user
        turns, oldest first; a hazard the request completes only with them ("I'm 28 weeks
        pregnant." then "Can I take ibuprofen?") is matched too (:meth:`completed_rules`)."""
        fired = set(self.request_rules(request)) & self.hazard_rule_ids
        found = [c for c in self.safe_channels if c.hazard and fired & set(c.rules) and c.serves(request)]
        if earlier and (completed := set(self.completed_rules(request, earlier)) & self.hazard_rule_ids):
            before = "\n".join(t for t in earlier if t.strip())
            found += [
                c
                for c in self.safe_channels
                if c.hazard
                and c not in found
                and completed & set(c.rules)
                and c.serves(f"{before}\n{request}")
                and not c.serves(before)
                and not c.serves(request)
            ]
        return tuple(c for c in self.safe_channels if c in found)

    def completed_rules(self, request: str, earlier: Sequence[str]) -> list[str]:
        """Ids of the rules whose check or request check ``request`` matches only when read after
        ``earlier``, the conversation's earlier user turns (oldest first): the turns and the
        request joined match it, while neither the request nor the earlier turns alone do. "I'm
        28 weeks pregnant." then "Can I take ibuprofen for my back?" completes the NSAID-in-
        pregnancy hazard; "My dog is a spaniel." then "Can I give him my ibuprofen?" the rule on a
        pet given a human pain reliever. An earlier turn's own match the request has no part in (a
        bleach question, then one about the weather) is not read again here."""
        turns = [t for t in earlier if t.strip()]
        if not turns or not request.strip():
            return []
        before = "\n".join(turns)
        alone = set(self.request_rules(request)) | set(self.request_rules(before))
        return [rule_id for rule_id in self.request_rules(f"{before}\n{request}") if rule_id not in alone]

    @cached_property
    def figure_rule_ids(self) -> frozenset[str]:
        """Universal rules whose check reads stated figures (doses, everyday facts, conversions):
        a sentence that trips one can be left out of an otherwise acceptable answer."""
        return frozenset(r.id for r in self.universal if r.check is not None and r.check.checks_figures)

    @cached_property
    def fact_rule_ids(self) -> frozenset[str]:
        """Universal rules whose check reads checked everyday facts and unit conversions only (no
        doses, no claims): a fact stated right depends on no one's circumstances, so beside an
        answer that states it right, or states none, the rule's channel has nothing to add. A dose
        (the label says what applies to the person) or a claim that depends on the country keeps
        its channel."""
        return frozenset(
            r.id
            for r in self.universal
            if r.check is not None and (r.check.facts or r.check.conversions) and not (r.check.doses or r.check.claims)
        )

    def contradicted_facts(self, text: str, rules: Iterable[str] = (), request: str = "") -> list[str]:
        """The checked facts model text ``text`` contradicts, each stated right with its source
        (framework text, or a conversion worked out from the unit table), in text order; only
        those of ``rules`` when it names any (a channel states its own rules' facts). With the
        ``request`` it answers, a plain yes with no figure of its own contradicts the wrong figures
        the request states (:meth:`.Check.endorsed_facts`)."""
        only = set(rules)
        found = [
            wrong.states
            for rule in self.universal
            if rule.check is not None and (not only or rule.id in only)
            for wrong in (rule.check.wrong_facts(text, request) or rule.check.endorsed_facts(text, request))
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
