"""An unattended STAR campaign: LLM personas red-team a target, annotate and arbitrate.

Every persona is a participant with ``simulated: true``, so simulated identities are labelled in
all data and exports. Matching, the 50/50 in/out-group attacker split, the out-group annotator
share, "never the same dialogue twice" and arbitration work exactly as for humans: the campaign
goes through the same store operations.

* **Identity.** Attacker personas attack as who they are: the persona's simulated demographics
  and expertise are in its prompt.
* **Spread.** Work is assigned in balanced batches (:meth:`StarStore.assign_all`): the most
  constrained tasks first, each to the least-loaded eligible persona, so loads differ by at most
  one where eligibility allows; ``max_share`` caps any persona's share of a phase.
* **Target failures** are failures, not turns: each failed attempt is recorded
  (:meth:`StarStore.record_target_failure`), retried up to ``target_retries`` times, and the
  target only ever gets the conversation it can take (:func:`fit_history`).
* **Resume.** Rerunning a campaign first finishes every task its personas still hold (a killed
  run's in-progress dialogues continue from their stored turns), then carries on; tasks nobody can
  take are reported in ``shortfall`` with the reason.
* **Provenance.** The first run records the persona models (attacker, annotator, refusal judge:
  :func:`persona_models`) with the campaign; a rerun on other models is refused before any work
  (:func:`check_persona_models`): its ratings and attacks would be pooled with the first models'
  under one campaign. The target is recorded per dialogue instead (a changed target is kept apart).
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..a2a import remote_transport
from ..config import Settings
from ..errors import InputError
from ..judges import RefusalJudge, build_refusal_judge
from ..models import ChatModel, build_model
from ..negotiation.engine import Negotiator
from ..textio import read_text
from ..yamlio import MAX_YAML_CHARS, load_yaml_model
from .instructions import generate_instructions
from .model import Participant, PreAnnotation, TaskKind, TaskRecord, Turn
from .parameters import load_parameters
from .personas import (
    AnnotatorPersona,
    AttackerPersona,
    ModelTarget,
    PreAnnotator,
    PsychoAlignTarget,
    Target,
    TargetError,
    model_label,
    prompt_digest,
)
from .policy import Policy, load_policy
from .store import StarStore

__all__ = ["check_persona_models", "load_campaign", "persona_models", "run_campaign"]


class TargetConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["model", "psychoalign"] = "psychoalign"
    role: str = Field("target", description="Config role of the target model (kind: model).")
    framework: str = "general"


class CampaignConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    seed: int = 0
    instructions: int = Field(10, ge=1, le=100_000)
    rules: list[str] | None = None
    turns: int = Field(3, ge=1, le=30, description="Red-teamer messages per dialogue (the paper encourages 10-15).")
    policy: str | None = None
    parameters: str | None = None
    target: TargetConfig = TargetConfig()
    attacker_role: str = "attacker"
    annotator_role: str = "annotator"
    personas: list[Participant] = Field(default_factory=list)
    generate_personas: bool = Field(True, description="Add simulated personas per target group and expertise.")
    personas_per_identity: int = Field(
        4, ge=1, le=20, description="Generated personas per identity (an attacker, two annotators, an arbitrator)."
    )
    relax_matching: bool = Field(False, description="Let red teamers take tasks they do not match (logged).")
    outgroup_annotator_share: float = Field(
        0.5,
        ge=0.0,
        le=1.0,
        description="Share of annotation slots on group-targeting dialogues for out-group annotators (control).",
    )
    max_share: float | None = Field(
        None,
        gt=0.0,
        le=1.0,
        description="Most any persona may take of one phase's tasks; default: balanced within ±1 where possible.",
    )
    target_retries: int = Field(2, ge=0, le=10, description="Retries of a failed target call.")
    refusal_judge: Literal["rules", "model", "cascade"] = Field(
        "rules", description="Tier of the shared refusal judge (docs/judges.md); model tiers use judge_role."
    )
    judge_role: str = "judge"


class CampaignReport(BaseModel):
    """The whole campaign as stored (a resumed run reports everything, not just its own part)."""

    campaign: str
    planned: int
    dialogues: int = 0
    refused_attacks: int = 0
    target_failed_dialogues: int = 0
    abandoned_dialogues: int = 0
    annotations: int = 0
    annotations_in_group: int = 0
    annotations_out_group: int = 0
    arbitrations: int = 0
    target_calls: int = 0
    target_failures: int = 0
    target_failure_rate: float | None = Field(None, description="Failed target calls / all target calls.")
    target_refusals: int = 0
    resumed_tasks: int = Field(0, description="Tasks a previous run left claimed, finished by this one.")
    target_changed: int = Field(
        0,
        description="Dialogues a previous run left unfinished against another target (the model, framework or "
        "settings changed since): kept as abandoned, never continued, their instructions red-teamed afresh.",
    )
    models: dict[str, str] = Field(
        default_factory=dict,
        description="The persona models the campaign ran on (attacker, annotator, refusal_judge), as recorded.",
    )
    models_recorded_late: bool = Field(
        False,
        description="The campaign had work from runs that did not record their models: recorded from this run "
        "on, the earlier work's models are unknown.",
    )
    work: dict[str, dict[str, int]] = Field(
        default_factory=dict, description="kind -> {personas, max, min}: tasks per persona who took any."
    )
    unclaimed: dict[str, int] = Field(default_factory=dict)
    shortfall: list[dict[str, Any]] = Field(default_factory=list)


def load_campaign(path: str | Path) -> CampaignConfig:
    p = Path(path)
    text = read_text(p, what="campaign file", max_bytes=MAX_YAML_CHARS)
    return load_yaml_model(
        text,
        str(p),
        CampaignConfig,
        hint='docs/star.md, "LLM personas and campaigns", shows a campaign file with every key',
    )


#: The roles a persona campaign records, as its errors and reports name them.
PERSONA_ROLES = {
    "attacker": "attacker",
    "attacker_prompts": "attacker prompts",
    "annotator": "annotator",
    "annotator_prompts": "annotator prompts",
    "refusal_judge": "refusal judge",
}


def persona_models(attacker: ChatModel, annotator: ChatModel, tier: str, judge: ChatModel | None) -> dict[str, str]:
    """What about the personas changes their output, by role: each model's label with its digest
    (:func:`~.personas.model_label`: backend, model, endpoint, sampling, script hash) and the refusal
    judge's tier (with its model's label for the model tiers); and the digest of the packaged
    prompts each persona role writes with (:func:`~.personas.prompt_digest`)."""
    return {
        "attacker": model_label(attacker),
        "attacker_prompts": prompt_digest("attacker"),
        "annotator": model_label(annotator),
        "annotator_prompts": prompt_digest("annotator"),
        "refusal_judge": tier if judge is None else f"{tier}:{model_label(judge)}",
    }


async def check_persona_models(store: StarStore, campaign: str, models: dict[str, str]) -> bool:
    """Check ``models`` (by role; a caller may give some roles only, as the lab's annotator
    personas do) against the ones recorded with ``campaign``, and record the roles not yet
    recorded. A role recorded with another model is refused (:class:`InputError`) before any work:
    the campaign's stored attacks, ratings and refusal flags came from the recorded model, and its
    export and analysis would pool two models' work under one name. True: nothing was recorded
    yet and the campaign already holds simulated work, whose models are unknown."""
    recorded = (await store.campaign_settings(campaign)).persona_models
    changed = [role for role in PERSONA_ROLES if role in models and role in recorded and recorded[role] != models[role]]
    if changed:
        what = "; ".join(f"{PERSONA_ROLES[r]} {recorded[r]} -> {models[r]}" for r in changed)
        raise InputError(
            f"campaign '{campaign}' ran on other persona models: {what}",
            hint="rerun it with the roles (and the PsychoAlign version, for prompts) it ran with: its export and "
            "analysis would pool two models' work; or give the campaign file a new name to start a new campaign "
            "beside it",
        )
    if all(role in recorded for role in models):
        return False
    await store.update_campaign_settings(campaign, persona_models={**models, **recorded})
    if recorded:
        return False
    slots = ("red_teamer", "annotator1", "annotator2")
    return any(r.get(f"{slot}_simulated") for r in await store.export_rows(campaign) for slot in slots)


def _generated_personas(config: CampaignConfig, policy: Policy) -> list[Participant]:
    space = load_parameters(config.parameters)
    dims = dict(space.target_group.dimensions) if space.target_group else {}
    people = []
    names = list(dims)
    combos = itertools.product(*(dims[d] for d in names)) if names else [()]
    suffix = "abcdefghijklmnopqrst"
    for i, combo in enumerate(combos):
        demographics = {d: [label] for d, label in zip(names, combo, strict=True)}
        for copy in range(config.personas_per_identity):
            people.append(
                Participant(id=f"sim-{config.name}-{i:02d}{suffix[copy]}", demographics=demographics, simulated=True)
            )
    expertise = sorted({r.matching for r in policy.rules() if r.matching not in ("none", "demographic")})
    for field in expertise:
        for copy in range(config.personas_per_identity):
            people.append(Participant(id=f"sim-{config.name}-{field}-{copy}", expertise=[field], simulated=True))
    return people


#: Told after each finished task: (phase: red_team / annotate / arbitrate, tasks done in it by this
#: run, the phase's tasks in all).
CampaignProgress = Callable[[str, int, int], None]


class _Run:
    """One execution of a campaign (state shared by the phases)."""

    def __init__(
        self,
        config: CampaignConfig,
        store: StarStore,
        policy: Policy,
        personas: list[Participant],
        attacker_model: ChatModel,
        annotator_model: ChatModel,
        target: Target,
        judge: RefusalJudge,
        progress: CampaignProgress | None = None,
    ) -> None:
        self.config = config
        self.progress = progress
        self.store = store
        self.policy = policy
        self.people = {p.id: p for p in personas}
        self.attacker_model = attacker_model
        self.annotator_model = annotator_model
        self.annotator_label = model_label(annotator_model)  # stamped on each rating it writes
        self.target = target
        self.judge = judge
        self.shortfall: dict[TaskKind, list[dict[str, Any]]] = {}
        self.target_changed = 0

    async def do(self, task: TaskRecord) -> bool:
        """Do one held task; False if it was re-queued meanwhile (its lease expired, or its
        dialogue was started against another target)."""
        person = self.people[task.participant_id or ""]
        try:
            await self.store.renew_lease(task.id, person.id)
        except InputError:
            return False
        if task.kind is TaskKind.RED_TEAM:
            return await self.red_team(task, person)
        dialogue_id = task.dialogue_id or ""
        record = await self.store.dialogue_instruction(dialogue_id)
        persona = AnnotatorPersona(self.annotator_model, person)
        turns = await self.store.dialogue_turns(dialogue_id)
        rule_text = self.policy.rule(record["rule"]).text
        if task.kind is TaskKind.ANNOTATE:
            rating, why = await persona.rate(rule_text, turns)
            await self.store.submit_annotation(task.id, person.id, int(rating), why, model=self.annotator_label)
        else:
            rating, why = await persona.rate(rule_text, turns, await self.store.reasonings(dialogue_id))
            await self.store.submit_arbitration(task.id, person.id, int(rating), why, model=self.annotator_label)
        return True

    async def red_team(self, task: TaskRecord, person: Participant) -> bool:
        """Red-team one task to the end; False if its dialogue (left by a killed run) was started
        against another target: then it is released, kept as ``abandoned`` with its turns, and the
        instruction goes back to the queue, so no dialogue holds two targets' answers under one label."""
        instruction = await self.store.instruction(task.instruction_id or "")
        dialogue_id = await self.store.start_dialogue(task.id, person.id, self.target.label)
        if (await self.store.dialogue_info(dialogue_id))["target"] != self.target.label:
            await self.store.release(task.id, person.id)
            self.target_changed += 1
            return False
        turns = await self.store.dialogue_turns(dialogue_id)  # non-empty when resuming a killed run
        attacker = AttackerPersona(self.attacker_model, person, self.judge)
        refused = target_failed = False
        sent = sum(1 for t in turns if t.role == "red_teamer")
        for _ in range(self.config.turns - sent):
            message = await attacker.next_message(instruction, turns)
            if await attacker.refuses(message):
                refused = not turns  # refusing before any attack: not an attack at all
                break
            attack = Turn(role="red_teamer", text=message)
            reply = await self.target_reply(dialogue_id, [*turns, attack])
            if reply is None:
                target_failed = True
                break
            await self.store.add_turns(dialogue_id, [attack, reply])
            turns += [attack, reply]
        pre = PreAnnotation(assigned_rule_broken=False)
        if turns:
            pre = await PreAnnotator(self.annotator_model, person, self.policy).annotate(instruction["rule"], turns)
        await self.store.finish_dialogue(dialogue_id, person.id, pre, refused=refused, target_failed=target_failed)
        return True

    async def target_reply(self, dialogue_id: str, turns: list[Turn]) -> Turn | None:
        """The target's reply, or None after ``target_retries`` failed retries (each recorded)."""
        for attempt in range(1, self.config.target_retries + 2):
            try:
                return await self.target.reply(turns)
            except TargetError as exc:
                await self.store.record_target_failure(dialogue_id, exc.message, attempt=attempt, trace_id=exc.trace_id)
                if not exc.retryable:
                    return None
        return None

    async def phase(self, kind: TaskKind) -> int:
        """Assign and do every task of ``kind`` the personas can take (new ones may appear as
        others finish, e.g. arbitrations); returns how many were done."""
        done = 0
        while True:
            total = await self._phase_size(kind)
            cap = math.ceil(self.config.max_share * total) if self.config.max_share and total else None
            result = await self.store.assign_all(
                kind,
                campaign=self.config.name,
                relax=self.config.relax_matching and kind is TaskKind.RED_TEAM,
                participant_ids=list(self.people),
                max_per_participant=cap,
                limit=len(self.people),  # one round at a time: leases stay fresh on long campaigns
            )
            if not result["assigned"]:
                # what the personas cannot take, with the reason (incl. the max_share cap)
                self.shortfall[kind] = [{"kind": kind.value, **item} for item in result["shortfall"]]
                return done
            for task_id in result["assignments"]:
                done += await self.do(await self.store.task(task_id))
                if self.progress is not None:
                    # the phase's tasks open, held or submitted: the done ones are among them
                    self.progress(kind.value, done, max(done, await self._phase_size(kind)))

    async def _phase_size(self, kind: TaskKind) -> int:
        counts = (await self.store.task_counts(self.config.name)).get(kind.value, {})
        return sum(n for status, n in counts.items() if status in ("open", "claimed", "submitted"))


