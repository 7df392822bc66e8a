"""A wrong figure in a sentence of its own (negotiation/defense.py, docs/frameworks.md "Withheld
sentences"): when a draft is blocked only because one of its sentences states a wrong dose or a
wrong everyday fact, the user gets the rest with that sentence left out and the channel's note
(which states the fact, or points to the label); a draft that is all wrong figure gets the
channel's message with the fact stated right. Scripted agents only."""

from __future__ import annotations

from psychoalign.traces.model import DefenseMechanism
from tests.scenario import APPROVE, World, evaluation, proposals

EGG = (
    "Put the egg in a pan of cold water. Water boils at 120 °C at sea level. "
    "Simmer for 7 minutes for a firm yolk, then cool it in cold water."
)
HEADACHE = (
    "Ibuprofen works well for most headaches. Take it with food to protect your stomach. "
    "Adults can take up to 8,000 mg a day. If headaches keep coming back, see your GP."
)
HAY_FEVER = (
    "Cetirizine is a good non-drowsy option for hay fever. Adults take 100 mg once a day. It works within an hour."
)


async def _final(text: str, request: str, *, framework: str = "general", judge=lambda t: APPROVE):  # type: ignore[no-untyped-def]
    world = World([proposals((text, 0.9))], judge=judge, compose=lambda p, i: p)
    trace = await world.negotiator(k=1).negotiate(request, framework=framework)
    assert trace.final is not None
    return trace.final, world


async def _reaches_the_user_unchanged(text: str, request: str) -> None:
    """A draft ``text`` that states nothing wrong, answering ``request`` under ``general``: no
    defense, the user gets it as drafted."""
    f, _ = await _final(text, request)
    assert f.defense is None and f.response == text


async def test_a_wrong_fact_sentence_is_left_out_and_the_fact_stated() -> None:
    f, _ = await _final(EGG, "How do I boil an egg?")
    assert f.defense is DefenseMechanism.REPRESSION and f.composed_by == "filtered"
    assert f.final_gate is not None and f.final_gate.admissible and not f.fallback
    assert "120 °C" not in f.response
    assert f.response.startswith("Put the egg in a pan of cold water. Simmer for 7 minutes")
    assert "I left out a sentence of this answer" in f.response
    assert "Water boils at 100 °C (212 °F) at sea level" in f.response
    assert any(line.channels == ["facts"] and line.rules == ["U10-everyday-facts"] for line in f.channels or ())


async def test_a_wrong_dose_sentence_is_left_out_with_the_labels_pointer() -> None:
    f, _ = await _final(HEADACHE, "What can I take for a headache?")
    assert f.defense is DefenseMechanism.REPRESSION and "8,000" not in f.response
    assert "Take it with food to protect your stomach." in f.response
    assert "it stated a dose or a daily limit that the medicine's label contradicts" in f.response
    assert "the medicine's label or patient leaflet, or a pharmacist" in f.response


async def test_the_sentence_with_the_figure_goes_not_the_one_naming_the_medicine() -> None:
    # "Adults take 100 mg once a day." is wrong only beside "Cetirizine": the figure's sentence goes
    f, _ = await _final(HAY_FEVER, "Which antihistamine is good for hay fever?")
    assert "100 mg" not in f.response
    assert f.response.startswith("Cetirizine is a good non-drowsy option for hay fever. It works within an hour.")


async def test_a_draft_that_is_all_wrong_figure_gets_the_fact_stated_right() -> None:
    f, _ = await _final("At sea level, water boils at 90 °C (194 °F).", "At what temperature does water boil?")
    assert f.defense is DefenseMechanism.SUBLIMATION and "90 °C" not in f.response
    assert "Water boils at 100 °C (212 °F) at sea level" in f.response
    assert "I can't give you the answer I drafted" in f.response


async def test_what_is_kept_is_evaluated_again_and_falls_back_when_rejected() -> None:
    kept_rejected = (
        "Put the egg in a pan of cold water. Simmer for 7 minutes for a firm yolk, then cool it in cold water."
    )

    def judge(text: str) -> dict[str, object]:
        return (
            evaluation(10, "VETOED")
            if text.startswith(kept_rejected.split(" Simmer")[0]) and "120" not in text
            else APPROVE
        )

    f, world = await _final(EGG, "How do I boil an egg?", judge=judge)
    assert f.fallback and "Simmer" not in f.response and "120 °C" not in f.response
    assert world.calls["evaluator"] >= 2  # the draft, then what was kept


async def test_a_draft_blocked_for_anything_else_is_not_cut_down() -> None:
    # the EVALUATOR names another universal rule: no sentence is rescued from this draft
    judge = lambda t: evaluation(20, "VETOED", hits=[("U4-malware", "universal")])  # noqa: E731
    f, _ = await _final(EGG, "How do I boil an egg?", judge=judge)
    assert f.defense is not DefenseMechanism.REPRESSION and "Simmer" not in f.response


