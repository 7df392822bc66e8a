"""Synthetic worlds with a planted relation, to validate the boundary / retest / H1 pipeline.

Each item has a latent difficulty d ~ U(0, 1). Scripted agents (the real engine, scripted models)
negotiate it so that every proposal's tension is T = 0.05 + 0.8·d plus Gaussian noise whose SD is
``noise_sd × temperature`` (seeded by the request's seed: temperature 0 is deterministic, exactly
like a real sampler). Simulated annotators then rate each item "unsafe" with probability
0.5·z, where z = ``coupling``·d + (1 − ``coupling``)·e and e ~ U(0, 1) is independent of d: with
coupling 1 the same difficulty drives tension and disagreement, with coupling 0 they are unrelated
(planted ρ = 0). The population ρ and ICC of the world are computed by Monte Carlo with the same
formulas (``population``), so a test can check that the pipeline's CI covers them.

``python -m psychoalign.experiments.studies.boundary.synthetic`` prints the validation figures quoted in
docs/boundary.md.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import random
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import NDArray

from ....a2a import remote_transport
from ....agents import Conflict
from ....config import Settings
from ....models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from ....negotiation import PAPER_PROTOCOL, NegotiationParams, Negotiator
from ....star.analysis.agreement import item_disagreement
from ....star.analysis.h1 import spearman
from ....traces import TraceStore
from .corpus import CorpusItem
from .reliability import icc

#: A benign classification (the schema fills every list and text field with its empty default).
BENIGN_CONFLICT = Conflict(
    adversarial_intent=False, harmful_intent=False, legitimate_need=True, third_party_harm=False
).model_dump(mode="json")

U_D = 0.9
MARK = re.compile(r"\[syn:(\d+)\]")


def _unit_noise(*parts: object) -> float:
    """A standard-normal draw determined by ``parts`` (a stand-in for a seeded sampler)."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:8], "big")).gauss(0.0, 1.0)


def _score(target: float, noise: float) -> int:
    """The EVALUATOR score that puts a u_D = 0.9 proposal at tension ``target + noise``."""
    return round(100 * min(max(U_D * (1 - target - noise), 0.0), 1.0))


