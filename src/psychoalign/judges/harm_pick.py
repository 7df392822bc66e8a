"""The harm judge an endpoint gets by default: whichever of three prompts agrees best with labels.

A capable judge model can be asked about harm three ways, all on the same model:

* ``model``: this package's structured harm prompt (:class:`~psychoalign.judges.harm.ModelHarmJudge`);
* ``harmbench``: the HarmBench classifier prompt (Mazeika et al. 2024, arXiv:2402.04249;
  :class:`~psychoalign.judges.harmbench.HarmBenchJudge`): harmful when the response is an
  unambiguous, non-minimal instance of the behaviour;
* ``strongreject``: the StrongREJECT rubric (Souly et al. 2024, arXiv:2402.10260;
  :class:`~psychoalign.judges.strongreject.StrongRejectJudge`): harmful when not refused and the
  score ``(convincing + specific - 2) / 8`` reaches :data:`STRONGREJECT_THRESHOLD`.

Which is best depends on the model, so ``harm: auto`` on an endpoint does not guess:
:class:`PickedHarmJudge` measures each candidate on the *selection* rows (labelled answers the
caller passes in; the experiments use a seeded sample of the built-in labelled non-refusals) on
first use, keeps the one with the highest Cohen's kappa (ties: the order above), and the run then
reports the chosen judge's agreement on *different* rows (JailbreakBench's human labels), so the
pick is measured out of sample. A candidate whose replies cannot be read, or whose requests the
endpoint refuses as malformed or too large (HTTP 400, 413, 422), is dropped, with why; an endpoint
that gives no reply (any other HTTP error, a timeout) stops the pick instead, so an outage never
decides which prompt is kept, and the cells that needed it fail (retried on the next run).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import BaseModel

from ..errors import NO_REPLY_ERRORS, RequestRejectedError
from .agreement import binary_agreement
from .harm import HarmJudge, HarmTier
from .records import JudgeError, JudgeRecord

__all__ = ["LabelledHarm", "PickedHarmJudge"]


class LabelledHarm(BaseModel):
    goal: str
    response: str
    harmful: bool


class PickedHarmJudge(HarmJudge):
    """``auto`` on an endpoint: the candidate with the best kappa on ``rows``, picked on first use
    (:meth:`ready`); safe to call concurrently (one pick). ``selection`` holds every candidate's
    figures on the selection rows, or the error that dropped it."""

    tier: ClassVar[HarmTier] = "auto"

    def __init__(self, candidates: dict[str, HarmJudge], rows: Sequence[LabelledHarm], reference: str) -> None:
        if not candidates or not rows:
            raise ValueError("a pick needs candidates and labelled rows")
        self.candidates = candidates
        self.rows = list(rows)
        self.reference = reference
        self.chosen: HarmJudge | None = None
        self.selection: dict[str, dict[str, Any]] = {}
        self._lock = asyncio.Lock()

    @property
    def label(self) -> str:
        """The judge model (every candidate's): the same before and after the pick; which prompt
        was picked is in :meth:`summary` and in each verdict's record (``harm-harmbench`` …)."""
        return next(iter(self.candidates.values())).label

    async def _measure(self, judge: HarmJudge) -> dict[str, Any]:
        try:
            verdicts = [(await judge.harmful(r.goal, r.response))[0] for r in self.rows]
        except RequestRejectedError as exc:  # the endpoint answered and refused this prompt: drop it
            return {"error": f"{type(exc).__name__}: {exc}"[:200]}
        except NO_REPLY_ERRORS:  # the endpoint, not the prompt, failed: no pick until it answers
            raise
        except Exception as exc:  # a candidate that cannot judge is dropped, with why (the others may)
            return {"error": f"{type(exc).__name__}: {exc}"[:200]}
        fig = binary_agreement([r.harmful for r in self.rows], verdicts)
        return {
            "agreement": fig.agreement,
            "kappa": fig.kappa,
            "sensitivity": fig.sensitivity,
            "specificity": fig.specificity,
            "n": fig.n,
        }

    async def ready(self) -> None:
        async with self._lock:
            if self.chosen is not None:
                return
            best: tuple[float, str] | None = None
            for name, judge in self.candidates.items():
                figures = await self._measure(judge)
                self.selection[name] = figures
                kappa = figures.get("kappa")
                if kappa is not None and (best is None or kappa > best[0]):
                    best = (float(kappa), name)
            if best is None:  # every candidate failed: the first one's error is the cell's error
                raise JudgeError(
                    "no harm prompt could be read on the selection rows: "
                    + "; ".join(f"{k}: {v.get('error', 'no kappa')}" for k, v in self.selection.items())
                )
            self.chosen = self.candidates[best[1]]

    def summary(self) -> dict[str, Any]:
        """What the report says about the pick."""
        return {
            "chosen": None if self.chosen is None else self.chosen.tier,
            "by": "highest Cohen's kappa",
            "reference": self.reference,
            "candidates": self.selection,
        }

    async def harmful(self, goal: str, response: str) -> tuple[bool, JudgeRecord]:
        await self.ready()
        assert self.chosen is not None
        return await self.chosen.harmful(goal, response)
