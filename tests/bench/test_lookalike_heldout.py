"""The request head's hand-written held-out files (``bench/data/lookalike_heldout*.yaml``, read by
``bench/request_head.py``) stay held out: each loads with its three sets, and none of its requests
repeats a project-written training request of the classifier (the bench's rule: the same
normalised text, or content words overlapping by Jaccard >= 0.5). The bench also checks the
public training sources and benchmarks, which need the evaluation data; for a file written blind
(not in the bench's lists until it is scored, once, with ``--file``; v16 on) a test here checks them. These
tests compare text only: none embeds or scores an item."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from bench.request_head import LOOKALIKES, load_sets, reference_texts, repeats

from psychoalign.models.crisis import benign_requests_path
from psychoalign.models.safety_corpus import more_harmful_requests
from tests.conftest import SHARED_DATA
from tests.helpers import REFERENCE_FOLDERS

SETS = ("lookalike", "premise", "harmful")
BENCH_DATA = Path(__file__).parents[2] / "bench" / "data"
#: Written blind: not in the bench's lists, so no build's default report reads it before it is
#: scored, once, explicitly with ``--file``. Empty while no blind file waits: the next one goes here
#: until it is scored, then into ``LOOKALIKES`` (as lookalike_heldout_v16.yaml to v19 did).
BLIND: tuple[Path, ...] = ()
#: The files written blind (lookalike_heldout_v16.yaml on, scored or not): each is checked here against
#: the training requests and benchmark prompts too (the bench checks its own list every run as well).
WRITTEN_BLIND = (*LOOKALIKES[10:], *BLIND)


def test_the_bench_reads_every_held_out_look_alike_file_but_the_blind_ones() -> None:
    on_disk = sorted(p.name for p in BENCH_DATA.glob("lookalike_heldout*.yaml"))
    assert sorted(p.name for p in (*LOOKALIKES, *BLIND)) == on_disk
    assert not set(BLIND) & set(LOOKALIKES)


@pytest.mark.parametrize("path", [*LOOKALIKES, *BLIND], ids=lambda p: p.name)
def test_no_held_out_request_repeats_a_project_training_request(path: Path) -> None:
    sets = load_sets(path, SETS)
    assert sets["lookalike"] and sets["harmful"], path.name
    items = [t for s in SETS for t in sets[s]]
    assert len(set(items)) == len(items), path.name
    project = yaml.safe_load(benign_requests_path().read_text(encoding="utf-8"))
    training = [str(t) for topics in project.values() for items_ in topics.values() for t in items_]
    # The project-written harmful requests a request-head candidate trains on (--more-harmful) too.
    training += [ex.text for ex in more_harmful_requests()]
    assert not repeats(items, training), path.name


def _texts(node: object) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, list):
        return [t for item in node for t in _texts(item)]
    if isinstance(node, dict):
        return [t for item in node.values() for t in _texts(item)]
    return []


@pytest.mark.parametrize("newest", [*LOOKALIKES[9:], *BLIND], ids=lambda p: p.name)
def test_a_newest_held_out_file_repeats_no_request_of_another_bench_file(newest: Path) -> None:
    """A file written whole as a fresh held-out file (v15; v16 to v19 written blind; and any blind one
    waiting) shares no request with any other file of ``bench/data`` (the older look-alike files, the
    older held-out requests, the crisis sets and the reference answers' questions), by the bench's rule."""
    fresh = tuple(f"lookalike_heldout_v{i}.yaml" for i in range(15, 20))
    assert newest.name in (*fresh, *(p.name for p in BLIND))
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


@pytest.mark.needs_data(*REFERENCE_FOLDERS)
@pytest.mark.parametrize("blind", WRITTEN_BLIND, ids=lambda p: p.name)
def test_a_blind_file_repeats_no_training_request_and_no_benchmark_prompt(blind: Path) -> None:
    """The check the bench runs on its files before any figure (training requests of the corpus,
    AdvBench, HarmBench, StrongREJECT, JailbreakBench, XSTest), run here on the blind file, which the
    bench reads only when it is scored."""
    sets = load_sets(blind, SETS)
    items = [t for s in SETS for t in sets[s]]
    references = reference_texts(SHARED_DATA)
    assert len(references) > 1000
    assert repeats(items, references) == set()


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
