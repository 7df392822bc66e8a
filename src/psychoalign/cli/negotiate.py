"""`psychoalign negotiate`, `frameworks …` and `traces …`."""

from __future__ import annotations

import asyncio
import sys
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import typer
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ..a2a import remote_transport
from ..config import Settings
from ..errors import InputError, PsychoAlignError
from ..frameworks import builtin_names, load_framework
from ..models import ModelSpec
from ..models.registry import preload
from ..negotiation import NegotiationParams
from ..negotiation.params import FLAGS, negotiation_source, parse_params
from ..textio import decode_utf8, normalise_text
from ..traces import Trace, TraceStatus
from ..traces.model import ChannelLine, FinalDecision, GateResult
from ..yamlio import parse_yaml
from .common import (
    ConfigOpt,
    JsonOpt,
    ProgressFn,
    deferred_interrupt,
    emit_json,
    err_console,
    out_console,
    out_or_stdout,
    print_wide,
    progress_bar,
    run_closing,
    safe,
    settings_from,
)

if TYPE_CHECKING:
    from rich.console import Console

    from ..traces import TraceStore

frameworks_app = typer.Typer(help="Ethical frameworks: list, show, validate.", no_args_is_help=True)
traces_app = typer.Typer(help="Negotiation traces: list, show, export.", no_args_is_help=True)


def load_samples() -> list[dict[str, str]]:
    text = (resources.files("psychoalign") / "data" / "samples.yaml").read_text(encoding="utf-8")
    samples: list[dict[str, str]] = parse_yaml(text, "psychoalign/data/samples.yaml")
    return samples


def _store(settings: Settings, url: str | None, no_store: bool) -> TraceStore | None:
    if no_store:
        return None
    from ..traces import open_store  # SQLAlchemy: imported while the models load (negotiate)

    return open_store(url or settings.effective_store_url())


def _params(settings: Settings, overrides: dict[str, Any]) -> NegotiationParams:
    flags = {k: v for k, v in overrides.items() if v is not None}
    origin = {k: f"{FLAGS[k]} {v}" for k, v in flags.items()}
    return parse_params({**settings.negotiation, **flags}, origin=origin, where=negotiation_source(settings))


def _preload_first_roles(settings: Settings) -> None:
    """Load the models of the first two calls of a negotiation, the EVALUATOR's (the request
    screen) and the DRIVE's, in background threads while the rest of the process starts
    (imports, the trace store): on the embedded default, MiniLM and SmolLM2 load side by side
    instead of one after the other. Remote agents load nothing here."""
    if settings.a2a.remote:
        return
    specs: list[ModelSpec] = []
    for role in ("evaluator", "drive"):
        try:
            spec = settings.model_spec(role)
        except PsychoAlignError:  # reported by the negotiation itself, as without a preload
            continue
        if spec not in specs:
            specs.append(spec)
    preload(specs)


