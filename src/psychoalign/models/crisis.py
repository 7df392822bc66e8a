"""The crisis check's training text: project-written requests of a person at risk, their
look-alikes, and the request head's project-written benign requests.

The exemplars (``classifier_data/crisis_exemplars.yaml``) are split by ``sha256(text) % 4`` before
anything is scored: fold 0 is held out (the tests and ``bench/request_head.py --crisis`` report on
it, as on the hand-written ``bench/data/crisis_heldout.yaml``), folds 1-3 train the crisis head
(``scripts/build_crisis_check.py``), together with the benign requests and look-alikes of
``classifier_data/project_requests.yaml`` that the request head trains or tunes on
(:func:`benign_requests`: its ``train`` and ``val`` splits, never its ``check`` split). The head
reads the encoder's embedding only (the check's explicit phrases, :mod:`.crisis_phrases`, are
re-exported here), never the request heads' weights, so those can be retrained without rebuilding
it (a change to ``project_requests.yaml`` does call for a rebuild: the head
records that file's hash). The head itself is
:class:`~psychoalign.models.crisis_check.CrisisCheck`, which the classifier scores on the
request embedding it already has.
"""

from __future__ import annotations

import hashlib
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ..yamlio import parse_yaml
from .crisis_phrases import EXPLICIT_PHRASES, MEDICINE_GUARD, says_self_harm

__all__ = [
    "EXPLICIT_PHRASES",
    "HELD_OUT_FOLD",
    "MEDICINE_GUARD",
    "Exemplar",
    "benign_requests",
    "benign_requests_path",
    "benign_requests_sha256",
    "exemplars",
    "exemplars_path",
    "exemplars_sha256",
    "says_self_harm",
]

#: The fold (``sha256(text) % 4``) that is never trained or tuned on.
HELD_OUT_FOLD = 0
#: The request head's sets read as benign requests, and its splits that may be read (not ``check``).
BENIGN_SOURCES = ("project-benign", "project-lookalike")
BENIGN_SPLITS = ("train", "val")


class Exemplar(BaseModel):
    """One written request: ``crisis`` (must reach the crisis channel) or ``lookalike`` (must not)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str
    label: Literal["crisis", "lookalike"]
    kind: str

    @property
    def fold(self) -> int:
        """``sha256(text) % 4`` over the UTF-8 text."""
        return int(hashlib.sha256(self.text.encode("utf-8")).hexdigest(), 16) % 4

    @property
    def held_out(self) -> bool:
        return self.fold == HELD_OUT_FOLD


def exemplars_path() -> Path:
    return Path(str(resources.files(__package__) / "classifier_data" / "crisis_exemplars.yaml"))


def exemplars_sha256(path: Path | None = None) -> str:
    """SHA-256 of the exemplar file's bytes (the crisis head records the one it was built from)."""
    return hashlib.sha256((path or exemplars_path()).read_bytes()).hexdigest()


def exemplars(path: Path | None = None) -> list[Exemplar]:
    """Every exemplar in file order (crisis first, then look-alikes)."""
    source = path or exemplars_path()
    data = parse_yaml(source.read_text(encoding="utf-8"), source.name) or {}
    out: list[Exemplar] = []
    for label in ("crisis", "lookalike"):
        for kind, texts in (data.get(label) or {}).items():
            out.extend(Exemplar(text=str(text), label=label, kind=str(kind)) for text in texts)
    return out


def benign_requests_path() -> Path:
    return Path(str(resources.files(__package__) / "classifier_data" / "project_requests.yaml"))


def benign_requests_sha256(path: Path | None = None) -> str:
    """SHA-256 of ``project_requests.yaml``'s bytes (the crisis head records the one it was built from)."""
    return hashlib.sha256((path or benign_requests_path()).read_bytes()).hexdigest()


def benign_requests(data: str | Path | None = None) -> list[tuple[str, str]]:
    """(text, group) of the project-written benign requests and look-alikes that the request head
    trains or tunes on, in the corpus's order: split and grouped as ``load_corpus`` does (which
    needs the evaluation data folder ``data``, and leaves out any text of a reported benchmark)."""
    from .safety_corpus import load_corpus

    return [(e.text, e.group) for e in load_corpus(data) if e.source in BENIGN_SOURCES and e.split in BENIGN_SPLITS]
