"""Alignment boundary profiling (paper §3, §4.5): negotiate a labelled corpus, map tension by domain.

``run_boundary`` negotiates every request (:mod:`.negotiate`: bounded concurrency; traces go to the
negotiator's store, so every item in the report carries its trace id) and ``analyze_boundary`` turns the outcomes into
the report: mean T per domain with bootstrap CIs (Figure 4), the domain × category heat map
(Figure 3), the Kruskal–Wallis test across domains (H2) with effect sizes, and the highest-tension
items. Every candidate tension definition is computed; the report's headline uses one
(``definition``, default :data:`DEFAULT_DEFINITION`) and compares the others in ``definitions``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from ....errors import InputError
from ....frameworks import Framework
from ....negotiation import Negotiator
from ....star.analysis.h1 import kruskal, mean_ci
from ....traces.model import TraceStatus
from ....traces.tension import DEFAULT_DEFINITION, TensionDefinition
from .corpus import Corpus
from .negotiate import ItemOutcome
from .retest import analyze_retest, run_retest

__all__ = ["run_boundary"]

MAX_REQUEST_PREVIEW = 300


async def run_boundary(
    corpus: Corpus,
    negotiators: Negotiator | Sequence[Negotiator],
    *,
    framework: str | Path | Framework = "general",
    concurrency: int = 4,
    definition: TensionDefinition | str = DEFAULT_DEFINITION,
    n_boot: int = 2000,
    seed: int = 0,
    top_k: int = 10,
    on_done: Callable[[ItemOutcome], None] | None = None,
    done: Mapping[tuple[int, str], ItemOutcome] | None = None,
) -> dict[str, Any]:
    """Negotiate the corpus once per negotiator and analyse it: the JSON-ready boundary report.

    With two or more negotiators (one per repeat, see
    :func:`.retest.sampled_settings`) the profile uses each request's
    mean T over the runs and the report gains a ``retest`` section (ICC per domain and overall)."""
    group = [negotiators] if isinstance(negotiators, Negotiator) else list(negotiators)
    if not group:
        raise InputError("run_boundary needs at least one negotiator")
    runs = await run_retest(
        corpus.items, group, framework=framework, concurrency=concurrency, on_done=on_done, done=done
    )
    report = boundary_report(corpus, runs, definition=definition, n_boot=n_boot, seed=seed, top_k=top_k)
    report["models"] = group[0].model_labels()
    report["params"] = group[0].params.model_dump(mode="json")
    return report


def boundary_report(
    corpus: Corpus,
    runs: Sequence[Sequence[ItemOutcome]],
    *,
    definition: TensionDefinition | str = DEFAULT_DEFINITION,
    n_boot: int = 2000,
    seed: int = 0,
    top_k: int = 10,
) -> dict[str, Any]:
    """The boundary report from the negotiated runs (one list of outcomes per repeat, in the
    corpus's order), however they were negotiated: here, or as cells of the harness (``.cells``)."""
    report = analyze_boundary(merge_runs(runs), definition=definition, n_boot=n_boot, seed=seed, top_k=top_k)
    report["runs"] = len(runs)
    report["retest"] = analyze_retest(runs, definition=definition) if len(runs) >= 2 else None
    report["corpus"] = {
        "name": corpus.name,
        "description": corpus.description,
        "source": corpus.source,
        "licence": corpus.licence,
        "items": len(corpus.items),
        "domains": corpus.domains(),
        "categories": corpus.categories(),
    }
    return report


def merge_runs(runs: Sequence[Sequence[ItemOutcome]]) -> list[ItemOutcome]:
    """One outcome per request from repeated runs: each definition's T is the mean over the runs
    that produced one (a request fails only if every run failed); the trace id is the first
    completed run's, and ``repeat`` counts the runs with a tension."""
    if not runs:
        return []
    merged = []
    for k, first in enumerate(runs[0]):
        versions = [run[k] for run in runs]
        done = [v for v in versions if v.status == TraceStatus.COMPLETED.value]
        if not done:
            merged.append(first)
            continue
        tensions: dict[str, float | None] = {}
        for d in TensionDefinition:
            vals = [t for v in done if (t := v.t(d)) is not None]
            tensions[d.value] = sum(vals) / len(vals) if vals else None
        merged.append(
            ItemOutcome(
                id=first.id,
                domain=first.domain,
                category=first.category,
                request=first.request,
                trace_id=done[0].trace_id,
                status=TraceStatus.COMPLETED.value,
                tensions=tensions,
                state=done[0].state,
                defense=done[0].defense,
                rounds=done[0].rounds,
                repeat=len(done),
            )
        )
    return merged


def _by(outcomes: Sequence[ItemOutcome], key: str, definition: TensionDefinition) -> dict[str, list[float]]:
    groups: dict[str, list[float]] = {}
    for o in outcomes:
        value = o.t(definition)
        groups.setdefault(str(getattr(o, key)), [])
        if value is not None:
            groups[str(getattr(o, key))].append(value)
    return groups


def _kw_or_reason(groups: dict[str, list[float]]) -> dict[str, Any]:
    try:
        return {"computable": True, **kruskal(groups).as_dict()}
    except InputError as exc:
        return {"computable": False, "reason": exc.message}


def analyze_boundary(
    outcomes: Sequence[ItemOutcome],
    *,
    definition: TensionDefinition | str = DEFAULT_DEFINITION,
    n_boot: int = 2000,
    seed: int = 0,
    top_k: int = 10,
) -> dict[str, Any]:
    """The boundary report (JSON-ready) from negotiated outcomes; see the module docstring."""
    d = TensionDefinition(definition)
    completed = [o for o in outcomes if o.status == TraceStatus.COMPLETED.value and o.t(d) is not None]
    failed = [o for o in outcomes if o not in completed]
    if not completed:
        reasons = sorted({o.error or "no tension" for o in failed})[:3]
        raise InputError(
            f"none of the {len(outcomes)} negotiations produced a tension ({'; '.join(reasons)})",
            hint="check the model configuration with `psychoalign negotiate 'hello'`",
        )
    domains = sorted({o.domain for o in outcomes})
    categories = sorted({o.category for o in outcomes})
    by_domain = _by(completed, "domain", d)
    per_domain = {
        dom: mean_ci(by_domain.get(dom, []), n_boot=n_boot, seed=seed).as_dict() | {"failed": 0} for dom in domains
    }
    for o in failed:
        per_domain[o.domain]["failed"] += 1
    order = sorted(domains, key=lambda dom: -(per_domain[dom]["mean"] if per_domain[dom]["mean"] is not None else -1))
    per_category = {
        cat: mean_ci(vals, n_boot=n_boot, seed=seed).as_dict() for cat, vals in _by(completed, "category", d).items()
    }
    mean = np.full((len(domains), len(categories)), np.nan)
    count = np.zeros((len(domains), len(categories)), dtype=int)
    for i, dom in enumerate(domains):
        for j, cat in enumerate(categories):
            vals = [t for o in completed if o.domain == dom and o.category == cat if (t := o.t(d)) is not None]
            count[i, j] = len(vals)
            if vals:
                mean[i, j] = float(np.mean(vals))
    top = sorted(completed, key=lambda o: -(o.t(d) or 0.0))[:top_k]
    definitions: dict[str, Any] = {}
    for other in TensionDefinition:
        groups = _by(completed, "domain", other)
        values = [v for vals in groups.values() for v in vals]
        definitions[other.value] = {
            "mean": float(np.mean(values)) if values else None,
            "domain_means": {g: (float(np.mean(v)) if v else None) for g, v in groups.items()},
            "kruskal_domains": _kw_or_reason(groups),
        }
    return {
        "experiment": "boundary",
        "definition": d.value,
        "counts": {
            "items": len(outcomes),
            "completed": len(completed),
            "failed": len(failed),
            "failures": [{"id": o.id, "trace_id": o.trace_id, "error": o.error} for o in failed][:50],
        },
        "overall": mean_ci([t for o in completed if (t := o.t(d)) is not None], n_boot=n_boot, seed=seed).as_dict(),
        "per_domain": per_domain,
        "domain_order": order,
        "per_category": per_category,
        "heatmap": {
            "domains": domains,
            "categories": categories,
            "mean": [[None if np.isnan(v) else float(v) for v in row] for row in mean],
            "n": count.tolist(),
        },
        "kruskal_domains": _kw_or_reason(by_domain),
        "kruskal_categories": _kw_or_reason(_by(completed, "category", d)),
        "top_items": [
            {
                "id": o.id,
                "domain": o.domain,
                "category": o.category,
                "tension": o.t(d),
                "state": o.state,
                "defense": o.defense,
                "trace_id": o.trace_id,
                "request": o.request[:MAX_REQUEST_PREVIEW],
            }
            for o in top
        ],
        "definitions": definitions,
        "items": [o.as_dict() for o in outcomes],
        "n_boot": n_boot,
        "seed": seed,
    }
