"""Small helpers shared by tests."""

from __future__ import annotations

from psychoalign.models import ModelSpec


def fast_spec(**kw: object) -> ModelSpec:
    """A spec with tiny backoff so retry tests run in milliseconds."""
    base: dict[str, object] = {"backoff_base_s": 0.001, "backoff_max_s": 0.01, "timeout_s": 5.0}
    base.update(kw)
    return ModelSpec.model_validate(base)
