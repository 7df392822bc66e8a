"""What a draft campaign is checked for before its lead launches it: the target model can be
built, the rules sit in the policy's areas as red teamers will read them, and there are people to
take its tasks.

A problem blocks the launch (a red teamer's first message would fail); a shortfall of people is a
warning the lead may launch past (people invited later take the tasks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ...errors import InputError
from ...star.model import TaskKind
from ..accounts import Role
from .lab import StarLab

#: Different annotators each dialogue needs (two ratings), and arbitrators (one, when they differ).
ANNOTATORS_NEEDED = 2
ARBITRATORS_NEEDED = 1


NOUN = {"red_team": "red teamer", "annotate": "annotator", "arbitrate": "arbitrator"}


def shortfall_reason(kind: str, requirement: dict[str, Any], store_reason: str = "") -> str:
    """Why nobody can take these tasks, in the lead's words."""
    who = NOUN.get(kind, kind)
    group = " × ".join(requirement.get("group", {}).values())
    if "already seen" in store_reason:
        return f"every eligible {who} has already seen the dialogue (nobody sees one twice): invite more"
    if "too few" in store_reason:
        return (
            f"too few eligible {who}s who have not seen the dialogue: each of its tasks needs another person "
            f"({_eligible_as(kind, requirement)}): invite more"
        )
    if "member" in store_reason:
        return f"no eligible {who} is a member of the campaign ({_eligible_as(kind, requirement)}): add members"
    if "quota" in store_reason:
        return f"every eligible {who} reached the campaign's per-person quota: invite more"
    if "skipped" in store_reason:
        return f"every eligible {who} skipped this instruction (a skip is never offered again): invite more"
    if kind == TaskKind.RED_TEAM.value and requirement.get("attacker") in ("in", "out"):
        side = "belongs to" if requirement["attacker"] == "in" else "is outside"
        return f"no red teamer who {side} the group {group} (with known demographics)"
    if requirement.get("matching") == "demographic":
        if requirement.get("annotator") == "out":
            return f"no {who} outside the group {group} (out-group control slot, known demographics)"
        return f"no {who} from the group {group}"
    if requirement.get("matching") == "expertise":
        return f"no {who} with {str(requirement.get('expertise', '?')).replace('_', '-')} expertise"
    return f"no participant with the {who} role"


def _eligible_as(kind: str, requirement: dict[str, Any]) -> str:
    group = " × ".join(requirement.get("group", {}).values())
    if requirement.get("matching") == "demographic":
        side = "outside" if requirement.get("annotator") == "out" else "from"
        return f"{side} the group {group}"
    if requirement.get("matching") == "expertise":
        return f"with {str(requirement.get('expertise', '?')).replace('_', '-')} expertise"
    return f"with the {NOUN.get(kind, kind)} role"


@dataclass
class LaunchChecks:
    """The checks' outcome: ``problems`` block the launch, ``warnings`` need the lead's "anyway"."""

    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: What red teamers read beside each rule: (area id, area text, [(rule id, rule text)]).
    areas: list[tuple[str, str, list[tuple[str, str]]]] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


async def launch_checks(lab: StarLab, name: str) -> LaunchChecks:
    """Check the draft campaign ``name`` (see the module's docstring)."""
    checks = LaunchChecks()
    campaign = await lab.campaign(name)
    try:
        lab.target(campaign)
    except InputError as exc:
        checks.problems.append(exc.message)
    policy = await lab.policy(name)
    chosen = set(campaign.rules) or {r.id for r in policy.rules()}
    missing = sorted(chosen - {r.id for r in policy.rules()})
    if missing:
        checks.problems.append(f"the policy has no rule {', '.join(missing)}: start a new campaign with its rules")
    for area in policy.areas:
        rules = [(r.id, r.text) for r in area.rules if r.id in chosen]
        if rules:
            checks.areas.append((area.id, area.text, rules))
    store = await lab.store_for(name)
    accounts = await lab.accounts.list_accounts(Role.PARTICIPANT)
    invited = await lab.accounts.invited_accounts()
    available = {a.participant_id for a in accounts if a.participant_id and (a.active or a.id in invited)}
    if await store.members_only(name):
        available &= set(await store.members(name))
    for entry in await store.shortfall(name, available=available):
        if entry["kind"] == TaskKind.RED_TEAM.value:
            reason = shortfall_reason(entry["kind"], entry["requirement"], entry.get("reason", ""))
            n = entry["open_tasks"]
            checks.warnings.append(f"{n} red-teaming task{'s' if n != 1 else ''}: {reason}")
    people = [p for p in await store.list_participants() if p.id in available]
    annotators = sum(1 for p in people if "annotator" in p.roles)
    if annotators < ANNOTATORS_NEEDED:
        checks.warnings.append(
            f"{_people(annotators, 'annotator')} can take its annotations; each dialogue needs "
            f"{ANNOTATORS_NEEDED} different ones: invite more"
        )
    arbitrators = sum(1 for p in people if "arbitrator" in p.roles)
    if arbitrators < ARBITRATORS_NEEDED:
        checks.warnings.append(
            f"{_people(arbitrators, 'arbitrator')} can take its arbitrations; a dialogue whose two ratings are "
            "two or more steps apart needs one: invite one"
        )
    return checks


def _people(n: int, noun: str) -> str:
    return f"no {noun}" if n == 0 else f"{n} {noun}{'s' if n != 1 else ''}"
