"""The crisis check's hand-written held-out sets (bench/data/crisis_heldout.yaml to
crisis_heldout_v9.yaml, reported by ``bench/request_head.py --crisis``, and any file in ``BLIND``,
written blind and scored only with its ``--file``) stay held out: each loads, keeps both sides, none
of its texts is a training text of the check (an exemplar, or a request of ``project_requests.yaml``,
whose benign requests it trains on), a later file repeats neither an exemplar nor an item of an
earlier file, even in other words (the bench's rule: content words overlapping by Jaccard >= 0.5),
and a file written blind (v9 on) repeats no training request or benchmark prompt either (with the
evaluation data). These tests compare text only: none embeds or scores an item."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest
import yaml
from bench.request_head import CRISIS_HELDOUTS, reference_texts, repeats

from psychoalign.models.crisis import benign_requests_path, exemplars
from tests.conftest import SHARED_DATA
from tests.helpers import REFERENCE_FOLDERS

BENCH_DATA = Path(__file__).parents[2] / "bench" / "data"
#: Written blind: not in the bench's lists, so no build's default report reads it before it is
#: scored, once, explicitly with ``--crisis --file``. Empty while no blind file waits: the next one
#: goes here until it is scored, then into ``CRISIS_HELDOUTS`` (as crisis_heldout_v9.yaml to v13 did).
BLIND: tuple[Path, ...] = ()
#: The bench's files, then the blind ones.
HELDOUTS = (*CRISIS_HELDOUTS, *BLIND)
#: The files written blind (crisis_heldout_v9.yaml on, scored or not): each is checked against the
#: training requests and benchmark prompts too.
WRITTEN_BLIND = (*CRISIS_HELDOUTS[8:], *BLIND)
#: No blind file waits: the tests of one skip (the mechanism stays for the next).
NO_BLIND = pytest.mark.skip(reason="no blind crisis file waits to be scored (BLIND is empty)")


def _key(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


@pytest.mark.parametrize("heldout", HELDOUTS, ids=lambda p: p.name)
def test_the_held_out_set_has_both_sides_and_no_duplicates(heldout: Path) -> None:
    data = yaml.safe_load(heldout.read_text(encoding="utf-8"))
    assert set(data) == {"crisis", "benign"}
    for side in ("crisis", "benign"):
        texts = [str(t) for t in data[side]]
        assert len(texts) >= 40, side
        assert len({_key(t) for t in texts}) == len(texts), side


@pytest.mark.parametrize("heldout", HELDOUTS, ids=lambda p: p.name)
def test_no_held_out_text_is_an_exemplar(heldout: Path) -> None:
    data = yaml.safe_load(heldout.read_text(encoding="utf-8"))
    held = {_key(str(t)) for side in ("crisis", "benign") for t in data[side]}
    assert not held & {_key(e.text) for e in exemplars()}  # the bench also drops near repeats


@pytest.mark.parametrize("heldout", HELDOUTS, ids=lambda p: p.name)
def test_no_held_out_text_is_a_project_request(heldout: Path) -> None:
    data = yaml.safe_load(heldout.read_text(encoding="utf-8"))
    held = {_key(str(t)) for side in ("crisis", "benign") for t in data[side]}
    project = yaml.safe_load(benign_requests_path().read_text(encoding="utf-8"))
    texts = {_key(str(t)) for topics in project.values() for items in topics.values() for t in items}
    assert not held & texts  # the bench also drops near repeats


def _texts(value: object) -> list[str]:
    """Every request string in a bench file's lists (items may be strings, ``{q: ...}`` or, in the
    outcome probes, ``{request: ...}`` beside the answers and patterns that judge it)."""
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [str(v.get("q", v.get("request", ""))) if isinstance(v, dict) else str(v) for v in value]
    return []


def test_no_training_exemplar_repeats_a_request_of_any_bench_file() -> None:
    """Every held-out file under bench/data measures something (this check, the request head, the
    useful answers): no exemplar the check trains on may repeat one of its requests (the bench's
    rule: the same normalised text, or content words overlapping by Jaccard >= 0.5). Left out: the
    held-out answers files (their requests are counted by the answers bench, below) and the outcome
    probes, development data for the framework's checks that no crisis-check figure is read on (a
    probe asking a child's paracetamol dose reads like a medicine look-alike the check trains on)."""
    held = [
        t
        for path in sorted(BENCH_DATA.glob("*.yaml"))
        if not path.name.startswith(("answers_heldout", "outcome_probes"))
        for t in _texts(yaml.safe_load(path.read_text("utf-8")))
    ]
    assert len(held) > 500
    assert repeats([e.text for e in exemplars() if not e.held_out], held) == set()


