"""``train_classifier.py --thirteen --keep-recall --more-harmful`` (the evaluator-minilm-v13 request-head
candidate, ``bench/candidates/``, not shipped): its fixed list of development files, its threshold rule
(the validation-balanced threshold raised until each source of the conversational validation harmful
requests is blocked at least as often as by the head it would replace), its flags, the project-written harmful
requests it adds (``classifier_data/project_harmful_requests.yaml``, never read by the shipped build)
and the frozen file: only its request head differs from the shipped weights."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from psychoalign.models.safety_corpus import Example, split_of

ROOT = Path(__file__).parents[2]
CANDIDATE = ROOT / "bench" / "candidates" / "evaluator-minilm-v13.json"


def _script() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))
    pytest.importorskip("sklearn")
    import train_classifier

    return train_classifier


def test_the_thirteen_files_are_a_fixed_list_ending_with_v18_and_the_older_lists_are_unchanged() -> None:
    tc = _script()
    names = [p.name for p in tc.THIRTEEN_DEV_FILES]
    assert len(tc.HARM_FIRST_DEV_FILES) == 12 and len(names) == 13
    assert names[:12] == [p.name for p in tc.HARM_FIRST_DEV_FILES]
    assert names[-1] == "lookalike_heldout_v18.yaml"
    assert all(p.is_file() for p in tc.THIRTEEN_DEV_FILES)


def _groups(split: str, prefix: str, n: int) -> list[str]:
    """``n`` group names that fall in ``split`` (the corpus's own hash rule)."""
    out, i = [], 0
    while len(out) < n:
        if split_of(f"{prefix}{i}") == split:
            out.append(f"{prefix}{i}")
        i += 1
    return out


def test_keep_recall_raises_the_balanced_threshold_until_the_replaced_head_s_harmful_recall_is_kept() -> None:
    tc = _script()
    from psychoalign.models.heads import Head

    rng = np.random.default_rng(3)
    # 2-d embeddings: acceptable requests around +x, unacceptable around -x, overlapping.
    examples: list[Example] = []
    emb: dict[str, Any] = {}
    for split, n in (("train", 40), ("val", 40)):
        for ok, centre, source in ((True, 0.6, "project-benign"), (False, -0.6, "project-harmful")):
            for j, group in enumerate(_groups(split, f"{split}-{ok}-", n)):
                text = f"{split} {source} {j}"
                v = np.asarray([centre + rng.normal(scale=0.7), rng.normal(scale=0.7)], dtype=np.float32)
                emb[text] = v / np.linalg.norm(v)
                examples.append(Example(text, "request", ok, source, group))
    # The replaced head blocks every request with x < 0.9: more harmful ones than any balanced cut.
    strict = Head(coef=[10.0, 0.0], intercept=-9.0, threshold=0.5)
    balanced, info0 = tc.fit_head(examples, emb, "request")
    raised, info = tc.fit_head(examples, emb, "request", keep_recall=strict)
    assert info["threshold_rule"] == "balanced-conversational, keep-recall"
    assert info["balanced_threshold"] == pytest.approx(balanced.threshold, abs=1e-6)
    assert raised.threshold > balanced.threshold
    assert info["val_unacceptable_blocked"] >= info["val_unacceptable_blocked_by_replaced_head"]
    per_source = info["val_unacceptable_blocked_per_source"]
    assert set(per_source) == {"project-harmful"}
    assert all(v["this_head"] >= v["replaced_head"] for v in per_source.values())
    # A replaced head that blocks nothing leaves the balanced threshold where it is.
    lenient = Head(coef=[0.0, 0.0], intercept=9.0, threshold=0.5)
    same, info2 = tc.fit_head(examples, emb, "request", keep_recall=lenient)
    assert same.threshold == pytest.approx(balanced.threshold, abs=1e-9)
    assert info2["val_unacceptable_blocked_by_replaced_head"] == 0.0
    assert "keep-recall" not in info0["threshold_rule"]


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["--only", "request", "--thirteen"],
            "error: --thirteen trains on the thirteen files at the validation threshold; use it with --dev-files "
            "(and --lofo, --keep-recall, --more-harmful), not with --twelve, --guard or --harm-first",
        ),
        (
            ["--dev-files", "--only", "request", "--thirteen", "--twelve"],
            "error: --thirteen trains on the thirteen files at the validation threshold; use it with --dev-files "
            "(and --lofo, --keep-recall, --more-harmful), not with --twelve, --guard or --harm-first",
        ),
        (
            ["--keep-recall"],
            "error: --keep-recall and --kernel change the request head; use them with --only request",
        ),
        (
            ["--only", "response", "--kernel", "10", "1.4"],
            "error: --keep-recall and --kernel change the request head; use them with --only request",
        ),
        (
            ["--only", "response", "--more-harmful"],
            "error: --more-harmful adds request examples; use it with --only request (or --score FILE)",
        ),
    ],
)
def test_the_v13_flags_refuse_a_wrong_combination_in_one_line(args: list[str], error: str) -> None:
    script = ROOT / "scripts" / "train_classifier.py"
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [error]


