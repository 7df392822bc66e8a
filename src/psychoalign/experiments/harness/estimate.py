"""Dry run: how many calls and roughly how many tokens and dollars a run will spend, before it does.

Estimates, not promises: prompt tokens are counted as characters / 4 plus a fixed overhead per
call for the system's own prompts; completion tokens as half of ``max_tokens`` (typical) or all
of it (upper bound). Call counts come from each system kind's ``calls_typical`` / ``calls_max``
(one request; two for MT-Bench's two turns; a multi-turn attack's bound of turns + backtracks) and
each benchmark's judge calls (the multi-turn attacker's calls are counted with the judges').
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ...config import Settings
from .runner import Cell
from .spec import ExperimentSpec
from .systems import SystemInfo

__all__ = ["estimate"]

#: Prompt overhead (tokens) per call: the agents' prompts with examples are longer than a chat turn.
OVERHEAD = {"drive": 350, "evaluator": 900, "mediator": 350, "chat": 60, "judge": 400}


def _judge_calls(benchmark: str, spec: ExperimentSpec, plain: bool = False) -> int:
    """Judge calls per cell (upper bound) by benchmark, given the judge spec. ``plain``: the judge
    model is asked for plain text (the embedded one), which rates one quality dimension per call."""
    j = spec.judge
    return {
        "hhh": 1 if j.choice_model else 0,
        "advbench": (1 if j.harm_on else 0) + (0 if j.refusal == "rules" else 1),
        "mt-bench": 2,
        "realtoxicity": 1 if j.toxicity == "model" else 0,
        "xstest": 0 if j.refusal == "rules" else 1,
        "dilemmas": 2 if plain else 1,
    }.get("advbench" if benchmark.startswith("attack-") else benchmark, 1)  # attacks: judged like AdvBench


def check_calls(spec: ExperimentSpec, plain: bool = False) -> int:
    """Judge calls of the once-per-run checks on constructed cases (:mod:`.calibration`)."""
    from .calibration import CHOICE_CALIBRATION_N, RATING_CALIBRATION_N

    n = spec.judge.calibration_n
    names = {b.name for b in spec.benchmarks}
    calls = 0
    if "hhh" in names and spec.judge.choice_model:
        calls += min(CHOICE_CALIBRATION_N, n)
    if "mt-bench" in names:
        calls += 2 * min(RATING_CALIBRATION_N, n)  # each capability pair's two answers
    if "dilemmas" in names:
        calls += 2 * 2 * min(RATING_CALIBRATION_N, n)  # two answers of each pair, two dimensions
    if spec.judge.refusal != "rules" and names & {"advbench", "xstest"}:
        calls += min(n, 900)
    return calls


def estimate(
    spec: ExperimentSpec, cells: list[Cell], settings: Settings, infos: dict[str, SystemInfo]
) -> dict[str, Any]:
    """Per system and in total: cells, calls (typical / max), tokens (typical / max), USD (typical / max)."""
    rows: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    plain = settings.model_spec(spec.judge.role).backend == "local"  # the embedded judge: plain text
    for cell in cells:
        info = infos[cell.system.name]
        # multi-turn items carry their bounds (attacks.MultiTurnAttack): target calls, judged turns, attacker calls
        turns = int(cell.item.data.get("target_calls", len(cell.item.turns)))
        prompt_chars = sum(len(t) for t in cell.item.turns)
        row = rows[cell.system.name]
        row["cells"] += 1
        for role in info.roles:
            mspec = settings.model_spec(role).model_copy(update=cell.system.roles.get(role, {}))
            share = 1 / len(info.roles)
            for kind, calls in (("typical", info.calls_typical), ("max", info.calls_max)):
                n = calls * turns * share
                ptok = n * (prompt_chars / 4 + OVERHEAD.get(role, 200))
                ctok = n * mspec.max_tokens * (0.5 if kind == "typical" else 1.0)
                row[f"calls_{kind}"] += n
                row[f"tokens_{kind}"] += ptok + ctok
                row[f"usd_{kind}"] += (ptok * mspec.input_cost_per_mtok + ctok * mspec.output_cost_per_mtok) / 1e6
        jcalls = _judge_calls(cell.benchmark.name, spec, plain) * int(cell.item.data.get("judged_turns", 1))
        jcalls += int(cell.item.data.get("attacker_calls", 0))
        jspec = settings.model_spec(spec.judge.role)
        jp, jc = jcalls * (prompt_chars / 2 + OVERHEAD["judge"] + 300), jcalls * 150
        row["judge_calls"] += jcalls
        row["judge_tokens"] += jp + jc
        row["judge_usd"] += (jp * jspec.input_cost_per_mtok + jc * jspec.output_cost_per_mtok) / 1e6
    total: dict[str, float] = defaultdict(float)
    for vals in rows.values():
        for k, v in vals.items():
            total[k] += v
    out = [{"system": name, **{k: round(v, 4) for k, v in vals.items()}} for name, vals in rows.items()]
    return {
        "systems": out,
        "total": {k: round(v, 4) for k, v in total.items()},
        "judge_check_calls": check_calls(spec, plain),
    }
