"""The embedded model's runtime present but broken (llama-cpp-python whose shared library is
missing): one line naming it and the fix, not "FileNotFoundError: — check the path" and a
traceback per failed negotiation. No model is loaded: the import itself is made to fail."""

from __future__ import annotations

import importlib.abc
import sys
from pathlib import Path

import pytest

from psychoalign.errors import BackendUnavailableError
from psychoalign.models import ModelSpec, build_model, local
from psychoalign.models.local import LocalBackend, _LoadedModel


class _BrokenLibrary(importlib.abc.MetaPathFinder):
    """What llama_cpp's import does when its libllama.so is gone."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name == "llama_cpp" or name.startswith("llama_cpp."):
            raise FileNotFoundError("Shared library with base name 'llama' not found")
        return


@pytest.fixture
def broken_llama(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "llama_cpp" or m.startswith("llama_cpp.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setattr(sys, "meta_path", [_BrokenLibrary(), *sys.meta_path])
    # a model an earlier test loaded in this process would be reused without importing anything
    monkeypatch.setattr(local, "_MODELS", {})


@pytest.mark.usefixtures("broken_llama")
async def test_a_missing_llama_library_is_one_line_naming_it_and_the_fix(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailableError) as err:
        _LoadedModel(tmp_path / "m.gguf", 512, 1)
    message = str(err.value)
    assert "llama.cpp library cannot be loaded" in message and "'llama' not found" in message
    assert "--force-reinstall" in message and "endpoint" in message and "\n" not in message

    model = build_model(ModelSpec(backend="local"))
    with pytest.raises(BackendUnavailableError, match=r"llama\.cpp library cannot be loaded"):
        await model.chat("hello")


@pytest.mark.usefixtures("broken_llama")
def test_models_list_says_the_local_backend_is_unusable_and_why() -> None:
    usable, why = LocalBackend.availability()
    assert usable is False and "llama.cpp library cannot be loaded" in why
