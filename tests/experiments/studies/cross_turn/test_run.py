"""The scripted cross-turn experiment through the harness's systems, and the cross-turn preset."""

from __future__ import annotations


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
