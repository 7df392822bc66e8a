"""Prompt scaffolding in model-written text: labels, preambles and instructions a small model
copies from its own prompt into what the user would read.

A 135M model asked to "write the final answer" from a "Request: … / Draft answer: …" prompt
often answers "The answer to the user's request is:\\nDraft answer: …", and a DRIVE whose system
prompt names the deployment context sometimes lists it back ("1. Deployment context: Public
general-purpose chat assistant …"). None of that is an answer. :func:`scaffolding_echo` finds it
in a text, given the fixed prompt text the model saw; the agents redraw or fall back when it
fires (docs/embedded.md, "User-visible text").

Two signals, both about the *prompt*, never about the topic:

* a line that starts with one of the labels the project's prompts use (``Request:``, ``Draft
  answer:``, ``Deployment context:`` …) or is a preamble announcing the answer ("The answer to
  the user's request is:");
* a run of :data:`ECHO_WORDS` words that appears in the fixed prompt text (templates and
  instructions, the deployment context) and not in the text the model may legitimately reuse
  (the user's request, the draft it was asked to revise, the conversation so far).

A follow-up's context carries the conversation's earlier turns (and, on /v1, the tool results
for the request) after the deployment context and the application's instructions;
:func:`split_context` separates the two. The conversation is never scaffolding: a follow-up
("Can you say that again more briefly?") rightly repeats the earlier answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

#: A run of this many words shared with the fixed prompt (and absent from request and draft)
#: counts as an echo of the prompt.
ECHO_WORDS = 6

#: Labels the project's prompts put at the start of a line (prompts/*.yaml), plus the ones a
#: small model invents around them.
#: (Generic words such as "Context:" or "Final answer:" are left out: real answers use them.)
SCAFFOLD_LABELS = (
    "request",
    "user request",
    "the user's request",
    "draft answer",
    "required changes",
    "required modifications",
    "selected proposal",
    "deployment context",
    "reviewer feedback",
    "rewritten answer",
    "revised answer",
)

_LABEL = re.compile(
    r"^[ \t>*#_-]*(?:\d+[.)][ \t]*)?[*_]*(?:" + "|".join(re.escape(x) for x in SCAFFOLD_LABELS) + r")[*_]*[ \t]*:",
    re.IGNORECASE | re.MULTILINE,
)
_PREAMBLE = re.compile(
    r"^[ \t*#_-]*(?:sure[,!.]?[ \t]*)?(?:here(?:'s| is)[ \t]+)?(?:the[ \t]+|my[ \t]+)?"
    r"(?:(?:final|revised|rewritten|composed|entire|full|complete)[ \t]+)?(?:answer|response|reply)"
    r"(?:[ \t]+(?:to|for)[ \t]+the[ \t]+user(?:'s)?(?:[ \t]+request)?)?(?:[ \t]+is)?[*_]*[ \t]*:?[*_ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
# The MEDIATOR's feedback relay (negotiation/decision.py, relay_feedback) to the DRIVE: a line
# per proposal, "Proposal 2: score 35/100, VETOED, blocked by the gates. …". A draft with a line
# labelled like one, or the verdict word in capitals, writes back the relay, not an answer; so
# does a relay line inside a sentence ("… without further evaluation. Proposal 1: score 59/2").
_RELAY = re.compile(
    r"^[ \t>*#_-]*[*_]*proposal[ \t]+\d+[*_]*[ \t]*:|\bproposal[ \t]+\d+[*_]*[ \t]*:[ \t]*[*_]*score\b"
    r"|(?-i:\bVETOED\b)",
    re.IGNORECASE | re.MULTILINE,
)
# A draft that answers the reviewer instead of the user: it speaks of its own previous answer, the
# reviewer's feedback or a numbered proposal ("The review of your previous response has been
# addressed … 'Proposal 1' was revised …", round 3 of an embedded ibuprofen question). Read only
# where the request does not use the words itself.
_SELF_REVIEW = re.compile(
    r"\b(?:(?:your|my|the|this)\s+previous\s+(?:response|answer|draft|proposal|revision)"
    r"|reviewer\s+feedback|(?:the|this)\s+review\s+of\s+(?:your|my|the)"
    r"|(?:i\s+have|i've)\s+reviewed\s+(?:the|your|this)\s+(?:response|answer|proposal|draft)"
    r"|feedback\s+(?:on|to|about)\s+(?:your|my)\s+(?:previous\s+)?(?:response|answer|draft|proposal))\b"
    r"|[\"“']proposal\s+\d+[\"”']",
    re.IGNORECASE,
)
_DETERMINER = re.compile(r"^(?:your|my|the|this) ")
_ALNUM = re.compile(r"[a-z0-9]+")
#: Headings that open the conversation part of a negotiation context, as /v1
#: (``web/openai_api.build_context``) and the A2A system agent (``a2a/system.build_context``)
#: write it: the earlier turns, then the tool calls made for the request and their results.
CONVERSATION_HEADINGS = ("Earlier in this conversation:\n", "Tool calls made for this request")
_CONVERSATION = re.compile(r"(?:^|\n\n)(?=" + "|".join(re.escape(h) for h in CONVERSATION_HEADINGS) + ")")
_PLACEHOLDER = re.compile(r"\{[^{}]*\}")
_FENCE = re.compile(r"^[ \t]*```.*?^[ \t]*```[ \t]*$", re.MULTILINE | re.DOTALL)
_WORDS = re.compile(r"[a-z0-9']+")


def _words(text: str) -> list[str]:
    return _WORDS.findall(text.lower())


def _grams(text: str, n: int = ECHO_WORDS) -> set[tuple[str, ...]]:
    w = _words(text)
    return {tuple(w[i : i + n]) for i in range(len(w) - n + 1)}


def fixed_parts(*templates: str) -> list[str]:
    """The fixed text of prompt templates: each template cut at its ``{placeholders}``."""
    return [part for t in templates for part in _PLACEHOLDER.split(t) if part.strip()]


def split_context(context: str) -> tuple[str, str]:
    """``context`` as (instructions, conversation): the deployment context and the application's
    instructions, which a model must not recite, and from the first heading of
    :data:`CONVERSATION_HEADINGS` on, the earlier turns and tool results, which it may repeat
    (empty when there are none)."""
    match = _CONVERSATION.search(context)
    if match is None:
        return context, ""
    return context[: match.start()], context[match.end() :]


def scaffolding_echo(text: str, prompt: Iterable[str], allowed: Sequence[str] = ()) -> list[str]:
    """Why ``text`` reads as prompt scaffolding rather than an answer (empty: it does not).

    ``prompt``: the fixed prompt text the model saw (template parts, instructions, deployment
    context); ``allowed``: text the model may repeat (the request, the draft it revises)."""
    reasons: list[str] = []
    prose = _FENCE.sub("", text)  # code blocks may hold "request:" keys and the like
    label = _LABEL.search(prose)
    if label:
        reasons.append(f"a line starts with the prompt label '{label.group(0).strip(' *#_->')}'")
    if _PREAMBLE.search(prose):
        reasons.append("a line only announces the answer")
    if _RELAY.search(prose):
        reasons.append("it writes back the reviewer's feedback")
    said = " ".join(_ALNUM.findall(" ".join(allowed).lower()))
    # compared as words, without a leading determiner: "my previous answer" in the request allows
    # "your previous answer" in the reply, "proposal 2" allows "'Proposal 2'"
    if any(
        _DETERMINER.sub("", " ".join(_ALNUM.findall(m.group(0).lower()))) not in said
        for m in _SELF_REVIEW.finditer(prose)
    ):
        reasons.append("it answers the reviewer, not the user")
    echoed = set().union(*(_grams(p) for p in prompt)) - set().union(*(_grams(a) for a in allowed))
    if echoed and _grams(text) & echoed:
        reasons.append(f"it repeats {ECHO_WORDS}+ words of its instructions")
    return reasons


def strip_scaffolding(text: str, prompt: Iterable[str], allowed: Sequence[str] = ()) -> str:
    """``text`` without the lines that carry scaffolding (a labelled line, a preamble, a line that
    repeats the instructions); what is left, stripped (possibly empty)."""
    prompt = list(prompt)
    kept = [line for line in text.splitlines() if not scaffolding_echo(line, prompt, allowed)]
    return "\n".join(kept).strip()


# A sentence end: terminal punctuation, optionally closed by quotes, brackets or emphasis, then
# a space or the end of the line. (A numbered list's marker, "4. ", looks the same: trim_cut
# skips a match that is all of its line's start.)
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]*_]*(?=\s|$)")
_LIST_MARKER = re.compile(r"^[ \t]*(?:[-*•]|\d+[.)])[ \t]*")


def trim_cut(text: str) -> str:
    """``text`` that the token limit cut off, ended at its last complete sentence.

    A model stopped by ``max_tokens`` stops mid-word ("In this context paracetamol can"); the
    user should not read that. The last line is the cut one: it keeps what precedes its last
    sentence end, or goes whole (a list item, a code line). Then trailing lines that only
    introduce what was cut (ending in ':', a bare list marker) go, and a code block the cut left
    open goes from its opening fence. If nothing complete is left, ``text`` is returned as it is
    (a cut answer is still better than none; the caller decides)."""
    lines = text.rstrip().splitlines()
    if not lines:
        return text
    last = lines.pop()
    ends = [m.end() for m in _SENTENCE_END.finditer(last) if not _LIST_MARKER.fullmatch(last[: m.end()])]
    if ends:
        lines.append(last[: ends[-1]])
    while lines and (not lines[-1].strip() or lines[-1].rstrip().endswith(":") or _LIST_MARKER.fullmatch(lines[-1])):
        lines.pop()
    fences = [i for i, line in enumerate(lines) if line.lstrip().startswith("```")]
    if len(fences) % 2:
        del lines[fences[-1] :]
        while lines and (not lines[-1].strip() or lines[-1].rstrip().endswith(":")):
            lines.pop()
    kept = "\n".join(lines).strip()
    return kept or text
