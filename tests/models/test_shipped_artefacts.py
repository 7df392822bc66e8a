"""The shipped classifier weights, the shipped crisis check and the bench's candidate checks load as
the same artefacts: their models read every field of the file and write it back unchanged, and
their labels (version and weights hash, as traces record and model specs pin them) stay put."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from psychoalign.models.classifier import default_weights_path, load_weights
from psychoalign.models.crisis_check import CrisisCheck, default_crisis_path, load_crisis_check
from psychoalign.models.heads import ClassifierWeights
from tests.helpers import V8_WEIGHTS

ROOT = Path(__file__).resolve().parents[2]
CANDIDATE = ROOT / "bench" / "candidates" / "crisis-minilm-v9c.json"
#: The previous shipped crisis check, kept for comparison.
PREVIOUS = ROOT / "bench" / "candidates" / "crisis-minilm-v8.json"

ARTEFACTS: list[tuple[type[ClassifierWeights] | type[CrisisCheck], Path, str]] = [
    (ClassifierWeights, default_weights_path(), "evaluator-minilm-v14@068a239ede3a"),
    (CrisisCheck, default_crisis_path(), "crisis-minilm-v13@81c639b57c20"),
    (CrisisCheck, ROOT / "bench" / "candidates" / "crisis-minilm-v12.json", "crisis-minilm-v12@39afe99c7582"),
    (CrisisCheck, ROOT / "bench" / "candidates" / "crisis-minilm-v10.json", "crisis-minilm-v10@4e27ecb9d14b"),
    (CrisisCheck, PREVIOUS, "crisis-minilm-v8@4675d82e3599"),
    (CrisisCheck, CANDIDATE, "crisis-minilm-v9c@839360fb7106"),
    (ClassifierWeights, V8_WEIGHTS, "evaluator-minilm-v8@242e308abca2"),
]


@pytest.mark.parametrize(("model", "path", "label"), ARTEFACTS, ids=lambda a: getattr(a, "name", None))
def test_an_artefact_loads_and_writes_back_the_same_file(
    model: type[ClassifierWeights] | type[CrisisCheck], path: Path, label: str
) -> None:
    raw = json.loads(path.read_text(encoding="utf-8"))
    loaded = model.model_validate(raw)
    assert loaded.model_dump(mode="json") == raw
    assert loaded.label == label


def test_the_loaders_read_the_shipped_artefacts() -> None:
    check = load_crisis_check()
    assert check is not None
    assert load_weights().label == ARTEFACTS[0][2]
    assert load_weights().sha256.startswith("068a239ede3a")
    assert check.label == ARTEFACTS[1][2]
