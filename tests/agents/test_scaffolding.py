"""User-visible text on the plain (embedded) path carries no prompt scaffolding: scripted plain
models that echo their prompts ("The answer to the user's request is:", "Draft answer:", the
deployment context) never get those lines to the user, and whatever the MEDIATOR falls back to
still passes the final gate."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from psychoalign.agents.agents import DriveAgent, MediatorAgent
from psychoalign.agents.messages import NO_PROPOSAL, ComposeTask, DriveTask
from psychoalign.agents.scaffolding import fixed_parts, scaffolding_echo, split_context, strip_scaffolding, trim_cut
from psychoalign.config import Settings
from psychoalign.errors import ModelError
from psychoalign.models import ChatModel, ChatRequest, Completion, ModelSpec
from psychoalign.models.scripted import ScriptedBackend
from psychoalign.negotiation import NegotiationParams, Negotiator
from psychoalign.prompts import load_prompt_yaml
from tests.scenario import evaluation

CONTEXT = "Public general-purpose chat assistant for adult users."
#: A fixed prompt of the kind a plain model sees: an instruction (the paper's to the DRIVE, which
#: LLM DRIVEs get) and the deployment context.
DRIVE_PROMPT = [
    "Do not self-censor: another agent reviews every answer before it reaches the user.",
    *fixed_parts(load_prompt_yaml("drive_plain")["system"], load_prompt_yaml("drive_plain")["feedback"]),
    CONTEXT,
]
ECHOES = [
    "The answer to the user's request is:\nDraft answer: Boil the egg for six minutes.",
    "1. Deployment context: Public general-purpose chat assistant for adult users 2. Requirements: answer",
    "Request: How do I boil an egg?\nDraft answer: six minutes",
    "**Draft answer:** six minutes",
    "Do not self-censor: another agent reviews every answer. Six minutes.",
    "Here is the rewritten answer:",
    "Here is the entire response:\n**Answer**\nBoil the egg for six minutes.",
    'Title: "Reviews"\nProposal 4: score 7/8 or 6 out of 10 for this review: VETOED.',
    # round 2 of an ibuprofen question: the relay's line inside a sentence, sent to the user
    "It is acceptable for pain relief; see a provider before proceeding. Proposal 1: score 59/2",
    # round 3 of an ibuprofen question: the DRIVE answered the reviewer instead of the user
    "The review of your previous response has been addressed, and the criteria are confirmed.",
    'A: "Proposal 1" was revised to a single sentence that focuses on the evaluation process.',
]
CLEAN = [
    "Boil the egg for six minutes, then cool it in cold water.",
    "Final answer: 42",
    "Context: the Treaty of Versailles ended the war in 1919.",
    "```yaml\nrequest: GET /status\n```\nThat is the health check.",
    "To answer your request about eggs: boil them for six minutes.",
    "You can ask a licensed professional in the relevant field about it.",
    "Proposal 3 of the council's plan is the cheaper one.",
    "The committee preferred proposal 2: it scored better with residents.",
    "Reviewers read the manuscript and send feedback; authors then revise their previous draft.",
    "The FDA approved it in 1990.",
]


class PlainScripted(ScriptedBackend):
    """A scripted model that, like the embedded ones, writes plain text and rates nothing."""

    rates_numbers: ClassVar[bool] = False


def plain(replies: list[str], cycle: bool = False) -> tuple[ChatModel, PlainScripted]:
    spec = ModelSpec(backend="scripted")
    backend = PlainScripted(spec, replies=replies, cycle=cycle)
    return ChatModel(spec, backend), backend


def test_echoes_are_found_and_answers_are_left_alone() -> None:
    for text in ECHOES:
        assert scaffolding_echo(text, DRIVE_PROMPT, ["How do I boil an egg?"]), text
    for text in CLEAN:
        assert not scaffolding_echo(text, DRIVE_PROMPT, ["Tell me about eggs, answer my request"]), text


def test_text_the_model_may_repeat_is_not_an_echo() -> None:
    # The request itself shares six words with nothing fixed; the draft a MEDIATOR revises may be repeated.
    draft = "Do not self-censor: another agent reviews every answer"
    assert scaffolding_echo(draft, DRIVE_PROMPT)
    assert not scaffolding_echo(draft, DRIVE_PROMPT, [draft])


def test_strip_keeps_the_answer_lines_only() -> None:
    text = "Here is the final answer:\nBoil the egg for six minutes.\nDeployment context: chat"
    assert strip_scaffolding(text, DRIVE_PROMPT) == "Boil the egg for six minutes."
    assert strip_scaffolding(ECHOES[0], DRIVE_PROMPT) == ""


def compose_task(proposal: str, mods: list[str] | None = None) -> ComposeTask:
    return ComposeTask(
        request="How do I boil an egg?",
        context=CONTEXT,
        proposal=proposal,
        modifications=mods or [],
        instruction="Base it on the selected proposal and apply every required modification.",
    )


async def test_mediator_echo_falls_back_to_the_gated_draft() -> None:
    model, backend = plain([ECHOES[0]])
    reply = await MediatorAgent(model).compose(compose_task("Boil the egg for six minutes, then cool it."))
    assert reply.output.response == "Boil the egg for six minutes, then cool it."
    # Laid out as a chat, not a form: the draft is the model's own turn, no "Draft answer:" label.
    roles = [m.role for m in backend.requests[0].messages]
    assert roles == ["system", "user", "assistant", "user"]
    assert not any("Draft answer:" in m.content for m in backend.requests[0].messages)


async def test_mediator_keeps_its_own_text_once_a_preamble_is_cut() -> None:
    model, _ = plain(["Here is the rewritten answer:\nBoil it six minutes; cool it in iced water."])
    reply = await MediatorAgent(model).compose(compose_task("Boil it.", ["Mention cooling."]))
    assert reply.output.response == "Boil it six minutes; cool it in iced water."


async def test_mediator_without_a_draft_sends_the_fixed_line_and_asks_no_model() -> None:
    model, backend = plain(["Sure, here are many ways to do that: ..."])
    reply = await MediatorAgent(model).compose(compose_task(NO_PROPOSAL))
    fixed = " ".join(load_prompt_yaml("mediator_compose_plain")["fallback"].split())
    assert reply.output.response == fixed and backend.requests == []
    assert reply.usage.total_tokens == 0


async def test_mediator_falls_back_to_the_fixed_line_when_the_draft_is_scaffolding_too() -> None:
    model, _ = plain(["Draft answer: whatever"])
    reply = await MediatorAgent(model).compose(compose_task("Request: How do I boil an egg?"))
    assert reply.output.response == " ".join(load_prompt_yaml("mediator_compose_plain")["fallback"].split())


async def test_a_drive_draft_reciting_its_prompt_is_drawn_again_and_never_kept() -> None:
    model, backend = plain([ECHOES[1], "Deployment context: x\nBoil it for six minutes."])
    reply = await DriveAgent(model).propose(DriveTask(request="How do I boil an egg?", context=CONTEXT, n=1))
    assert len(backend.requests) == 2  # redrawn once
    assert [p.text for p in reply.output.proposals] == ["Boil it for six minutes."]


def echoing_world(mediator_reply: str, judge: Any) -> tuple[Negotiator, list[str]]:
    """Plain scripted DRIVE and MEDIATOR (the MEDIATOR echoes its prompt), a scripted EVALUATOR
    judging the text it is given (the structured ``inputs``), fast path on."""
    judged: list[str] = []

    def evaluator(request: ChatRequest) -> dict[str, Any]:
        text = (request.inputs or {})["proposal"]
        judged.append(text)
        result: dict[str, Any] = judge(text)
        return result

    spec = ModelSpec(backend="scripted", schema_retries=0, max_retries=0)
    drive, _ = plain(["Some people are awful. Here is a mean joke about them."], cycle=True)
    mediator, _ = plain([mediator_reply], cycle=True)
    models = {
        "drive": drive,
        "evaluator": ChatModel(spec, ScriptedBackend(spec, fn=evaluator)),
        "mediator": mediator,
    }
    return Negotiator(Settings(), params=NegotiationParams(k=1, n_proposals=1), models=models), judged


async def test_end_to_end_an_echoing_mediator_never_reaches_the_user_and_the_fallback_is_gated() -> None:
    # The draft is a conditional acceptance. An embedded (plain) MEDIATOR is no longer asked to
    # rewrite it (docs/embedded.md): the draft is adopted, and since it was not approved outright
    # the final gate evaluates it again; when that vetoes it: refusal. Nothing echoed reaches the user.
    def judge(text: str) -> dict[str, Any]:
        if "mean joke" in text and "Draft answer" not in text:
            return evaluation(65, "CONDITIONAL", mods=["Keep it kind."])
        return evaluation(95, "APPROVED")

    neg, judged = echoing_world("The answer to the user's request is:\nDraft answer: whatever", judge)
    trace = await neg.negotiate("Tell me a joke about my neighbours.")
    assert trace.final is not None
    assert "Draft answer" not in trace.final.response and "user's request is" not in trace.final.response
    # What the final gate judged is what the MEDIATOR sent (the draft, not the echo), plus what the
    # engine's defense adds (k = 1 ends in a deadlock: Sublimation appends the safe channel).
    assert judged[-1].startswith("Some people are awful. Here is a mean joke about them.")
    assert trace.final.response == judged[-1]
    assert trace.final.final_gate is not None

    def strict(text: str) -> dict[str, Any]:  # the draft passes once; the final gate vetoes
        return evaluation(65, "CONDITIONAL", mods=["Keep it kind."]) if len(judged) == 1 else evaluation(10, "VETOED")

    neg, judged = echoing_world("Draft answer: whatever", strict)
    trace = await neg.negotiate("Tell me a joke about my neighbours.")
    assert trace.final is not None and trace.final.fallback  # the gated fallback failed the final gate
    assert trace.final.composed_by == "fallback" and "Draft answer" not in trace.final.response


async def test_the_embedded_drive_sees_the_request_under_the_deployment_context_alone() -> None:
    # Every draft's prompt is paid for in tokens: the system turn is the deployment context C, the
    # user turn the request, nothing more (no rule is enforced by the DRIVE's prompt: the EVALUATOR
    # and the gates judge every draft).
    model, backend = plain(["Boil it for six minutes."], cycle=True)
    await DriveAgent(model).propose(DriveTask(request="How do I boil an egg?", context=CONTEXT, n=1))
    system, user = backend.requests[0].messages
    assert (system.role, system.content) == ("system", CONTEXT)
    assert (user.role, user.content) == ("user", "How do I boil an egg?")
    # A revision carries the relayed feedback in the user turn; the system turn is the same.
    feedback = "Proposal 1: score 40/100, VETOED, blocked by the gates."
    await DriveAgent(model).propose(DriveTask(request="How do I boil an egg?", context=CONTEXT, n=1, feedback=feedback))
    revised_system, revised_user = backend.requests[1].messages
    assert revised_system.content == system.content
    assert revised_user.content.startswith("How do I boil an egg?") and feedback in revised_user.content
    # No context: no system turn, so the model's chat template puts its own default, as a plain call.
    await DriveAgent(model).propose(DriveTask(request="How do I boil an egg?", context="", n=1))
    assert [(m.role, m.content) for m in backend.requests[2].messages] == [("user", "How do I boil an egg?")]
    # The conversation so far, carried in the context, is in the system turn with it.
    with_turns = f"{CONTEXT}\n\nEarlier in this conversation:\nUser: My egg is large."
    await DriveAgent(model).propose(DriveTask(request="How long then?", context=with_turns, n=1))
    assert backend.requests[3].messages[0].content == with_turns


# Answers the token limit cut, as the embedded model wrote them, and what the user gets instead.
CUT = [
    (
        "Both are safe together for most adults. In this context paracetamol can",
        "Both are safe together for most adults.",
    ),
    (
        "Some guidelines:\n\n1. Save a small emergency fund first.\n2. Then pay the card.\n"
        "3. However, in some situations:\n\n4. If you have a credit",
        "Some guidelines:\n\n1. Save a small emergency fund first.\n2. Then pay the card.",
    ),
    (
        "Use this:\n\n```python\ndef rev(s):\n    return s[::-1]\n```\n\nIt slices the",
        "Use this:\n\n```python\ndef rev(s):\n    return s[::-1]\n```",
    ),
    ("It reverses a string.\n\n```python\ndef rev(s):\n    return", "It reverses a string."),
    ('He said "stop." Then he left and', 'He said "stop."'),
]


def test_a_cut_answer_ends_at_its_last_whole_sentence() -> None:
    for text, expected in CUT:
        assert trim_cut(text) == expected, text
    # Nothing whole to keep: the text stays as it is.
    assert trim_cut("no sentence ends here and") == "no sentence ends here and"


class CutScripted(PlainScripted):
    """A plain scripted model whose every reply was stopped by the token limit."""

    async def complete(self, request: ChatRequest) -> Completion:
        return (await super().complete(request)).model_copy(update={"finish_reason": "length"})


async def test_drive_and_mediator_drafts_cut_by_the_token_limit_end_at_a_whole_sentence() -> None:
    spec = ModelSpec(backend="scripted")
    cut = "Boil it for six minutes. Then cool it in"
    model = ChatModel(spec, CutScripted(spec, replies=[cut, cut]))
    reply = await DriveAgent(model).propose(DriveTask(request="How do I boil an egg?", context=CONTEXT, n=1))
    assert [p.text for p in reply.output.proposals] == ["Boil it for six minutes."]
    composed = await MediatorAgent(model).compose(compose_task("Boil it."))
    assert composed.output.response == "Boil it for six minutes."
    # A reply that ended by itself is left as it is, whatever its last word.
    whole, _ = plain(["Boil it for six minutes. Then cool it in"])
    reply = await DriveAgent(whole).propose(DriveTask(request="How do I boil an egg?", context=CONTEXT, n=1))
    assert [p.text for p in reply.output.proposals] == ["Boil it for six minutes. Then cool it in"]


async def test_a_drive_draft_writing_back_the_relayed_feedback_is_drawn_again() -> None:
    # Round 2 of the embedded bleach-and-vinegar question: the DRIVE answered the MEDIATOR's relay
    # with a review of its own, which the classifier approved and the user received.
    feedback = "Proposal 1: score 35/100, VETOED, blocked by the gates. Rules: none. Changes required: 1."
    echo = 'Title: "Reviews"\nScores 1.5/2, 3+9/10 = Excellent.\nProposal 4: score 7/8 for this review: VETOED.'
    clean = "Yes: bleach and vinegar together release chlorine gas. Use one, rinse, then the other."
    model, backend = plain([echo, clean])
    task = DriveTask(request="Is it dangerous to mix bleach and vinegar?", context=CONTEXT, n=1, feedback=feedback)
    reply = await DriveAgent(model).propose(task)
    assert len(backend.requests) == 2  # redrawn once
    assert [p.text for p in reply.output.proposals] == [clean]


def test_words_of_the_request_are_no_answer_to_the_reviewer() -> None:
    reply = "Improve your previous answer by citing two sources."
    assert scaffolding_echo(reply, DRIVE_PROMPT, ["Tell me about sources"])
    assert not scaffolding_echo(reply, DRIVE_PROMPT, ["How do I improve my previous answer on the exam?"])
    assert not scaffolding_echo("Vote for 'Proposal 2'.", DRIVE_PROMPT, ["What is proposal 2 on the ballot?"])


async def test_a_drive_draft_answering_the_reviewer_is_drawn_again_from_the_request_alone() -> None:
    feedback = "Proposal 1: score 59/100, VETOED, blocked by the gates. Rules: U7-dose-label. Changes required: 0."
    meta = "The review of your previous response has been addressed, and the criteria are confirmed."
    clean = "Adults take 200 to 400 mg every 4 to 6 hours; with kidney disease, ask your doctor first."
    model, backend = plain([meta, clean])
    task = DriveTask(request="How much ibuprofen can I take?", context=CONTEXT, n=1, feedback=feedback)
    reply = await DriveAgent(model).propose(task)
    assert [p.text for p in reply.output.proposals] == [clean]
    first, again = (request.messages[-1].content for request in backend.requests)
    assert feedback in first and again == "How much ibuprofen can I take?"  # the redraw sees no feedback


# A follow-up in one conversation, as /v1 and the A2A system agent put it in the context: the
# embedded DRIVE, asked "Can you say that again more briefly?", restated its earlier answer, and
# every line shared six words with that answer. Read as prompt scaffolding, each draft was
# stripped to nothing: "the DRIVE wrote only empty answers", no answer for the follow-up.
EARLIER_ANSWER = (
    "Boiling an egg is a simple yet effective way to create a delicious and nutritious breakfast.\n"
    "1. Boil the eggs until they're fully cooked, usually around 10 minutes."
)
RESTATED = "Boiling an egg is a simple yet effective way to create a delicious breakfast: about 10 minutes."
INSTRUCTIONS = "Always answer like a friendly kitchen assistant for beginners who cook at home."


def follow_up_contexts() -> list[str]:
    from psychoalign.a2a.system import build_context as a2a_context
    from psychoalign.web.openai_api import build_context as v1_context
    from psychoalign.web.openai_schema import ChatMessage

    messages = [
        ChatMessage(role="system", text=INSTRUCTIONS),
        ChatMessage(role="user", text="How do I boil an egg?"),
        ChatMessage(role="assistant", text=EARLIER_ANSWER),
        ChatMessage(role="user", text="Can you say that again more briefly?"),
    ]
    v1 = v1_context(CONTEXT, messages)
    a2a = a2a_context(CONTEXT, INSTRUCTIONS, [("How do I boil an egg?", EARLIER_ANSWER)])
    assert v1 is not None and a2a is not None
    return [v1, a2a]


def test_a_context_splits_into_instructions_and_the_conversation_so_far() -> None:
    for context in follow_up_contexts():
        instructions, conversation = split_context(context)
        assert CONTEXT in instructions and INSTRUCTIONS in instructions
        assert EARLIER_ANSWER in conversation and "How do I boil an egg?" in conversation
        assert EARLIER_ANSWER not in instructions
    # Without earlier turns or tool results the whole context is instructions.
    assert split_context(CONTEXT) == (CONTEXT, "")


async def test_a_follow_up_may_repeat_the_conversation_so_far() -> None:
    request = "Can you say that again more briefly?"
    for context in follow_up_contexts():
        model, backend = plain([RESTATED, "Boil the eggs until they're fully cooked, usually around 10 minutes."])
        reply = await DriveAgent(model).propose(DriveTask(request=request, context=context, n=2))
        assert len(backend.requests) == 2  # neither draft drawn again
        assert [p.text for p in reply.output.proposals] == [
            RESTATED,
            "Boil the eggs until they're fully cooked, usually around 10 minutes.",
        ]
        # The MEDIATOR's revision may repeat it too, and so may the draft it falls back to.
        mediator, _ = plain([RESTATED])
        task = compose_task(RESTATED).model_copy(update={"request": request, "context": context})
        assert (await MediatorAgent(mediator).compose(task)).output.response == RESTATED


async def test_a_follow_up_reciting_the_instructions_still_fails_with_a_message_that_says_so() -> None:
    # The deployment context and the application's instructions stay scaffolding in a follow-up.
    context = follow_up_contexts()[0]
    recital = "Always answer like a friendly kitchen assistant for beginners who cook at home."
    model, backend = plain([recital], cycle=True)
    task = DriveTask(request="Can you say that again more briefly?", context=context, n=1)
    with pytest.raises(ModelError) as raised:
        await DriveAgent(model).propose(task)
    assert "the DRIVE's answers only recited its prompt (it repeats 6+ words of its instructions)" in (
        raised.value.message
    )
    assert len(backend.requests) == 2  # drawn again once, then given up
    # Nothing written at all is named as such.
    empty, _ = plain([""], cycle=True)
    with pytest.raises(ModelError) as raised:
        await DriveAgent(empty).propose(task)
    assert raised.value.message.endswith("the DRIVE wrote only empty answers")


# The embedded model's own first answer to "How do I boil an egg?".
EGG_ANSWER = (
    "Boiling an egg is a simple yet effective way to create a delicious and nutritious breakfast. "
    "Here's how it can be done:\n1. Boil the eggs until they're fully cooked, usually around 20 minutes "
    "for an adult male, or about 35 seconds per dozen of eggs (depending on your preference)."
)


@pytest.mark.realmodel
async def test_the_embedded_drive_answers_a_follow_up_that_restates_the_earlier_answer() -> None:
    # Asked to say it again, SmolLM2 restates its earlier answer (every draft shares six words with
    # it); those drafts were read as prompt scaffolding and stripped to nothing.
    from psychoalign.frameworks import load_framework
    from psychoalign.models.registry import build_model
    from psychoalign.web.openai_api import build_context
    from psychoalign.web.openai_schema import ChatMessage

    request = "Can you say that again more briefly?"
    framework = load_framework("general")
    messages = [
        ChatMessage(role="user", text="How do I boil an egg?"),
        ChatMessage(role="assistant", text=EGG_ANSWER),
        ChatMessage(role="user", text=request),
    ]
    context = build_context(framework.deployment_context, messages)
    assert context is not None
    model = build_model(ModelSpec(backend="local"))
    try:
        reply = await DriveAgent(model).propose(DriveTask(request=request, context=context, n=2))
    finally:
        await model.aclose()
    drafts = [p.text for p in reply.output.proposals]
    # Two answers, none stripped to nothing. Whether SmolLM2 restates six words of its earlier
    # answer depends on its prompt; that such drafts are kept is shown with scripted drafts above.
    assert len(drafts) == 2 and all(d.strip() for d in drafts)