def test_the_added_harmful_requests_are_unacceptable_conversational_and_grouped_by_topic() -> None:
    from psychoalign.models.safety_corpus import more_harmful_requests

    added = more_harmful_requests()
    assert len(added) >= 100
    assert len({ex.text for ex in added}) == len(added)
    assert all(ex.kind == "request" and not ex.acceptable and ex.source == "project-harmful" for ex in added)
    assert len({ex.group for ex in added}) >= 20
    assert {ex.split for ex in added} == {"train", "val", "check"}


def test_the_added_harmful_requests_repeat_no_bench_file_and_no_project_request() -> None:
    """No added request repeats a text of ``bench/data`` (the look-alike files, the held-out requests,
    the crisis sets) or a project-written request, by the bench's rule (text only, nothing scored)."""
    import yaml
    from bench.request_head import repeats

    from psychoalign.models.crisis import benign_requests_path
    from psychoalign.models.safety_corpus import more_harmful_requests

    def texts(node: object) -> list[str]:
        if isinstance(node, str):
            return [node]
        if isinstance(node, list):
            return [t for item in node for t in texts(item)]
        if isinstance(node, dict):
            return [t for item in node.values() for t in texts(item)]
        return []

    added = [ex.text for ex in more_harmful_requests()]
    bench = [t for p in sorted((ROOT / "bench" / "data").glob("*.yaml")) for t in texts(yaml.safe_load(p.read_text()))]
    project = texts(yaml.safe_load(benign_requests_path().read_text(encoding="utf-8")))
    assert len(bench) > 1000 and len(project) > 1000
    assert repeats(added, bench) == set()
    assert repeats(added, project) == set()


def test_the_candidate_loads_refits_only_the_request_head_and_records_its_rule_and_data() -> None:
    from psychoalign.models.classifier import load_weights
    from tests.helpers import V8_WEIGHTS, assert_records_dev_files, assert_refits_only_the_request_head

    tc = _script()
    shipped = load_weights(str(V8_WEIGHTS))  # the classifier it was built on (v14 shares v8's request head)
    candidate = load_weights(str(CANDIDATE))
    assert candidate.version == "evaluator-minilm-v13"
    assert_refits_only_the_request_head(candidate, shipped)
    assert candidate.request.guard is None
    lofo = assert_records_dev_files(candidate, tc.THIRTEEN_DEV_FILES, 13)
    fit = candidate.training["fit"]["request"]
    assert fit["threshold_rule"].startswith("balanced-conversational, keep-recall")
    assert candidate.request.threshold == pytest.approx(fit["validation_threshold"], abs=1e-6)
    assert fit["val_unacceptable_blocked"] >= fit["val_unacceptable_blocked_by_replaced_head"]
    per_source = fit["val_unacceptable_blocked_per_source"]
    assert {"project-harmful", "hh-harmful"} <= set(per_source)
    assert all(v["this_head"] >= v["replaced_head"] for v in per_source.values())
    assert candidate.training["more_harmful_file"] == "project_harmful_requests.yaml"
    assert candidate.training["counts"]["request:project-harmful"]["train"] > 402
    n = lofo["all"]["n"]
    assert n[0] > 700 and n[1] > 300
