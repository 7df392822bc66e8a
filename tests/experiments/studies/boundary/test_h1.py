"""H1: the request/context mapping of each multi-annotator set in ../shared/data, and the H1
analysis recovering a planted relation (or none) on a synthetic world."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from psychoalign.errors import InputError
from psychoalign.experiments.studies.boundary.h1 import H1Item, analyze_h1, load_h1_dataset, split_turns
from psychoalign.experiments.studies.boundary.negotiate import ItemOutcome
from psychoalign.experiments.studies.boundary.synthetic import SyntheticWorld
from psychoalign.traces.tension import TensionDefinition
from tests.conftest import SHARED_DATA
from tests.experiments.studies.helpers import N_ITEMS

DICES = SHARED_DATA / "dices_judgebench"

needs_data = pytest.mark.needs_data("dices_judgebench", "diasafety_cc")


def test_split_turns_handles_both_dices_layouts() -> None:
    # DICES-990 separates turns with a literal backslash-n; DICES-350 with real newlines.
    assert split_turns("A: hi\\nB: hello\\nA: how do I pay him\\n") == [
        ("user", "hi"),
        ("assistant", "hello"),
        ("user", "how do I pay him"),
    ]
    assert split_turns("USER: one\nLAMDA: two\ncontinued\nUSER: three") == [
        ("user", "one"),
        ("assistant", "two\ncontinued"),
        ("user", "three"),
    ]
    assert split_turns("no speaker at all") == [("user", "no speaker at all")]


@needs_data
def test_dices_990_request_is_the_last_user_turn_and_context_the_earlier_ones() -> None:
    ds = load_h1_dataset(DICES / "dices_990.json")
    assert ds.format == "dices" and len(ds.items) == 990
    assert ds.scale == ("No", "Unsure", "Yes") and ds.positive == {2} and ds.excluded == {1}
    raw = json.loads((DICES / "dices_990.json").read_text())["instances"][0]
    first = ds.items[0]
    assert first.id == str(raw["id"])
    assert first.request == "you said jesus cost money and maybe jesus can cure me"
    assert first.context.startswith("Earlier turns of this conversation:\nUser: why is everyone getting vaccines")
    assert raw["instance"]["response"] not in first.context  # the rated response is never shown
    assert sum(first.counts) == len(raw["annotations"]["safety"]["individual_human_scores"])
    assert sum(sum(it.counts) for it in ds.items) == 72103


@needs_data
def test_dices_350_and_diasafety_load_with_every_rating() -> None:
    dices = load_h1_dataset(DICES / "dices_350_crowdsourced.json")
    assert len(dices.items) == 350 and sum(sum(it.counts) for it in dices.items) == 43050
    dia = load_h1_dataset(SHARED_DATA / "diasafety_cc" / "diasafety_cc.json")
    assert dia.format == "diasafety-cc" and len(dia.items) == 1095
    assert dia.items[0].request.startswith("I'm just gonna block you") and dia.items[0].context == ""
    assert all(sum(it.counts) <= 6 for it in dia.items)


@needs_data
def test_single_rater_files_are_refused_and_limit_samples_reproducibly(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="2 or more ratings"):
        load_h1_dataset(DICES / "dices_350_expert.json")
    a = load_h1_dataset(DICES / "dices_350_crowdsourced.json", limit=7, seed=1)
    b = load_h1_dataset(DICES / "dices_350_crowdsourced.json", limit=7, seed=1)
    assert [it.id for it in a.items] == [it.id for it in b.items] and len(a.items) == 7


def test_one_row_per_rating_files_need_a_text_column(tmp_path: Path) -> None:
    from psychoalign.star.analysis.data import mapping_from

    rows = ["item,rater,score,prompt"]
    for i in range(5):
        for r in range(4):
            rows.append(f'q{i},r{r},{1 + (i + r) % 5},"User: hello\nAssistant: hi\nUser: question {i}?"')
    path = tmp_path / "ratings.csv"
    path.write_text("\n".join(rows) + "\n")
    with_text = mapping_from(
        {"item_col": "item", "rater_col": "rater", "rating_col": "score", "scale": "1..5", "text_col": "prompt"}
    )
    ds = load_h1_dataset(path, mapping=with_text)
    assert len(ds.items) == 5 and all(sum(it.counts) == 4 for it in ds.items)
    assert ds.items[0].request == "question 0?" and "User: hello" in ds.items[0].context
    bare = mapping_from({"item_col": "item", "rater_col": "rater", "rating_col": "score", "scale": "1..5"})
    with pytest.raises(InputError, match="no text to negotiate"):
        load_h1_dataset(path, mapping=bare)


def _h1(
    world: SyntheticWorld, outcomes: list[ItemOutcome], counts_seed: int | None = None, **kw: Any
) -> dict[str, Any]:
    counts = world.counts(counts_seed)
    items = [H1Item(id=it.id, request=it.request, counts=tuple(c)) for it, c in zip(world.items(), counts, strict=True)]
    return analyze_h1(items, outcomes, scale=("safe", "unsafe"), positive=frozenset({1}), **kw)


def test_pipeline_recovers_the_planted_rho_within_its_ci(
    planted: tuple[SyntheticWorld, list[list[ItemOutcome]]],
) -> None:
    world, runs = planted
    assert all(o.status == "completed" for run in runs for o in run)
    report = _h1(world, runs[0], n_boot=1000, n_perm=1000)
    head = report["headline"]
    truth = world.population()["rho"]
    assert truth > 0.5  # the planted relation is strong, so "recovered" means something
    assert head["ci_low"] <= truth <= head["ci_high"]
    assert head["ci_low"] > 0.3 and head["p_permutation"] < 0.01
    # The T-bin view rises with T, and the top bin is clearly above the bottom one.
    bins = report["bins"]
    means = [b["outcome"]["mean"] for b in bins if b["n"]]
    assert means == sorted(means)
    assert bins[-1]["outcome"]["ci_low"] > bins[0]["outcome"]["ci_high"]
    assert report["counts"]["with_tension"] == N_ITEMS and report["counts"]["failed"] == 0
    assert set(report["definitions"]) == {d.value for d in TensionDefinition}
    assert report["points"][0]["trace_id"] == runs[0][0].trace_id


def test_pipeline_finds_rho_near_zero_when_none_is_planted(
    planted: tuple[SyntheticWorld, list[list[ItemOutcome]]],
) -> None:
    """The same negotiated items, rated by 30 independent annotation studies whose disagreement
    ignores difficulty: ρ averages ~0 and the 95 % CI covers 0 in most studies."""
    _, runs = planted
    null_world = SyntheticWorld(n_items=N_ITEMS, coupling=0.0, seed=3)
    rhos, covered = [], 0
    for k in range(30):
        head = _h1(null_world, runs[0], counts_seed=500 + k, n_boot=400, n_perm=200)["headline"]
        rhos.append(head["rho"])
        covered += head["ci_low"] <= 0.0 <= head["ci_high"]
    assert abs(float(np.mean(rhos))) < 0.06
    assert covered >= 25


def test_reverse_check_reports_the_majority_label_separately(
    planted: tuple[SyntheticWorld, list[list[ItemOutcome]]],
) -> None:
    world, runs = planted
    report = _h1(world, runs[0], n_boot=300, n_perm=200)
    rev = report["reverse_check"]
    auc = rev["auc_t_for_majority_unsafe"]
    if auc["computable"]:
        assert 0.0 <= auc["auc"] <= 1.0 and auc["n_unsafe"] + auc["n_safe"] <= N_ITEMS
    assert set(rev["rho_within_majority"]) == {"majority_safe", "majority_unsafe"}


def test_the_reverse_check_has_no_auc_when_every_tension_is_the_same() -> None:
    """All pairs tied give U / (n1 n0) = 0.5 and p = 1: a T that carries no information shown as
    a T measured at chance. It is not computable, with the reason."""
    import numpy as np

    from psychoalign.experiments.studies.boundary.h1 import _auc

    labels = np.array([True, False, True, False, False])
    flat = _auc(np.full(5, 0.25), labels, n_boot=50, seed=0)
    assert flat == {"computable": False, "reason": "every item has the same T (0.25): nothing to rank"}
    ranked = _auc(np.array([0.9, 0.1, 0.8, 0.2, 0.3]), labels, n_boot=50, seed=0)
    assert ranked["computable"] is True and ranked["auc"] == 1.0


def test_the_auc_gets_no_bootstrap_interval_on_few_items_of_a_label() -> None:
    """Two unsafe and three safe items, perfectly ranked: the bootstrap gave AUC 1.0 [1.0, 1.0], an
    interval of zero width on five items. Under MIN_AUC_CLASS items of either label: no interval."""
    import numpy as np

    from psychoalign.experiments.studies.boundary.h1 import MIN_AUC_CLASS, _auc

    labels = np.array([True, False, True, False, False])
    few = _auc(np.array([0.9, 0.1, 0.8, 0.2, 0.3]), labels, n_boot=200, seed=0)
    assert few["auc"] == 1.0 and few["ci_low"] is None and few["ci_high"] is None
    assert f"fewer than {MIN_AUC_CLASS}" in few["ci_note"]
    rng = np.random.default_rng(0)
    labels = np.array([True] * MIN_AUC_CLASS + [False] * MIN_AUC_CLASS)
    score = np.where(labels, rng.normal(1, 1, labels.size), rng.normal(0, 1, labels.size))
    enough = _auc(score, labels, n_boot=200, seed=0)
    assert enough["ci_low"] is not None and enough["ci_low"] < enough["auc"] < enough["ci_high"]
    assert "ci_note" not in enough
