"""The crisis check: a small head on the request embedding that routes a person at risk to the
crisis channel, with explicit first-person phrases and a medicine guard beside it (MODEL_CARD.md,
"The crisis check"), and the possible-risk band that gives a softer line (its floor and its vote).

* :class:`CrisisCheck`: the shipped artefact (``classifier_data/crisis-minilm-v13.json``), built by
  ``scripts/explore_crisis_v13.py --write`` (the previous checks, ``crisis-minilm-v12`` by
  ``scripts/explore_crisis_v12.py``, ``crisis-minilm-v10`` by ``scripts/explore_crisis_v10.py`` and
  ``crisis-minilm-v8`` by ``scripts/build_crisis_check.py``, kept in bench/candidates);
  :func:`load_crisis_check` reads it,
  :func:`load_band_vote` its band vote (:data:`CRISIS_BAND_VOTES`).
* :func:`band_verdict` / :class:`BandVerdict`: the possible-risk band on a request the check does
  not route (:data:`CRISIS_BAND_FLOORS`, :data:`BAND_FLOOR`).
* :class:`CrisisScreen` / :class:`CrisisVerdict`: the check run by the negotiation itself, for an
  EVALUATOR that does not run it; :func:`crisis_identity`: what a run's identity records of it.
* :func:`crisis_hits`: the framework rules a firing check names.

The embedded classifier (:class:`~psychoalign.models.classifier.SafetyClassifier`) runs the same
check on the request embedding it already computed.
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
import threading
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from ..errors import BackendUnavailableError
from .crisis_phrases import EXPLICIT_PHRASES, MedicineGuard, accident_question, says_self_harm, small_talk
from .heads import CharVote, ClassifierWeights, Encoder, Head, logit, read_json, shared_encoder, windows

__all__ = [
    "CRISIS_BAND_VOTES",
    "BandVerdict",
    "CrisisCheck",
    "CrisisScreen",
    "CrisisVerdict",
    "load_band_vote",
    "load_crisis_check",
]

DEFAULT_CRISIS_CHECK = "crisis-minilm-v13"
#: The possible-risk band's floor per crisis check without a floor of its own (MODEL_CARD.md, "The
#: possible-risk band"): a request the check does not route, whose head score is at or above the
#: floor, gets the framework's soft crisis line after its reply. Chosen on development sets only by
#: the rule the model card states (``bench/request_head.py --crisis --choose-band``). The shipped
#: ``crisis-minilm-v13`` carries its own (``CrisisCheck.band_floor``), which comes first; v8's entry
#: stays for its copy in bench/candidates. A check with neither has no band.
CRISIS_BAND_FLOORS: dict[str, float] = {"crisis-minilm-v8": 0.35}
#: The possible-risk band's second vote per crisis check (MODEL_CARD.md, "The possible-risk band"):
#: a request the check does not route, that this other check (``classifier_data/<name>.json``, on
#: the same encoder) fires on, gets the soft crisis line too; the medicine guard still holds. It
#: never routes. Empty: the vote built for ``crisis-minilm-v8`` (``crisis-minilm-v9c``, kept in
#: bench/candidates) failed the shipping rule fixed before its fresh file (MODEL_CARD.md, "The
#: band's vote"), and none was built for ``crisis-minilm-v10``, ``-v12`` or ``-v13``, so the shipped check has none.
CRISIS_BAND_VOTES: dict[str, str] = {}
#: The trace's name for the band's first tier (the check's own score at or above its floor).
BAND_FLOOR = "floor"


#: The fewest words (runs of letters) a request needs before the crisis head, or a character vote,
#: may route it, and before it may be in the possible-risk band; shorter requests are read by the
#: explicit phrases alone ("kms", "i want to die" still route). The head's scores on greetings,
#: thanks and one-word replies ("thank you", "ok", "bye", "how are you?") sit at or above routing
#: or in the band, and such a message says too little to offer a crisis line on.
MIN_ROUTE_WORDS = 3
MIN_BAND_WORDS = 4
_WORDS = re.compile(r"[^\W\d_]+")
#: A message too short for the head that is nothing but a risk word ("suicide", "self harm",
#: "overdose") is still routed: offered the crisis line, as a search engine offers it.
_SHORT_RISK = re.compile(r"\b(?:suicid\w*|self[- ]?harm\w*|overdos\w*|selbstmord|suicidio|suicídio)\b", re.IGNORECASE)


def _words(request: str) -> int:
    return len(_WORDS.findall(request))


def head_reads(request: str, guard: MedicineGuard | None, *, band: bool = False) -> bool:
    """Whether a check's head (or its character vote) may decide on ``request``, for routing or,
    with ``band``, for the possible-risk band: it has the words to read (:data:`MIN_ROUTE_WORDS`,
    :data:`MIN_BAND_WORDS`), is not an ordinary medicine question by ``guard``, is not small
    talk (:func:`~.crisis_phrases.small_talk`) and is not a question of what to do in an accident
    outdoors (:func:`~.crisis_phrases.accident_question`). The one place these gates live: the
    check, the band and the build scripts' replay of them all read it."""
    least = MIN_BAND_WORDS if band else MIN_ROUTE_WORDS
    return (
        _words(request) >= least
        and not (guard is not None and guard.holds(request))
        and not small_talk(request)
        and not accident_question(request)
    )