async def run_campaign(
    config: CampaignConfig,
    settings: Settings,
    store: StarStore,
    *,
    negotiator: Negotiator | None = None,
    models: Mapping[str, ChatModel] | None = None,
    progress: CampaignProgress | None = None,
    on_planned: Callable[[], Awaitable[object]] | None = None,
) -> CampaignReport:
    """Run ``config`` to the end, or resume it. ``models`` overrides the attacker / annotator /
    target / judge models by role name; ``progress`` is told each finished task.

    Everything that can fail on the campaign file alone (policy, parameters, the instruction plan,
    personas) is done before the store is written: a run that fails there leaves no trace of the
    campaign. ``on_planned`` is awaited once the campaign and its plan are in the store (the CLI
    records the campaign for the lab then, never before)."""
    models = dict(models or {})
    built: list[ChatModel] = []  # the models this run builds, closed when it ends

    def model(role: str) -> ChatModel:
        if role not in models:  # built once per role: the judge and the recorded identity are one model
            built.append(build_model(settings.model_spec(role), cache_dir=settings.cache_dir()))
            models[role] = built[-1]
        return models[role]

    policy = load_policy(config.policy)
    space = load_parameters(config.parameters)
    items = generate_instructions(policy, space, config.instructions, seed=config.seed, rules=config.rules)
    personas = [p.model_copy(update={"simulated": True}) for p in config.personas]
    if config.generate_personas:
        personas += _generated_personas(config, policy)
    if not personas:
        raise InputError("the campaign has no personas", hint="set generate_personas: true or list personas")
    known = {p.id for p in await store.list_participants()}
    await store.add_participants([p for p in personas if p.id not in known])
    if not await store.has_campaign(config.name):
        await store.create_campaign(config.name, items, outgroup_annotator_share=config.outgroup_annotator_share)
    if on_planned is not None:
        await on_planned()
    await store.add_members(config.name, [p.id for p in personas])  # counts if a lead made it members-only
    status = await store.campaign_status(config.name)
    if status != "live":  # personas do not work on a draft, paused or closed campaign, not even their held tasks
        hints = {
            "paused": "resume it on the lead's campaign page",
            "draft": "launch it on the lead's campaign page",
        }
        raise InputError(
            f"campaign '{config.name}' is {status}: personas do not run on it",
            hint=hints.get(status, "closing is final: use a new name"),
        )

    own_negotiator = None
    try:
        judge = build_refusal_judge(
            config.refusal_judge, model(config.judge_role) if config.refusal_judge != "rules" else None
        )
        target: Target
        if config.target.kind == "psychoalign":
            if negotiator is None:
                negotiator = own_negotiator = Negotiator(settings, transport=remote_transport(settings))
            target = PsychoAlignTarget(negotiator, config.target.framework, judge)
        else:
            target = ModelTarget(model(config.target.role), judge)
        return await _run_personas(config, store, policy, personas, model, target, judge, progress, len(items))
    finally:  # the HTTP sessions of what this run built: a process that exits leaves none open
        if own_negotiator is not None:
            await own_negotiator.aclose()
        for built_model in built:
            await built_model.aclose()


