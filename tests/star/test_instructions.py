"""STAR policy, parameter space, instruction generation and coverage."""

from __future__ import annotations

import gc
import json
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from psychoalign.errors import InputError
from psychoalign.star import PolicyError, coverage, generate_instructions, instructions, load_parameters, load_policy
from tests.cli.test_main import cli

POLICY = load_policy()
SPACE = load_parameters()


def test_builtin_policy_has_the_papers_areas_and_rules() -> None:
    assert {"dangerous", "misinformation", "sexual"} <= {a.id for a in POLICY.areas}
    rules = {r.id: r for r in POLICY.rules()}
    for rule in (
        "hate-speech",
        "harassment",
        "stereotypes",
        "dangerous-activities",
        "misinformation",
        "medical-advice",
        "sexually-explicit",
    ):
        assert rule in rules
    assert rules["medical-advice"].matching == "medical"
    assert rules["misinformation"].matching == "fact_checking"
    assert rules["hate-speech"].targets_group and rules["hate-speech"].matching == "demographic"


def test_hate_speech_is_not_filed_under_misinformation() -> None:
    """Red teamers read a rule's area beside it, and the report groups by area: hate speech and
    stereotypes are in an area that names them, never one about misinformation."""
    for rule in ("hate-speech", "stereotypes"):
        area = next(a for a in POLICY.areas if rule in {r.id for r in a.rules})
        assert area.id == "hate" and "misinform" not in area.text.casefold()
        (item,) = generate_instructions(POLICY, SPACE, 1, seed=1, rules=[rule])
        assert item.area == "hate" and item.record()["area"] == "hate"
        assert f"(area: {area.text})" in item.text and "misinform" not in item.text.casefold()
    (item,) = generate_instructions(POLICY, SPACE, 1, seed=1, rules=["misinformation"])
    assert item.area == "misinformation" and "misinform" in item.text


def test_the_instruction_counts_messages_as_the_page_does() -> None:
    """The red-teaming page counts the red teamer's messages: the instruction asks for messages too."""
    (item,) = generate_instructions(POLICY, SPACE, 1, seed=1)
    assert "10 to 15 messages" in item.text and "turns" not in item.text


def test_target_groups_follow_appendix_d() -> None:
    groups = SPACE.target_group.groups()  # type: ignore[union-attr]
    singles = [g for g in groups if len(g) == 1]
    pairs = [g for g in groups if len(g) == 2]
    assert len(singles) == 4 + 3
    assert len(pairs) == 4 * 2
    assert all(p["gender"] in ("Female", "Male") for p in pairs)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 3000), seed=st.integers(0, 2**31), flat=st.booleans())
def test_quotas_are_even(n: int, seed: int, flat: bool) -> None:
    items = generate_instructions(POLICY, SPACE, n, seed=seed, balance="flat" if flat else "hierarchical")
    assert len(items) == n
    report = coverage(POLICY, SPACE, items)
    if flat:
        assert report.max_planned - report.min_planned <= 1
    else:
        per_rule = Counter(i.rule for i in items)
        assert max(per_rule.values()) - min(per_rule.values()) <= 1 or n < len(POLICY.rules())
        for lo, hi in report.per_rule.values():
            assert hi - lo <= 1
    assert len({i.id for i in items}) == n


def test_large_plan_covers_every_cell_evenly() -> None:
    items = generate_instructions(POLICY, SPACE, len(POLICY.rules()) * 180 * 3, seed=1)
    report = coverage(POLICY, SPACE, items)
    assert report.uncovered_cells == 0
    for rule, (lo, hi) in report.per_rule.items():
        assert hi / lo <= 1.0 + 1e-9 or hi - lo == 1, rule
    group_rules = [i for i in items if i.rule == "hate-speech"]
    assert Counter(i.params["adversariality"] for i in group_rules) == {"low": 180, "medium": 180, "high": 180}


def test_deterministic_under_seed_and_different_across_seeds() -> None:
    a = [i.record() for i in generate_instructions(POLICY, SPACE, 200, seed=7)]
    b = [i.record() for i in generate_instructions(POLICY, SPACE, 200, seed=7)]
    c = [i.record() for i in generate_instructions(POLICY, SPACE, 200, seed=8)]
    assert a == b
    assert a != c


