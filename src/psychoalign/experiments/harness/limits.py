"""Per-run limits: tokens, cost, time and failed cells (:class:`~.spec.RunLimits`).

:class:`Budget` keeps the run's spend as cells become durable and says which limit, if any, is
reached. Tokens and cost count every model call of the run: the stored cells' system calls and
attackers' calls (``details["attacker_cost"]``), earlier invocations included, plus the judges'
(the run meta's ``judge_cost`` and this invocation's judge meter). Time is the seconds the run has
been running, summed over invocations (``meta["elapsed_s"]``), read from an injectable clock.
Failed cells count this invocation's failures plus the cells that gave up earlier (never retried);
a fraction is of the run's planned cells, as Inspect's ``fail_on_error`` does.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .spec import RunLimits
from .store import CellResult

#: The ``experiment run`` flag of each limit (the spec's ``limits.<field>``), named in the stop reason.
FLAGS = {"tokens": "--max-tokens", "cost_usd": "--max-cost", "time_s": "--max-time", "errors": "--max-errors"}


def _spend(cell: CellResult) -> tuple[float, float]:
    """(tokens, USD) of a cell's model calls: the system's and an attacker's."""
    tokens = float(cell.cost.get("tokens", 0.0))
    usd = float(cell.cost.get("cost_usd", 0.0))
    attacker = cell.details.get("attacker_cost")
    if isinstance(attacker, Mapping):
        tokens += float(attacker.get("tokens", 0.0) or 0.0)
        usd += float(attacker.get("cost_usd", 0.0) or 0.0)
    return tokens, usd


def merge_limits(limits: RunLimits, overrides: Mapping[str, float | int | None]) -> RunLimits:
    """The spec's limits with the flags given on the command line (a flag wins over the spec)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    return RunLimits.model_validate({**limits.model_dump(), **given}) if given else limits


@dataclass
class Budget:
    """What the run has spent against ``limits``; :meth:`reached` names the first limit reached."""

    limits: RunLimits
    total_cells: int
    clock: Callable[[], float]
    tokens: float = 0.0
    cost_usd: float = 0.0
    elapsed_before: float = 0.0
    errors: int = 0
    judge: Callable[[], Mapping[str, float]] = field(default=dict)
    started: float = field(init=False)

    def __post_init__(self) -> None:
        self.started = self.clock()

    @classmethod
    def of_run(
        cls,
        limits: RunLimits,
        *,
        total_cells: int,
        stored: Iterable[CellResult],
        meta: Mapping[str, Any],
        clock: Callable[[], float],
        judge: Callable[[], Mapping[str, float]],
    ) -> Budget:
        budget = cls(limits, total_cells, clock, elapsed_before=float(meta.get("elapsed_s") or 0.0), judge=judge)
        previous_judges = meta.get("judge_cost") or {}
        budget.tokens = float(previous_judges.get("tokens", 0.0))
        budget.cost_usd = float(previous_judges.get("cost_usd", 0.0))
        for cell in stored:
            budget.add(cell, count_failure=False)
            budget.errors += cell.status == "gave_up"  # never retried: it stays a failure of the run
        return budget

    def add(self, cell: CellResult, *, count_failure: bool = True) -> None:
        tokens, usd = _spend(cell)
        self.tokens += tokens
        self.cost_usd += usd
        if count_failure and cell.status != "done":
            self.errors += 1

    def elapsed(self) -> float:
        return self.elapsed_before + self.clock() - self.started

    def error_cap(self) -> int | None:
        """Failed cells at which the run stops."""
        cap = self.limits.errors
        if cap is None:
            return None
        return int(cap) if cap >= 1 else max(1, math.ceil(cap * self.total_cells))

    def reached(self) -> str | None:
        """The first limit reached, as one line naming it, the spend and the flag to raise; or None."""
        judged = self.judge()
        tokens = self.tokens + float(judged.get("tokens", 0.0))
        usd = self.cost_usd + float(judged.get("cost_usd", 0.0))
        lim = self.limits
        if lim.tokens is not None and tokens >= lim.tokens:
            return self._why("tokens", f"{tokens:,.0f} tokens used of {lim.tokens:,}")
        if lim.cost_usd is not None and usd >= lim.cost_usd:
            return self._why("cost_usd", f"${usd:,.4f} spent of ${lim.cost_usd:,.4f}")
        if lim.time_s is not None and (elapsed := self.elapsed()) >= lim.time_s:
            return self._why("time_s", f"{elapsed:,.1f} s run of {lim.time_s:,.1f} s")
        cap = self.error_cap()
        if cap is not None and self.errors >= cap:
            fraction = lim.errors is not None and lim.errors < 1
            share = f" ({lim.errors:g} of {self.total_cells} cells)" if fraction else ""
            return self._why("errors", f"{self.errors} failed cells, the threshold is {cap}{share}")
        return None

    @staticmethod
    def _why(limit: str, spend: str) -> str:
        name = {"tokens": "token", "cost_usd": "cost", "time_s": "time", "errors": "error"}[limit]
        return f"{name} limit reached: {spend}; rerun with a higher {FLAGS[limit]} (or limits.{limit}) to go on"

    def meta(self, stopped: str | None) -> dict[str, Any]:
        """What the run's meta keeps: the seconds run so far, and why it stopped (None: it did not)."""
        limit = None
        if stopped is not None:
            limit = next((k for k, flag in FLAGS.items() if flag in stopped), None)
        return {
            "elapsed_s": round(self.elapsed(), 3),
            "stopped": None if stopped is None else {"reason": stopped, "limit": limit},
        }