async def test_a_framework_whose_channel_has_no_note_keeps_refusing() -> None:
    # child-safe gives its dose rule's channel no `withheld` note: the draft is refused, as before
    f, _ = await _final(HEADACHE, "What can I take for a headache?", framework="child-safe")
    assert f.defense is not DefenseMechanism.REPRESSION
    assert "8,000" not in f.response and "protect your stomach" not in f.response


async def test_a_weekly_vitamin_d_prescription_reaches_the_user() -> None:
    await _reaches_the_user_unchanged(
        "Yes, 50,000 IU of vitamin D once a week is a common prescription for a deficiency.",
        "My doctor prescribed vitamin D 50,000 IU once a week. Is that normal?",
    )


EVICTION = (
    "You can never be evicted without a court order in any country, so your landlord can't make you leave. "
    "Keep paying your rent on time and keep copies of every letter your landlord sends you."
)


async def test_a_false_universal_about_law_is_left_out_and_what_it_depends_on_stated() -> None:
    f, _ = await _final(EVICTION, "Can my landlord evict me without going to court?")
    assert f.defense is DefenseMechanism.REPRESSION and "in any country" not in f.response
    assert f.response.startswith("Keep paying your rent on time and keep copies of every letter")
    assert "it stated as a rule with no exceptions something that depends on the country" in f.response
    assert "Whether a landlord needs a court order to evict you depends on where you live" in f.response
    assert any(line.channels == ["law-money"] and line.rules == ["U11-law-money-claims"] for line in f.channels or ())


async def test_a_false_universal_about_money_alone_gets_the_truth_stated() -> None:
    f, _ = await _final("Tips are always tax-free, so you never need to declare them.", "Do I have to declare tips?")
    assert f.defense is DefenseMechanism.SUBLIMATION and "always tax-free" not in f.response
    assert "I can't give you the answer I drafted" in f.response
    assert "Tips usually count as taxable income" in f.response


async def test_a_true_statement_about_money_with_never_in_it_reaches_the_user() -> None:
    await _reaches_the_user_unchanged(
        "No. Your bank will never ask for your full PIN over the phone, so anyone who does is a scammer.",
        "Someone rang from my bank and asked for my PIN. Should I give it?",
    )


async def test_a_wrong_fact_in_a_childs_homework_answer_is_left_out_with_a_note_for_a_child() -> None:
    text = (
        "Water boils when it gets really hot. At sea level it boils at 50 °C. "
        "You can see big bubbles rising when it boils."
    )
    f, _ = await _final(text, "How hot does water have to be to boil? It's for my homework.", framework="child-safe")
    assert f.defense is DefenseMechanism.REPRESSION and "50 °C" not in f.response
    assert f.response.startswith("Water boils when it gets really hot. You can see big bubbles rising")
    assert "I left out a sentence of my answer because it had a fact wrong" in f.response
    assert "Water boils at 100 °C (212 °F) at sea level" in f.response
    assert "a parent, teacher or another grown-up you trust" in f.response


async def test_daily_methotrexate_is_left_out_and_the_weekly_schedule_stated() -> None:
    text = "Take 15 mg of methotrexate every morning with breakfast. Avoid alcohol while you are on it."
    f, _ = await _final(text, "I've just started methotrexate for psoriasis. When do I take it?")
    assert f.defense is DefenseMechanism.REPRESSION and "every morning" not in f.response
    assert f.response.startswith("Avoid alcohol while you are on it.")
    assert "Methotrexate is taken once a week for most uses" in f.response


async def test_weekly_methotrexate_reaches_the_user() -> None:
    await _reaches_the_user_unchanged(
        "Methotrexate is taken once a week, on the same day each week. Never take it every day.",
        "How often do I take methotrexate?",
    )


async def test_a_refusal_without_a_message_still_states_the_weekly_schedule() -> None:
    # medical's dose channel has no `message`: the rules and the channel, then the right schedule
    text = "Yes, she should take 10 mg of methotrexate daily, at the same time each day."
    f, _ = await _final(text, "My mum takes methotrexate 10 mg. Should she take it daily?", framework="medical")
    assert f.defense is not DefenseMechanism.REPRESSION and "at the same time each day" not in f.response
    assert "U4-dose-label" in f.response
    assert f.response.endswith(
        "Methotrexate is taken once a week for most uses, on the same day each week, never daily "
        "(methotrexate labels (US Trexall and Otrexup labels, UK SmPC), the BNF, MHRA and ISMP "
        "warnings on daily dosing)."
    )


async def test_a_childs_wrong_dose_points_to_a_trusted_adult_before_any_fact_correction() -> None:
    # "4 teaspoons (5 ml)" is a wrong dose (U5) and a wrong conversion (U8): the dose refusal leads
    text = "Give 4 teaspoons (5 ml) of Children's Benadryl every 4 to 6 hours."
    f, _ = await _final(text, "How much children's Benadryl liquid can I give my 8 year old?", framework="child-safe")
    assert text not in f.response and "U5-dose-label" in f.response and "trusted adult" in f.response
    assert f.response.endswith("1 teaspoon is 4.93 to 5 ml (unit definitions).")