def test_records_have_every_parameter_as_a_field() -> None:
    item = next(i for i in generate_instructions(POLICY, SPACE, 100, seed=2, rules=["hate-speech"]) if i.target_group)
    row = item.record()
    for key in ("rule", "area", "adversariality", "use_case", "topic", "target_group", "text", "cell"):
        assert key in row
    assert row["target_group"] in row["text"]
    assert row["adversariality"] in row["text"]


def test_topics_mix_free_choice_and_suggestions() -> None:
    items = generate_instructions(POLICY, SPACE, 2000, seed=3)
    free = sum(1 for i in items if i.sampled["topic"] is None)
    assert 0.4 < free / len(items) < 0.6  # free_choice_share 0.5
    assert "your free choice" in next(i.text for i in items if i.sampled["topic"] is None)


def test_parameters_are_data_caste_and_age(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(
        "max_parameters: 6\n"
        "parameters:\n"
        "  - {name: adversariality, values: [low, high]}\n"
        "  - {name: language, values: [Hindi, Tamil]}\n"
        "  - {name: age, values: [teen, adult, senior]}\n"
        "target_group:\n"
        "  dimensions:\n"
        "    caste: [Dalit, Brahmin]\n"
    )
    space = load_parameters(path)
    items = generate_instructions(POLICY, space, 700, seed=0)
    hate = [i for i in items if i.rule == "hate-speech"]
    assert {i.target_group["caste"] for i in hate if i.target_group} == {"Dalit", "Brahmin"}  # type: ignore[index]
    assert {i.params["language"] for i in items} == {"Hindi", "Tamil"}
    assert "Language: Hindi." in next(i.text for i in items if i.params["language"] == "Hindi")
    report = coverage(POLICY, space, items)
    own = {r.id: len(r.parameters[0].values) if r.parameters else 1 for r in POLICY.rules()}  # rule parameters
    assert report.cells == sum(2 * 2 * 3 * own[r.id] * (2 if r.targets_group else 1) for r in POLICY.rules())


def test_too_many_parameters_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "params.yaml"
    path.write_text(
        "max_parameters: 3\nparameters:\n  - {name: a, values: [x]}\n  - {name: b, values: [y]}\n"
        "  - {name: c, values: [z]}\n"
    )
    with pytest.raises(PolicyError, match="exceed max_parameters=3"):
        load_parameters(path)


def test_invalid_policy_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "name: p\nversion: '1.0'\nareas:\n  - id: a\n    text: area\n    rules:\n"
        "      - id: r1\n        text: a rule\n        matching: psychic\n"
    )
    with pytest.raises(PolicyError, match=rf"{path}:9: areas.0.rules.0.matching"):
        load_policy(path)
    path.write_text(
        "name: p\nversion: '1.0'\nareas:\n  - id: a\n    text: x\n    rules:\n      - id: r\n"
        "        text: rule\n        targets_group: true\n"
    )
    with pytest.raises(PolicyError, match="matching: demographic"):
        load_policy(path)


def test_bad_requests_are_refused() -> None:
    with pytest.raises(InputError, match="unknown rule") as caught:
        generate_instructions(POLICY, SPACE, 10, rules=["nope"])
    assert caught.value.hint is not None and all(r.id in caught.value.hint for r in POLICY.rules())
    with pytest.raises(InputError, match="between 1 and 100000"):
        generate_instructions(POLICY, SPACE, 0)
    # `star instructions generate --n 99999999999999999999` used to run until memory ran out
    with pytest.raises(InputError, match=r"between 1 and 100000 \(got 100000000000000000000\)"):
        generate_instructions(POLICY, SPACE, 10**20)


def test_generation_leaves_the_garbage_collector_as_it_found_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """The collector is paused while a batch is built: it is back on afterwards if it was on, stays
    off if the caller had turned it off, and is put back when generation fails."""
    assert gc.isenabled()
    try:
        generate_instructions(POLICY, SPACE, 30, seed=2)
        assert gc.isenabled()
        gc.disable()
        generate_instructions(POLICY, SPACE, 30, seed=2)
        assert not gc.isenabled()
        gc.enable()

        def fail(*_: object) -> str:
            raise RuntimeError("render failed")

        monkeypatch.setattr(instructions._CellText, "render", fail)
        with pytest.raises(RuntimeError, match="render failed"):
            generate_instructions(POLICY, SPACE, 30, seed=2)
        assert gc.isenabled()
    finally:
        gc.enable()


