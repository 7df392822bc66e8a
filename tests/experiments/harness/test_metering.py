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
