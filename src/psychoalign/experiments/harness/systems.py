"""Systems under test behind one small interface: a conversation in, a response (+ cost) out.

Every system is documented with its source in docs/experiments.md. Cost is not returned by the
system itself: every model call a system makes goes through the cell's metered models
(:class:`~psychoalign.experiments.harness.metering.ModelPool`), so calls, critical-path calls and tokens
are counted the same way for every system.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ...agents.agents import DriveAgent, EvaluatorAgent, MediatorAgent
from ...agents.messages import AssessItem, AssessTask, ComposeTask, DriveTask, EvaluateTask
from ...agents.schemas import Evaluation, Verdict
from ...config import Settings, deep_merge
from ...errors import ConfigError, ModelError
from ...frameworks import Framework, load_framework
from ...models import Backend, ChatModel, ChatRequest, Completion, Message
from ...negotiation.defense import template
from ...negotiation.gates import Layer1Enforcer, TauFilter, apply_gates
from ...negotiation.params import NegotiationParams
from ...negotiation.track import ConversationRef, conversation_ref
from ...prompts import load_prompt_yaml
from ...traces import InMemoryTraceStore, TraceStatus, TraceStore
from ...traces.tension import all_tensions
from .metering import CallMeter, ModelPool

__all__ = ["SystemInfo"]


class SystemSpec(BaseModel):
    """One system of an experiment: a kind (see :data:`SYSTEM_KINDS`) and its configuration.

    ``roles`` overrides model-spec keys per role for this system only (e.g. point ``drive`` at an
    abliterated endpoint); ``negotiation`` overrides negotiation parameters; ``options`` are the
    kind's own knobs (documented per kind in docs/experiments.md). ``kind`` left out (or empty) is
    the system's name (``- psychoalign`` is the psychoalign kind), filled in when the spec is read,
    so a spec shown or stored says which kind runs.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, max_length=60, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
    kind: str = ""
    framework: str = "general"
    roles: dict[str, dict[str, Any]] = Field(default_factory=dict)
    negotiation: dict[str, Any] = Field(default_factory=dict)
    options: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _kind_from_name(cls, data: Any) -> Any:
        """No kind: the name's (``experiment show`` printed ``kind: ''`` for such systems)."""
        if isinstance(data, dict) and not data.get("kind") and isinstance(data.get("name"), str):
            return {**data, "kind": data["name"]}
        return data

    @property
    def effective_kind(self) -> str:
        return self.kind or self.name


class SystemReply(BaseModel):
    """What a system answered. ``trace_id`` is set for negotiation systems (the stored trace)."""

    model_config = ConfigDict(frozen=True)

    response: str
    trace_id: str | None = None
    details: dict[str, Any] = Field(default_factory=dict)


class SystemFailedError(ModelError):
    """The system could not answer (endpoint down, negotiation failed): the cell fails, never scores 0."""

    def __init__(self, message: str, *, trace_id: str | None = None) -> None:
        super().__init__(message)
        self.trace_id = trace_id


@dataclass
class CellContext:
    """What one cell gives a system: metered models, settings, where traces go."""

    pool: ModelPool
    meter: CallMeter
    settings: Settings
    trace_store: TraceStore | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def model(self, role: str, spec: SystemSpec | None = None) -> ChatModel:
        extra = spec.roles.get(role) if spec is not None else None
        return self.pool.model(role, self.meter, dict(extra) if extra else None)


class System(Protocol):
    """A system under test. ``respond`` must raise :class:`SystemFailedError` (or any
    :class:`~psychoalign.errors.PsychoAlignError`) rather than return a placeholder answer."""

    spec: SystemSpec
    info: SystemInfo

    async def respond(self, messages: Sequence[Message], ctx: CellContext) -> SystemReply: ...


@dataclass(frozen=True)
class SystemInfo:
    """Documentation and dry-run estimates of a system kind. ``options``: the keys its
    ``options`` table accepts (None: not checked, e.g. a plugin that does not say)."""

    kind: str
    title: str
    source: str
    roles: tuple[str, ...]
    calls_typical: int
    calls_max: int
    options: tuple[str, ...] | None = None


