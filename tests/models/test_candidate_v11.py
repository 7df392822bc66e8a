"""``train_classifier.py --harm-first`` (the evaluator-minilm-v11 request-head candidate): its choice
rule (:func:`choose_harm_first`) on small hand-made margins, its fixed list of development files and
its flags. The rule never lets one left-out file give up a blocked twin for another file's look-alikes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

ROOT = Path(__file__).parents[2]


def _rule() -> Any:
    sys.path.insert(0, str(ROOT / "scripts"))
    pytest.importorskip("sklearn")
    import train_classifier

    return train_classifier


def _file(look_old: list[float], twin_old: list[float], look_new: list[float], twin_new: list[float]) -> dict[str, Any]:
    kinds = ["lookalike"] * len(look_old) + ["harmful"] * len(twin_old)
    return {
        "params": "C=1, gamma=1",
        "kinds": np.asarray(kinds),
        "rule": np.zeros(len(kinds), dtype=bool),
        "old": np.asarray([*look_old, *twin_old]),
        "new": np.asarray([*look_new, *twin_new]),
    }


# The kept head's and the refit's margins on the held requests: two acceptable check requests, two
# unacceptable validation requests, one harmful request of heldout_requests.yaml.
HELD_OK = np.asarray([True, True, False, False, False])
HELD_GROUP = np.asarray(["check", "check", "val", "val", "heldout"])
HELD_OLD = np.asarray([1.0, 1.0, -1.0, -1.0, -1.0])


def test_the_rule_takes_the_nearest_both_targets_within_every_limit() -> None:
    tc = _rule()
    # File b's second twin: the kept head blocks it confidently (-1), the refit passes it at +0.2. The
    # guard just below the kept head's look-alikes (-0.45) keeps it blocked without an offset.
    per_file = {
        "a.yaml": _file([-0.45, -0.45, 1, 1], [-1, 0.5], [1, 1, 1, 1], [-1, -1]),
        "b.yaml": _file([-0.45, -0.45, 1, 1], [-1, -1], [1, 1, 1, 1], [-1, 0.2]),
    }
    w, d, c, record = tc.choose_harm_first({1.0: (per_file, HELD_OLD.copy())}, HELD_OLD, HELD_OK, HELD_GROUP)
    assert (w, d, c) == (1.0, 0.0, -0.5)
    assert record["chosen"][:5] == [8, 4, 0, 2, 1] and record["kept_head"][:5] == [4, 3, 0, 2, 1]
    assert record["twins_blocked_per_file"]["b.yaml"] == {"n": 2, "kept_head": 2, "chosen": 2}


def test_no_file_gives_up_a_twin_for_more_look_alikes() -> None:
    tc = _rule()
    # The refit passes b's second twin confidently (+5) where the kept head barely blocks it (-0.05):
    # pooled, file a's extra twin would make up for it, but the rule allows only settings that keep
    # it blocked (a guard at the kept head's threshold), so no look-alike is gained.
    per_file = {
        "a.yaml": _file([-0.45, -0.45, 1, 1], [-1, 0.5], [1, 1, 1, 1], [-1, -1]),
        "b.yaml": _file([-0.45, -0.45, 1, 1], [-1, -0.05], [1, 1, 1, 1], [-1, 5.0]),
    }
    _, _, c, record = tc.choose_harm_first({1.0: (per_file, HELD_OLD.copy())}, HELD_OLD, HELD_OK, HELD_GROUP)
    assert c == 0.0
    assert record["twins_blocked_per_file"]["b.yaml"]["chosen"] == 2
    assert record["chosen"][0] == record["kept_head"][0] == 4


def test_a_harmful_heldout_request_the_refit_passes_is_a_limit() -> None:
    tc = _rule()
    per_file = {"a.yaml": _file([-0.45, 1], [-1], [1, 1], [-1])}
    held_new = HELD_OLD.copy()
    held_new[4] = 3.0  # the refit passes the held-out harmful request the kept head blocks at -1
    _, d, c, record = tc.choose_harm_first({1.0: (per_file, held_new)}, HELD_OLD, HELD_OK, HELD_GROUP)
    assert record["chosen"][4] == 1
    assert (c is not None and c > -1.0) or d > 3.0


def test_the_rule_fails_closed_when_nothing_keeps_harmful_recall() -> None:
    tc = _rule()
    per_file = {"a.yaml": _file([1.0], [-1.0], [1.0], [-1.0])}
    held_old = np.asarray([1.0, 1.0, -1.0, -1.0, -9.0])
    held_new = np.asarray([-9.0, -9.0, 9.0, 9.0, 9.0])  # blocks what is acceptable, passes what is not
    with pytest.raises(SystemExit, match="no weight, offset and cut keep harmful recall"):
        tc.choose_harm_first({1.0: (per_file, held_new)}, held_old, HELD_OK, HELD_GROUP)


def test_the_twelve_files_are_a_fixed_list_and_the_older_lists_are_unchanged() -> None:
    tc = _rule()
    names = [p.name for p in tc.HARM_FIRST_DEV_FILES]
    assert len(tc.DEV_FILES) == 10 and len(tc.GUARD_DEV_FILES) == 11 and len(names) == 12
    assert names[:11] == [p.name for p in tc.GUARD_DEV_FILES]
    assert names[-1] == "lookalike_heldout_v17.yaml"
    assert all(p.is_file() for p in tc.HARM_FIRST_DEV_FILES)
    heldout = tc.heldout_examples()
    assert {ex.source for ex in heldout} == {"heldout-benign", "heldout-harmful"}
    assert all(ex.acceptable == (ex.source == "heldout-benign") for ex in heldout)


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["--dev-files", "--only", "request", "--harm-first"],
            "error: --harm-first chooses its offset and cut leave one file out; add --dev-files --lofo",
        ),
        (
            ["--dev-files", "--lofo", "--only", "request", "--harm-first", "--guard"],
            "error: --harm-first and --guard are two choice rules; give one",
        ),
        (
            ["--only", "request", "--twelve"],
            "error: --twelve trains on the twelve files at the validation threshold; use it with --dev-files alone",
        ),
        (
            ["--dev-files", "--lofo", "--only", "request", "--twelve", "--harm-first"],
            "error: --twelve trains on the twelve files at the validation threshold; use it with --dev-files alone",
        ),
    ],
)
def test_the_harm_first_flags_refuse_a_wrong_combination_in_one_line(args: list[str], error: str) -> None:
    script = ROOT / "scripts" / "train_classifier.py"
    done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, check=False)
    assert done.returncode != 0
    assert done.stderr.strip().splitlines() == [error]


CANDIDATE = ROOT / "bench" / "candidates" / "evaluator-minilm-v11.json"


def test_the_candidate_loads_and_keeps_the_response_and_adversarial_heads_of_v8() -> None:
    from psychoalign.models.classifier import load_weights
    from tests.helpers import V8_WEIGHTS, assert_refits_only_the_request_head, moved_threshold

    shipped = load_weights(str(V8_WEIGHTS))
    candidate = load_weights(str(CANDIDATE))
    assert candidate.version == "evaluator-minilm-v11"
    assert_refits_only_the_request_head(candidate, shipped)
    fit = candidate.training["fit"]["request"]
    lofo = fit["lofo"]
    assert candidate.request.threshold == pytest.approx(
        moved_threshold(fit["validation_threshold"], lofo["offset"]), abs=1e-5
    )
    # The rule chose the shipped request head as the guard at its own threshold (cut 0): whatever the
    # shipped head blocks stays blocked, and the refit blocks more only where it is confident.
    assert lofo["guard_cut"] == 0.0 and candidate.request.guard is not None
    guard = candidate.request.guard
    assert guard.threshold == pytest.approx(shipped.request.threshold, abs=1e-6)
    assert guard.model_dump(exclude={"threshold", "contested_floor"}) == shipped.request.model_dump(
        exclude={"threshold", "contested_floor"}
    )


def test_the_candidate_records_the_twelve_files_and_its_limits_held() -> None:
    tc = _rule()
    from psychoalign.models.classifier import load_weights
    from tests.helpers import assert_records_dev_files

    candidate = load_weights(str(CANDIDATE))
    lofo = assert_records_dev_files(candidate, tc.HARM_FIRST_DEV_FILES, 12)
    assert candidate.training["fit"]["request"]["heldout_limit"] == "heldout_requests.yaml"
    kept, got = lofo["kept_head"], lofo["chosen"]
    # Every limit of choose_harm_first held on the development data it was chosen on.
    assert got[1] >= kept[1] and got[2] >= kept[2] and got[3] >= kept[3] and got[4] >= kept[4]
    assert got[5] >= kept[5] - tc.GUARD_ACCEPTABLE_SLACK
    assert all(f["chosen"] >= f["kept_head"] for f in lofo["twins_blocked_per_file"].values())
