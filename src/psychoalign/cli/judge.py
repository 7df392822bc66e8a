"""`psychoalign judge …`: the shared judges, one response at a time or measured on labelled data."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import typer
from rich.table import Table

from ..errors import InputError
from ..textio import decode_utf8
from .common import (
    ConfigOpt,
    DataOpt,
    JsonOpt,
    ProgressFn,
    data_dir_from,
    emit_json,
    err_console,
    out_console,
    progress_bar,
    safe,
    settings_from,
)

if TYPE_CHECKING:
    from ..experiments.harness.judging import Judges
    from ..experiments.harness.metering import ModelPool

_T = TypeVar("_T")

judge_app = typer.Typer(help="Judges shared by STAR and the experiments (refusal detection).", no_args_is_help=True)

TIERS = ("aware", "rules", "model", "cascade")
TierOpt = typer.Option(
    "aware",
    "--tier",
    help="aware (offline: rules, phrase-free refusals, answers that miss the request), rules (the response "
    "alone), model (the --role model) or cascade.",
)
HARM_TIERS = ("auto", "model", "harmbench", "strongreject", "classifier")
RoleOpt = typer.Option("judge", "--role", help="Config role of the judge model (model and cascade tiers).")


def _run_judged(
    pool: ModelPool, judges: Judges, work: Callable[[ProgressFn | None], Awaitable[_T]], *, show: bool
) -> _T:
    """Run ``work`` under a progress bar (on a terminal), then close the judges and their models."""

    async def go(bar: ProgressFn | None) -> _T:
        try:
            return await work(bar)
        finally:
            judges.close()
            await pool.aclose()

    with progress_bar("judged", show=show) as bar:
        return asyncio.run(go(bar))


Clustering = Mapping[str, Any]


def clustered_intervals(confusion: dict[str, int], clustering: Clustering | None) -> dict[str, dict[str, Any]]:
    """Agreement, sensitivity and specificity whose labelled rows repeat prompts (``clustering``: a
    calibration's ``prompts``, ``n_eff`` and ``rates_n_eff``, :func:`~psychoalign.experiments.
    harness.calibration.clustering`): each one's interval on its effective n, as the validity gate
    computes it (:func:`~psychoalign.experiments.harness.validity.share_interval`), and that n.
    Empty when the rows answer distinct prompts (the plain Wilson intervals hold)."""
    from ..experiments.harness.validity import share_interval
    from ..judges.agreement import figures_shown, from_confusion

    if not clustering or clustering.get("n_eff") is None:
        return {}
    effective = {"agreement": clustering.get("n_eff"), **(clustering.get("rates_n_eff") or {})}
    out: dict[str, dict[str, Any]] = {}
    for f in figures_shown(from_confusion(confusion)):
        n_eff = effective.get(f.name)
        if f.value is None or f.ci is None or n_eff is None or float(n_eff) >= f.n:
            continue
        lo, hi, n_eff = share_interval(f.value, f.n, n_eff)
        out[f.name] = {"ci": [round(lo, 3), round(hi, 3)], "n_eff": round(n_eff, 1)}
    return out


def _agreement_line(
    confusion: dict[str, int], *, warn: bool = True, held_out: bool = True, clustering: Clustering | None = None
) -> str:
    """Agreement, sensitivity, specificity and kappa from confusion counts, each with its interval
    (or why none is shown) and the responses behind it; on rows that repeat prompts
    (``clustering``), the shares' intervals are clustered by prompt and say their effective n.
    Warns on stderr, in one line, when a figure rests on fewer than ten responses, and when the
    validity gate finds the judge weak for a reason those warnings leave unsaid (``held_out``
    False: the labels are in sample)."""
    from ..judges.agreement import MIN_RESPONSES, figures_shown, from_confusion, small_figures

    fig = from_confusion(confusion)
    shown = figures_shown(fig)
    clustered = clustered_intervals(confusion, clustering)
    one_class = fig.positives in (0, fig.n)
    parts = []
    for f in shown:
        value = "n/a" if f.value is None else f"{f.value:.3f}"
        behind = f"n {f.n}"
        if f.name == "kappa" and one_class:
            # kappa is 0 by construction when the labels hold one class: not a measurement
            value, interval = "n/a", " [one class of labels]"
        elif f.value is None:
            interval = ""
        elif (c := clustered.get(f.name)) is not None:
            interval = f" [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}]"
            behind += f", clustered by prompt: effective n {c['n_eff']:.1f}"
        elif f.ci is not None:
            interval = f" [{f.ci[0]:.3f}, {f.ci[1]:.3f}]"
        else:
            interval = " [interval n/a: n too small]" if f.n < MIN_RESPONSES else " [interval n/a: zero width]"
        parts.append(f"{'κ' if f.name == 'kappa' else f.name} {value}{interval} ({behind})")
    if warn and (small := small_figures(shown)):
        _warn_small(", ".join(small), "a larger --limit")
    if warn:
        tp, fp, fn, tn = (int(confusion.get(k, 0)) for k in ("tp", "fp", "fn", "tn"))
        _warn_constant(tp, fp, fn, tn)
        why = _not_measured(fig)
        if why is not None:
            err_console.print(f"warning: {why}", style="yellow", highlight=False)
        elif (
            not small
            and constant_verdict(tp, fp, fn, tn) is None
            and (weak := gate_verdict(confusion, held_out=held_out, clustering=clustering))
        ):
            # what the lines above leave unsaid: 0 < κ < 0.4, or fewer than 30 labelled responses
            err_console.print(f"warning: {weak}", style="yellow", highlight=False)
    tail = f"; n = {fig.n} ({fig.positives} positive)"
    if clustered and clustering is not None:
        tail += f", {clustering.get('prompts')} prompts: intervals clustered by prompt"
    return ", ".join(parts) + tail


def judge_gate(
    confusion: dict[str, int], *, held_out: bool = True, clustering: Clustering | None = None
) -> dict[str, Any]:
    """The experiments' validity gate (:func:`~psychoalign.experiments.harness.validity.gate`) on
    these confusion counts (and, on rows that repeat prompts, their ``clustering``): the same judge
    is believed here exactly when a run would believe it."""
    from ..experiments.harness.validity import gate
    from ..judges.agreement import from_confusion

    fig = from_confusion(confusion)
    if fig.n == 0:
        return gate({"n": 0})
    pa, pb = (fig.tp + fig.fp) / fig.n, fig.positives / fig.n
    chance = pa * pb + (1 - pa) * (1 - pb)
    repeats = {k: clustering[k] for k in ("prompts", "n_eff") if clustering and k in clustering}
    return gate(
        {"agreement": fig.agreement, "n": fig.n, "chance": chance, "kappa": fig.kappa, "held_out": held_out, **repeats}
    )


def gate_verdict(
    confusion: dict[str, int], *, held_out: bool = True, clustering: Clustering | None = None
) -> str | None:
    """One line when :func:`judge_gate` finds the judge weak, else None."""
    verdict = judge_gate(confusion, held_out=held_out, clustering=clustering)
    if verdict["status"] != "weak":
        return None
    return (
        f"weak judge: {verdict['weak_reason']}; an experiment run marks the columns it decides, "
        "so do not read its verdicts as a measurement"
    )


def _not_measured(fig: Any) -> str | None:
    """Why the agreement figures do not show a judge better than chance, else None: the labels hold
    one class (specificity or sensitivity and kappa are undefined, agreement is the other share),
    or kappa's interval reaches 0 (or kappa is at most 0 where no interval is shown)."""
    if fig.n and fig.positives in (0, fig.n):
        which = "positive" if fig.positives else "negative"
        return (
            f"every one of the {fig.n} reference labels is {which}: kappa is 0 by construction and "
            f"{'specificity' if fig.positives else 'sensitivity'} is undefined, so these figures cannot show the "
            "judge tells the classes apart; judge a set holding both"
        )
    if fig.kappa is None or (fig.tp + fig.fp) in (0, fig.n):
        return None  # no kappa, or a constant judge (its own warning says so)
    from ..judges.agreement import MIN_RESPONSES

    ci = fig.kappa_ci if fig.n >= MIN_RESPONSES else None  # the interval the line shows, if any
    if (ci[0] if ci is not None else fig.kappa) <= 0:
        worse = ci is not None and ci[1] < 0
        return (
            f"κ {fig.kappa:.3f}"
            + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci is not None else "")
            + (
                ": the judge disagrees with the labels more than chance would (an inverted label or scale?)"
                if worse
                else ": the judge is not shown to agree with the labels beyond chance"
            )
            + "; do not use its verdicts as a measurement"
        )
    return None


def constant_verdict(tp: int, fp: int, fn: int, tn: int, positive: str = "positive") -> str | None:
    """Why the figures measure nothing when the judge gave every response one verdict (a model
    that answers one label whatever it reads), else None: its agreement is then the base rate."""
    n = tp + fp + fn + tn
    if n == 0 or (tp + fp and fn + tn):
        return None
    verdict = positive if tp + fp else f"not {positive}"
    base = (tp + tn) / n
    return (
        f"the judge gave all {n} responses the same verdict ({verdict}): it does not tell them apart, "
        f"and its agreement {base:.3f} is the share of responses labelled that way, not a measurement"
    )


def _warn_constant(tp: int, fp: int, fn: int, tn: int, positive: str = "positive") -> None:
    """One line on stderr (so that --json output stays parseable) when :func:`constant_verdict` applies."""
    if (why := constant_verdict(tp, fp, fn, tn, positive)) is not None:
        err_console.print(f"warning: {why}", style="yellow", highlight=False)


def _warn_small(what: str, more: str) -> None:
    """One line on stderr (so that --json output stays parseable): these figures rest on few responses."""
    from ..judges.agreement import MIN_RESPONSES

    err_console.print(
        f"warning: fewer than {MIN_RESPONSES} responses behind {what}: intervals that wide say little; "
        f"judge more responses ({more})",
        highlight=False,
    )


def _check_role(role: str, settings: Any) -> None:
    """A --role typo would fall back to [defaults] silently (or, on an offline tier, be ignored)."""
    from ..config import KNOWN_ROLES

    if role not in KNOWN_ROLES and role not in settings.roles:
        known = ", ".join(sorted({*KNOWN_ROLES, *settings.roles}))
        raise InputError(f"unknown role '{role}' for --role", hint=f"choose one of: {known}; or add [roles.{role}]")


def _judge(tier: str, role: str, config: Path | None) -> tuple[Any, Any]:
    from ..judges import build_refusal_judge
    from ..models import build_model

    if tier not in TIERS:
        raise InputError(f"unknown tier '{tier}'", hint="aware, rules, model or cascade")
    settings = settings_from(config)  # read on every tier: a broken --config file is named, not skipped
    _check_role(role, settings)
    model = None
    if tier in ("model", "cascade"):
        model = build_model(settings.model_spec(role), cache_dir=settings.cache_dir())
    return build_refusal_judge(tier, model), model  # type: ignore[arg-type]


@judge_app.command("refusal")
def judge_refusal(
    text: str = typer.Argument(..., help="The response to judge; '-' reads standard input."),
    request: str | None = typer.Option(
        None, "--request", help="The request it answers: the aware tier checks the response addresses it."
    ),
    tier: str = TierOpt,
    role: str = RoleOpt,
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Did this response refuse? Prints the label, confidence, evidence and tier."""
    if text == "-":
        text = decode_utf8(sys.stdin.buffer.read(), "standard input")
        if not text.strip():  # nothing piped: a mistake, not an empty response to judge
            raise InputError(
                "standard input is empty: there is no response to judge",
                hint="pipe the response in (`echo TEXT | psychoalign judge refusal -`) or pass it as the argument",
            )
    judge, model = _judge(tier, role, config)

    async def go() -> Any:
        try:
            return await judge.judge(text, request=request)
        finally:
            if model is not None:
                await model.aclose()

    verdict = asyncio.run(go())
    if json_out:
        emit_json(verdict.model_dump(mode="json"))
        return
    out_console.print(
        f"{verdict.label.value} (confidence {verdict.confidence:.2f}, tier {verdict.tier})", highlight=False
    )
    if verdict.evidence:
        out_console.print(safe(f"evidence: {verdict.evidence!r}"))
    out_console.print(safe(f"reason: {verdict.reason}"))


@judge_app.command("eval-refusal")
def judge_eval_refusal(
    data: Path | None = DataOpt,
    tier: str = TierOpt,
    role: str = RoleOpt,
    source: list[str] | None = typer.Option(
        None, "--source", help="Only these sources: xstest, harmbench-compliant, hard-case, perturbed."
    ),
    limit: int | None = typer.Option(None, "--limit", help="Every k-th item so that about N are judged."),
    no_perturb: bool = typer.Option(False, "--no-perturb", help="Skip the perturbed copies."),
    concurrency: int = typer.Option(1, "--concurrency", help="Parallel judge calls (remote endpoints)."),
    misses: int = typer.Option(0, "--misses", help="Print up to N misclassified responses."),
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Precision/recall of a refusal-judge tier on the labelled set (docs/judges.md). In-sample for the
    rules and the aware tier (they were written and tuned on it): `judge eval-jailbreak --tier refusal`
    measures them on held-out human labels."""
    from ..judges.refusal_eval import evaluate, load_refusal_set

    items = load_refusal_set(data_dir_from(data, settings_from(config)), perturb=not no_perturb)
    if source:
        known = {x.source for x in items}
        unknown = set(source) - known
        if unknown:
            raise InputError(f"unknown source(s) {sorted(unknown)}", hint=f"choose from {sorted(known)}")
        items = [x for x in items if x.source in source]
    if limit is not None:
        if limit < 1:
            raise InputError(f"--limit must be at least 1 (got {limit})")
        step = max(1, len(items) // limit)
        items = items[::step][:limit]
    judge, model = _judge(tier, role, config)

    async def go(bar: ProgressFn | None) -> Any:
        def progress(done: int, total: int) -> None:
            if bar is not None:
                bar(done, total)
            elif tier in ("model", "cascade") and (done % 25 == 0 or done == total):
                err_console.print(f"[dim]{done}/{total}[/dim]")

        try:
            return await evaluate(judge, items, concurrency=concurrency, keep_misses=misses, progress=progress)
        finally:
            if model is not None:
                await model.aclose()

    with progress_bar("judged", show=not json_out) as bar:
        report = asyncio.run(go(bar))
    if small := report.small_samples():
        _warn_small(", ".join(small), "a larger --limit, more --source")
    every = report.refused.get("all")
    if every is not None:
        _warn_constant(every.tp, every.fp, every.fn, every.tn, "refused")
    if json_out:
        emit_json({"tier": tier, "model": model.label if model else None, **report.model_dump(mode="json")})
        return
    title = f"Refusal judge '{tier}'" + (f" ({model.label})" if model else "") + f": {report.n} responses"
    table = Table(title=safe(title))
    for col in ("subset", "n", "precision [95% CI]", "recall [95% CI]", "F1", "accuracy [95% CI]"):
        table.add_column(col)

    def fmt(
        x: float | None, ci: tuple[float, float] | None = None, n: int | None = None, eff: float | None = None
    ) -> str:
        if x is None:
            return "n/a"
        behind = "" if n is None else f" (n {n}" + ("" if eff is None else f", effective n {eff:.1f}") + ")"
        return f"{x:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "") + behind

    for name, m in report.refused.items():
        row = (
            fmt(m.precision, m.precision_ci, m.tp + m.fp, m.n_eff.get("precision")),
            fmt(m.recall, m.recall_ci, m.tp + m.fn, m.n_eff.get("recall")),
            fmt(m.f1),
            fmt(m.accuracy, m.accuracy_ci, m.n, m.n_eff.get("accuracy")),
        )
        table.add_row(safe(name), str(m.n), *row)
    out_console.print(table)
    if repeated := [
        f"{name} {m.n} responses to {m.prompts} prompts" for name, m in report.refused.items() if m.prompts
    ]:
        out_console.print(
            safe(
                f"responses repeat prompts ({'; '.join(repeated)}): intervals clustered by prompt, on the effective n; "
                "a figure without one varied no more between prompts than independent responses would"
            ),
            highlight=False,
            soft_wrap=True,
        )
    fr = report.full_refusal
    out_console.print(
        f"full refusal only (original data, n = {fr.n}): "
        f"precision {fmt(fr.precision, fr.precision_ci, fr.tp + fr.fp, fr.n_eff.get('precision'))}, "
        f"recall {fmt(fr.recall, fr.recall_ci, fr.tp + fr.fn, fr.n_eff.get('recall'))}; "
        f"3-way accuracy {report.three_way_accuracy:.3f}; "
        f"perturbation invariance {fmt(report.perturbation_invariance)}; errors {report.errors}; {report.seconds:.2f}s",
        highlight=False,
    )
    if tier in ("rules", "aware"):
        out_console.print(
            f"in-sample: the '{tier}' tier was written and tuned on these sources; held-out figures: "
            "psychoalign judge eval-jailbreak --tier refusal",
            highlight=False,
        )
    for miss in report.misses:
        out_console.print(safe(f"- {miss.id}: {miss.label.value} judged {miss.predicted.value}: {miss.response!r}"))


@judge_app.command("eval-harm")
def judge_eval_harm(
    data: Path | None = DataOpt,
    tier: str = typer.Option(
        "auto",
        "--tier",
        help="model, harmbench or strongreject (prompts on the --role model), classifier (offline) or auto "
        "(as experiments pick: on an endpoint, the prompt that agrees best with labelled answers).",
    ),
    role: str = RoleOpt,
    limit: int = typer.Option(100, "--limit", min=1, max=2000, help="Labelled items judged (a seeded sample)."),
    seed: int = typer.Option(0, "--seed", help="Sampling seed."),
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Agreement of the harm judge with held-out labelled non-refusals (docs/judges.md, "Harm judge")."""
    from ..experiments.harness.calibration import harm_agreement
    from ..experiments.harness.judging import Judges, JudgeSpec
    from ..experiments.harness.metering import CallMeter, ModelPool

    if tier not in HARM_TIERS:
        raise InputError(f"unknown tier '{tier}'", hint=", ".join(HARM_TIERS))
    settings = settings_from(config)
    _check_role(role, settings)
    data = data_dir_from(data, settings)
    if not (data / "xstest").is_dir():
        raise InputError(f"no xstest/ in {data}", hint="psychoalign data verify shows what the data directory holds")
    pool = ModelPool(settings)
    judges = Judges(JudgeSpec(role=role, harm=tier), pool, data, cache_path=None, meter=CallMeter())

    result = _run_judged(
        pool, judges, lambda bar: harm_agreement(judges, data, limit, seed, progress=bar), show=not json_out
    )
    held_out = bool(result.get("held_out", True))
    # the calibration's clustering (rows answering one goal): the same as a run's gate reads
    line = _agreement_line(result["confusion"], held_out=held_out, clustering=result) if "confusion" in result else None
    if json_out:
        if "confusion" in result:  # the gate's verdict, as a run would give it
            result["gate"] = judge_gate(result["confusion"], held_out=held_out, clustering=result)
            if clustered := clustered_intervals(result["confusion"], result):
                result["clustered_ci"] = clustered
        emit_json(result)
        return
    if line is None:
        out_console.print(safe(f"harm judge not measured: {result.get('reason')}"), highlight=False)
        return
    out_console.print(safe(f"harm judge {result['judge']} ({result['tier']}): {line}"), highlight=False)
    held = "held out" if result.get("held_out") else "in sample"
    out_console.print(safe(f"  reference ({held}): {result['reference']}"), highlight=False)
    for name, fig in (result.get("picked") or {}).get("candidates", {}).items():
        shown = fig.get("error") or f"agreement {fig['agreement']}, κ {fig['kappa']} (n = {fig['n']})"
        out_console.print(safe(f"  pick, {name} prompt: {shown}"), highlight=False)
    for source, counts in result["flagged_by_source"].items():
        out_console.print(safe(f"  {source}: {counts['flagged']}/{counts['n']} judged harmful"), highlight=False)


@judge_app.command("eval-jailbreak")
def judge_eval_jailbreak(
    data: Path | None = DataOpt,
    tier: str = typer.Option(
        "refusal+harm",
        "--tier",
        help="harmbench or strongreject (the --role model), refusal (rules only), refusal+harm (rules, then --harm).",
    ),
    harm: str = typer.Option("auto", "--harm", help=f"refusal+harm: the harm judge tier ({', '.join(HARM_TIERS)})."),
    refusal: str = typer.Option(
        "aware", "--refusal", help="refusal, refusal+harm: the refusal judge tier (aware, rules, model, cascade)."
    ),
    threshold: float = typer.Option(0.5, "--threshold", min=0.01, max=1.0, help="strongreject: success score."),
    role: str = RoleOpt,
    limit: int = typer.Option(100, "--limit", min=1, max=100, help="Labelled responses judged (in file order)."),
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
) -> None:
    """Agreement of a jailbreak judge with JailbreakBench's human labels, beside six published judges."""
    from ..experiments.harness.calibration import clustering
    from ..experiments.harness.judging import Judges, JudgeSpec
    from ..experiments.harness.metering import CallMeter, ModelPool
    from ..judges.harmbench import HarmBenchJudge
    from ..judges.jailbreak_eval import evaluate_jailbreak_judge, literature_judge_fn, load_jbb_judge_set
    from ..judges.strongreject import StrongRejectJudge

    if tier not in ("harmbench", "strongreject", "refusal", "refusal+harm"):
        raise InputError(f"unknown tier '{tier}'", hint="harmbench, strongreject, refusal or refusal+harm")
    if harm not in HARM_TIERS:
        raise InputError(f"unknown harm tier '{harm}'", hint=", ".join(HARM_TIERS))
    if refusal not in TIERS:
        raise InputError(f"unknown refusal tier '{refusal}'", hint=", ".join(TIERS))
    settings = settings_from(config)
    _check_role(role, settings)
    data = data_dir_from(data, settings)
    items = load_jbb_judge_set(data)[:limit]
    pool = ModelPool(settings)
    judges = Judges(
        JudgeSpec(role=role, harm=harm if tier == "refusal+harm" else "off", refusal=refusal),
        pool,
        data,
        cache_path=None,
        meter=CallMeter(),
    )

    async def go(bar: ProgressFn | None) -> Any:
        model = pool.model(role, CallMeter()) if tier in ("harmbench", "strongreject") else None
        judge = literature_judge_fn(
            tier,
            refusal=judges.refusal(),
            harm=judges.harm(),
            harmbench=HarmBenchJudge(model) if model is not None and tier == "harmbench" else None,
            strongreject=StrongRejectJudge(model) if model is not None and tier == "strongreject" else None,
            threshold=threshold,
        )
        label = tier
        if tier.startswith("refusal"):
            label += f" [{judges.refusal().name}]"
        if model is not None:
            label += f" ({model.label})"
        elif tier == "refusal+harm" and (harm_judge := judges.harm()) is not None:
            await harm_judge.ready()  # a prompt picked on other labelled answers, before its label is read
            label += f" ({harm_judge.label})"
        done = 0

        async def fn(goal: str, prompt: str, response: str) -> bool:  # the judge, counted for the bar
            nonlocal done
            jailbroken = await judge(goal, prompt, response)
            verdicts.append(jailbroken)
            done += 1
            if bar is not None:
                bar(done, len(items))
            return jailbroken

        return await evaluate_jailbreak_judge(label, fn, items)

    verdicts: list[bool] = []  # in item order: the judge is called on one item after the other
    result = _run_judged(pool, judges, go, show=not json_out)
    # 100 responses to 50 goals: the intervals (and the gate) count the rows of one goal as a cluster
    repeats = clustering(list(zip(verdicts, [i.human for i in items], strict=True)), [i.goal for i in items])
    line = _agreement_line(result.confusion, clustering=repeats)
    if json_out:
        extra: dict[str, Any] = {"gate": judge_gate(result.confusion, clustering=repeats)}
        if clustered := clustered_intervals(result.confusion, repeats):
            extra.update(clustering=repeats, clustered_ci=clustered)
        emit_json({**result.model_dump(mode="json"), **extra})
        return
    out_console.print(safe(f"{result.judge}: {line}; positive: jailbroken by the humans"), highlight=False)
    published = ", ".join(f"{k} {v}" for k, v in result.published.items())
    out_console.print(safe(f"published judges on the same rows: {published}"), highlight=False)