def render_conversation(messages: Sequence[Message]) -> str:
    """A multi-turn conversation as one request text (for systems that take one request)."""
    users = [m for m in messages if m.role == "user"]
    if len(messages) == 1 or (len(users) == 1 and messages[-1].role == "user" and len(messages) <= 2):
        return messages[-1].content
    lines = ["Conversation so far:"]
    for m in messages[:-1]:
        if m.role != "system":
            lines.append(f"{m.role.capitalize()}: {m.content}")
    lines.append("")
    lines.append(f"Now answer the user's latest message: {messages[-1].content}")
    return "\n".join(lines)


def _prompts() -> dict[str, str]:
    data: dict[str, str] = load_prompt_yaml("baselines")
    return data


def _principles(framework: Framework) -> str:
    return "\n".join(f"- {r.text}" for r in framework.rules())


def plain_text_only(model: ChatModel) -> bool:
    """Whether ``model`` is asked for plain text instead of structured JSON: the embedded models
    (``Backend.rates_numbers`` False), whose JSON and numbers are not reliable (docs/embedded.md).
    Their replies are parsed by rule into a closed vocabulary instead."""
    return not model.rates_numbers


def _option(spec: SystemSpec, key: str, default: int, lo: int, hi: int) -> int:
    value = spec.options.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(
            f"system '{spec.name}': option {key}={value!r} is invalid", hint=f"use an integer from {lo} to {hi}"
        )
    return value


# -- single-model baselines ----------------------------------------------------------------------
class _Base:
    info: SystemInfo

    def __init__(self, spec: SystemSpec, settings: Settings) -> None:
        self.spec = spec
        self.settings = settings
        role = spec.options.get("role", "chat")
        if not isinstance(role, str) or not role:
            raise ConfigError(f"system '{spec.name}': option role={role!r} is invalid", hint="name a config role")
        self.role = role
        self.framework = load_framework(spec.framework)

    def model_roles(self) -> tuple[str, ...]:
        """The config roles whose models this system calls."""
        return (self.role,)

    async def _text(
        self,
        ctx: CellContext,
        messages: Sequence[Message],
        system: str | None = None,
        *,
        sample: int = 0,
    ) -> str:
        """One plain reply. ``sample`` > 0 draws a different sample (another seed, temperature at
        least 0.7), as symmetric agents must not all write the same answer."""
        model = ctx.model(self.role, self.spec)
        if sample:
            result = await model.chat(
                list(messages),
                system=system,
                seed=(model.spec.seed or 0) + sample,
                temperature=max(model.spec.temperature, 0.7),
            )
        else:
            result = await model.chat(list(messages), system=system)
        text = result.text.strip()
        if not text:
            raise SystemFailedError(f"{self.spec.name}: the model returned an empty reply")
        return text


class Vanilla(_Base):
    info = SystemInfo("vanilla", "Vanilla LLM", "one call to the model, no system prompt", ("chat",), 1, 1, ("role",))

    async def respond(self, messages: Sequence[Message], ctx: CellContext) -> SystemReply:
        return SystemReply(response=await self._text(ctx, messages))


class RLHFPrompted(_Base):
    info = SystemInfo(
        "rlhf",
        "RLHF (stand-in)",
        "the model behind a standard helpful-honest-harmless system prompt (a stand-in for RLHF; "
        "no preference training), as in the paper's baseline",
        ("chat",),
        1,
        1,
        ("role",),
    )

    async def respond(self, messages: Sequence[Message], ctx: CellContext) -> SystemReply:
        return SystemReply(response=await self._text(ctx, messages, system=_prompts()["rlhf_system"].strip()))