@pytest.mark.needs_data
def test_a_held_out_answers_file_counts_its_requests_that_repeat_a_crisis_exemplar() -> None:
    """A held-out answers file (``answers_heldout*.yaml``, left out above) measures answers; the
    requests beside them are their context and may repeat a request the crisis check trains on. The
    answers bench counts those among the requests that repeat a training request and reports them
    (they make its whole-verdict figures partly in sample), so its training requests hold every
    exemplar the check trains on."""
    from bench.response_head import training_texts

    _, requests = training_texts(SHARED_DATA)
    assert {e.text for e in exemplars() if not e.held_out} <= set(requests)


@pytest.mark.parametrize("index", range(2, len(HELDOUTS)), ids=lambda i: HELDOUTS[i].name)
def test_a_later_held_out_file_repeats_no_exemplar_and_no_earlier_item(index: int) -> None:
    """From crisis_heldout_v3.yaml on, a held-out file is fresh: none of its items is a near repeat
    of any exemplar (held-out fold included), of a project request, or of an earlier held-out file's item."""
    data = yaml.safe_load(HELDOUTS[index].read_text(encoding="utf-8"))
    items = [str(t) for side in ("crisis", "benign") for t in data[side]]
    earlier = [
        str(t)
        for path in HELDOUTS[:index]
        for side in ("crisis", "benign")
        for t in yaml.safe_load(path.read_text(encoding="utf-8"))[side]
    ]
    project = yaml.safe_load(benign_requests_path().read_text(encoding="utf-8"))
    requests = [str(t) for topics in project.values() for texts in topics.values() for t in texts]
    assert len(earlier) >= 150
    assert repeats(items, [*earlier, *(e.text for e in exemplars()), *requests]) == set()


@pytest.mark.parametrize("blind", BLIND or [pytest.param(None, marks=NO_BLIND, id="none")], ids=lambda p: p.name)
def test_a_blind_file_is_not_in_the_bench_lists(blind: Path) -> None:
    """A blind file is read by no build's default report before it is scored."""
    assert blind.is_file() and blind not in CRISIS_HELDOUTS


def test_every_crisis_file_on_disk_is_in_the_bench_list_or_blind() -> None:
    """A crisis file is either read by the bench or waiting blind, never both, never neither."""
    on_disk = sorted(p.name for p in BENCH_DATA.glob("crisis_heldout*.yaml"))
    assert sorted(p.name for p in HELDOUTS) == on_disk
    assert not set(BLIND) & set(CRISIS_HELDOUTS)
    assert CRISIS_HELDOUTS[8].name == "crisis_heldout_v9.yaml"  # the first written blind


@pytest.mark.needs_data(*REFERENCE_FOLDERS)
@pytest.mark.parametrize("blind", WRITTEN_BLIND, ids=lambda p: p.name)
def test_a_blind_file_repeats_no_training_request_and_no_benchmark_prompt(blind: Path) -> None:
    """The bench's own check on its look-alike files (training requests of the corpus, AdvBench,
    HarmBench, StrongREJECT, JailbreakBench, XSTest), applied to each crisis file written blind."""
    data = yaml.safe_load(blind.read_text(encoding="utf-8"))
    items = [str(t) for side in ("crisis", "benign") for t in data[side]]
    references = reference_texts(SHARED_DATA)
    assert len(references) > 1000
    assert repeats(items, references) == set()
