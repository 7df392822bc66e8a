"""H1 datasets: the request/context mapping of each multi-annotator set in ../shared/data."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from psychoalign.errors import InputError
from psychoalign.experiments.studies.boundary.h1 import load_h1_dataset, split_turns

from .conftest import SHARED_DATA

DICES = SHARED_DATA / "dices_judgebench"
needs_data = pytest.mark.skipif(not DICES.exists(), reason="../shared/data is not beside the repo")


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


def _star_export(path: Path, *, with_tension: bool, n: int = 40) -> Path:
    """A STAR export (the store's JSONL shape) of a campaign that targeted PsychoAlign: the higher a
    dialogue's tension, the more its two annotators disagree (planted)."""
    rows = []
    for i in range(n):
        t = i / (n - 1)
        discordant = i % 4 < round(4 * t)  # share of discordant pairs rises with t
        rows.append(
            {
                "dialogue_id": f"d{i}",
                "status": "submitted",
                "turns": [
                    {"role": "red_teamer", "text": f"attack {i}", "tension": None, "state": None, "trace_id": None},
                    {
                        "role": "target",
                        "text": f"reply {i}",
                        "tension": t if with_tension else None,
                        "state": "healthy_equilibrium",
                        "trace_id": f"tr{i}",
                    },
                ],
                "annotator1_id": "a1",
                "annotator1_rating": 1 if discordant else 4,
                "annotator2_id": "a2",
                "annotator2_rating": 4,
            }
        )
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_star_campaign_against_psychoalign_gets_rho_of_tension_and_disagreement(tmp_path: Path) -> None:
    from psychoalign.star.analysis.data import load
    from psychoalign.star.analysis.h1 import h1_section

    data = load(_star_export(tmp_path / "campaign.jsonl", with_tension=True), "star")
    section = h1_section(data, n_boot=300, n_perm=300)
    assert section["computable"] and section["tension"] == "tension_mean"
    s = section["spearman"]
    assert s["n"] == 40 and s["rho"] > 0.5 and s["ci_low"] > 0 and s["p_permutation"] < 0.01
    assert [b["name"] for b in section["bins"]] == ["low", "medium", "high"]
    plain = load(_star_export(tmp_path / "plain.jsonl", with_tension=False), "star")
    assert h1_section(plain) == {**h1_section(plain), "computable": False}
    assert "did not target PsychoAlign" in h1_section(plain)["reason"]


def test_star_report_shows_h1_for_a_campaign_against_psychoalign(tmp_path: Path) -> None:
    from psychoalign.star.analysis import analyze, write_report
    from psychoalign.star.analysis.data import load

    data = load(_star_export(tmp_path / "campaign.jsonl", with_tension=True), "star")
    report = analyze([data], n_boot=200, embed=False)
    section = report["datasets"][data.name]["h1"]
    assert section["computable"] and section["spearman"]["rho"] > 0.5
    write_report(report, [data], tmp_path / "out")
    page = (tmp_path / "out" / "report.html").read_text()
    assert "H1: tension vs disagreement" in page and "Spearman rho(tension_mean, disagreement)" in page


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