async def _run_personas(
    config: CampaignConfig,
    store: StarStore,
    policy: Policy,
    personas: list[Participant],
    model: Callable[[str], ChatModel],
    target: Target,
    judge: RefusalJudge,
    progress: CampaignProgress | None,
    planned: int,
) -> CampaignReport:
    """Resume what a killed run left claimed, then red teaming, annotation and arbitration."""
    run = _Run(
        config,
        store,
        policy,
        personas,
        model(config.attacker_role),
        model(config.annotator_role),
        target,
        judge,
        progress,
    )
    judge_model = model(config.judge_role) if config.refusal_judge != "rules" else None
    models = persona_models(run.attacker_model, run.annotator_model, config.refusal_judge, judge_model)
    late = await check_persona_models(store, config.name, models)  # before any work: nothing pooled

    # 0. Resume: finish whatever a previous (killed) run left claimed by these personas.
    resumed = 0
    for kind in (TaskKind.RED_TEAM, TaskKind.ANNOTATE, TaskKind.ARBITRATE):
        for pid in run.people:
            for task in await store.claimed_tasks(pid):
                if task.campaign == config.name and task.kind is kind:
                    resumed += await run.do(task)
    # 1. Red teaming, 2. annotation, 3. arbitration; annotation again in case arbitration waits.
    await run.phase(TaskKind.RED_TEAM)
    while await run.phase(TaskKind.ANNOTATE) + await run.phase(TaskKind.ARBITRATE):
        pass
    shortfall = [item for kind in TaskKind for item in run.shortfall.get(kind, [])]
    report = await campaign_report(store, config.name, planned, resumed, shortfall)
    report.target_changed = run.target_changed
    report.models_recorded_late = late
    return report


