"""``LocalBackend.reset_prompt_cache``: the next call evaluates its whole prompt (llama.cpp's kept
prefix forgotten), nothing else changes. No model is loaded: a fake llama.cpp context stands in
the process-wide table of loaded models."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from psychoalign.models import Backend, ChatRequest, Message, ModelSpec, local
from psychoalign.models.local import LocalBackend
from psychoalign.models.scripted import ScriptedBackend


class _FakeLlama:
    """What ``reset_prompt_cache`` may touch of ``llama_cpp.Llama``: the kept tokens."""

    def __init__(self, lock: threading.Lock) -> None:
        self.lock = lock
        self.n_tokens = 37  # a prompt kept from an earlier call
        self.resets: list[bool] = []  # whether the context lock was held at each reset

    def reset(self) -> None:
        self.resets.append(self.lock.locked())
        self.n_tokens = 0


class _FakeLoaded:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.llama = _FakeLlama(self.lock)


def _no_load(path: Path, n_ctx: int, n_threads: int | None) -> None:
    raise AssertionError("reset_prompt_cache loaded a model")


@pytest.fixture
def backend(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> LocalBackend:
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    monkeypatch.setattr(local, "_MODELS", {})
    monkeypatch.setattr(local, "_load", _no_load)
    return LocalBackend(ModelSpec(backend="local", model=str(gguf)))


def test_the_kept_prompt_of_this_backends_context_is_forgotten_and_nothing_else(
    backend: LocalBackend, monkeypatch: pytest.MonkeyPatch
) -> None:
    mine, other = _FakeLoaded(), _FakeLoaded()
    spec = backend.spec
    before: dict[tuple[str, int, int | None], Any] = {
        (str(backend.path), spec.n_ctx, spec.n_threads): mine,
        (str(backend.path), spec.n_ctx * 2, spec.n_threads): other,  # another context of the file
    }
    monkeypatch.setattr(local, "_MODELS", dict(before))
    backend.reset_prompt_cache()
    assert mine.llama.n_tokens == 0 and mine.llama.resets == [True]  # under the context lock
    assert not mine.lock.locked()
    assert other.llama.n_tokens == 37 and other.llama.resets == []
    assert before == local._MODELS  # still loaded, the same objects


def test_with_no_model_loaded_it_loads_nothing(backend: LocalBackend) -> None:
    backend.reset_prompt_cache()  # _no_load raises if it tries
    assert local._MODELS == {}


async def test_a_backend_that_keeps_no_prompt_replies_as_before(tmp_path: Path) -> None:
    script = tmp_path / "s.yaml"
    script.write_text("rules: []\ndefault: same reply\n")
    scripted = ScriptedBackend(ModelSpec(backend="scripted", script=str(script)))
    assert type(scripted).reset_prompt_cache is Backend.reset_prompt_cache  # the base class's no-op
    request = ChatRequest(messages=(Message(role="user", content="hello"),))
    before = await scripted.complete(request)
    scripted.reset_prompt_cache()
    assert await scripted.complete(request) == before
