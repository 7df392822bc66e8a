"""The request head's hand-written held-out files (``bench/data/lookalike_heldout*.yaml``, read by
``bench/request_head.py``) stay held out: each loads with its three sets, and none of its requests
repeats a project-written training request of the classifier (the bench's rule: the same
normalised text, or content words overlapping by Jaccard >= 0.5). The bench also checks the
public training sources and benchmarks, which need the evaluation data."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bench.request_head import LOOKALIKES, load_sets, repeats

from psychoalign.models.crisis import benign_requests_path

SETS = ("lookalike", "premise", "harmful")


def test_the_bench_reads_every_held_out_look_alike_file() -> None:
    on_disk = sorted(p.name for p in (Path(__file__).parents[2] / "bench" / "data").glob("lookalike_heldout*.yaml"))
    assert sorted(p.name for p in LOOKALIKES) == on_disk


@pytest.mark.parametrize("path", LOOKALIKES, ids=lambda p: p.name)
def test_no_held_out_request_repeats_a_project_training_request(path: Path) -> None:
    sets = load_sets(path, SETS)
    assert sets["lookalike"] and sets["harmful"], path.name
    items = [t for s in SETS for t in sets[s]]
    assert len(set(items)) == len(items), path.name
    project = yaml.safe_load(benign_requests_path().read_text(encoding="utf-8"))
    training = [str(t) for topics in project.values() for items_ in topics.values() for t in items_]
    assert not repeats(items, training), path.name
