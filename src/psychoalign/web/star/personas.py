"""Hybrid campaigns from the lead's page: LLM personas fill the annotation and arbitration gaps
that no registered human can take (the shortfall), through the same store operations as humans.

Each persona is a participant with ``simulated: true`` whose (simulated) identity is built to
meet one shortfall requirement: in-group demographics for a group rule, out-group ones for an
out-group control slot, the expertise a medical or public-interest rule needs. Three per
requirement, because nobody sees a dialogue twice (two annotators and an arbitrator). Red
teaming by personas stays with ``psychoalign star campaign run`` (docs/star.md).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from typing import Any

from ...errors import InputError, PsychoAlignError
from ...models import build_model
from ...star.campaign import check_persona_models
from ...star.model import Participant, TaskKind
from ...star.personas import AnnotatorPersona, model_label, prompt_digest
from ...star.store import ClaimError
from .lab import StarLab

#: The label an out-group persona holds on each dimension of the attacked group: known, and not the group's.
OTHER_LABEL = "(simulated) other"


def persona_for(campaign: str, requirement: dict[str, Any], copy: int) -> Participant:
    """A simulated participant who meets ``requirement`` (an annotation / arbitration slot)."""
    key = hashlib.sha256(json.dumps(requirement, sort_keys=True).encode()).hexdigest()[:8]
    demographics: dict[str, list[str]] = {}
    expertise: list[str] = []
    group = requirement.get("group") or {}
    if requirement.get("matching") == "demographic":
        if requirement.get("annotator") == "out":
            demographics = {dim: [OTHER_LABEL] for dim in group}
        else:
            demographics = {dim: [label] for dim, label in group.items()}
    elif requirement.get("matching") == "expertise":
        expertise = [str(requirement.get("expertise"))]
    return Participant(
        id=f"sim-{campaign}-{key}-{copy}"[:64],
        demographics=demographics,
        expertise=expertise,
        roles=["annotator", "arbitrator"],
        simulated=True,
    )


async def fill_with_personas(lab: StarLab, campaign: str, *, max_tasks: int = 50) -> dict[str, int]:
    """Create personas for every annotation/arbitration shortfall of ``campaign`` and let them
    take and complete tasks (annotations first, then the arbitrations those open) until none is
    left or ``max_tasks`` are done. Returns counts per kind."""
    store = await lab.store_for(campaign)
    status = await store.campaign_status(campaign)
    if status != "live":  # checked again here: the campaign may have been paused since the lead clicked
        raise InputError(f"campaign '{campaign}' is {status}: personas do not run on it")
    policy = await lab.policy(campaign)
    shortfall = [s for s in await store.shortfall(campaign) if s["kind"] != TaskKind.RED_TEAM.value]
    wanted = {json.dumps(s["requirement"], sort_keys=True): s["requirement"] for s in shortfall}
    people = [persona_for(campaign, req, copy) for req in wanted.values() for copy in range(3)]
    known = {p.id for p in await store.list_participants()}
    await store.add_participants([p for p in people if p.id not in known])
    await store.add_members(campaign, [p.id for p in people])  # a members-only campaign takes them too
    model = build_model(lab.settings.model_spec("annotator"), cache_dir=lab.settings.cache_dir())
    done: Counter[str] = Counter()
    try:
        # the campaign's annotator personas rate on one model: another one is refused before any work
        label = model_label(model)  # stamped on each rating the personas write
        await check_persona_models(
            store, campaign, {"annotator": label, "annotator_prompts": prompt_digest("annotator")}
        )
        for kind in (TaskKind.ANNOTATE, TaskKind.ARBITRATE):
            progress = True
            while progress and sum(done.values()) < max_tasks:
                progress = False
                for person in people:
                    if sum(done.values()) >= max_tasks:
                        break
                    try:
                        task = await store.claim(person.id, kind, campaign=campaign)
                    except ClaimError:
                        continue
                    progress = True
                    dialogue_id = task.dialogue_id or ""
                    record = await store.dialogue_instruction(dialogue_id)
                    turns = await store.dialogue_turns(dialogue_id)
                    rater = AnnotatorPersona(model, person)
                    rule_text = policy.rule(record["rule"]).text
                    try:
                        if kind is TaskKind.ANNOTATE:
                            rating, why = await rater.rate(rule_text, turns)
                            await store.submit_annotation(task.id, person.id, int(rating), why, model=label)
                        else:
                            rating, why = await rater.rate(rule_text, turns, await store.reasonings(dialogue_id))
                            await store.submit_arbitration(task.id, person.id, int(rating), why, model=label)
                    except PsychoAlignError:
                        await store.release(task.id, person.id)  # nothing half-done: the task goes back
                        raise
                    done[kind.value] += 1
    finally:
        await model.aclose()
    return dict(done)