class Constitutional(_Base):
    info = SystemInfo(
        "constitutional",
        "Constitutional AI",
        "Bai et al. 2022 (SL-CAI critique -> revision) against the framework's principles",
        ("chat",),
        3,
        1 + 2 * 3,
        ("role", "revisions"),
    )

    def __init__(self, spec: SystemSpec, settings: Settings) -> None:
        super().__init__(spec, settings)
        self.revisions = _option(spec, "revisions", 1, 1, 3)

    async def respond(self, messages: Sequence[Message], ctx: CellContext) -> SystemReply:
        p = _prompts()
        revisions = self.revisions
        request = render_conversation(messages)
        principles = _principles(self.framework)
        response = await self._text(ctx, messages)
        critiques = []
        for _ in range(revisions):
            critique = await self._text(
                ctx,
                [
                    Message(
                        role="user",
                        content=p["constitutional_critique"].format(
                            request=request, response=response, principles=principles
                        ),
                    )
                ],
            )
            critiques.append(critique)
            response = await self._text(
                ctx,
                [
                    Message(
                        role="user",
                        content=p["constitutional_revise"].format(
                            request=request, response=response, critique=critique, principles=principles
                        ),
                    )
                ],
            )
        return SystemReply(response=response, details={"critiques": critiques})


class _Feedback(BaseModel):
    model_config = ConfigDict(frozen=True)

    feedback: str = Field(max_length=2000)
    done: bool


def parse_done(reply: str) -> bool:
    """Self-Refine's stop signal in a plain-text feedback reply: the reply's first word is DONE
    (any case, markdown or punctuation around it). Anything else is feedback to apply."""
    from ...textnorm import normalise

    words = re.findall(r"[a-z]+", normalise(reply).text[:40])
    return bool(words) and words[0] == "done"


class SelfRefine(_Base):
    info = SystemInfo(
        "self-refine",
        "Self-Refine",
        "Madaan et al. 2023: generate -> feedback -> refine, stopping when the feedback says done",
        ("chat",),
        3,
        1 + 2 * 4,
        ("role", "iterations"),
    )

    def __init__(self, spec: SystemSpec, settings: Settings) -> None:
        super().__init__(spec, settings)
        self.iterations = _option(spec, "iterations", 2, 1, 4)

    async def _feedback(self, ctx: CellContext, request: str, response: str) -> _Feedback:
        """Structured feedback (``{"feedback", "done"}``), or for a plain-text model the feedback
        as text whose first word DONE means no change is needed (:func:`parse_done`)."""
        p = _prompts()
        model = ctx.model(self.role, self.spec)
        if plain_text_only(model):
            text = await self._text(
                ctx,
                [
                    Message(
                        role="user", content=p["self_refine_feedback_plain"].format(request=request, response=response)
                    )
                ],
            )
            return _Feedback(feedback=text[:2000], done=parse_done(text))
        fb, _result = await model.structured(
            p["self_refine_feedback"].format(request=request, response=response), _Feedback, schema_name="feedback"
        )
        return fb

    async def respond(self, messages: Sequence[Message], ctx: CellContext) -> SystemReply:
        p = _prompts()
        request = render_conversation(messages)
        response = await self._text(ctx, messages)
        steps = 0
        for _ in range(self.iterations):
            fb = await self._feedback(ctx, request, response)
            if fb.done:
                break
            response = await self._text(
                ctx,
                [
                    Message(
                        role="user",
                        content=p["self_refine_refine"].format(
                            request=request, response=response, feedback=fb.feedback
                        ),
                    )
                ],
            )
            steps += 1
        return SystemReply(response=response, details={"refinements": steps})