def negotiate(
    request: str | None = typer.Argument(None, help="The user request ('-' reads stdin)."),
    framework: str = typer.Option("general", "--framework", "-f", help="Built-in name or path to a YAML file."),
    context: str | None = typer.Option(None, "--context", help="Deployment context (default: the framework's)."),
    earlier: list[str] | None = typer.Option(
        None,
        "--earlier",
        help="An earlier user turn of the conversation (repeat it, oldest first): the safety checks read it "
        "with the request, e.g. a child's age for a dose.",
    ),
    rounds: int | None = typer.Option(None, "--rounds", "-k", help="Maximum rounds k (default 5)."),
    proposals: int | None = typer.Option(None, "--proposals", "-n", help="DRIVE proposals per round (default 3)."),
    tau: float | None = typer.Option(None, "--tau", help="Safety floor tau (default 0.6)."),
    samples: bool = typer.Option(False, "--samples", help="Negotiate the bundled sample requests; print a summary."),
    show_internal: bool = typer.Option(
        False, "--show-internal", help="Reveal DRIVE proposal texts (never shown by default)."
    ),
    store_url: str | None = typer.Option(None, "--store", help="Trace store URL (default: SQLite file under home)."),
    no_store: bool = typer.Option(False, "--no-store", help="Do not store the trace."),
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Negotiate a request between DRIVE, EVALUATOR and MEDIATOR; show how contested it was."""
    settings = settings_from(config)
    params = _params(settings, {"k": rounds, "n_proposals": proposals, "tau": tau})
    if samples and earlier:
        raise InputError(
            "--earlier goes with one request, not --samples", hint='psychoalign negotiate --earlier "…" "…"'
        )
    if samples:
        requests = [(s["kind"], s["request"]) for s in load_samples()]
    elif request is None:
        raise InputError("no request given", hint='psychoalign negotiate "your request" (or --samples)')
    else:
        text = decode_utf8(sys.stdin.buffer.read(), "standard input") if request == "-" else request
        requests = [("request", text)]
    # Bad input is refused here, before a trace exists: one line, exit 2. (The engine fails closed
    # on it too, but as a failed negotiation: a stored failed trace, a fallback answer, exit 1.)
    loaded = load_framework(framework)
    for _kind, text in requests:
        normalised = normalise_text(text)  # as the engine sees it
        length = len(normalised)
        if not normalised.strip():
            raise InputError("the request is empty", hint='psychoalign negotiate "your request" (or --samples)')
        if length > params.max_request_chars:
            raise InputError(
                f"the request is {length} characters, over the limit of {params.max_request_chars}",
                hint="shorten it or raise negotiation.max_request_chars",
            )
    if context is not None:  # the limit /v1 puts on earlier turns: past it the prompt outgrows a model
        length = len(normalise_text(context))
        if length > settings.serve.max_conversation_chars:
            raise InputError(
                f"the context is {length} characters, over the limit of {settings.serve.max_conversation_chars}",
                hint="shorten --context or raise serve.max_conversation_chars",
            )
    held = sum(len(normalise_text(turn)) for turn in earlier or ())
    if held > settings.serve.max_conversation_chars:  # as /v1 refuses earlier messages over it
        raise InputError(
            f"the earlier turns hold {held} characters, over the limit of {settings.serve.max_conversation_chars}",
            hint="drop earlier turns (--earlier) or raise serve.max_conversation_chars",
        )
    # A Ctrl-C while this thread imports beside the preload threads could leave the import lock
    # held (a hang): it is raised once the imports are done (asyncio.run handles it after that).
    with deferred_interrupt():
        _preload_first_roles(settings)
        from ..negotiation import Negotiator  # the engine: imported while the models load

    async def go(bar: ProgressFn | None) -> list[Trace]:
        store = _store(settings, store_url, no_store)
        negotiator = Negotiator(settings, params=params, store=store, transport=remote_transport(settings))
        out = []
        if bar is not None:
            bar(0, len(requests))
        try:
            for kind, text in requests:
                if samples and not json_out:
                    err_console.print(safe(f"negotiating ({kind}): {text[:70]}…", style="dim"))
                out.append(
                    await negotiator.negotiate(
                        text, framework=loaded, context=context, metadata={"kind": kind}, earlier=earlier
                    )
                )
                if bar is not None:
                    bar(len(out), len(requests))
        finally:
            await negotiator.aclose()
            if store is not None:
                await store.close()
        return out

    with progress_bar("negotiated", show=samples and not json_out) as bar:
        traces = asyncio.run(go(bar))
    if samples:
        _print_summary(traces, json_out)
    else:
        show_trace(traces[0], show_internal, json_out)
    failed = [t for t in traces if t.status is TraceStatus.FAILED]
    if failed and not samples:
        # The endpoint's own words are internal: printed with --debug (main.run) or shown above
        # with --show-internal, never by default.
        raise PsychoAlignError(
            f"negotiation failed: {failed[0].error} (trace {failed[0].id})", detail=failed[0].error_detail
        )


def show_trace(trace: Trace, show_internal: bool, json_out: bool) -> None:
    """One trace as JSON or tables; DRIVE proposal texts only with ``show_internal``."""
    if json_out:
        data = trace.model_dump(mode="json")
        if not show_internal:
            _hide_internal(data)
        emit_json(data)
        if describe_decision(trace)[0] in ("answered", "partly answered") and _embedded(trace):
            _print_embedded_note(err_console)  # stdout stays JSON
    else:
        print_trace(trace, show_internal)


HIDDEN = "[hidden: use --show-internal]"


def _hide_internal(data: dict[str, Any]) -> None:
    """Blank everything that can hold DRIVE text: proposal texts, what a deterministic check
    matched, and the EVALUATOR's free text (it may quote the proposal it judged)."""

    def gate(g: dict[str, Any] | None) -> None:
        if g and g.get("evidence"):
            g["evidence"] = [HIDDEN]

    if data.get("error_detail"):  # what an endpoint said back: internal
        data["error_detail"] = HIDDEN

    for rd in data.get("rounds", []):
        for p in rd.get("proposals", []):
            p["text"] = HIDDEN
            gate(p.get("gate"))
            e = p.get("evaluation")
            if e:
                e["modifications"] = [HIDDEN] if e.get("modifications") else []
                e["reasoning"] = HIDDEN if e.get("reasoning") else ""
                c = e.get("conflict", {})
                for key in ("harmful_segments", "stakeholders"):
                    if c.get(key):
                        c[key] = [HIDDEN]
                for key in ("safe_adjacent_topic", "safe_channel"):
                    if c.get(key):
                        c[key] = HIDDEN
    if data.get("final"):
        gate(data["final"].get("final_gate"))


#: The one command that moves every role of the embedded default to a real endpoint (README).
ENDPOINT_COMMAND = (
    "PSYCHOALIGN_DEFAULTS__BACKEND=openai PSYCHOALIGN_DEFAULTS__BASE_URL=http://127.0.0.1:11434/v1 "
    "PSYCHOALIGN_DEFAULTS__MODEL=qwen3:8b psychoalign negotiate --samples"
)


def _rules_of(trace: Trace) -> list[str]:
    """Framework rule ids behind the outcome: those the request tripped before drafting, else
    those named by the gates' reasons and the rule hits of the last round, or of every round when
    no draft was chosen (every draft was blocked: the engine's refusal draws on all of them). Ids
    only: rule ids on a trace are the framework's own (canonical_hits, GateBlock.rule)."""
    if trace.screen is not None and trace.screen.rules:
        return list(trace.screen.rules)
    ids: list[str] = []
    nothing_chosen = trace.final is not None and trace.final.chosen_round is None
    rounds = trace.rounds if nothing_chosen else trace.rounds[-1:]
    evals = [p.evaluation for rd in rounds for p in rd.proposals if p.evaluation is not None]
    if trace.screen is not None and trace.screen.evaluation is not None:
        evals.append(trace.screen.evaluation)
    for e in evals:
        ids.extend(h.rule_id for h in e.rule_hits if h.rule_id != "?")
    for rd in rounds:
        for p in rd.proposals:
            if p.gate is not None:
                ids.extend(p.gate.rule_ids)
    return list(dict.fromkeys(ids))


def describe_decision(trace: Trace) -> tuple[str, str]:
    """(decision, why) in plain words: ``answered``, ``redirected`` or ``refused``, and the reason
    a newcomer can read (which rule, whether a draft was written, what decided)."""
    from ..judges.outcome import Outcome, user_outcome
    from ..negotiation import DefenseMechanism

    f = trace.final
    if trace.status is TraceStatus.FAILED or f is None:
        return "refused", f"the negotiation failed ({trace.error or 'unknown error'}); a fixed refusal was sent"
    rules = _rules_of(trace)
    named = f" (rule {', '.join(rules)})" if rules else ""
    redirect = f.defense in (DefenseMechanism.SUBLIMATION, DefenseMechanism.DISPLACEMENT)
    if trace.screen is not None and trace.screen.decided:
        if redirect and f.composed_by == "template":
            # The framework's own message for the rule (self-harm, a stereotype's premise): the
            # person is not told they broke a rule.
            matched = f"rule {', '.join(rules)}" if rules else "a rule"
            what = f"the request matched {matched}, which the framework answers with its own message"
        elif trace.screen.rules:
            what = f"the request itself breaks a universal rule{named}"
        else:
            what = f"the EVALUATOR judged that no answer to this request could be safe enough{named}"
        reply = ""  # a template: the framework's own text, no agent call
        if f.composed_by == "mediator":
            mediator = trace.agents.get("mediator")
            wrote = (
                "wrote the reply"
                if mediator is not None and mediator.completion_tokens
                else "sent its fixed redirect line (no model text)"
            )
            reply = f"; the MEDIATOR {wrote} and the EVALUATOR checked it"
        return ("redirected" if redirect else "refused"), f"{what}; decided before any draft was written{reply}"
    if f.fallback:
        return "refused", f"the final answer failed the last safety check{named}; a fixed refusal was sent instead"
    if redirect:
        return "redirected", f"every draft was blocked{named}; the reply points to where the need is served safely"
    outcome = user_outcome(trace)
    if f.defense in (DefenseMechanism.RATIONALIZATION, DefenseMechanism.REACTION_FORMATION):
        why = (
            "the request looks like an attempt to get around the rules"
            if f.defense is DefenseMechanism.REACTION_FORMATION
            else "every draft was blocked"
        )
        return "refused", f"{why}{named}"
    if outcome is Outcome.REFUSED:
        return "refused", f"the approved reply declines the request{named}"
    chosen = next(
        (p for rd in trace.rounds if rd.index == f.chosen_round for p in rd.proposals if p.rank == f.chosen_rank), None
    )
    score = f" (safety score {chosen.evaluation.score}/100)" if chosen and chosen.evaluation else ""
    how = {
        "adopted": "a draft the EVALUATOR approved was sent as written",
        "filtered": "a draft was sent with the sentences that broke a rule removed",
        "mediator": "the MEDIATOR rewrote an acceptable draft and it passed the final check",
    }.get(f.composed_by, f"composed by {f.composed_by}")
    decision = "answered" if outcome is Outcome.ANSWERED else "partly answered"
    if f.composed_by == "filtered":  # the rules are those of the sentences removed
        return decision, how + score + named
    why = how + score
    pointer = added_pointer(f)
    if pointer:  # a rule that fired has a channel with its own message (the dose label, self-harm)
        why += f", plus a closing line pointing to {pointer}"
    warnings = added_warnings(f)
    if warnings:
        why += f", plus a safety warning ({warnings})"
    blocked, broken = trace.blocked_drafts()
    if blocked:
        drafts = "1 other draft" if blocked == 1 else f"{blocked} other drafts"
        broke = f" broke rule {', '.join(broken)} and" if broken else ""
        why += f"; {drafts}{broke} {'was' if blocked == 1 else 'were'} blocked"
    return decision, why


def added_pointer(final: FinalDecision) -> str:
    """Where the closing lines the engine added to the answer point (a fired rule's channel: the
    dose label, a crisis line), as recorded (``FinalDecision.channels``), or "". A trace recorded
    before that field says nothing here: its response shows the line."""
    lines = [c.text for c in final.channels or () if c.placement == "closing_line"]
    return " or ".join(dict.fromkeys(lines))


def added_warnings(final: FinalDecision) -> str:
    """The known hazards whose safety warning the engine added to the reply (first, or after a
    crisis message that opens it), by channel id (e.g. ``carbon-monoxide``), as recorded, or ""."""
    ids = [i for c in final.channels or () if c.placement == "warning" for i in (c.channels or ["unnamed"])]
    return ", ".join(dict.fromkeys(ids))


def describe_channels(channels: list[ChannelLine] | None) -> str:
    """The safe channels the engine put in the answer, in words: where each points, how, and for
    which rules."""
    if channels is None:
        return "not recorded (the trace predates this record)"
    if not channels:
        return "none"
    parts = []
    for c in channels:
        how = {"closing_line": "a closing line pointing to", "warning": "a known-hazard warning:"}.get(
            c.placement, "the reply points to"
        )
        rules = f" (rule {', '.join(c.rules)})" if c.rules else ""
        parts.append(f"{how} {c.text}{rules}")
    return "; ".join(parts)


def blocked_by(gate: GateResult | None) -> str:
    """What blocked a draft, from the gate's record: ``layer1: U7-dose-label; tau: below tau``."""
    if gate is None or gate.admissible:
        return "-"
    if gate.blocked_by is None:
        return "not recorded"
    return "; ".join(b.label for b in gate.blocked_by)


def _cost(trace: Trace) -> tuple[float | None, int, int]:
    """(seconds, model tokens, model calls) of one negotiation."""
    seconds = (trace.finished_at - trace.created_at).total_seconds() if trace.finished_at else None
    tokens = sum(a.prompt_tokens + a.completion_tokens for a in trace.agents.values())
    calls = sum(a.calls for a in trace.agents.values())
    return seconds, tokens, calls


def _print_summary(traces: list[Trace], json_out: bool) -> None:
    from ..judges.outcome import user_outcome

    rows = []
    for t in traces:
        decision, why = describe_decision(t)
        seconds, tokens, calls = _cost(t)
        rows.append(
            {
                "kind": t.metadata.get("kind", ""),
                "request": t.request,
                "status": t.status.value,
                "outcome": user_outcome(t).value,
                "decision": decision,
                "why": why,
                "rules": _rules_of(t),
                "channels": [c.model_dump(mode="json") for c in t.final.channels or ()] if t.final else [],
                "blocked": dict(zip(("drafts", "rules"), t.blocked_drafts(), strict=True)),
                "seconds": seconds,
                "tokens": tokens,
                "calls": calls,
                "calls_by_role": {role: a.calls for role, a in t.agents.items() if a.calls},
                "drive_tokens": (t.agents["drive"].prompt_tokens + t.agents["drive"].completion_tokens)
                if "drive" in t.agents
                else 0,
                "response": t.final.response if t.final else "",
                "rounds": len(t.rounds),
                "tension": t.final.tension if t.final else None,
                "state": t.final.state.value if t.final and t.final.state else None,
                "defense": t.final.defense.value if t.final and t.final.defense else None,
                "trace": t.id,
                "models": dict(t.models),
            }
        )
    if json_out:
        emit_json(rows)
        if any(_embedded(t) for t in traces):
            _print_embedded_note(err_console)  # stdout stays JSON
        return
    # The models first: every decision, cost and answer below is theirs.
    for models in dict.fromkeys(", ".join(f"{k}={v}" for k, v in t.models.items()) for t in traces):
        out_console.print(Text.assemble(("Models: ", "bold"), safe(models or "-")))
    # Per sample: the decision in plain words, why, what it cost, and the whole answer.
    for i, r in enumerate(rows, start=1):
        out_console.print(Text.assemble((f"{i}. {r['kind']}: ", "bold"), safe(str(r["request"]))))
        colour = {"answered": "green", "redirected": "yellow"}.get(str(r["decision"]), "red")
        out_console.print(
            Text.assemble("   ", (str(r["decision"]).upper(), f"bold {colour}"), " - ", safe(str(r["why"])))
        )
        out_console.print(Text("   " + _cost_line(r), style="dim"))
        answer = str(r["response"]).strip()
        if out_console.is_terminal:
            out_console.print(
                Panel(safe(answer), title="What the user gets", title_align="left", padding=(0, 1), expand=False)
            )
        else:  # piped: no box as wide as the longest line; each line of the answer whole, indented
            out_console.print(Text("   What the user gets:", style="bold"))
            out_console.print(safe("\n".join(f"     {line}" for line in answer.splitlines())))
    out_console.print(Text(_cost_legend(traces), style="dim"))
    if any(_embedded(t) for t in traces):
        _print_embedded_note()


def _cost_line(row: dict[str, Any]) -> str:
    """ "10.1 s; 2 rounds; agent calls: DRIVE 4, EVALUATOR 5; 1322 model tokens (1322 for drafts); trace …" """
    secs = "-" if row["seconds"] is None else f"{row['seconds']:.1f} s"
    rounds = _rounds(row["rounds"])
    by_role = row["calls_by_role"]
    calls = (
        "agent calls: " + ", ".join(f"{role.upper()} {n}" for role, n in by_role.items())
        if by_role
        else "no agent call"
    )
    tokens = f"{row['tokens']} model tokens"
    if row["tokens"]:
        tokens += f" ({row['drive_tokens']} for drafts)"
    return f"{secs}; {rounds}; {calls}; {tokens}; trace {str(row['trace'])[:8]}"


def _rounds(n: int) -> str:
    return {0: "no round", 1: "1 round"}.get(n, f"{n} rounds")


def _cost_legend(traces: list[Trace]) -> str:
    """What the cost lines count, printed once below them."""
    legend = (
        "Cost: an agent call is one message to the DRIVE, the EVALUATOR or the MEDIATOR (to the EVALUATOR: a "
        "screen of the request, a round's drafts, the final reply); model tokens are what language models "
        "read and wrote"
    )
    if any(t.models.get("evaluator", "").startswith("classifier:") for t in traces):
        legend += ", and the EVALUATOR here is a classifier, which uses none"
    legend += "."
    if any(t.screen is not None and t.screen.decided and not any(a.calls for a in t.agents.values()) for t in traces):
        legend += " No agent call: a rule's own check decided from the request's words, before any model was asked."
    return legend


def _embedded(trace: Trace) -> bool:
    """Whether the embedded model wrote or rewrote the answer (DRIVE or MEDIATOR)."""
    return any(trace.models.get(role, "").startswith("local:") for role in ("drive", "mediator"))


def _print_embedded_note(console: Console | None = None) -> None:
    """The note that the embedded model's answers can be wrong, with the command that points
    every role at a real endpoint; on ``console`` (default: stdout, after the answers)."""
    (console or out_console).print(
        Text.assemble(
            ("Note: ", "bold"),
            "the embedded 135M model shows the negotiation path offline; its answers can be wrong. "
            "Point every role at a real endpoint with: ",
            (ENDPOINT_COMMAND, "bold"),
        )
    )


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def print_trace(trace: Trace, show_internal: bool = False) -> None:
    fw = trace.framework
    header = Text.assemble(
        ("Request: ", "bold"),
        safe(trace.request),
        "\n",
        ("Framework: ", "bold"),
        safe(f"{fw.name} v{fw.version} ({fw.sha256[:12]})" if fw else "-"),
        "\n",
        # the scores, tensions and the answer below depend on these: a model swap must show here
        ("Models: ", "bold"),
        safe(", ".join(f"{role}={label}" for role, label in trace.models.items()) or "-"),
        "\n",
        ("Context: ", "bold"),
        safe(trace.context or "-"),
        *(("\n", ("Earlier user turns: ", "bold"), safe(" | ".join(trace.earlier))) if trace.earlier else ()),
    )
    out_console.print(Panel(header, title=safe(f"trace {trace.id}"), expand=False))
    for rd in trace.rounds:
        table = Table(
            title=f"Round {rd.index}: T = {rd.tension:.3f}, {rd.admissible} admissible"
            + (f", {rd.exit}" if rd.exit else "")
        )
        for col in ("#", "u_D", "score", "verdict", "gates", "blocked by", "T", "objective"):
            table.add_column(col)
        if show_internal:
            table.add_column("DRIVE proposal (internal)", overflow="fold")
        for p in rd.proposals:
            e, g = p.evaluation, p.gate
            gate = "pass" if g and g.admissible else ("; ".join(g.reasons) if g else "-")
            if show_internal and g is not None and g.evidence:  # what a check matched: DRIVE text
                gate += " [matched: " + "; ".join(g.evidence) + "]"
            row: list[Any] = [
                ("*" if rd.proposals.index(p) == rd.lead else "") + str(p.rank),
                f"{p.utility:.2f}",
                str(e.score) if e else "-",
                e.verdict.value if e else "-",
                safe(gate),
                safe(blocked_by(g)),
                f"{p.tension:.3f}" if p.tension is not None else "-",
                f"{p.objective:.3f}" if p.objective is not None else "-",
            ]
            if show_internal:
                kept = f"[blocked draft, not stored: {p.redacted.chars} characters]" if p.redacted else p.text
                row.append(safe(kept))
            table.add_row(*row)
        out_console.print(table)
    if trace.rounds:
        out_console.print(Text(ROUND_LEGEND, style="dim"))
    f = trace.final
    if trace.status is TraceStatus.FAILED:
        out_console.print(Text.assemble(("FAILED: ", "bold red"), safe(trace.error or "")))
        if show_internal and trace.error_detail:
            out_console.print(Text.assemble(("Detail (internal): ", "bold"), safe(trace.error_detail)))
    if f is not None:
        facts = Text.assemble(
            ("State: ", "bold"),
            f.state.value if f.state else "-",
            "   ",
            ("T: ", "bold"),
            f"{f.tension:.3f}" if f.tension is not None else "-",
            "   ",
            ("Defense: ", "bold"),
            f.defense.value if f.defense else "none",
            "   ",
            ("Composed: ", "bold"),
            safe(f.composed_by + (" (dual gate fallback)" if f.fallback else "")),
        )
        out_console.print(facts)
        decision, why = describe_decision(trace)
        out_console.print(Text.assemble(("Decision: ", "bold"), decision, " - ", safe(why)))
        out_console.print(Text.assemble(("Safe channels: ", "bold"), safe(describe_channels(f.channels))))
        if trace.blocked_drafts_kept:
            out_console.print("[yellow]This trace keeps blocked drafts in full (traces.keep_blocked_drafts).[/yellow]")
        out_console.print(Panel(safe(f.response), title="Response", expand=False))
        if decision in ("answered", "partly answered") and _embedded(trace):
            _print_embedded_note()


#: Under the round tables, once: what their columns and the word after a round's title mean.
ROUND_LEGEND = (
    "Columns: # the DRIVE's rank of the draft (* the round's lead draft); u_D how useful the DRIVE rates it (0-1); "
    "score the EVALUATOR's score (0-100) and verdict; gates what the checks outside every agent found (pass: "
    "nothing), blocked by the gates that kept the draft from the MEDIATOR; T the tension; objective the "
    "MEDIATOR's weighted choice score. A word after a round's title says why the negotiation stopped "
    "there (early_exit, accepted, confident, converged, corrected: a "
    "wrong figure is withheld and the checked fact stated, ceiling). docs/negotiation.md"
)


# -- frameworks ---------------------------------------------------------------------------------
@frameworks_app.command("list")
def frameworks_list(json_out: bool = JsonOpt) -> None:
    """Built-in frameworks with version, hash and rule counts."""
    rows: list[dict[str, Any]] = []
    for name in builtin_names():
        fw = load_framework(name)
        rows.append(
            {
                "name": fw.name,
                "version": fw.version,
                "sha256": fw.sha256,
                "description": fw.description,
                "universal": len(fw.universal),
                "contextual": len(fw.contextual),
                "aspirational": len(fw.aspirational),
            }
        )
    if json_out:
        emit_json(rows)
        return
    table = Table(
        title="Built-in frameworks",
        caption="rules per layer: universal (no one may break them), contextual (this deployment's), aspirations",
    )
    for col in ("name", "version", "hash", "universal", "contextual", "aspirations", "description"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(
            safe(r["name"]),
            safe(r["version"]),
            str(r["sha256"])[:12],
            str(r["universal"]),
            str(r["contextual"]),
            str(r["aspirational"]),
            safe(str(r["description"])),
        )
    out_console.print(table)


@frameworks_app.command("show")
def frameworks_show(name: str = typer.Argument(..., help="Built-in name or path."), json_out: bool = JsonOpt) -> None:
    """Print a framework's layers and rules as the EVALUATOR reads them."""
    fw = load_framework(name)
    if json_out:
        emit_json({**fw.model_dump(mode="json"), "sha256": fw.sha256})
        return
    out_console.print(safe(fw.render()))
    out_console.print(safe(f"sha256 {fw.sha256}", style="dim"))


@frameworks_app.command("validate")
def frameworks_validate(
    path: Path = typer.Argument(..., help="Framework YAML file."), json_out: bool = JsonOpt
) -> None:
    """Check a framework file; errors name the file and line."""
    fw = load_framework(path)
    if json_out:
        emit_json({"ok": True, "name": fw.name, "version": fw.version, "rules": len(fw.rules()), "sha256": fw.sha256})
        return
    line = f"{fw.name} v{fw.version}: {len(fw.rules())} rules, sha256 {fw.sha256[:12]}"
    out_console.print(Text.assemble(("ok", "green"), " ", safe(line)))


# -- traces -------------------------------------------------------------------------------------
def _open(config: Path | None, store_url: str | None) -> TraceStore:
    from ..traces import open_store

    return open_store(store_url or settings_from(config).effective_store_url())


StoreOpt = typer.Option(None, "--store", help="Trace store URL (default: SQLite file under home).")


@traces_app.command("list")
def traces_list(
    limit: int = typer.Option(20, "--limit", min=1, max=100_000, help="How many traces (1-100000)."),
    status: TraceStatus | None = typer.Option(None, "--status"),
    store_url: str | None = StoreOpt,
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Newest traces first."""

    async def newest(store: TraceStore) -> list[dict[str, Any]]:
        await store.recover_interrupted()
        return await store.list(limit=limit, status=status)

    rows = run_closing(lambda: _open(config, store_url), newest)
    if json_out:
        emit_json(rows)
        return
    if out_console.is_terminal:
        out_console.print(_traces_stacked(rows))
        return
    # Piped or written to a file: one line per trace, every cell whole (full model labels), so the
    # table parses back (split a line at the column rules).
    table = Table(title="Traces")
    for col in ("id", "created", "status", "rounds", "T", "state", "defense", "request", "models"):
        table.add_column(col, no_wrap=True)
    for r in rows:
        t = r["tension"]
        table.add_row(
            safe(r["id"][:12]),
            safe(r["created_at"][:19]),
            safe(r["status"]),
            str(r["rounds"]),
            "-" if t is None else f"{t:.2f}",
            safe(r["state"] or "-"),
            safe(r["defense"] or "-"),
            safe(_one_line(r["request"])[:60]),
            safe(", ".join(f"{role}={_one_line(label)}" for role, label in r.get("models", {}).items()) or "-"),
        )
    print_wide(table, 120)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _traces_stacked(rows: list[dict[str, Any]]) -> Table:
    """``traces list`` on a terminal: four columns whose cells stack their facts, so a terminal of
    100 columns still gives the request a readable width beside the three models."""
    from rich import box

    table = Table(title="Traces", box=box.SIMPLE_HEAD, show_lines=True)
    table.add_column("trace", no_wrap=True)
    table.add_column("outcome", max_width=16)
    table.add_column("request", ratio=1, overflow="fold")
    table.add_column("models: DRIVE, EVALUATOR, MEDIATOR", max_width=32, overflow="fold")
    for r in rows:
        t = r["tension"]
        outcome = [
            (r["state"] or r["status"]).replace("_", " "),
            f"T {'-' if t is None else f'{t:.2f}'}, {_rounds(r['rounds'])}",
        ]
        if r["status"] != "completed":
            outcome[0] = r["status"] + ("" if r["state"] is None else f" ({outcome[0]})")
        if r["defense"]:
            outcome.append(r["defense"].replace("_", " "))
        created = r["created_at"][:16].replace("T", " ")
        table.add_row(
            safe("\n".join((r["id"][:8], *created.split(" ")))),
            safe("\n".join(outcome)),
            safe(_clip(_one_line(r["request"]), 160)),
            safe(_models_stacked(r.get("models", {}))),
        )
    return table


def _models_stacked(models: dict[str, str]) -> str:
    """One line per role, in the order DRIVE, EVALUATOR, MEDIATOR, or one line when every role
    runs the same model. Short forms: a model file without its folder, a classifier without its
    weights' hash (``traces show`` and ``--json`` give both)."""
    labels = [_short_label(models[role]) for role in ("drive", "evaluator", "mediator") if role in models]
    if not labels:
        return "-"
    if len(labels) == 3 and len(set(labels)) == 1:
        return f"all three: {labels[0]}"
    return "\n".join(labels)


def _short_label(label: str) -> str:
    backend, _, model = label.partition(":")
    if backend in ("local", "classifier"):
        model = model.replace("\\", "/").rsplit("/", 1)[-1]
    if backend == "classifier":
        model = model.split("@", 1)[0]
    return _one_line(f"{backend}:{model}" if model else backend)


@traces_app.command("show")
def traces_show(
    trace_id: str = typer.Argument(..., help="Trace id or a unique prefix."),
    show_internal: bool = typer.Option(False, "--show-internal"),
    store_url: str | None = StoreOpt,
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """One trace in full."""

    trace = run_closing(lambda: _open(config, store_url), lambda store: store.get(trace_id))
    if trace is None:
        raise InputError(f"no trace with id (or unique prefix) '{trace_id}'", hint="see `psychoalign traces list`")
    show_trace(trace, show_internal, json_out)


@traces_app.command("export")
def traces_export(
    fmt: str = typer.Option("jsonl", "--format", help="jsonl (one full trace per line)."),
    out: Path | None = typer.Option(None, "--out", "-o", help="Output file (default stdout)."),
    store_url: str | None = StoreOpt,
    config: Path | None = ConfigOpt,
) -> None:
    """Export every trace (full, including internal proposal texts) for analysis."""
    if fmt != "jsonl":
        raise InputError(f"unknown export format '{fmt}'", hint="use --format jsonl")

    async def go(sink: IO[str]) -> int:
        store = _open(config, store_url)
        n = 0
        try:
            async for trace in store.iter_all():
                sink.write(trace.model_dump_json() + "\n")
                n += 1
        finally:
            await store.close()
        return n

    with out_or_stdout(out) as sink:  # --out FILE is replaced only when every trace is written
        n = asyncio.run(go(sink))
    if out:
        err_console.print(safe(f"exported {n} traces to {out}"), soft_wrap=True)
