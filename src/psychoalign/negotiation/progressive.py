"""Progressive gated streaming: the DRIVE's draft released window by window, each window only
after the gates have passed the text up to its end *and* a look-ahead beyond it.

The negotiation is cut short to one DRIVE draft (the fast path's first proposal). The draft is
split into windows: the first of ``window`` characters, each later one twice as long as the one
before (so a small first window costs few checks on a long answer: their number grows with the
logarithm of the length, not the length). Window ``i`` may go out once the dual gate (the
EVALUATOR's judgement, the deterministic Layer-1 checks and the caller's extra check) has passed
``draft[: end_i + lookahead]``: the look-ahead does not depend on the window sizes. The first
window's check runs alone; once that window is out, the checks of every later prefix start
together (the draft is whole), and windows go out in order as theirs pass. So the first window
waits for one EVALUATOR call on a short prefix, not for the whole negotiation, and the whole
answer for two. A veto (or a deterministic match) on any prefix cuts the stream there: nothing
of that window or after it is released, and the response ends with the framework's refusal. The
last window's check covers the whole draft, so an answer released in full passed the same gate
as a draft adopted whole.

``WindowStream.released`` is what was handed to the caller, in order; the trace's final response
is exactly that, plus the refusal (or fail-closed text) that ended a cut stream, and
``metadata.stream`` says how many windows went out and whether the stream was cut.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..agents.messages import DriveTask, EvaluateTask
from ..agents.schemas import Evaluation, Proposal
from ..traces.model import (
    AlignmentContribution,
    ChannelLine,
    FinalDecision,
    GateResult,
    ProposalRecord,
    RoundRecord,
    Trace,
)
from .bus import MessageBus
from .decision import (
    Gates,
    beside_answer,
    closing_line,
    fired_rules,
    guarded_evaluation,
    refusal,
    with_hazard_warnings,
)
from .defense import DefenseContext, DefenseMechanism, hazard_lines
from .gates import canonical_hits
from .tension import SystemState, classify_state, tension

__all__ = ["WindowStream"]

Emit = Callable[..., Awaitable[None]]


@dataclass
class WindowStream:
    """How a draft is released: ``window`` characters first, then windows twice as long as the
    one before, each after the gates passed ``lookahead`` characters more; ``release`` receives
    each window in order."""

    window: int
    lookahead: int
    release: Callable[[str], Awaitable[None]]
    released: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.window < 1 or self.lookahead < 0:
            raise ValueError("window must be at least 1 character and lookahead at least 0")

    @property
    def text(self) -> str:
        return "".join(self.released)

    def record(self, *, cut: bool) -> dict[str, Any]:
        """What the trace keeps about the stream (``metadata.stream``)."""
        return {
            "window": self.window,
            "lookahead": self.lookahead,
            "windows": len(self.released),
            "released_chars": len(self.text),
            "cut": cut,
        }


def windows(length: int, window: int, lookahead: int) -> list[tuple[int, int, int]]:
    """(start, end, checked end) of each window of a text of ``length`` characters: the first is
    ``window`` characters long, each later one twice the one before; the window is ``[start,
    end)``; the gate must have passed ``[0, checked end)`` before it goes out."""
    spans = []
    start, size = 0, window
    while start < length:
        end = min(length, start + size)
        spans.append((start, end, min(length, end + lookahead)))
        start, size = end, size * 2
    return spans


async def draft_once(bus: MessageBus, request: str, context: str) -> Proposal:
    """The DRIVE's one draft (the best of its reply) for a progressive stream."""
    drive = await bus.send("mediator", "drive", DriveTask(request=request, context=context, n=1))
    proposals: list[Proposal] = drive.output.proposals
    return max(proposals, key=lambda x: x.utility)