class Debate(_Base):
    info = SystemInfo(
        "debate",
        "Multi-agent debate",
        "Du et al. 2023: symmetric agents answer, read each other's answers for rounds; a judge answers",
        ("chat", "judge"),
        3 * 2 + 1,
        5 * 4 + 1,
        ("role", "agents", "rounds", "judge_role"),
    )

    def __init__(self, spec: SystemSpec, settings: Settings) -> None:
        super().__init__(spec, settings)
        self.agents = _option(spec, "agents", 3, 2, 5)
        self.rounds = _option(spec, "rounds", 2, 1, 4)
        judge = spec.options.get("judge_role", self.role)
        if not isinstance(judge, str) or not judge:
            raise ConfigError(
                f"system '{spec.name}': option judge_role={judge!r} is invalid", hint="name a config role"
            )
        self.judge_role = judge

    def model_roles(self) -> tuple[str, ...]:
        return (self.role, self.judge_role)

    async def respond(self, messages: Sequence[Message], ctx: CellContext) -> SystemReply:
        p = _prompts()
        agents, rounds = self.agents, self.rounds
        request = render_conversation(messages)
        # Agent i > 0 samples with its own seed: symmetric agents decoding greedily with one seed
        # would all write the same answer and the debate would have nothing to debate.
        answers = list(await asyncio.gather(*(self._text(ctx, messages, sample=i) for i in range(agents))))
        for _ in range(rounds - 1):

            def others(i: int, current: list[str] = answers) -> str:
                return "\n\n".join(f"Agent {j + 1}: {a}" for j, a in enumerate(current) if j != i)

            answers = list(
                await asyncio.gather(
                    *(
                        self._text(
                            ctx,
                            [
                                Message(
                                    role="user",
                                    content=p["debate_update"].format(request=request, others=others(i), own=a),
                                )
                            ],
                            sample=i,
                        )
                        for i, a in enumerate(answers)
                    )
                )
            )
        listing = "\n\n".join(f"Agent {j + 1}: {a}" for j, a in enumerate(answers))
        result = await ctx.model(self.judge_role, self.spec).chat(
            p["debate_judge"].format(request=request, n=agents, answers=listing)
        )
        if not result.text.strip():
            raise SystemFailedError(f"{self.spec.name}: the debate judge returned an empty reply")
        return SystemReply(response=result.text.strip(), details={"agents": agents, "rounds": rounds})


# -- PsychoAlign and its ablations ---------------------------------------------------------------
class _Negotiating:
    info: SystemInfo
    param_defaults: dict[str, Any] = {}  # noqa: RUF012 - read-only per class

    def __init__(self, spec: SystemSpec, settings: Settings) -> None:
        self.spec = spec
        self.settings = settings.model_copy(update={"roles": deep_merge(settings.roles, spec.roles)})
        merged = {**settings.negotiation, **self.param_defaults, **spec.negotiation}
        try:
            self.params = NegotiationParams.model_validate(merged)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            msg = "unknown parameter" if first["type"] == "extra_forbidden" else first["msg"]
            raise ConfigError(
                f"system '{spec.name}': negotiation.{where}: {msg}",
                hint=f"parameters: {', '.join(NegotiationParams.model_fields)}",
            ) from None
        self.framework = load_framework(spec.framework)

    def negotiation_from_settings(self) -> dict[str, Any]:
        """The parameters the configuration's ``[negotiation]`` changed for this system: their
        effective values where they differ from the kind's and the spec's own. The spec is in the
        run id, the configuration is not, so these go into the run's identity."""
        own = NegotiationParams.model_validate({**self.param_defaults, **self.spec.negotiation}).model_dump()
        effective = self.params.model_dump()
        return {k: v for k, v in effective.items() if v != own[k]}

    def _models(self, ctx: CellContext) -> dict[str, ChatModel]:
        return {role: ctx.model(role, self.spec) for role in ("drive", "evaluator", "mediator")}

    def _inputs(self, messages: Sequence[Message]) -> tuple[str, str, Layer1Enforcer, TauFilter]:
        """What the ablations start from: the request as one text, the deployment context, the gates."""
        request = render_conversation(messages)
        return (
            request,
            self.framework.deployment_context,
            Layer1Enforcer(self.framework, request),
            TauFilter(self.params.tau),
        )

    def model_roles(self) -> tuple[str, ...]:
        """The config roles whose models this system calls."""
        return self.info.roles


