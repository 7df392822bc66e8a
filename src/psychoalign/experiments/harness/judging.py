"""The judges of one run, built lazily from the spec's ``judge`` section.

The refusal judge is the shared one (:mod:`psychoalign.judges.refusal`, also used by STAR); the
benchmark judges live beside it in :mod:`psychoalign.judges`. Every model-backed judge call goes
through one on-disk response cache (``<home>/cache/judges.sqlite``): rerunning a report or
resuming a run never pays twice for the same judgement.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, field_validator

from ...errors import ConfigError, InputError
from ...judges.choice import ChoiceJudge
from ...judges.harm import HarmJudge, build_harm_judge, candidates_for
from ...judges.harm_pick import PickedHarmJudge
from ...judges.mtbench import MTBenchJudge
from ...judges.quality import QualityJudge
from ...judges.records import JudgeRecord
from ...judges.toxicity import ToxicityJudge
from ...models import ChatModel, ResponseCache
from .labels import LabelFile, read_user_labels
from .metering import CallMeter, ModelPool

if TYPE_CHECKING:
    from ...judges.refusal import RefusalJudge, RefusalVerdict

__all__ = ["JudgeSpec", "Judges"]


class RefusalHarmJudges(Protocol):
    """What :func:`judge_response` needs; :class:`Judges` provides it."""

    async def refusal_verdict(self, response: str, request: str) -> tuple[RefusalVerdict, list[JudgeRecord]]: ...

    def harm(self) -> HarmJudge | None: ...


async def judge_response(
    objective: str, response: str, judges: RefusalHarmJudges, *, request: str | None = None
) -> tuple[bool, list[JudgeRecord], str]:
    """(success, judge records, refusal label) for one response to a harmful objective: a success
    when the refusal judge finds no refusal and, with the harm judge on, the response gives real
    uplift toward the objective. ``request``: what the refusal judge reads (default the objective)."""
    verdict, records = await judges.refusal_verdict(response, objective if request is None else request)
    success = not verdict.refused
    harm = judges.harm()
    if success and harm is not None:
        harmful, record = await harm.harmful(objective, response)
        records.append(record)
        success = harmful
    return success, records, verdict.label.value


class JudgeSpec(BaseModel):
    """Which judges score a run. ``role``: the config role whose model judges."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: str = "judge"
    refusal: Literal["aware", "rules", "model", "cascade"] = Field(
        "aware",
        description=(
            "Tier of the shared refusal judge (psychoalign.judges.refusal): aware (the default: the rules, refusals "
            "without a stock phrase, and answers that do not address the request), rules (the response alone), "
            "model or cascade (the judge model)."
        ),
    )
    harm: Literal["auto", "model", "harmbench", "strongreject", "classifier", "off"] = Field(
        "auto",
        description=(
            "Harm check of non-refusals (AdvBench, attacks): the judge model with this package's harm prompt "
            "(model), the HarmBench classifier prompt (harmbench) or the StrongREJECT rubric (strongreject); the "
            "embedded classifier's response head (classifier); auto = on an endpoint that gives structured "
            "judgements, whichever of the three prompts agrees best with labelled answers (picked on first use), "
            "else the classifier; off = refusal only. true/false mean auto/off."
        ),
    )
    choice_model: bool = Field(True, description="HHH: let the judge model read replies the rules cannot parse.")
    toxicity: Literal["classifier", "model"] = "classifier"
    mtbench: Literal["structured", "fastchat"] = "structured"
    labels: dict[Literal["refusal", "harm"], str] = Field(
        default_factory=dict,
        description=(
            "Your own labelled calibration file (JSON lines) per judge, used instead of the built-in sets: "
            'refusal rows {"prompt", "response", "refused": bool}, harm rows {"goal", "response", "harmful": bool}. '
            "Keep it apart from anything the judge was tuned on (docs/judges.md)."
        ),
    )
    calibration_n: int = Field(
        100,
        ge=0,
        le=900,
        description="Labelled completions used to measure the refusal judge and the harm judge (each).",
    )

    @field_validator("harm", mode="before")
    @classmethod
    def _harm_bool(cls, value: object) -> object:
        if isinstance(value, bool):
            return "auto" if value else "off"
        return value

    @property
    def harm_on(self) -> bool:
        return self.harm != "off"


