"""The three agents. Each turns one task into one schema-validated model call.

Agents hold no state between calls and know nothing of each other: routing, gates and
arbitration live in :mod:`psychoalign.negotiation`, never here.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
from abc import ABC
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel

from ..errors import ModelError
from ..frameworks import Framework
from ..models import ChatModel, Message, Usage
from ..models.refusal_rules import is_refusal
from ..prompts import load_prompt_yaml
from .messages import (
    NO_PROPOSAL,
    AgentReply,
    AssessTask,
    ComposeTask,
    DriveTask,
    EvaluateBatchTask,
    EvaluateTask,
    framework_json,
)
from .scaffolding import fixed_parts, scaffolding_echo, split_context, strip_scaffolding, trim_cut
from .schemas import (
    DriveOutput,
    Evaluation,
    EvaluationBatch,
    Feasibility,
    MediatorAssessment,
    MediatorCompose,
    Proposal,
)

OutT = TypeVar("OutT", bound=BaseModel)
_log = logging.getLogger(__name__)

#: u_D of a plain answer from a model that is not asked to rate itself (``rates_numbers`` False):
#: the DRIVE's aim is a complete answer, so each answer it writes counts as fully useful to it.
IMPUTED_UTILITY = 1.0
#: Feasibility of every admissible proposal when the MEDIATOR's model is not asked for ratings:
#: neutral, so the objective ranks by u_D and u_V alone (no model call is made).
IMPUTED_FEASIBILITY = 1.0


def build_messages(prompt: str, system_vars: dict[str, Any], user_vars: dict[str, Any]) -> list[Message]:
    """System text, few-shot turns, then the user turn, from ``prompts/<prompt>.yaml``."""
    spec = load_prompt_yaml(prompt)
    return [
        Message(role="system", content=spec["system"].format(**system_vars).strip()),
        *_examples(prompt),
        Message(role="user", content=spec["user"].format(**user_vars).strip()),
    ]


@functools.lru_cache(maxsize=32)
def _examples(prompt: str) -> tuple[Message, ...]:
    """The few-shot turns of ``prompts/<prompt>.yaml`` (fixed text; messages are frozen, so every
    call shares them)."""
    out: list[Message] = []
    for example in load_prompt_yaml(prompt).get("examples", []):
        out.append(Message(role="user", content=example["user"].strip()))
        out.append(Message(role="assistant", content=example["assistant"].format().strip()))
    return tuple(out)


@functools.lru_cache(maxsize=32)
def _render_framework(framework_json: str) -> str:
    return Framework.model_validate_json(framework_json).render()


class Agent(ABC):
    """An LLM-backed role. Subclasses define ``role`` and one public coroutine per task kind.

    Contract: every public method returns an :class:`AgentReply` whose ``output`` validated
    against the role's schema, or raises :class:`~psychoalign.errors.ModelError` (after the
    model layer's bounded retries). No method returns unvalidated model text.
    """

    role: ClassVar[str]

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    async def _call(
        self, messages: list[Message], output: type[OutT], name: str, max_tokens: int | None
    ) -> AgentReply[Any]:
        result = await self.model.chat(messages, output=output, schema_name=name, max_tokens=max_tokens)
        return AgentReply(output=result.data, usage=result.usage, latency_s=result.latency_s, model=self.model.label)


class DriveAgent(Agent):
    """``D(x) -> {p_1..p_n}``: unconstrained proposals with self-rated utility."""

    role = "drive"

    async def propose(self, task: DriveTask) -> AgentReply[DriveOutput]:
        if not self.model.rates_numbers:
            return await self._propose_plain(task)
        spec = load_prompt_yaml("drive")
        feedback = spec["feedback"].format(feedback=task.feedback).rstrip() if task.feedback else ""
        messages = build_messages(
            "drive",
            {"n": task.n},
            {"request": task.request, "context": task.context, "n": task.n, "feedback": feedback},
        )
        if task.first == 0:
            reply: AgentReply[DriveOutput] = await self._call(messages, DriveOutput, "drive_proposals", None)
            return reply
        # More proposals for a round that has some: another seed, sampled, so they differ.
        result = await self.model.chat(
            messages,
            output=DriveOutput,
            schema_name="drive_proposals",
            seed=(self.model.spec.seed or 0) + task.first,
            temperature=max(self.model.spec.temperature, 0.7),
        )
        return AgentReply(output=result.data, usage=result.usage, latency_s=result.latency_s, model=self.model.label)

    async def _propose_plain(self, task: DriveTask) -> AgentReply[DriveOutput]:
        """One plain answer per call through the model's chat template (n calls, varied seeds);
        u_D is :data:`IMPUTED_UTILITY`. Empty answers are dropped; none at all is an error."""
        spec = load_prompt_yaml("drive_plain")
        user = task.request + (spec["feedback"].format(feedback=task.feedback).rstrip() if task.feedback else "")
        system = spec["system"].format(context=task.context).strip()
        # No context: the model's own default system turn, exactly as a plain call sends it.
        head = [Message(role="system", content=system)] if system else []
        messages = [*head, Message(role="user", content=user)]
        # A draft that recites its prompt is drawn again; with feedback, from the request alone: a
        # 135M model that answered the reviewer once ("The review of your previous response has
        # been addressed …") mostly does so again when it is shown the feedback again.
        again = [*head, Message(role="user", content=task.request)] if task.feedback else messages
        # What the model saw that is not the user's: an answer repeating it echoes its prompt. The
        # relayed feedback too: a 135M model answers it with "Proposal 4: score 7/8 … VETOED".
        # The conversation so far is the user's: a follow-up may repeat an earlier turn.
        instructions, conversation = split_context(task.context)
        prompt = [
            *fixed_parts(spec["system"], spec["feedback"]),
            instructions,
            *([task.feedback] if task.feedback else []),
        ]
        allowed = [task.request, *([conversation] if conversation else [])]
        proposals: list[Proposal] = []
        echoed: list[str] = []
        usage, latency = Usage(), 0.0
        base_seed = self.model.spec.seed or 0
        for i in range(task.first, task.first + task.n):
            # The round's first answer is the model's default decoding; later ones are sampled for variety.
            result = await self.model.chat(messages, seed=base_seed + i, temperature=None if i == 0 else 0.8)
            usage, latency = usage + result.usage, latency + result.latency_s
            if is_refusal(result.text, fully=True) or scaffolding_echo(result.text, prompt, allowed):
                # A draft that declines is no proposal from an agent whose aim is a complete answer
                # (a tiny model sometimes declines harmless requests), nor is one that recites its
                # own instructions: drawn again once, sampled.
                result = await self.model.chat(again, seed=base_seed + i + 1000, temperature=0.8)
                usage, latency = usage + result.usage, latency + result.latency_s
            # Lines that still recite the prompt never become part of a proposal.
            text = strip_scaffolding(result.text.strip(), prompt, allowed)[:4000]
            if result.finish_reason == "length":  # cut by the token limit: end at a whole sentence
                text = trim_cut(text)
            if text:
                proposals.append(Proposal(text=text, utility=IMPUTED_UTILITY))
            elif result.text.strip():
                echoed.extend(scaffolding_echo(result.text, prompt, allowed))
        if not proposals:
            # Say which: nothing written, or only lines that recite the prompt (never an answer).
            what = f"'s answers only recited its prompt ({echoed[0]})" if echoed else " wrote only empty answers"
            raise ModelError(f"{self.model.label}: the DRIVE{what}", hint="use a stronger model")
        return AgentReply(
            output=DriveOutput(proposals=proposals), usage=usage, latency_s=latency, model=self.model.label
        )


class EvaluatorAgent(Agent):
    """``V(p, F) -> (s, v, m)`` plus rule hits and a conflict classification, for one proposal."""

    role = "evaluator"

    async def evaluate(self, task: EvaluateTask) -> AgentReply[Evaluation]:
        fw_json = framework_json(task.framework)
        messages = build_messages(
            "evaluator",
            {"framework": _render_framework(fw_json)},
            {"request": task.request, "context": task.context, "proposal": task.proposal},
        )
        # The structured task travels beside the prompt: a classifier backend judges these fields
        # directly instead of parsing them back out of the prompt text.
        inputs = {"request": task.request, "context": task.context, "proposal": task.proposal, "framework": fw_json}
        if task.earlier:  # the conversation's earlier user turns (a dose for the child named there)
            inputs["earlier"] = json.dumps(task.earlier)
        result = await self.model.chat(messages, output=Evaluation, schema_name="evaluation", inputs=inputs)
        return AgentReply(output=result.data, usage=result.usage, latency_s=result.latency_s, model=self.model.label)

    async def evaluate_batch(self, task: EvaluateBatchTask) -> AgentReply[EvaluationBatch]:
        """Each proposal in its own, concurrent model call (the model sees one proposal at a
        time); usage and latency are summed over the calls."""
        replies = await asyncio.gather(*(self.evaluate(task.single(p)) for p in task.proposals))
        usage = Usage(
            prompt_tokens=sum(r.usage.prompt_tokens for r in replies),
            completion_tokens=sum(r.usage.completion_tokens for r in replies),
        )
        return AgentReply(
            output=EvaluationBatch(evaluations=[r.output for r in replies]),
            usage=usage,
            latency_s=sum(r.latency_s for r in replies),
            model=self.model.label,
        )


class MediatorAgent(Agent):
    """The arbiter's two model calls: feasibility per round, and the final composition."""

    role = "mediator"

    async def assess(self, task: AssessTask) -> AgentReply[MediatorAssessment]:
        if not self.model.rates_numbers:
            neutral = [Feasibility(proposal=i, feasibility=IMPUTED_FEASIBILITY) for i in range(1, len(task.items) + 1)]
            return AgentReply(output=MediatorAssessment(assessments=neutral), model=self.model.label)
        lines = [
            f"Proposal {i} (utility {item.utility:.2f}, score {item.score}, {item.verdict}): {item.text}"
            for i, item in enumerate(task.items, start=1)
        ]
        messages = build_messages(
            "mediator_assess", {}, {"request": task.request, "context": task.context, "proposals": "\n".join(lines)}
        )
        reply: AgentReply[MediatorAssessment] = await self._call(messages, MediatorAssessment, "assessment", 200)
        return reply

    async def compose(self, task: ComposeTask) -> AgentReply[MediatorCompose]:
        if not self.model.rates_numbers:
            return await self._compose_plain(task)
        messages = build_messages(
            "mediator_compose",
            {"instruction": task.instruction},
            {
                "request": task.request,
                "context": task.context,
                "proposal": task.proposal,
                "modifications": json.dumps(task.modifications) if task.modifications else "none",
            },
        )
        reply: AgentReply[MediatorCompose] = await self._call(messages, MediatorCompose, "final_response", None)
        return reply

    async def _compose_plain(self, task: ComposeTask) -> AgentReply[MediatorCompose]:
        """The composition as plain text through the model's chat template (embedded models).

        Laid out as a chat (the request, the draft as the model's own turn, a request to revise
        it), never as a labelled form. Lines of the reply that echo prompt scaffolding (labels,
        preambles, the instructions; :mod:`.scaffolding`) are dropped; if nothing is left, the
        MEDIATOR sends the gated draft it was given instead. With no draft (nothing passed the
        gates) the model is not asked at all: the fixed ``fallback`` line of the prompt file.
        Whatever it sends, the engine's final gate evaluates it before a user sees it."""
        spec = load_prompt_yaml("mediator_compose_plain")
        if not task.proposal.strip() or task.proposal == NO_PROPOSAL:
            # Nothing passed the gates: a plain model is not asked to write from the request alone
            # (it carries the request out; prompts/mediator_compose_plain.yaml). The fixed line.
            fixed = MediatorCompose(response=" ".join(str(spec["fallback"]).split()))
            return AgentReply(output=fixed, model=self.model.label)
        changes = spec["changes"].format(modifications="; ".join(task.modifications)) if task.modifications else ""
        messages = [
            Message(role="system", content=spec["system"].format(instruction=task.instruction).strip()),
            Message(role="user", content=task.request),
            Message(role="assistant", content=task.proposal),
            Message(role="user", content=spec["revise"].format(changes=changes.strip() + " " if changes else "")),
        ]
        result = await self.model.chat(messages)
        conversation = split_context(task.context)[1]
        said = [task.request, *([conversation] if conversation else [])]  # the user's side: may be repeated
        allowed = [*said, task.proposal]
        scaffold = self._compose_scaffold(task)
        raw = result.text.strip()
        # Lines that carry scaffolding go; if nothing of the reply is left, it is not used.
        text = strip_scaffolding(raw, scaffold, allowed)[:4000]
        if result.finish_reason == "length":  # cut by the token limit: end at a whole sentence
            text = trim_cut(text)
        if not text:
            # The draft passed the gates already (and passes the final gate again); if it too is
            # only scaffolding, the fixed line.
            draft = strip_scaffolding(task.proposal, scaffold, said)
            text = draft or " ".join(str(spec["fallback"]).split())
            _log.info(
                "mediator composition not used (%s): sent %s",
                "; ".join(scaffolding_echo(raw, scaffold, allowed)) or "empty",
                "the gated draft" if draft else "the fixed line",
            )
        return AgentReply(
            output=MediatorCompose(response=text),
            usage=result.usage,
            latency_s=result.latency_s,
            model=self.model.label,
        )

    @staticmethod
    def _compose_scaffold(task: ComposeTask) -> list[str]:
        """The fixed text around a composition: this prompt file, the defense instruction
        templates, the DRIVE's plain prompt (a draft can carry it), the modifications and the
        deployment context with the application's instructions (not the conversation so far)."""
        plain = load_prompt_yaml("mediator_compose_plain")
        instructions = load_prompt_yaml("mediator_compose")["instructions"]
        drive = load_prompt_yaml("drive_plain")
        return [
            *fixed_parts(plain["system"], plain["revise"], plain["changes"]),
            *fixed_parts(*instructions.values()),
            *fixed_parts(drive["system"], drive["feedback"]),
            *task.modifications,
            split_context(task.context)[0],
        ]
