"""Metering: the embedded model's calls wait for its queue and are not retried on timeout."""

from __future__ import annotations

from psychoalign.config import Settings
from psychoalign.experiments.harness.metering import ModelPool


def test_local_model_calls_wait_for_the_queue_and_are_not_retried() -> None:
    from psychoalign.experiments.harness.metering import LOCAL_TIMEOUT_S

    default = ModelPool(Settings()).spec("chat")
    assert (default.timeout_s, default.max_retries) == (LOCAL_TIMEOUT_S, 0)
    chosen = ModelPool(Settings(roles={"chat": {"timeout_s": 30, "max_retries": 2}})).spec("chat")
    assert (chosen.timeout_s, chosen.max_retries) == (30, 2)  # what the configuration says wins
    remote = ModelPool(Settings(roles={"chat": {"backend": "openai", "base_url": "http://x/v1"}})).spec("chat")
    assert (remote.timeout_s, remote.max_retries) == (120.0, 3)


def test_a_metered_backend_keeps_every_ability_of_the_model_it_wraps() -> None:
    """Experiments run the system as deployed: a metered classifier still screens requests before
    any draft (``judges_requests``) and is not asked again about a text it passed
    (``deterministic``); a metered embedded model is still asked for plain text."""
    from typing import ClassVar

    from psychoalign.experiments.harness.metering import ABILITIES, CallMeter, MeteredBackend
    from psychoalign.models import ModelSpec
    from psychoalign.models.base import Backend
    from psychoalign.models.scripted import ScriptedBackend

    class ClassifierLike(ScriptedBackend):
        rates_numbers: ClassVar[bool] = False
        judges_requests: ClassVar[bool] = True
        deterministic: ClassVar[bool] = True

    spec = ModelSpec(backend="scripted")
    for inner in (ClassifierLike(spec, replies=[{}]), ScriptedBackend(spec, replies=[{}])):
        metered = MeteredBackend(inner, CallMeter())
        assert {a: getattr(metered, a) for a in ABILITIES} == {a: getattr(inner, a) for a in ABILITIES}
    assert set(ABILITIES) == {name for name in vars(Backend) if isinstance(getattr(Backend, name), bool)}