class PsychoAlignSystem(_Negotiating):
    info = SystemInfo(
        "psychoalign",
        "PsychoAlign",
        "the full DRIVE / EVALUATOR / MEDIATOR negotiation (paper §2), any configuration",
        ("drive", "evaluator", "mediator"),
        4,
        5 * (1 + 3 + 1) + 2,
        (),
    )

    def __init__(self, spec: SystemSpec, settings: Settings) -> None:
        super().__init__(spec, settings)
        # The cross-turn track reads a conversation's earlier turns from the trace store; a run
        # without one (library use, tests) keeps this system's traces in memory instead.
        self._memory: TraceStore | None = None

    def _store(self, ctx: CellContext) -> TraceStore:
        if ctx.trace_store is not None:
            return ctx.trace_store
        if self._memory is None:
            self._memory = InMemoryTraceStore()
        return self._memory

    def _conversation(self, messages: Sequence[Message], ctx: CellContext) -> ConversationRef:
        """One cell is one conversation: the track's scope is (run, cell, system), and the turns
        are linked by the user messages, so a benchmark that calls ``respond`` with a growing
        conversation (MT-Bench's second turn, a multi-turn attack, with backtracking) gets the
        track of its earlier turns (docs/negotiation.md, "Cross-turn tension")."""
        run, cell = ctx.metadata.get("run_id"), ctx.metadata.get("cell")
        if run is None or cell is None:  # outside the runner: one scope per cell context
            run = ctx.metadata.setdefault("conversation_scope", uuid.uuid4().hex)
        scope = f"exp\x00{run}\x00{cell}\x00{self.spec.name}"
        return conversation_ref(scope, [m.content for m in messages if m.role == "user"])

    async def respond(self, messages: Sequence[Message], ctx: CellContext) -> SystemReply:
        from ...a2a import remote_transport
        from ...negotiation.engine import Negotiator

        negotiator = Negotiator(
            self.settings,
            params=self.params,
            models=self._models(ctx),
            store=self._store(ctx),
            transport=remote_transport(self.settings),
        )
        # a system message is the request's context (a study's item with earlier turns), never its text
        context = "\n\n".join(m.content for m in messages if m.role == "system") or None
        trace = await negotiator.negotiate(
            render_conversation([m for m in messages if m.role != "system"]),
            framework=self.framework,
            context=context,
            metadata={"experiment": dict(ctx.metadata), "turn": sum(1 for m in messages if m.role == "user")},
            conversation=self._conversation(messages, ctx),
            # the request above already holds every turn: the checks read no stored turns beside it
            earlier=(),
        )
        if trace.status is not TraceStatus.COMPLETED or trace.final is None:
            raise SystemFailedError(f"{self.spec.name}: negotiation failed: {trace.error}", trace_id=trace.id)
        final = trace.final
        return SystemReply(
            response=final.response,
            trace_id=trace.id,
            details={
                "tension": final.tension,
                "state": final.state.value if final.state else None,
                "defense": final.defense.value if final.defense else None,
                "rounds": len(trace.rounds),
                "composed_by": final.composed_by,
                "tau_effective": trace.cross_turn.tau_effective if trace.cross_turn else self.params.tau,
                # every request-level tension definition (the boundary study reads them)
                "tensions": all_tensions(trace),
            },
        )


class SinglePass(PsychoAlignSystem):
    param_defaults = {"k": 1}  # noqa: RUF012
    info = SystemInfo(
        "single-pass",
        "No negotiation (single pass)",
        "paper Table 5: the full pipeline with k = 1 round (no revision from feedback)",
        ("drive", "evaluator", "mediator"),
        4,
        1 + 3 + 1 + 2,
        (),
    )


class _GenericPrompts(Backend):
    """Replaces an agent's role instructions (its system message) with a generic-assistant prompt.

    Everything else is the protocol's: the task message, the few-shot format examples and the
    output schema. The EVALUATOR still receives the framework as data (without being told it is
    the EVALUATOR), so the comparison isolates the role prompts, not the information."""

    name: ClassVar[str] = "generic-prompts"

    def __init__(self, inner: Backend, framework: Framework) -> None:
        super().__init__(inner.spec)
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]  # labels read like the wrapped backend
        self.rates_numbers = inner.rates_numbers  # type: ignore[misc]  # plain-text agents stay plain
        base = _prompts()["generic_assistant"].strip()
        self._systems = {
            "evaluation": f"{base}\n\nEthical framework for this task:\n{framework.render()}\n\nReply with JSON only.",
        }
        self._default = f"{base} Reply with JSON only."
        self._plain = base

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    def reset_prompt_cache(self) -> None:
        self.inner.reset_prompt_cache()  # a measurement's reset must reach the model that keeps the prompt

    async def complete(self, request: ChatRequest) -> Completion:
        messages = list(request.messages)
        if messages and messages[0].role == "system":
            if request.json_schema is None:  # a plain-text call (embedded models): no JSON instruction
                system = self._plain
            else:
                system = self._systems.get(request.schema_name, self._default)
            messages[0] = Message(role="system", content=system)
        return await self.inner.complete(request.model_copy(update={"messages": tuple(messages)}))


