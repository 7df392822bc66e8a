"""Leave-one-file-out choice and build of the crisis check candidate ``crisis-minilm-v13``.

Run from the repo root (needs the evaluation data folder, shared/data, as the build does):

    .venv/bin/python scripts/explore_crisis_v13.py               # the LOFO estimate and the choice (prints only)
    .venv/bin/python scripts/explore_crisis_v13.py --write       # the chosen setting trained on all twelve files,
                                                                 # written to classifier_data/crisis-minilm-v13.json

The shipped crisis check since it was scored once on its fresh file (``bench/data/crisis_heldout_v13.yaml``,
written blind after it was frozen, by the rule MODEL_CARD.md states); ``crisis-minilm-v12``, which it
replaced, is read from ``bench/candidates/crisis-minilm-v12.json`` for the comparison.

v12's recipe (``scripts/explore_crisis_v12.py``, whose data, grid, rule and build it runs through
:func:`explore_crisis_v12.explore` with its own :class:`~explore_crisis_v12.Recipe`), with two changes:

* the medicine guard is :data:`~psychoalign.models.crisis_phrases.MEDICINE_GUARD_V11` (written for
  the v11 candidate): "at once" alone is no longer a risk cue, so a plain dose question ("How much
  ibuprofen can I take at once?", which v12 routes to the crisis message) is a pharmacist's question
  the head gives way to, while taking them all at once, what it would take, not waking up and an
  amount "enough" still lift the guard and leave the head to decide;
* the training data adds ``bench/data/crisis_heldout_v12.yaml`` (v12's fresh file, scored once; now
  development data): all twelve crisis files, both sets.

Method and rule (v12's, fixed before any setting was scored). For each of the twelve files in turn a
head is trained on the other eleven and the rest of v12's training data, its thresholds set by a
setting's caps on that fold's out-of-fold margins, and the held-out file scored as the runtime
scores it under v13's guard. The baseline is v12's recipe: v12's setting (C 10, gamma 1, look-alike
cap 8 %, band caps 5 % / 25 %) and v12's guard, run the same way on the same twelve files; v12 as
shipped is printed beside it (in sample on the first eleven files) and is the reference of the
checks. The rule (:func:`explore_crisis_v12.choose`): keep the settings whose all-files model routes
none of the five known false fires and no more medicine look-alikes and ``self_harm_requests.yaml``
look-alikes than v12 as shipped, and whose pooled LOFO look-alikes routed and given the soft line
are each at most those of v12's recipe; among them the highest mean LOFO crisis share routed (ties:
mean either tier, then fewer look-alikes routed, then fewer given the soft line). No reported
benchmark is read by the choice (MT-Bench first turns are printed as a check only). No randomness:
the same files write the same JSON.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "scripts"))
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import crisis_lofo  # noqa: E402
import explore_crisis_v12 as v12  # noqa: E402
from explore_crisis_v10 import Setting  # noqa: E402

from psychoalign.models.crisis import MEDICINE_GUARD  # noqa: E402
from psychoalign.models.crisis_phrases import MEDICINE_GUARD_V11  # noqa: E402
from request_head import CRISIS_HELDOUTS  # noqa: E402

VERSION = "crisis-minilm-v13"
CANDIDATE = ROOT / "src" / "psychoalign" / "models" / "classifier_data" / "crisis-minilm-v13.json"
#: The twelve crisis files (all scored at least once; development data for this candidate).
TRAIN_FILES = CRISIS_HELDOUTS[:12]
#: v12's chosen setting (its file's ``metrics["setting"]``), run with v12's guard as the baseline.
V12_SETTING = Setting(10.0, 1.0, 0.08, 0.05, 0.25, True)

V13 = v12.Recipe(
    version=VERSION,
    train_files=TRAIN_FILES,
    guard=MEDICINE_GUARD_V11,
    out=CANDIDATE,
    baseline="v12",
    baseline_check=v12.CANDIDATE,
    baseline_setting=V12_SETTING,
    baseline_guard=MEDICINE_GUARD,
    candidate_note="scripts/explore_crisis_v13.py, frozen for a fresh file; not shipped",
    files_word="twelve",
    extra_metrics={"guard": "MEDICINE_GUARD_V11", "baseline": "v12's setting and guard on the twelve files"},
)


def main() -> int:
    ap = crisis_lofo.parser(
        __doc__, CANDIDATE, "write the chosen check (all twelve files) to FILE (default: the shipped classifier_data/)"
    )
    crisis_lofo.add_jobs(ap)
    args = ap.parse_args()
    only = crisis_lofo.only_pairs(ap, args.only, v12.CS, v12.GAMMAS)
    return v12.explore(V13, args.data, args.write, args.jobs, args.cache, only, args.gram)


if __name__ == "__main__":
    raise SystemExit(main())