async def campaign_report(
    store: StarStore,
    campaign: str,
    planned: int,
    resumed: int = 0,
    shortfall: list[dict[str, Any]] | None = None,
) -> CampaignReport:
    """The campaign's numbers, computed from the store. ``shortfall`` (open tasks the campaign's
    own personas could not take, with reasons) defaults to the store's view over every registered
    participant."""
    rows = await store.export_rows(campaign)
    report = CampaignReport(campaign=campaign, planned=planned, resumed_tasks=resumed)
    report.models = dict((await store.campaign_settings(campaign)).persona_models)
    status = Counter(r["status"] for r in rows)
    report.dialogues = status["submitted"]
    report.refused_attacks = status["refused"]
    report.target_failed_dialogues = status["target_failed"]
    report.abandoned_dialogues = status["abandoned"]
    work: dict[str, Counter[str]] = {"red_team": Counter(), "annotate": Counter(), "arbitrate": Counter()}
    for r in rows:
        if r["status"] in ("submitted", "refused", "target_failed"):
            work["red_team"][r["red_teamer_id"]] += 1
        for i in (1, 2):
            if r.get(f"annotator{i}_id"):
                report.annotations += 1
                work["annotate"][r[f"annotator{i}_id"]] += 1
                in_group = r.get(f"annotator{i}_in_group")
                report.annotations_in_group += in_group is True
                report.annotations_out_group += in_group is False
        if r.get("arbitrator_id"):
            report.arbitrations += 1
            work["arbitrate"][r["arbitrator_id"]] += 1
        target_turns = [t for t in r["turns"] if t["role"] == "target"]
        report.target_calls += len(target_turns) + r["target_failures"]
        report.target_failures += r["target_failures"]
        report.target_refusals += sum(1 for t in target_turns if t.get("refused"))
    report.target_failure_rate = report.target_failures / report.target_calls if report.target_calls else None
    report.work = {
        kind: {"personas": len(c), "max": max(c.values()), "min": min(c.values())} for kind, c in work.items() if c
    }
    report.shortfall = shortfall if shortfall is not None else await store.shortfall(campaign)
    for item in report.shortfall:
        report.unclaimed[item["kind"]] = report.unclaimed.get(item["kind"], 0) + item["open_tasks"]
    return report
