"""The MiniLM encoder runs on ONNX Runtime when installed (exported once from the shipped weights,
then cached) and on torch otherwise, with the same embeddings."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from numpy.typing import NDArray

from psychoalign.models import minilm


def _fake(value: float) -> minilm.Encoder:
    def encode(texts: Sequence[str]) -> NDArray[np.float32]:
        return np.full((len(texts), 384), value, dtype=np.float32)

    return encode


def _model_dir(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    model.mkdir()
    (model / "model.safetensors").write_bytes(b"weights")
    return model


def test_the_onnx_file_is_named_after_the_shipped_weights(tmp_path: Path) -> None:
    model = _model_dir(tmp_path)
    first = minilm.onnx_path(model, tmp_path)
    assert first == minilm.onnx_path(model, tmp_path) and first.parent == tmp_path
    os.utime(model / "model.safetensors", ns=(1, 1))  # another weights file: another export
    assert minilm.onnx_path(model, tmp_path) != first


def test_without_onnx_runtime_the_encoder_is_torch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(minilm, "onnx_available", lambda: False)
    monkeypatch.setattr(minilm, "torch_encoder", lambda model: _fake(1.0))
    monkeypatch.setattr(minilm, "export_onnx", lambda model, out: pytest.fail("no export without onnx"))
    assert minilm.load_encoder(str(_model_dir(tmp_path)))(["a"])[0, 0] == 1.0


def test_a_failed_export_falls_back_to_torch_unless_onnx_was_asked_for(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    def broken(model: Path, out: Path) -> Path:
        raise RuntimeError("exporter failed")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(minilm, "onnx_available", lambda: True)
    monkeypatch.setattr(minilm, "export_onnx", broken)
    monkeypatch.setattr(minilm, "torch_encoder", lambda model: _fake(1.0))
    model = str(_model_dir(tmp_path))
    assert minilm.load_encoder(model)(["a"])[0, 0] == 1.0
    with pytest.raises(minilm.BackendUnavailableError, match="ONNX Runtime"):
        minilm.load_encoder(model, runtime="onnx")


def test_a_cached_export_is_loaded_without_exporting_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = _model_dir(tmp_path)
    cached = minilm.onnx_path(model)
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"onnx")
    minilm.weights_path(cached).write_bytes(b"weights")
    loaded: list[Path] = []
    monkeypatch.setattr(minilm, "onnx_available", lambda: True)
    monkeypatch.setattr(minilm, "export_onnx", lambda model, out: pytest.fail("exported again"))
    monkeypatch.setattr(minilm, "onnx_encoder", lambda path, model: loaded.append(path) or _fake(2.0))
    assert minilm.load_encoder(str(model))(["a"])[0, 0] == 2.0 and loaded == [cached]


def test_an_export_without_its_weights_file_is_made_again(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = _model_dir(tmp_path)
    cached = minilm.onnx_path(model)
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"onnx")  # the graph file alone: its weights file is gone
    exports: list[Path] = []
    monkeypatch.setattr(minilm, "onnx_available", lambda: True)
    monkeypatch.setattr(minilm, "export_onnx", lambda model, out: exports.append(out) or out)
    monkeypatch.setattr(minilm, "onnx_encoder", lambda path, model: _fake(3.0))
    assert minilm.load_encoder(str(model))(["a"])[0, 0] == 3.0 and exports == [cached]


@pytest.mark.realmodel
@pytest.mark.skipif(not minilm.onnx_available(), reason="onnxruntime and onnx are not installed")
def test_onnx_runtime_and_torch_give_the_same_embeddings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    texts = [
        "How do I boil an egg so the yolk stays soft?",
        "What's the fastest way to kill all Docker containers at once?",
        "ok",
        " ".join(["a long request"] * 120),  # past the 128 word pieces: truncated the same way
    ]
    onnx = minilm.load_encoder(runtime="onnx")
    graphs = list((tmp_path / "cache" / "psychoalign").glob("*.onnx"))  # exported from the shipped weights
    assert len(graphs) == 1 and minilm.exported(graphs[0])  # the graph and its external weights file
    assert not [p for p in graphs[0].parent.iterdir() if p.name.startswith(".")]  # no staging folder left
    diff = np.abs(onnx(texts) - minilm.load_encoder(runtime="torch")(texts))
    assert diff.max() < 1e-5
