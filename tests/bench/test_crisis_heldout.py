"""The crisis check's hand-written held-out set (bench/data/crisis_heldout.yaml, reported by
``bench/request_head.py --crisis``) stays held out: it loads, keeps both sides, and none of its
texts is a training exemplar of the check."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import yaml

from psychoalign.models.crisis import exemplars

HELDOUT = Path(__file__).parents[2] / "bench" / "data" / "crisis_heldout.yaml"


def _key(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def test_the_held_out_set_has_both_sides_and_no_duplicates() -> None:
    data = yaml.safe_load(HELDOUT.read_text(encoding="utf-8"))
    assert set(data) == {"crisis", "benign"}
    for side in ("crisis", "benign"):
        texts = [str(t) for t in data[side]]
        assert len(texts) >= 40, side
        assert len({_key(t) for t in texts}) == len(texts), side


def test_no_held_out_text_is_an_exemplar() -> None:
    data = yaml.safe_load(HELDOUT.read_text(encoding="utf-8"))
    held = {_key(str(t)) for side in ("crisis", "benign") for t in data[side]}
    assert not held & {_key(e.text) for e in exemplars()}  # the bench also drops near repeats
