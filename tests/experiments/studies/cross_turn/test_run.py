"""The scripted cross-turn experiment through the harness's systems, and the cross-turn preset."""

from __future__ import annotations

import pytest


async def test_the_harness_system_passes_the_conversation() -> None:
    """A multi-turn attack through System.respond(growing messages), with backtracking, gets the
    track; the same world without it is attacked successfully; 2-turn benign conversations are
    never touched (fewer than three earlier turns and at most one hot turn)."""
    from psychoalign.experiments.studies.cross_turn.run import simulate

    result = await simulate(n=4, seed=3)
    on, off = result["systems"]["psychoalign"], result["systems"]["psychoalign-stateless"]
    assert off["asr"]["crescendo"]["k"] == off["asr"]["crescendo"]["n"] == 4
    assert on["asr"]["crescendo"]["k"] < 4
    assert on["benign_followup_refusal"]["benign-2turn"] == off["benign_followup_refusal"]["benign-2turn"]
    assert on["turns_tightened"]["benign-2turn"]["k"] == 0
    assert all(row["k"] == 0 for row in off["turns_tightened"].values())


def test_the_cross_turn_preset_compares_the_switch_and_nothing_else() -> None:
    from psychoalign.experiments.harness.spec import load_spec

    spec = load_spec("cross-turn")
    on, off = spec.systems
    assert (on.effective_kind, off.effective_kind) == ("psychoalign", "psychoalign")
    assert on.negotiation == {} and off.negotiation == {"cross_turn": False}
    assert [b.name for b in spec.benchmarks] == ["attack-multiturn", "mt-bench-followup"]


# -- intervals: rows of the same dialogue are not independent ------------------------------------


def test_k_identical_follow_ups_per_dialogue_give_about_the_interval_of_one() -> None:
    """12 dialogues, 3 follow-ups each, every follow-up of a dialogue the same (4 dialogues refuse
    all three): the 12/36 rows say no more than 4/12 dialogues. The old row interval (Wilson on 36
    independent rows) was narrower than that; the clustered one is Wilson's on the 12 dialogues
    with the small-sample correction (CR2: 11 rows' worth, t with 11 degrees of freedom)."""
    from scipy.stats import t

    from psychoalign.experiments.harness.stats import Z95, wilson_ci
    from psychoalign.experiments.studies.cross_turn.run import rate_row

    values = [d < 4 for d in range(12) for _ in range(3)]
    dialogues = [f"d{d}" for d in range(12) for _ in range(3)]
    row = rate_row(values, dialogues)
    assert (row["k"], row["n"], row["rate"]) == (12, 36, 12 / 36)  # the point estimate is the rows'
    n_eff = 11 * (Z95 / t.ppf(0.975, 11)) ** 2
    assert row["dialogues"] == 12 and row["n_eff"] == round(n_eff, 1) and row["ci_method"] == "wilson-clustered"
    assert row["ci95"] == pytest.approx(list(wilson_ci(n_eff / 3, n_eff)), abs=1e-9)
    one = wilson_ci(4, 12)
    assert row["ci95"][0] < one[0] and row["ci95"][1] > one[1]
    naive = wilson_ci(12, 36)
    assert row["ci95"][0] < naive[0] and row["ci95"][1] > naive[1]


def test_one_row_per_dialogue_keeps_plain_wilson() -> None:
    from psychoalign.experiments.harness.stats import wilson_ci
    from psychoalign.experiments.studies.cross_turn.run import rate_row

    row = rate_row([i % 5 == 0 for i in range(40)], [f"d{i}" for i in range(40)])
    assert row["ci_method"] == "wilson" and row["n_eff"] == 40.0 and row["dialogues"] == 40
    assert row["ci95"] == list(wilson_ci(8, 40)) and "ci_note" not in row


def test_follow_ups_that_differ_only_within_dialogues_count_in_full() -> None:
    """Every dialogue refuses exactly one of its two follow-ups: the dialogues do not differ, so
    the cluster-robust variance is zero and the rows count in full (n_eff is capped at n, never
    more rows than there are)."""
    from psychoalign.experiments.harness.stats import wilson_ci
    from psychoalign.experiments.studies.cross_turn.run import rate_row

    values = [j == 0 for _ in range(20) for j in range(2)]
    dialogues = [f"d{d}" for d in range(20) for _ in range(2)]
    row = rate_row(values, dialogues)
    assert row["n_eff"] == 40.0
    assert row["ci95"] == pytest.approx(list(wilson_ci(20, 40)), abs=1e-9)


def test_fewer_than_ten_dialogues_with_repeats_get_no_interval() -> None:
    from psychoalign.experiments.studies.cross_turn.run import rate_row

    row = rate_row([True, False, False] * 9, [f"d{d}" for d in range(9) for _ in range(3)])
    assert row["k"] == 9 and row["n"] == 27 and row["dialogues"] == 9
    assert row["ci95"] == [None, None] and row["ci_method"] is None
    assert "9 dialogues" in row["ci_note"] and "fewer than 10" in row["ci_note"]


async def test_the_scripted_tables_count_each_dialogue_once() -> None:
    """sensitive-once has three benign follow-ups per dialogue: its row carries the number of
    dialogues and an interval at least as wide as the rows' Wilson; benign-2turn (one follow-up
    per dialogue) and the ASR rows (one objective per dialogue) stay plain Wilson. Point estimates
    are counts of the rows, as before."""
    from psychoalign.experiments.harness.stats import wilson_ci
    from psychoalign.experiments.studies.cross_turn.run import simulate

    n = 10
    result = await simulate(n=n, seed=0)
    for system in result["systems"].values():
        once = system["benign_followup_refusal"]["sensitive-once"]
        assert once["n"] == 3 * n and once["dialogues"] == n and once["rate"] == once["k"] / once["n"]
        assert once["ci_method"] == "wilson-clustered" and n <= once["n_eff"] <= once["n"]
        naive = wilson_ci(once["k"], once["n"])
        assert once["ci95"][0] <= naive[0] + 1e-12 and once["ci95"][1] >= naive[1] - 1e-12
        assert system["benign_followup_refusal"]["sensitive-twice"]["dialogues"] == n
        two = system["benign_followup_refusal"]["benign-2turn"]
        assert two["n"] == two["dialogues"] == n and two["ci_method"] == "wilson"
        for row in system["asr"].values():
            assert row["n"] == row["dialogues"] == n and row["ci95"] == list(wilson_ci(row["k"], row["n"]))
        for family, row in system["turns_tightened"].items():
            assert row["dialogues"] == n and row["n"] > n, family
    without = result["systems"]["psychoalign-stateless"]["benign_followup_refusal"]["sensitive-once"]
    assert without["k"] == 0 and without["n_eff"] == n  # all answered: copies taken as identical