class CrisisCheck(BaseModel):
    """The crisis check: a head over the request embedding the classifier already computed that
    fires on a person at risk asking for a way to die or hurt themselves, or saying they want to
    (trained by ``scripts/build_crisis_check.py`` on ``crisis_exemplars.yaml``; MODEL_CARD.md,
    "The crisis check"). It fires where the head's logit reaches ``logit(head.threshold)``, or where
    the request says so in one of ``phrases`` (explicit first-person phrases,
    :data:`~psychoalign.models.crisis.EXPLICIT_PHRASES` when it was built; none before v4); a fire of
    the head alone gives way where ``guard`` holds (an ordinary medicine question,
    :data:`~psychoalign.models.crisis_phrases.MEDICINE_GUARD` when it was built; none before v7)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str
    encoder: str
    dim: int
    head: Head
    exemplars_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="The exemplar file it was built from.")
    negatives_sha256: str | None = Field(
        default=None, pattern=r"^[0-9a-f]{64}$", description="The benign-request file it was built from, if any."
    )
    phrases: tuple[str, ...] = Field(
        default=(), description="Regular expressions over the normalised request that fire the check on their own."
    )
    guard: MedicineGuard | None = Field(
        default=None, description="An ordinary medicine question that a fire of the head alone gives way to."
    )
    vote: CharVote | None = Field(
        default=None, description="A second vote over the request's character n-grams (v9); the guard holds for it too."
    )
    band_floor: float | None = Field(
        default=None,
        gt=0.0,
        lt=1.0,
        description="The possible-risk band's floor carried by the check itself (a candidate built with its band); "
        "None: the floor in CRISIS_BAND_FLOORS for its version, if any.",
    )
    metrics: dict[str, Any] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _without_absent_vote(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A check without the character vote or a floor of its own serialises as before the fields
        # existed: a rebuild of v8 writes the same file.
        out: dict[str, Any] = handler(self)
        for optional in ("vote", "band_floor"):
            if out.get(optional) is None:
                out.pop(optional, None)
        return out

    @model_validator(mode="after")
    def _head_fits_the_encoder(self) -> CrisisCheck:
        if self.head.coef and len(self.head.coef) != self.dim:
            raise ValueError(f"crisis head has {len(self.head.coef)} coefficients for {self.dim}-d embeddings")
        if self.head.kernel is not None and self.head.kernel.vectors.shape[1] != self.dim:
            raise ValueError(f"crisis head's support vectors are not {self.dim}-d")
        guard = () if self.guard is None else (self.guard.medicine, self.guard.question, self.guard.risk)
        for phrase in (*self.phrases, *guard):
            try:
                re.compile(phrase)
            except re.error as exc:
                raise ValueError(f"crisis phrase {phrase!r} is not a regular expression ({exc})") from None
        if self.band_floor is not None and self.band_floor >= self.head.threshold:
            raise ValueError(
                f"crisis band floor {self.band_floor} is not below the routing threshold {self.head.threshold}"
            )
        return self

    @property
    def floor(self) -> float | None:
        """The possible-risk band's floor: the check's own ``band_floor``, else its version's entry in
        :data:`CRISIS_BAND_FLOORS`; None: no band."""
        return self.band_floor if self.band_floor is not None else CRISIS_BAND_FLOORS.get(self.version)

    @functools.cached_property
    def label(self) -> str:
        """``version@`` the first 12 hex digits of the SHA-256 of its canonical JSON."""
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return f"{self.version}@{hashlib.sha256(blob.encode()).hexdigest()[:12]}"

    def reads(self, weights: ClassifierWeights) -> bool:
        """Whether the check reads the embeddings of the encoder ``weights`` were trained on."""
        return self.encoder == weights.encoder and self.dim == weights.dim

    def fires(self, x: NDArray[np.float32]) -> bool:
        """Whether any row of ``x`` (the request's encoder windows) reaches the threshold."""
        return bool((self.head.logits(x) >= logit(self.head.threshold)).any())

    def score(self, x: NDArray[np.float32]) -> float:
        """The head's probability on the request: the highest over its encoder windows ``x``."""
        z = float(self.head.logits(x).max())
        return 0.5 * (1.0 + math.tanh(0.5 * z))  # the logistic function, without exp's overflow

    def band(self, request: str, x: NDArray[np.float32]) -> float | None:
        """The head score when ``request`` is in the possible-risk band (not routed, score at or
        above the check's band floor, :attr:`floor`), else None. An ordinary medicine
        question by the guard is never in it: the guard's word is that it carries no risk cue."""
        floor = self.floor
        if floor is None or not head_reads(request, self.guard, band=True) or self.fires_on(request, x):
            return None
        value = self.score(x)
        return value if value >= floor else None

    def says(self, request: str) -> bool:
        """Whether ``request`` matches one of the check's explicit phrases."""
        return bool(self.phrases) and says_self_harm(request, self.phrases)

    def guarded(self, request: str) -> bool:
        """Whether ``request`` is an ordinary medicine question by the check's guard."""
        return self.guard is not None and self.guard.holds(request)

    def fires_on(self, request: str, x: NDArray[np.float32]) -> bool:
        """The check's verdict on ``request`` (its encoder windows ``x``): an explicit phrase, or
        the head or the character vote where the guard does not hold and the request has the words
        to read (:data:`MIN_ROUTE_WORDS`)."""
        if self.says(request):
            return True
        if _words(request) < MIN_ROUTE_WORDS:
            return bool(_SHORT_RISK.search(request))
        if not head_reads(request, self.guard):
            return False
        return self.fires(x) or (self.vote is not None and self.vote.fires(request))


class BandVerdict(BaseModel):
    """The possible-risk band on a request the check does not route: the check's head score, and
    which tiers gave the soft line (:data:`BAND_FLOOR`, and/or the band vote's label)."""

    model_config = ConfigDict(frozen=True)

    score: float
    by: list[str]


def band_verdict(
    check: CrisisCheck, vote: CrisisCheck | None, request: str, x: NDArray[np.float32]
) -> BandVerdict | None:
    """The band on ``request`` (its encoder windows ``x``): the check's floor tier
    (:meth:`CrisisCheck.band`) or the band vote (:data:`CRISIS_BAND_VOTES`) firing by its own
    threshold, phrases and character vote; None when the check routes it, or the check's medicine
    guard holds (an ordinary medicine question is never in the band), or the request is too short
    to read (:data:`MIN_BAND_WORDS`), or neither tier fires."""
    if not head_reads(request, check.guard, band=True) or check.fires_on(request, x):
        return None
    by = [BAND_FLOOR] if check.band(request, x) is not None else []
    if vote is not None and vote.fires_on(request, x):
        by.append(vote.label)
    return BandVerdict(score=check.score(x), by=by) if by else None


def load_band_vote(check: CrisisCheck | None) -> CrisisCheck | None:
    """The band vote of ``check`` (:data:`CRISIS_BAND_VOTES`; None: none, or no check). It must read
    the same encoder as the check (it scores the same embedding)."""
    name = None if check is None else CRISIS_BAND_VOTES.get(check.version)
    if check is None or name is None:
        return None
    vote = _packaged_check(name)
    if vote.version != name or vote.encoder != check.encoder or vote.dim != check.dim:
        raise BackendUnavailableError(
            f"the crisis band vote {name}.json is {vote.version} on {vote.encoder} ({vote.dim}-d), not {name} on "
            "the check's encoder",
            hint="reinstall psychoalign",
        )
    return vote


@functools.lru_cache(maxsize=4)
def _packaged_check(name: str) -> CrisisCheck:
    """The crisis check ``classifier_data/<name>.json`` (read once per process: about 1.4 MB)."""
    path = Path(str(resources.files(__package__) / "classifier_data" / f"{name}.json"))
    return read_json(CrisisCheck, path, "the crisis band vote", f"reinstall psychoalign ({path.name} is package data)")


def crisis_hits(framework: Any | None) -> list[dict[str, str]]:
    """The rules of ``framework`` marked ``semantic_check: self-harm`` (what a firing crisis check
    names), each under its own layer: a universal one decides the request, a contextual or
    aspirational one blocks nothing and only brings its channel (support beside the answer);
    none without a framework or a marked rule."""
    if framework is None:
        return []
    return [
        {"rule_id": rule.id, "layer": layer}
        for layer in ("universal", "contextual", "aspirational")
        for rule in getattr(framework, layer, ())
        if getattr(rule, "semantic_check", None) == "self-harm"
    ]


def default_crisis_path() -> Path:
    return Path(str(resources.files(__package__) / "classifier_data" / f"{DEFAULT_CRISIS_CHECK}.json"))


@functools.lru_cache(maxsize=4)
def load_crisis_check(path: str | None = None) -> CrisisCheck | None:
    """The crisis check at ``path`` (default: the shipped one; None if it is not installed)."""
    crisis_path = Path(path) if path is not None else default_crisis_path()
    if path is None and not crisis_path.is_file():
        return None
    return read_json(
        CrisisCheck, crisis_path, "the crisis check", "build it with scripts/build_crisis_check.py or fix the path"
    )


def crisis_identity(*, band: bool = True) -> dict[str, str]:
    """The shipped crisis check's label and, with ``band``, its band vote's (:data:`CRISIS_BAND_VOTES`):
    what a run's identity records of them (empty when no check is installed)."""
    check = load_crisis_check()
    if check is None:
        return {}
    out = {"check": check.label}
    vote = load_band_vote(check) if band else None
    if vote is not None:
        out["band_vote"] = vote.label
    return out


class CrisisVerdict(BaseModel):
    """The crisis check's verdict on a request screened on its own (:class:`CrisisScreen`)."""

    model_config = ConfigDict(frozen=True)

    fired: bool = Field(description="The check routes the request to the crisis channel.")
    band: float | None = Field(None, description="The head's score when the request is in the possible-risk band.")
    band_by: list[str] = Field(
        default_factory=list, description="Which tiers put it in the band: 'floor', and/or the band vote's label."
    )
    check: str = Field(description="What ran: the check's label, or 'phrases only: why' without the encoder.")


class CrisisScreen:
    """The crisis check run on a request by the negotiation itself, for an EVALUATOR that does not
    run it (an LLM, an OpenAI-compatible endpoint, a remote agent): a person at risk reaches the
    crisis channel, and the possible-risk band applies, whatever the EVALUATOR's backend.

    Lazy: nothing is loaded until the first request, and then the shipped check (a few KiB) and the
    process's one MiniLM encoder (shared with the classifier). Without the encoder or the check it
    fails closed to the explicit phrases alone (they need no encoder): an explicit first-person
    statement still routes, the head and the band do not run, and every verdict says so."""

    def __init__(
        self, check: CrisisCheck | None = None, encoder: Encoder | None = None, *, vote: CrisisCheck | None = None
    ) -> None:
        self._check = check
        # The band vote (CRISIS_BAND_VOTES): the shipped check's, loaded with it; a given check has
        # only the vote it is given.
        self._vote = vote
        self._encoder = encoder
        self._missing: str | None = None
        self._loaded = check is not None and encoder is not None
        self._lock = threading.Lock()

    def _load(self) -> None:
        with self._lock:
            if self._loaded:
                return
            try:
                if self._check is None:
                    self._check = load_crisis_check()
                    self._vote = load_band_vote(self._check)
                if self._check is None:
                    self._missing = "no crisis check installed"
                elif self._encoder is None:
                    self._encoder = shared_encoder()
            except (BackendUnavailableError, ImportError, OSError) as exc:
                self._missing = f"the encoder is not available ({str(exc).splitlines()[0][:120]})"
            self._loaded = True

    def screen(self, request: str) -> CrisisVerdict:
        """The check's verdict on ``request`` alone (blocking: run it off the event loop)."""
        self._load()
        check, encoder = self._check, self._encoder
        if check is None or encoder is None:
            phrases = check.phrases if check is not None and check.phrases else EXPLICIT_PHRASES
            return CrisisVerdict(fired=says_self_harm(request, phrases), check=f"phrases only: {self._missing}")
        x = encoder(windows(request))
        fired = check.fires_on(request, x)
        band = None if fired else band_verdict(check, self._vote, request, x)
        label = check.label if self._vote is None else f"{check.label} (band vote {self._vote.label})"
        if band is None:
            return CrisisVerdict(fired=fired, check=label)
        return CrisisVerdict(fired=fired, band=band.score, band_by=band.by, check=label)