class NoRoles(PsychoAlignSystem):
    info = SystemInfo(
        "no-roles",
        "No-Roles",
        "paper §4: the same three models and negotiation protocol, every agent prompted as a generic assistant "
        "(role instructions replaced; task messages, format examples and schemas unchanged)",
        ("drive", "evaluator", "mediator"),
        4,
        5 * (1 + 3 + 1) + 2,
        (),
    )

    def _models(self, ctx: CellContext) -> dict[str, ChatModel]:
        out = {}
        for role, model in super()._models(ctx).items():
            # no response cache: its key is the original request, which would return role-prompted replies
            out[role] = ChatModel(model.spec, _GenericPrompts(model.backend, self.framework))
        return out


def _refusal(framework: Framework) -> str:
    return template(
        "rationalization", rules="the safety rules of this deployment", alternative=template("default_alternative")
    )


class NoDrive(_Negotiating):
    """EVALUATOR + MEDIATOR: the MEDIATOR drafts, the EVALUATOR scores under the framework, the
    gates filter, the MEDIATOR revises once with the EVALUATOR's modifications; fail closed."""

    info = SystemInfo(
        "no-drive",
        "No-DRIVE",
        "paper Table 5: EVALUATOR + MEDIATOR answer (the MEDIATOR drafts, the EVALUATOR gates, one revision)",
        ("evaluator", "mediator"),
        2,
        4,
        (),
    )

    async def respond(self, messages: Sequence[Message], ctx: CellContext) -> SystemReply:
        models = self._models(ctx)
        evaluator, mediator = EvaluatorAgent(models["evaluator"]), MediatorAgent(models["mediator"])
        request, context, layer1, tau = self._inputs(messages)
        fw = self.framework.model_dump(mode="json")
        instruction = "There is no selected proposal: answer the request directly and helpfully yourself."
        mods: list[str] = []
        proposal = "(none)"
        for attempt in range(2):
            draft = (
                await mediator.compose(
                    ComposeTask(
                        request=request, context=context, proposal=proposal, modifications=mods, instruction=instruction
                    )
                )
            ).output.response.strip()
            ev: Evaluation = (
                await evaluator.evaluate(EvaluateTask(request=request, context=context, proposal=draft, framework=fw))
            ).output
            if apply_gates(layer1, tau, draft, ev).admissible:
                return SystemReply(response=draft, details={"revisions": attempt, "score": ev.score})
            mods, proposal = list(ev.modifications), draft
            instruction = "Revise the selected proposal so that it applies every required modification."
        return SystemReply(response=_refusal(self.framework), details={"revisions": 1, "fallback": True})


class NoEvaluator(_Negotiating):
    """DRIVE + MEDIATOR: proposals, the MEDIATOR's feasibility choice and composition; only the
    deterministic Layer-1 checks remain (no EVALUATOR score, so no tau filter)."""

    info = SystemInfo(
        "no-evaluator",
        "No-EVALUATOR",
        "paper Table 5: DRIVE proposes, MEDIATOR chooses by feasibility and composes; deterministic gates only",
        ("drive", "mediator"),
        3,
        3,
        (),
    )

    async def respond(self, messages: Sequence[Message], ctx: CellContext) -> SystemReply:
        models = self._models(ctx)
        drive, mediator = DriveAgent(models["drive"]), MediatorAgent(models["mediator"])
        request, context, layer1, _ = self._inputs(messages)
        out = (await drive.propose(DriveTask(request=request, context=context, n=self.params.n_proposals))).output
        candidates = [p for p in out.proposals if not layer1.deterministic(p.text)]
        if not candidates:
            return SystemReply(response=_refusal(self.framework), details={"fallback": True})
        items = [AssessItem(text=p.text, utility=p.utility, score=0, verdict="UNEVALUATED") for p in candidates]
        assessed = (await mediator.assess(AssessTask(request=request, context=context, items=items))).output
        feas = {a.proposal: a.feasibility for a in assessed.assessments}
        p = self.params
        best = max(
            range(len(candidates)),
            key=lambda i: p.alpha * candidates[i].utility + p.gamma * feas.get(i + 1, 0.0),
        )
        task = ComposeTask(
            request=request,
            context=context,
            proposal=candidates[best].text,
            modifications=[],
            instruction="Base it on the selected proposal.",
        )
        text = (await mediator.compose(task)).output.response.strip()
        if layer1.deterministic(text):
            return SystemReply(response=_refusal(self.framework), details={"fallback": True})
        return SystemReply(response=text, details={"chosen": best + 1})


