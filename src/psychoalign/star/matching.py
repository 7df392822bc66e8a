"""Who may take which task (paper §3.2, appendix D). Pure functions: the store applies them atomically.

* Red teaming on a group-targeting rule: each instruction requires an in-group or an out-group
  attacker; the plan alternates them within each cell, so each cell is 50/50 within rounding.
* Annotation and arbitration: dialogues attacking a group go to members of that group, except
  annotation slots a campaign reserves for out-group annotators (``annotator: out``, the control
  group of ``outgroup_annotator_share``); medical rules to medical experts; public-interest
  (fact_checking) rules to fact-checkers; others to anyone with the role.
* Unknown ("prefer not to say") demographics match neither in- nor out-group (Decision, docs/star.md).
* Nobody sees the same dialogue twice in any role (the store enforces it with a unique key).
"""

from __future__ import annotations

from typing import Any

from .model import Participant, TaskKind
from .policy import PolicyRule

ROLE_FOR = {TaskKind.RED_TEAM: "red_teamer", TaskKind.ANNOTATE: "annotator", TaskKind.ARBITRATE: "arbitrator"}


def annotation_requirement(rule: PolicyRule, group: dict[str, str] | None) -> dict[str, Any]:
    if rule.matching == "demographic" and group:
        return {"matching": "demographic", "group": group}
    if rule.matching not in ("none", "demographic"):  # medical, fact_checking, legal, financial
        return {"matching": "expertise", "expertise": rule.matching}
    return {"matching": "none"}


def eligible(participant: Participant, kind: TaskKind, requirement: dict[str, Any]) -> tuple[bool, str]:
    """(may take it, why not)."""
    role = ROLE_FOR[kind]
    if role not in participant.roles:
        return False, f"not a {role}"
    if kind is TaskKind.RED_TEAM:
        want = requirement.get("attacker")
        if want in ("in", "out"):
            status = participant.in_group(requirement["group"])
            if status is None:
                return False, "demographics unknown for the targeted group"
            if status != (want == "in"):
                return False, f"task needs an {want}-group attacker"
        return True, ""
    matching = requirement.get("matching", "none")
    if matching == "demographic":
        status = participant.in_group(requirement["group"])
        if requirement.get("annotator") == "out":  # the out-group control slot (campaign setting)
            if status is None:
                return False, "demographics unknown for the targeted group"
            if status:
                return False, "task needs an out-group annotator"
        elif status is not True:
            return False, "task needs an annotator from the targeted group"
    elif matching == "expertise" and requirement["expertise"] not in participant.expertise:
        return False, f"task needs {requirement['expertise']} expertise"
    return True, ""
