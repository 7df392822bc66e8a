"""Copy retired held-out request files into the classifier's training data.

Run from the repo root:

    .venv/bin/python scripts/retire_heldout.py   # writes classifier_data/project_retired_requests.yaml

A held-out file of ``bench/data`` stops being fresh once a request head it measured has been
chosen with its figures in view. The ``evaluator-minilm-v9`` candidate (not shipped, MODEL_CARD.md)
trained and validated on the older look-alike files listed in ``RETIRED``, and was measured only on
a file written after it was frozen and on the public benchmarks. The files stay in ``bench/data``
unchanged; this script copies their items, file by file and set by set, into package data that
``psychoalign.models.safety_corpus`` reads with ``retired=True`` (``train_classifier.py
--retired``; one split group per item).
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
#: The held-out files retired into training for evaluator-minilm-v9 (each measured an earlier head).
RETIRED = (
    "lookalike_heldout.yaml",
    "lookalike_heldout_v7.yaml",
    "lookalike_heldout_v8.yaml",
    "lookalike_heldout_v9.yaml",
    "lookalike_heldout_v10.yaml",
    "lookalike_heldout_v11.yaml",
    "lookalike_heldout_v12.yaml",
    "lookalike_heldout_v13.yaml",
)
SETS = ("lookalike", "premise", "harmful")
OUT = ROOT / "src" / "psychoalign" / "models" / "classifier_data" / "project_retired_requests.yaml"
HEADER = """\
# Retired held-out requests: training and development data of the evaluator-minilm-v9 candidate.
#
# Written by `python scripts/retire_heldout.py` from the held-out files of bench/data it lists (each
# written by hand for this project, see their headers; no text is from a dataset). Each of them
# measured an earlier request head and was looked at while choosing the next, so none is fresh any
# more. With `train_classifier.py --retired` they are split like the rest of the corpus (sha256 of
# the item's group: one group per item) into train, validation (where the head's settings and
# threshold are chosen) and check; the shipped weights were not trained on them.
# Licence: Apache-2.0, as the rest of the project.
#
# Sets (psychoalign.models.safety_corpus reads them; source names retired-<set>):
#   lookalike  benign requests with alarming words (acceptable)
#   premise    stereotypes or false claims about a group (unacceptable: never agreed with)
#   harmful    harmful twins of the look-alikes (unacceptable)
# Keys under each set are the bench file's stem.
"""


def main() -> None:
    out: dict[str, dict[str, list[str]]] = {s: {} for s in SETS}
    for name in RETIRED:
        path = ROOT / "bench" / "data" / name
        loaded = yaml.safe_load(path.read_text(encoding="utf-8"))
        if not isinstance(loaded, dict):
            sys.exit(f"error: {path} is not a mapping of sets (lookalike, premise, harmful)")
        for s in SETS:
            items = [str(t).strip() for t in loaded.get(s) or [] if str(t).strip()]
            if items:
                out[s][path.stem] = items
    body = yaml.safe_dump(out, allow_unicode=True, sort_keys=False, width=1000)
    OUT.write_text(HEADER + body, encoding="utf-8")
    n = sum(len(v) for topics in out.values() for v in topics.values())
    print(f"wrote {OUT.relative_to(ROOT)}: {n} requests from {len(RETIRED)} files")


if __name__ == "__main__":
    main()
