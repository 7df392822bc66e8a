"""A framework file's twins (frameworks/_channel_twins.py, checked on load): each false claim and
known hazard is written as a rule's regex and as the safe channel that corrects or warns of it; a
half without its twin is refused in one line naming the file, the line, the rule or channel and
the fix, and every shipped framework has both halves."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.frameworks import builtin_names, load_framework

# A false claim and a known hazard are each written twice: the regex in the rule's check (what
# fires it) and the safe channel's `premise` / `hazard` (what the user reads). A half without its
# twin is refused on load, in one line naming the file, the line, the rule or channel and the fix.
TWINS = """name: mine
version: "1.0"
description: twins
safe_channels:
  - id: co
    text: "Safety warning: never run a grill indoors."
    rules: [C1-hazard]
    hazard: &co 'grill\\w* indoors'
  - id: fix
    text: your doctor
    rules: [U2-premise]
    premise: &claim 'antibiotics\\s+cure\\s+colds'
    message: "Antibiotics do not treat colds. See {channel}."
universal:
  - id: U1-x
    text: no harm
  - id: U2-premise
    text: correct false health claims
    request_check:
      premises: [*claim]
contextual:
  - id: C1-hazard
    text: warn of hazards
    request_check:
      hazards: [*co]
"""


def _refused(text: str, tmp_path: Path) -> str:
    from psychoalign.frameworks import FrameworkError

    path = tmp_path / "mine.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FrameworkError) as caught:
        load_framework(path)
    line = f"{caught.value.message} — {caught.value.hint}"
    assert "\n" not in line and str(path) in line
    return line


def test_a_framework_with_both_twins_loads(tmp_path: Path) -> None:
    path = tmp_path / "mine.yaml"
    path.write_text(TWINS, encoding="utf-8")
    fw = load_framework(path)
    assert [c.id for c in fw.hazard_channels("Can I use my grill indoors tonight?")] == ["co"]


@pytest.mark.parametrize(
    ("edit", "line", "says"),
    [
        # a hazard the rule lists with no channel warning of it: the rule would fire and warn of nothing
        (
            ("      hazards: [*co]", "      hazards: [*co, 'bleach\\s+and\\s+ammonia']"),
            "mine.yaml:25: contextual.0.request_check.hazards: rule 'C1-hazard' lists a hazard (#2, 'bleach",
            "`rules: [C1-hazard]`",
        ),
        # a claim the rule lists with no channel correcting it
        (
            ("      premises: [*claim]", "      premises: [*claim, 'vaccines\\s+cause\\s+autism']"),
            "mine.yaml:20: universal.1.request_check.premises: rule 'U2-premise' lists a false claim (#2, 'vaccines",
            "`rules: [U2-premise]`",
        ),
        # the channel's claim list is missing from its rule
        (
            ("      premises: [*claim]", "      patterns: ['x']"),
            "mine.yaml:12: safe_channels.1.premise: safe channel 'fix' corrects a premise that none",
            "copy the regex into that rule's `premises`",
        ),
        # a correction with no text to say it
        (
            ('    message: "Antibiotics do not treat colds. See {channel}."\n', ""),
            "mine.yaml:12: safe_channels.1.premise: safe channel 'fix' corrects a false claim but has no `message`",
            "add the correction as its `message`",
        ),
        # a channel naming no rule
        (
            ("    rules: [C1-hazard]\n", ""),
            "mine.yaml:7: safe_channels.0.hazard: safe channel 'co' warns of a hazard that none",
            "name the rule in its `rules`",
        ),
        # hazards under `check` would veto every draft that names one
        (
            ("    request_check:\n      hazards: [*co]", "    check:\n      hazards: [*co]"),
            "mine.yaml:25: contextual.0.check.hazards: rule 'C1-hazard' lists hazards under `check`",
            "move them to `request_check.hazards`",
        ),
        # a hazard rule never blocks: its other checks would decide nothing
        (
            ("      hazards: [*co]", "      hazards: [*co]\n      patterns: ['grill']"),
            "mine.yaml:25: contextual.0.request_check: rule 'C1-hazard' lists hazards and also request_check.patterns",
            "a rule of their own",
        ),
        (
            ("    hazard: &co", "    premise: 'x'\n    hazard: &co"),
            "mine.yaml:5: safe_channels.0: safe channel 'co' sets both `premise` and `hazard`",
            "split it into two channels",
        ),
    ],
)
def test_a_premise_or_hazard_without_its_twin_is_one_line_naming_file_rule_and_fix(
    tmp_path: Path, edit: tuple[str, str], line: str, says: str
) -> None:
    assert edit[0] in TWINS
    got = _refused(TWINS.replace(edit[0], edit[1]), tmp_path)
    assert line in got and says in got, got


def test_every_shipped_framework_has_each_claim_and_hazard_twinned() -> None:
    for name in builtin_names():
        fw = load_framework(name)
        for rule in fw.rules():
            for check in (rule.check, rule.request_check):
                for regex in check.premises + check.hazards if check is not None else ():
                    assert any(regex in (c.premise, c.hazard) and rule.id in c.rules for c in fw.safe_channels)