def test_coverage_counts_done() -> None:
    items = generate_instructions(POLICY, SPACE, 50, seed=1, rules=["medical-advice"])
    report = coverage(POLICY, SPACE, items, done_ids=[items[0].id, items[1].id, "unknown"])
    assert report.done == 2
    assert report.cells == 12


def test_cli_generate_and_coverage(tmp_path: Path) -> None:
    out = tmp_path / "i.jsonl"
    r = cli("star", "instructions", "generate", "--n", "120", "--seed", "5", "--out", str(out))
    assert r.returncode == 0, r.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 120 and all("text" in row and "rule" in row for row in rows)
    done = tmp_path / "done.jsonl"
    done.write_text("\n".join(json.dumps({"instruction_id": row["id"]}) for row in rows[:10]))
    cov = cli("star", "coverage", "--plan", str(out), "--done", str(done), "--json")
    assert cov.returncode == 0, cov.stderr
    report = json.loads(cov.stdout)
    assert report["planned"] == 120 and report["done"] == 10
    show = cli("star", "policy", "show", "--json")
    assert len(json.loads(show.stdout)["sha256"]) == 64
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1}\n')
    err = cli("star", "coverage", "--plan", str(bad))
    assert err.returncode != 0 and f"{bad}:1" in err.stderr


def test_builtin_policy_covers_the_main_taxonomy_categories() -> None:
    """Issue #10 item 16: privacy, cybercrime, non-violent crime and fraud, self-harm and
    specialised legal/financial advice each have a rule with parameters, mapped to HarmBench and
    Do-Not-Answer categories."""
    rules = {r.id: r for r in POLICY.rules()}
    for rule_id in ("privacy", "cybercrime", "fraud-and-crime", "self-harm", "legal-advice", "financial-advice"):
        assert rules[rule_id].parameters, rule_id
        assert rules[rule_id].taxonomies, rule_id
    assert rules["legal-advice"].matching == "legal" and rules["financial-advice"].matching == "financial"
    harmbench = {c for r in POLICY.rules() for c in r.taxonomies.get("harmbench", ())}
    # every HarmBench semantic category except copyright (out of scope: not an ethical/social harm)
    assert harmbench == {
        "chemical_biological",
        "harmful",
        "harassment_bullying",
        "cybercrime_intrusion",
        "illegal",
        "misinformation_disinformation",
    }
    dna = {c.split(" (")[0] for r in POLICY.rules() for c in r.taxonomies.get("do_not_answer", ())}
    assert len(dna) >= 11  # Do-Not-Answer's 12 harm types, all but "Treat chatbot as a human"


def test_rule_parameters_are_balanced_and_rendered() -> None:
    items = generate_instructions(POLICY, SPACE, 720, seed=4, rules=["privacy"])
    report = coverage(POLICY, SPACE, items, rules=["privacy"])
    assert report.cells == 12 * 6 and report.uncovered_cells == 0 and report.max_planned - report.min_planned <= 1
    values = {i.params["personal_data"] for i in items}
    assert values == set(POLICY.rule("privacy").parameters[0].values)
    assert all(f"Personal data: {i.params['personal_data']}." in i.text for i in items)
    assert all("personal_data" in i.record() for i in items)


def test_rule_parameters_are_checked_against_the_space(tmp_path: Path) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "name: p\nversion: '1.0'\nareas:\n  - id: a\n    text: A\n    rules:\n"
        "      - id: r\n        text: rule text\n        parameters:\n          - {name: use_case, values: [x]}\n"
    )
    with pytest.raises(InputError, match="clash"):
        generate_instructions(load_policy(path), SPACE, 3, seed=1)
    path.write_text(
        "name: p\nversion: '1.0'\nareas:\n  - id: a\n    text: A\n    rules:\n"
        "      - id: r\n        text: rule text\n        parameters:\n          - {name: x1, values: [x]}\n"
        "          - {name: x2, values: [y]}\n"
    )
    with pytest.raises(InputError, match="max_parameters"):
        generate_instructions(load_policy(path), SPACE, 3, seed=1)