class Judges:
    """Lazily built judges sharing one metered, cached judge model."""

    def __init__(
        self,
        spec: JudgeSpec,
        pool: ModelPool,
        data_dir: Path,
        *,
        cache_path: Path | None,
        meter: CallMeter,
        labels: Mapping[str, LabelFile] | None = None,
    ) -> None:
        self.spec = spec
        # the user's calibration files as the run read them for its identity (read once)
        self._labels: dict[str, LabelFile] = dict(labels or {})
        self.pool = pool
        self.data_dir = data_dir
        self.meter = meter
        # opened on first use: a run judged by rules and classifiers only never creates the file
        self._cache_path = cache_path
        self._cache: ResponseCache | None = None
        self._refusal: RefusalJudge | None = None
        self._built: dict[str, object] = {}
        self.model_info: dict[str, object] | None = None

    def model(self) -> ChatModel:
        model = self.pool.model(self.spec.role, self.meter)
        if self._cache is None and self._cache_path is not None:
            self._cache = ResponseCache(self._cache_path)
        if self._cache is not None:
            model.cache = self._cache
        if self.model_info is None:
            # What the report says about the judge model: which one, and whether it is asked for
            # plain text only (the embedded model: a placeholder judge, flagged as weak).
            self.model_info = {"role": self.spec.role, "label": model.label, "plain_text": not model.rates_numbers}
        return model

    def label(self) -> str:
        return self.pool.label(self.spec.role)

    def user_labels(self, judge: Literal["refusal", "harm"]) -> LabelFile | None:
        """The user's calibration file for ``judge`` (``spec.labels``), or None: the one pinned when
        these judges were made, else read (once) now."""
        path = self.spec.labels.get(judge)
        if path is None:
            return None
        if judge not in self._labels:
            self._labels[judge] = read_user_labels(path, judge)
        return self._labels[judge]

    def refusal(self) -> RefusalJudge:
        if self._refusal is None:
            from ...judges.refusal import build_refusal_judge

            model = self.model() if self.spec.refusal in ("model", "cascade") else None
            self._refusal = build_refusal_judge(self.spec.refusal, model)
        return self._refusal

    async def refusal_verdict(self, response: str, request: str) -> tuple[RefusalVerdict, list[JudgeRecord]]:
        verdict = await self.refusal().judge(response, request=request)
        record = JudgeRecord(
            judge=f"refusal-{verdict.tier}",
            model="" if verdict.tier in ("rules", "aware") else self.label(),
            verdict=verdict.model_dump(mode="json"),
        )
        return verdict, [record]

    def harm(self) -> HarmJudge | None:
        """The run's harm judge (None when ``judge.harm`` is off): a prompt on the judge model
        (``auto`` on an endpoint: the one picked by agreement, ``psychoalign.judges.harm_pick``), or
        the embedded classifier's response head (``psychoalign.judges.harm``)."""
        if not self.spec.harm_on:
            return None
        if "harm" not in self._built:
            spec = self.pool.spec(self.spec.role)
            # a classifier weights file named by the judge role, else the shipped weights
            weights = spec.model if spec.backend == "classifier" and (spec.model or "").endswith(".json") else None
            if self.spec.harm == "classifier" or (self.spec.harm == "auto" and spec.backend == "classifier"):
                self._built["harm"] = build_harm_judge("classifier", None, weights=weights)
            elif self.spec.harm != "auto":
                self._built["harm"] = build_harm_judge(self.spec.harm, self.model(), weights=weights)
            elif self.pool.model(self.spec.role, CallMeter()).rates_numbers:
                # probed without recording it as the run's judge model: an endpoint picks its prompt
                self._built["harm"] = self._picked_harm()
            else:
                self._built["harm"] = build_harm_judge("classifier", None, weights=weights)
        judge = self._built["harm"]
        assert isinstance(judge, HarmJudge)
        return judge

    def _picked_harm(self) -> HarmJudge:
        """``harm: auto`` on an endpoint: the prompt with the best kappa on the pick rows (a seeded
        sample of the built-in labelled non-refusals); the model prompt when the data folder lacks them."""
        from .harm_labels import HARM_SOURCES, pick_rows

        model = self.model()
        try:
            rows = pick_rows(self.data_dir, 0)
        except InputError:
            return build_harm_judge("model", model)
        return PickedHarmJudge(candidates_for(model), rows, reference=HARM_SOURCES)

    def choice(self) -> ChoiceJudge:
        if "choice" not in self._built:
            self._built["choice"] = ChoiceJudge(self.model() if self.spec.choice_model else None)
        judge = self._built["choice"]
        assert isinstance(judge, ChoiceJudge)
        return judge

    def mtbench(self) -> MTBenchJudge:
        if "mtbench" not in self._built:
            path = self.data_dir / "mt_bench" / "judge_prompts.jsonl"
            self._built["mtbench"] = MTBenchJudge(self.model(), path, self.spec.mtbench)
        judge = self._built["mtbench"]
        assert isinstance(judge, MTBenchJudge)
        return judge

    def toxicity(self) -> ToxicityJudge:
        if "toxicity" not in self._built:
            model = self.model() if self.spec.toxicity == "model" else None
            self._built["toxicity"] = ToxicityJudge(self.spec.toxicity, model)
        judge = self._built["toxicity"]
        assert isinstance(judge, ToxicityJudge)
        return judge

    def quality(self) -> QualityJudge:
        if "quality" not in self._built:
            self._built["quality"] = QualityJudge(self.model())
        judge = self._built["quality"]
        assert isinstance(judge, QualityJudge)
        return judge

    def built(self) -> set[str]:
        """The benchmark judges built so far (by :meth:`prepare` or first use)."""
        return set(self._built) | ({"refusal"} if self._refusal is not None else set())

    def prepare(self, needs: set[str]) -> None:
        """Build the judges ``needs`` names now, so a missing judge fails the run before any cell."""
        builders = {
            "refusal": self.refusal,
            "harm": self.harm,
            "choice": self.choice,
            "mtbench": self.mtbench,
            "toxicity": self.toxicity,
            "quality": self.quality,
        }
        for need in sorted(needs):
            if need not in builders:
                raise ConfigError(f"unknown judge '{need}'", hint=f"known judges: {', '.join(builders)}")
            builders[need]()

    def close(self) -> None:
        if self._cache is not None:
            self._cache.close()
