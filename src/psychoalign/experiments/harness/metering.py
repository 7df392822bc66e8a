"""Per-cell cost accounting: LLM calls, critical-path calls, tokens, overload signals.

Models are shared across the cells of a run (one backend per endpoint, so connections are
pooled), but cost must be counted per cell. :class:`ModelPool` hands each cell fresh
:class:`~psychoalign.models.ChatModel` objects over :class:`MeteredBackend` wrappers that report
to that cell's :class:`CallMeter`.

Critical-path calls are measured, not declared: a call's depth is one more than the deepest call
that had *finished* when it started, so calls issued together (``asyncio.gather``) share a depth
and calls made one after another add up. The critical path is the largest depth.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ClassVar

from ...config import Settings
from ...errors import TransientBackendError
from ...models import Backend, ChatModel, ChatRequest, Completion, ModelSpec, ResponseCache, backend_class
from ...models.types import Usage

__all__ = ["CallMeter", "ModelPool"]

#: Per-call timeout of the embedded (``local``) model in experiments, unless the configuration sets
#: ``timeout_s``: it serves one call at a time, so a call's time includes the calls queued ahead of
#: it (a debate's parallel agents); on a busy shared CPU the 120 s default timed calls out that were
#: only waiting, and each retry queued the same work again. Timeouts of a local call are not
#: retried unless ``max_retries`` is set: a deterministic model asked again does the same work.
LOCAL_TIMEOUT_S = 900.0


@dataclass
class CallMeter:
    """Counts one cell's backend attempts. Not shared between cells."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    transient_errors: int = 0
    on_overload: Callable[[], None] | None = None
    #: told after each finished call (the runner's per-sample token limit cuts the cell off)
    on_call: Callable[[CallMeter], None] | None = None
    _finished_depth: int = 0
    _max_depth: int = 0
    _labels: dict[str, int] = field(default_factory=dict)

    def start(self) -> int:
        return self._finished_depth + 1

    def finish(self, depth: int, spec: ModelSpec, label: str, usage: Usage) -> None:
        self.calls += 1
        self.prompt_tokens += usage.prompt_tokens
        self.completion_tokens += usage.completion_tokens
        self.cost_usd += (
            usage.prompt_tokens * spec.input_cost_per_mtok + usage.completion_tokens * spec.output_cost_per_mtok
        ) / 1e6
        self._finished_depth = max(self._finished_depth, depth)
        self._max_depth = max(self._max_depth, depth)
        self._labels[label] = self._labels.get(label, 0) + 1
        if self.on_call is not None:
            self.on_call(self)

    def overloaded(self) -> None:
        self.transient_errors += 1
        if self.on_overload is not None:
            self.on_overload()

    @property
    def critical_path(self) -> int:
        return self._max_depth

    def summary(self) -> dict[str, float]:
        return {
            "calls": self.calls,
            "critical_path": self.critical_path,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "tokens": self.prompt_tokens + self.completion_tokens,
            "cost_usd": round(self.cost_usd, 8),
            "transient_errors": self.transient_errors,
        }


#: The :class:`Backend` flags by which callers decide what to ask a model.
ABILITIES = ("rates_numbers", "judges_requests", "deterministic")


class MeteredBackend(Backend):
    """Wraps a shared backend and reports each attempt to one :class:`CallMeter`."""

    name: ClassVar[str] = "metered"

    def __init__(self, inner: Backend, meter: CallMeter) -> None:
        super().__init__(inner.spec)
        self.inner = inner
        self.meter = meter
        self.name = inner.name  # type: ignore[misc]  # labels read like the wrapped backend
        # Callers decide what to ask by the model's abilities: a metered embedded model must still
        # be asked for plain text, not for self-ratings (docs/embedded.md), and a metered classifier
        # must still screen requests before any draft and skip re-judging a text it passed, as it
        # does outside an experiment (without them a cell ran a system that no deployment runs).
        for ability in ABILITIES:
            setattr(self, ability, getattr(inner, ability))

    @property
    def model_name(self) -> str:
        return self.inner.model_name

    def reset_prompt_cache(self) -> None:
        self.inner.reset_prompt_cache()  # a measurement's reset must reach the model that keeps the prompt

    async def complete(self, request: ChatRequest) -> Completion:
        depth = self.meter.start()
        # Yield once so that calls issued together all start before any of them finishes.
        await asyncio.sleep(0)
        try:
            completion = await self.inner.complete(request)
        except TransientBackendError:
            self.meter.overloaded()
            raise
        self.meter.finish(depth, self.inner.spec, self.inner.model_name, completion.usage)
        return completion