async def release_in_windows(
    trace: Trace,
    bus: MessageBus,
    gates: Gates,
    context: str,
    stream: WindowStream,
    emit: Emit,
) -> None:
    """Draft once, release in gated windows, and fill in the trace's round and final decision.
    Runs only after the request's screen let it through: a request that decides starts no DRIVE
    call, streaming or not (engine.py)."""
    await emit(trace, "round", round=1)
    draft = await draft_once(bus, trace.request, context)
    text = draft.text

    async def judge(end: int) -> Evaluation:
        task = EvaluateTask(
            request=trace.request,
            context=context,
            proposal=text[:end],
            earlier=gates.layer1.earlier,
            framework=gates.fw_payload,
        )
        return canonical_hits((await bus.send("mediator", "evaluator", task)).output, gates.fw)

    # A known hazard's warning depends on the request alone (framework text): it goes out right
    # before the first window, so it leads what is released. A draft cut before its first window
    # gets the whole path's refusal instead (a crisis message first when the draft showed a risk).
    warnings = hazard_lines(gates.fw, trace.request, earlier=gates.layer1.earlier)
    warned: list[ChannelLine] = []

    spans = windows(len(text), stream.window, stream.lookahead)
    jobs: dict[int, asyncio.Future[Evaluation]] = {}

    def start_checks(ends: list[int]) -> None:
        for checked in ends:
            if checked not in jobs:
                jobs[checked] = asyncio.ensure_future(judge(checked))

    # The first window's check runs alone (the first token waits for nothing else); the checks of
    # all later windows start together once it has gone out.
    start_checks([spans[0][2]])
    evaluation: Evaluation | None = None
    gate: GateResult | None = None
    cut = False
    try:
        for i, (start, end, checked) in enumerate(spans):
            gate = gates.recheck(text[:checked])  # the deterministic checks need no model: they go first
            if gate.admissible:
                start_checks([checked])
                evaluation = await jobs[checked]
                gate = gates.gate(text[:checked], evaluation)
            if not gate.admissible:
                cut = True
                break
            if i == 0:
                for hazard in warnings:
                    lead = f"{hazard.text}\n\n"
                    stream.released.append(lead)
                    await stream.release(lead)
                    warned.append(hazard)
            stream.released.append(text[start:end])  # recorded before it is handed on
            await stream.release(text[start:end])
            if i == 0:
                start_checks([c for _, _, c in spans[1:]])
    finally:
        for job in jobs.values():  # checks of windows that will not go out: stop paying for them
            job.cancel()
        await asyncio.gather(*jobs.values(), return_exceptions=True)

    u_d = draft.utility
    u_v = evaluation.score / 100 if evaluation is not None and not cut else 0.0
    t = tension(u_d, u_v)
    record = ProposalRecord(rank=1, text=text, utility=u_d, evaluation=evaluation, gate=gate, tension=t)
    trace.rounds.append(RoundRecord(index=1, proposals=[record], lead=0, tension=t, admissible=0 if cut else 1))
    trace.rounds[0].exit = "cut" if cut else "released"
    await emit(trace, "evaluated", round=1, proposals=1, admissible=0 if cut else 1, tension=t)
    await emit(trace, "deciding")
    withheld: list[str] = []
    evals = [guarded_evaluation(evaluation, gates.guard, True, withheld)] if evaluation is not None else []
    ctx = DefenseContext(
        chosen_text=None if cut else text,
        chosen_eval=None if cut or not evals else evals[0],
        round_evals=evals,
        deadlock=cut,
        framework=gates.fw,
        blocked=[(text, evals[0])] if cut and evals else [],
        unjudged=[text] if cut and not evals else [],  # cut by the deterministic checks alone
        fired=fired_rules(
            trace.request,
            [record],
            gates.fw,
            gates.layer1,
            # an earlier turn's self-harm rule (Negotiator._at_risk_earlier): the crisis channel here
            # too; and a rule the request completes only with an earlier turn (Negotiator._from_earlier)
            also=[
                *(gates.fw.at_risk_rules(trace.earlier[-trace.params.cross_turn_window :]) if trace.earlier else ()),
                *(
                    gates.fw.completed_rules(trace.request, trace.earlier[-trace.params.cross_turn_window :])
                    if trace.earlier
                    else ()
                ),
                *(
                    trace.crisis_screen.rules if trace.crisis_screen is not None else ()
                ),  # the negotiation's crisis screen
            ],
        ),
        request=trace.request,
        earlier=gates.layer1.earlier,
    )
    # beside a released answer, a figure rule it does not trip chooses no channel (decision.beside_answer)
    closing = ctx if cut else beside_answer(ctx, text, gates.layer1)
    support = closing.supportive()
    mechanism: DefenseMechanism | None = None
    channels: list[ChannelLine] = []
    if cut:
        gates.guard.block(text)
        if stream.released:
            # What went out stays first, the warnings leading it: the refusal does not repeat them.
            ending = refusal(ctx, given=stream.text)
            response, channels = f"{stream.text}\n\n{ending.text}", [*warned, *ending.channels]
        else:  # nothing went out: the whole path's refusal, warnings placed as there
            ending = refusal(ctx)
            response, channels = with_hazard_warnings(ending.text, ending.channels, ctx)
        mechanism = DefenseMechanism.SUBLIMATION if support is not None else DefenseMechanism.RATIONALIZATION
        state = SystemState.DRIVE_DOMINANT if stream.released else SystemState.DEADLOCK
    else:
        if support is not None and support.text not in text:
            # A person at risk always gets the crisis channel, also beside an answer (framework text).
            line = closing.support_line("closing_line")
            channel = closing_line("", line)  # "\n\n" and the line: it follows what was released
            stream.released.append(channel)
            await stream.release(channel)
            channels.append(line)
        channels = [*warned, *channels]
        response = stream.text
        state = classify_state(
            final_tension=t,
            u_d=u_d,
            u_v=u_v,
            round_tensions=[t],
            converged=True,
            threshold=trace.params.healthy_threshold,
        )
    # A cut draft falls back (u_v is 0 then); a released one is adopted as round 1's only proposal.
    trace.final = FinalDecision(
        response=response,
        chosen_round=None if cut else 1,
        chosen_rank=None if cut else 1,
        u_d=u_d,
        u_v=u_v,
        tension=t,
        state=state,
        defense=mechanism,
        composed_by="fallback" if cut else "adopted",
        final_gate=gate,
        fallback=cut,
        withheld=withheld,
        channels=channels,
    )
    trace.converged = not cut
    trace.contribution = AlignmentContribution()
    trace.metadata["stream"] = stream.record(cut=cut)
