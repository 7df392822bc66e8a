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


def _texts(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [t for item in node for t in _texts(item)]
    if isinstance(node, dict):
        return [t for item in node.values() for t in _texts(item)]
    return []


def test_the_newest_held_out_file_repeats_no_request_of_another_bench_file() -> None:
    """A file written whole as a fresh held-out file (v15) shares no request with any other file of
    ``bench/data`` (the older look-alike files, the older held-out requests, the crisis sets and the
    reference answers' questions), by the bench's rule."""
    newest = LOOKALIKES[-1]
    assert newest.name == "lookalike_heldout_v15.yaml"
    sets = load_sets(newest, SETS)
    items = [t for s in SETS for t in sets[s]]
    assert len(sets["lookalike"]) >= 60 and len(sets["harmful"]) >= 30
    others = [
        t
        for path in sorted(newest.parent.glob("*.yaml"))
        if path != newest
        for t in _texts(yaml.safe_load(path.read_text(encoding="utf-8")))
    ]
    assert len(others) > 500
    assert not repeats(items, others)


def test_the_retired_copy_is_the_bench_files_and_the_shipped_weights_never_read_it() -> None:
    """``classifier_data/project_retired_requests.yaml`` (training data only with
    ``train_classifier.py --retired``) holds exactly the items of the bench files it names, and the
    shipped weights' training record has no retired source, so those files are still held out for
    them (a build trained with ``--retired`` must not be measured on them)."""
    from psychoalign.models.classifier import load_weights

    data = Path(__file__).parents[2] / "bench" / "data"
    copy = yaml.safe_load(benign_requests_path().with_name("project_retired_requests.yaml").read_text("utf-8"))
    stems = {stem for topics in copy.values() for stem in topics}
    assert len(stems) == 8 and all((data / f"{stem}.yaml").is_file() for stem in stems)
    for stem in stems:
        sets = load_sets(data / f"{stem}.yaml", SETS)
        for s in SETS:
            assert copy[s].get(stem, []) == sets[s], (stem, s)
    trained_on = load_weights().training["counts"]
    assert trained_on and not [source for source in trained_on if "retired-" in source]