class ModelPool:
    """One backend per distinct model spec, shared by every cell; per-cell metered ChatModels.

    ``overrides`` maps a role to a ready ChatModel (tests, benchmarks): its backend is wrapped the
    same way, so scripted models are metered like real ones.
    """

    def __init__(self, settings: Settings, overrides: dict[str, ChatModel] | None = None) -> None:
        self.settings = settings
        self._overrides = dict(overrides or {})
        self._backends: dict[str, Backend] = {}
        self._caches: dict[str, ResponseCache | None] = {}
        # Per role without per-system overrides: the spec, shared backend and cache, resolved once
        # (every cell asks; settings are frozen for the run). One jitter RNG for every cell's model.
        self._resolved: dict[str, tuple[ModelSpec, Backend, ResponseCache | None]] = {}
        self._rng = random.Random()

    def spec(self, role: str, extra: dict[str, object] | None = None) -> ModelSpec:
        if role in self._overrides and not extra:
            return self._overrides[role].spec
        base = self.settings.model_spec(role)
        spec = base.model_copy(update=dict(extra)) if extra else base
        if spec.backend == "local":
            given = {**self.settings.defaults, **self.settings.roles.get(role, {}), **(extra or {})}
            update: dict[str, object] = {}
            if "timeout_s" not in given:
                update["timeout_s"] = max(spec.timeout_s, LOCAL_TIMEOUT_S)
            if "max_retries" not in given:
                update["max_retries"] = 0
            spec = spec.model_copy(update=update) if update else spec
        return spec

    def _shared(self, role: str, spec: ModelSpec) -> tuple[Backend, ResponseCache | None]:
        if role in self._overrides:
            model = self._overrides[role]
            return model.backend, model.cache
        key = spec.model_dump_json()
        if key not in self._backends:
            self._backends[key] = backend_class(spec.backend)(spec)
            cache_dir = self.settings.cache_dir()
            self._caches[key] = ResponseCache(cache_dir / "responses.sqlite") if cache_dir is not None else None
        return self._backends[key], self._caches[key]

    def resolve(self, role: str, extra: dict[str, object] | None = None) -> tuple[ModelSpec, Backend]:
        """The spec and shared backend ``role`` resolves to (with this system's ``extra`` keys)."""
        spec = self.spec(role, extra)
        return spec, self._shared(role, spec)[0]

    def model(self, role: str, meter: CallMeter, extra: dict[str, object] | None = None) -> ChatModel:
        """A ChatModel for ``role`` whose attempts are counted by ``meter``."""
        if extra:
            spec = self.spec(role, extra)
            backend, cache = self._shared(role, spec)
        else:
            if role not in self._resolved:
                base = self.spec(role)
                self._resolved[role] = (base, *self._shared(role, base))
            spec, backend, cache = self._resolved[role]
        return ChatModel(spec, MeteredBackend(backend, meter), cache=cache, rng=self._rng)

    def label(self, role: str) -> str:
        if role in self._overrides:
            return self._overrides[role].label
        return self.spec(role).label()

    async def aclose(self) -> None:
        for backend in self._backends.values():
            await backend.aclose()
        for cache in self._caches.values():
            if cache is not None:
                cache.close()
