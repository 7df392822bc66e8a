"""Who may take which task (``star/matching.py``)."""

from __future__ import annotations

from psychoalign.star.matching import eligible
from psychoalign.star.model import Participant, TaskKind


def person(pid: str, race: str = "White", gender: str = "Female") -> Participant:
    return Participant(id=pid, demographics={"race": [race], "gender": [gender]})


def test_unknown_demographics_take_neither_slot() -> None:
    shy = Participant(id="shy", demographics={"race": ["prefer not to say"]})
    out_slot = {"matching": "demographic", "group": {"race": "White"}, "annotator": "out"}
    assert eligible(shy, TaskKind.ANNOTATE, out_slot) == (False, "demographics unknown for the targeted group")
    assert eligible(person("w"), TaskKind.ANNOTATE, out_slot) == (False, "task needs an out-group annotator")
    assert eligible(person("b", "Asian"), TaskKind.ANNOTATE, out_slot) == (True, "")
    assert (
        eligible(person("b", "Asian"), TaskKind.ARBITRATE, {k: v for k, v in out_slot.items() if k != "annotator"})[0]
        is False
    )
