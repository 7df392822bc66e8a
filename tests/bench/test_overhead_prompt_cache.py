"""bench/overhead.py forgets llama.cpp's kept prompt prefix between timed calls through the
backend's public ``reset_prompt_cache``, past its own timing wrapper. No model is loaded."""

from __future__ import annotations

from pathlib import Path

import pytest
from bench.overhead import Timed, forget_prompt_prefix

from psychoalign.models import ChatModel, ModelSpec, local
from psychoalign.models.local import LocalBackend
from tests.models.test_local_prompt_cache import _FakeLoaded, _no_load


def test_the_plain_models_kept_prompt_is_forgotten_through_the_timing_wrapper(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    spec = ModelSpec(backend="local", model=str(gguf))
    loaded = _FakeLoaded()
    monkeypatch.setattr(local, "_MODELS", {(str(gguf), spec.n_ctx, spec.n_threads): loaded})
    monkeypatch.setattr(local, "_load", _no_load)
    plain = ChatModel(spec, Timed(LocalBackend(spec), [], "plain"))
    forget_prompt_prefix(plain)
    assert loaded.llama.n_tokens == 0 and loaded.llama.resets == [True]