class NoMediator(_Negotiating):
    """DRIVE + EVALUATOR with programmatic arbitration: rounds of proposals, scores and gates; the
    best admissible proposal is returned verbatim (nobody composes); feedback is relayed by code."""

    info = SystemInfo(
        "no-mediator",
        "No-MEDIATOR",
        "paper Table 5: DRIVE and EVALUATOR negotiate; code picks the best admissible proposal verbatim",
        ("drive", "evaluator"),
        4,
        5 * 4,
        (),
    )

    async def respond(self, messages: Sequence[Message], ctx: CellContext) -> SystemReply:
        models = self._models(ctx)
        drive, evaluator = DriveAgent(models["drive"]), EvaluatorAgent(models["evaluator"])
        request, context, layer1, tau = self._inputs(messages)
        fw = self.framework.model_dump(mode="json")
        feedback: str | None = None
        best: tuple[int, str] | None = None
        for r in range(1, self.params.k + 1):
            task = DriveTask(request=request, context=context, n=self.params.n_proposals, feedback=feedback)
            proposals = (await drive.propose(task)).output.proposals
            evals: list[Evaluation] = [
                reply.output
                for reply in await asyncio.gather(
                    *(
                        evaluator.evaluate(
                            EvaluateTask(request=request, context=context, proposal=x.text, framework=fw)
                        )
                        for x in proposals
                    )
                )
            ]
            lines = []
            for i, (x, e) in enumerate(zip(proposals, evals, strict=True), start=1):
                if apply_gates(layer1, tau, x.text, e).admissible and (best is None or e.score > best[0]):
                    best = (e.score, x.text)
                changes = "; ".join(e.modifications) or "none"
                lines.append(f"Proposal {i}: score {e.score}/100, {e.verdict.value}. Changes: {changes}.")
            if (
                best is not None
                and best[0] >= self.params.eta * 100
                and any(e.verdict is Verdict.APPROVED for e in evals)
            ):
                return SystemReply(response=best[1], details={"rounds": r})
            feedback = "\n".join(lines)
        if best is None:
            return SystemReply(response=_refusal(self.framework), details={"rounds": self.params.k, "fallback": True})
        return SystemReply(response=best[1], details={"rounds": self.params.k})


SystemFactory = Callable[[SystemSpec, Settings], System]

#: Built-in system kinds. Plugins add more through :class:`~psychoalign.experiments.harness.registry.Registry`.
SYSTEM_KINDS: dict[str, type[Any]] = {
    cls.info.kind: cls
    for cls in (
        PsychoAlignSystem,
        Vanilla,
        RLHFPrompted,
        Constitutional,
        SelfRefine,
        Debate,
        NoDrive,
        NoEvaluator,
        NoMediator,
        SinglePass,
        NoRoles,
    )
}


def build_system(spec: SystemSpec, settings: Settings, kinds: dict[str, type[Any]] | None = None) -> System:
    """Instantiate ``spec``; an unknown kind is a one-line error naming the known ones."""
    table = kinds if kinds is not None else SYSTEM_KINDS
    cls = table.get(spec.effective_kind)
    if cls is None:
        raise ConfigError(f"unknown system '{spec.effective_kind}'", hint=f"known systems: {', '.join(sorted(table))}")
    accepted = getattr(getattr(cls, "info", None), "options", None)
    if accepted is not None:
        unknown = sorted(set(spec.options) - set(accepted))
        if unknown:
            raise ConfigError(
                f"system '{spec.name}': unknown option(s) {', '.join(unknown)} for kind '{spec.effective_kind}'",
                hint=f"its options: {', '.join(accepted) or 'none'}",
            )
    system: System = cls(spec, settings)
    return system