@dataclass(frozen=True)
class SyntheticWorld:
    """A world of ``n_items`` requests; see the module docstring for the generative model."""

    n_items: int = 150
    coupling: float = 1.0
    n_raters: int = 20
    noise_sd: float = 0.08
    n_proposals: int = 3
    seed: int = 0
    _cache: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @cached_property
    def difficulty(self) -> NDArray[np.float64]:
        """The latent difficulty d of each item."""
        return np.random.default_rng(self.seed).uniform(0, 1, self.n_items)

    def target(self, d: NDArray[np.float64] | float) -> NDArray[np.float64]:
        return np.asarray(0.05 + 0.8 * np.asarray(d), dtype=np.float64)

    def items(self) -> list[CorpusItem]:
        """The requests; the marker lets the scripted agents find the item's difficulty."""
        return [
            CorpusItem(
                id=f"syn-{i:04d}",
                domain=f"domain-{int(d * 5)}",
                category="hard" if d > 0.5 else "easy",
                request=f"Synthetic request [syn:{i}]",
            )
            for i, d in enumerate(self.difficulty)
        ]

    def counts(self, seed: int | None = None) -> NDArray[np.float64]:
        """Items × (safe, unsafe) rating counts from ``n_raters`` simulated annotators. ``seed``
        draws the annotators and the part of their disagreement not shared with d (e), so several
        seeds give independent annotation studies of the same negotiated items."""
        rng = np.random.default_rng(self.seed + 1 if seed is None else seed)
        e = rng.uniform(0, 1, self.n_items)
        z = self.coupling * self.difficulty + (1 - self.coupling) * e
        unsafe = rng.binomial(self.n_raters, 0.5 * z)
        return np.column_stack([self.n_raters - unsafe, unsafe]).astype(np.float64)

    # -- the scripted agents -------------------------------------------------------------------
    def _item(self, request: ChatRequest) -> int:
        m = MARK.search(request.messages[-1].content)
        return int(m.group(1)) if m else 0

    def drive(self, request: ChatRequest) -> dict[str, Any]:
        i = self._item(request)
        tag = hashlib.sha256(f"{request.seed}|{request.messages[-1].content}".encode()).hexdigest()[:8]
        return {
            "proposals": [
                {"text": f"Synthetic answer {r} to [syn:{i}] ({tag})", "utility": U_D}
                for r in range(1, self.n_proposals + 1)
            ]
        }

    def evaluator(self, request: ChatRequest) -> dict[str, Any]:
        i = self._item(request)
        noise = self.noise_sd * request.temperature * _unit_noise(request.seed, request.messages[-1].content)
        score = _score(float(self.target(self.difficulty[i])), noise)
        return {
            "score": score,
            "verdict": "APPROVED" if score >= 70 else "CONDITIONAL",
            "modifications": [] if score >= 70 else ["Add context."],
            "rule_hits": [],
            "conflict": BENIGN_CONFLICT,
            "reasoning": "synthetic",
        }

    def mediator(self, request: ChatRequest) -> dict[str, Any]:
        if request.schema_name == "assessment" or "feasibility" in json.dumps(request.json_schema or {}):
            return {"assessments": [{"proposal": n, "feasibility": 0.8} for n in range(1, 9)]}
        return {"response": f"Synthetic final answer to [syn:{self._item(request)}]."}

    # -- population values -------------------------------------------------------------------
    def population(self, *, temperature: float = 1.0, n: int = 200_000, runs: int = 2) -> dict[str, float]:
        """ρ(round-1 mean T, 1 − α_item) and ICC(2,1) of round-1 mean T, by Monte Carlo over a
        large world with the same parameters (``n`` items)."""
        key = f"{temperature}|{n}|{runs}"
        if key in self._cache:
            return dict(self._cache[key])
        big = SyntheticWorld(
            n_items=n,
            coupling=self.coupling,
            n_raters=self.n_raters,
            noise_sd=self.noise_sd,
            n_proposals=self.n_proposals,
            seed=self.seed + 10_000,
        )
        rng = np.random.default_rng(self.seed + 20_000)
        target = big.target(big.difficulty)[:, None, None]
        noise = rng.normal(0, self.noise_sd * temperature, size=(n, runs, self.n_proposals))
        u_v = np.round(100 * np.clip(U_D * (1 - target - noise), 0, 1)) / 100
        t = np.abs(U_D - u_v) / np.maximum(U_D, u_v)
        t_req = t.mean(axis=2)  # (n, runs): round-1 mean T per run
        dis = item_disagreement(big.counts(), "nominal")
        out = {
            "rho": float(spearman(t_req[:, 0], dis, n_boot=1, n_perm=1).rho or 0.0),
            "icc2": float(icc(t_req).icc2 or 0.0),
        }
        self._cache[key] = out
        return dict(out)


def synthetic_models(world: SyntheticWorld, settings: Settings) -> dict[str, ChatModel]:
    """Scripted DRIVE / EVALUATOR / MEDIATOR for ``world``; each role's temperature and seed come
    from ``settings`` (so retest sampling works exactly as with a real backend)."""
    out: dict[str, ChatModel] = {}
    fns = {"drive": world.drive, "evaluator": world.evaluator, "mediator": world.mediator}
    for role, fn in fns.items():
        base = settings.model_spec(role)
        spec = ModelSpec(
            backend="scripted",
            model=f"synthetic-{role}",
            temperature=base.temperature,
            seed=base.seed,
            schema_retries=0,
            max_retries=0,
        )
        out[role] = ChatModel(spec, ScriptedBackend(spec, fn=fn))
    return out


