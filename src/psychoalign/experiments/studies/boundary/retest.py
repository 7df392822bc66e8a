"""Test–retest reliability of tension: the corpus negotiated once per repeat, each repeat sampling
(its own seed, temperature above 0), and the ICC of request-level T across the repeats
(:mod:`.reliability`), overall and per domain, for every tension definition."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ....config import Settings
from ....errors import InputError
from ....frameworks import Framework
from ....negotiation import Negotiator
from ....traces.tension import DEFAULT_DEFINITION, TensionDefinition
from .corpus import CorpusItem
from .negotiate import ItemOutcome, negotiate_items
from .reliability import icc

__all__ = ["SAMPLED_ROLES", "sampled_settings"]

#: The roles whose outputs make T (u_D and u_V). The MEDIATOR only picks among them.
SAMPLED_ROLES = ("drive", "evaluator")


def sampled_settings(
    settings: Settings, *, repeats: int, temperature: float | None = None, base_seed: int = 1
) -> list[Settings]:
    """One Settings per repeat: every agent role gets seed ``base_seed + repeat`` (and
    ``temperature`` when given). The result is checked with :func:`check_sampling`."""
    if repeats < 2:
        raise InputError(f"a retest needs at least 2 repeats, got {repeats}", hint="pass --repeats 2 or more")
    out = []
    for r in range(repeats):
        roles = {role: dict(settings.roles.get(role, {})) for role in ("drive", "evaluator", "mediator")}
        for spec in roles.values():
            spec["seed"] = base_seed + r
            if temperature is not None:
                spec["temperature"] = temperature
        out.append(settings.model_copy(update={"roles": {**settings.roles, **roles}}))
    check_sampling(out)
    return out


def check_sampling(runs: Sequence[Settings]) -> None:
    """Refuse a retest that is trivially perfect: with temperature 0 on every role that makes T, or
    the same seed in every run, a deterministic model replays the same negotiation and ICC = 1
    proves nothing. Raises :class:`InputError` naming the problem and the fix."""
    if len(runs) < 2:
        raise InputError(f"a retest needs at least 2 runs, got {len(runs)}", hint="pass --repeats 2 or more")
    for i, settings in enumerate(runs):
        specs = {role: settings.model_spec(role) for role in SAMPLED_ROLES}
        if all(spec.temperature == 0 for spec in specs.values()):
            raise InputError(
                f"retest run {i + 1} samples at temperature 0 on {' and '.join(SAMPLED_ROLES)}: every run would "
                "replay the same negotiation and the ICC would be trivially perfect",
                hint="pass --temperature 0.7 (or set roles.drive/evaluator temperature > 0)",
            )
    for role in SAMPLED_ROLES:
        seeds = [settings.model_spec(role).seed for settings in runs]
        temps = [settings.model_spec(role).temperature for settings in runs]
        if any(t > 0 for t in temps) and None not in seeds and len(set(seeds)) < len(seeds):
            raise InputError(
                f"retest runs share a seed for the {role} ({seeds}): a seeded sampler replays the same samples",
                hint="give each run its own seed (the CLI does: --seed is the first run's)",
            )


async def run_retest(
    items: Sequence[CorpusItem],
    negotiators: Sequence[Negotiator],
    *,
    framework: str | Path | Framework = "general",
    concurrency: int = 4,
    on_done: Callable[[ItemOutcome], None] | None = None,
    done: Mapping[tuple[int, str], ItemOutcome] | None = None,
) -> list[list[ItemOutcome]]:
    """Negotiate ``items`` once per negotiator (one per repeat), repeats one after the other.
    ``done`` ((repeat, item id) -> outcome) skips what a previous, interrupted run completed."""
    runs: list[list[ItemOutcome]] = []
    for r, negotiator in enumerate(negotiators):
        runs.append(
            await negotiate_items(
                negotiator,
                items,
                framework=framework,
                concurrency=concurrency,
                repeat=r,
                experiment="boundary" if len(negotiators) == 1 else "retest",
                on_done=on_done,
                done={i: o for (rr, i), o in (done or {}).items() if rr == r},
            )
        )
    return runs


def _icc_or_reason(matrix: np.ndarray) -> dict[str, Any]:
    try:
        return {"computable": True, **icc(matrix).as_dict()}
    except InputError as exc:
        return {"computable": False, "reason": exc.message}


def analyze_retest(
    runs: Sequence[Sequence[ItemOutcome]], *, definition: TensionDefinition | str = DEFAULT_DEFINITION
) -> dict[str, Any]:
    """ICC(2,1) and ICC(3,1) of request-level T across runs, overall and per domain, for every
    tension definition; flags runs that are identical (a retest that proved nothing)."""
    if len(runs) < 2:
        raise InputError(f"a retest needs at least 2 runs, got {len(runs)}")
    ids = [o.id for o in runs[0]]
    by_id = [{o.id: o for o in run} for run in runs]
    domains = sorted({o.domain for o in runs[0]})
    domain_of = {o.id: o.domain for o in runs[0]}
    definitions: dict[str, Any] = {}
    identical = True
    for d in TensionDefinition:
        matrix = np.array(
            [[(t if (t := run[i].t(d)) is not None else np.nan) if i in run else np.nan for run in by_id] for i in ids],
            dtype=np.float64,
        )
        complete = matrix[~np.isnan(matrix).any(axis=1)]
        if complete.size and not np.allclose(complete, complete[:, :1]):
            identical = False
        per_domain = {dom: _icc_or_reason(matrix[[domain_of[i] == dom for i in ids]]) for dom in domains}
        definitions[d.value] = {
            "overall": _icc_or_reason(matrix),
            "per_domain": per_domain,
            "mean_abs_run_difference": float(np.nanmean(np.abs(complete - complete.mean(axis=1, keepdims=True))))
            if complete.size
            else None,
        }
    ranking = sorted(
        (d for d in definitions if definitions[d]["overall"].get("icc2") is not None),
        key=lambda d: -definitions[d]["overall"]["icc2"],
    )
    return {
        "experiment": "retest",
        "definition": TensionDefinition(definition).value,
        "runs": len(runs),
        "items": len(ids),
        "failed_per_run": [sum(o.status != "completed" for o in run) for run in runs],
        "identical_runs": identical,
        "warning": (
            "every run gave the same tension for every request: the runs did not sample, so the ICC says "
            "nothing about reliability"
            if identical
            else None
        ),
        "definitions": definitions,
        "ranking_by_icc2": ranking,
    }