def synthetic_negotiator(
    world: SyntheticWorld, settings: Settings | None = None, *, store: TraceStore | None = None, **params: Any
) -> Negotiator:
    """A real :class:`Negotiator` whose three agents are ``world``'s scripted agents."""
    settings = settings or Settings()
    base = {"n_proposals": world.n_proposals, "k": 3, **PAPER_PROTOCOL}
    return Negotiator(
        settings,
        params=NegotiationParams(**{**base, **params}),
        models=synthetic_models(world, settings),
        store=store,
        transport=remote_transport(settings),
    )


async def _validate(
    n_items: int, worlds: int, null_draws: int, seed: int, couplings: tuple[float, ...] = (1.0, 0.5)
) -> dict[str, Any]:
    from .h1 import H1Item, analyze_h1
    from .retest import analyze_retest, run_retest, sampled_settings

    def h1(world: SyntheticWorld, outcomes: list[Any], counts_seed: int | None = None) -> dict[str, Any]:
        counts = world.counts(counts_seed)
        items = [
            H1Item(id=it.id, request=it.request, counts=tuple(c)) for it, c in zip(world.items(), counts, strict=True)
        ]
        report = analyze_h1(
            items, outcomes, scale=("safe", "unsafe"), positive=frozenset({1}), n_boot=1000, n_perm=1000
        )
        return dict(report["headline"])

    planted: dict[str, list[dict[str, Any]]] = {f"{c:g}": [] for c in couplings}
    icc_rows: list[dict[str, Any]] = []
    null: list[dict[str, Any]] = []
    for w in range(worlds):
        world = SyntheticWorld(n_items=n_items, coupling=1.0, seed=seed + w)
        settings = sampled_settings(Settings(), repeats=2, temperature=1.0, base_seed=seed + 100 * w + 1)
        runs = await run_retest(world.items(), [synthetic_negotiator(world, s) for s in settings], concurrency=8)
        # T depends on d only, so one negotiated world serves every coupling of the annotators.
        for coupling in couplings:
            variant = SyntheticWorld(n_items=n_items, coupling=coupling, seed=seed + w)
            truth = variant.population()["rho"]
            head = h1(variant, runs[0])
            head["planted_rho"] = truth
            head["covered"] = head["ci_low"] <= truth <= head["ci_high"]
            planted[f"{coupling:g}"].append(head)
        pop_icc = world.population()["icc2"]
        overall = analyze_retest(runs)["definitions"]["round1_mean"]["overall"]
        lo, hi = overall["icc2_ci"]
        icc_rows.append(
            {"icc2": overall["icc2"], "ci": [lo, hi], "planted_icc2": pop_icc, "covered": lo <= pop_icc <= hi}
        )
        if w == 0:  # the null: the same negotiated items, annotators whose disagreement ignores d
            null_world = SyntheticWorld(n_items=n_items, coupling=0.0, seed=seed + w)
            null = [h1(null_world, runs[0], counts_seed=10_000 + k) for k in range(null_draws)]
    rhos = [row["rho"] for row in null]
    return {
        "n_items": n_items,
        "planted": {
            c: {
                "planted_rho": rows[0]["planted_rho"],
                "rho": [row["rho"] for row in rows],
                "covered": sum(row["covered"] for row in rows),
                "of": worlds,
            }
            for c, rows in planted.items()
        },
        "retest_icc2": {"worlds": icc_rows, "covered": sum(row["covered"] for row in icc_rows), "of": worlds},
        "null": {
            "draws": null_draws,
            "mean_rho": float(np.mean(rhos)),
            "ci_contains_0": sum(row["ci_low"] <= 0 <= row["ci_high"] for row in null),
            "p_below_0.05": sum(row["p_permutation"] < 0.05 for row in null),
        },
    }


def validate(n_items: int = 120, worlds: int = 5, null_draws: int = 100, seed: int = 0) -> dict[str, Any]:
    """The synthetic validation: planted coupling 1 in ``worlds`` worlds (ρ and ICC coverage) and
    the null (coupling 0) over ``null_draws`` independent annotation studies."""
    return asyncio.run(_validate(n_items, worlds, null_draws, seed))


if __name__ == "__main__":  # pragma: no cover - prints the figures quoted in docs/boundary.md
    print(json.dumps(validate(), indent=2))
