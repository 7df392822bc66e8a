"""A STAR target's label tells two models of one name apart: two campaigns against two scripted
models (or two endpoints serving one model name) exported together read as two targets."""

from __future__ import annotations

from pathlib import Path

from psychoalign.models import ModelSpec, build_model
from psychoalign.star.personas import ModelTarget


def _label(spec: ModelSpec, tmp_path: Path) -> str:
    return ModelTarget(build_model(spec, cache_dir=tmp_path / "cache")).label


def test_two_scripts_or_two_endpoints_are_two_targets(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("rules: []\ndefault: I refuse.\n")
    b.write_text("rules: []\ndefault: Sure, here it is.\n")
    label_a = _label(ModelSpec(backend="scripted", script=str(a)), tmp_path)
    label_b = _label(ModelSpec(backend="scripted", script=str(b)), tmp_path)
    assert label_a.startswith("model:scripted:script@") and label_b.startswith("model:scripted:script@")
    assert label_a != label_b
    assert _label(ModelSpec(backend="scripted", script=str(a)), tmp_path) == label_a  # stable

    def served(url: str) -> str:
        return _label(ModelSpec(backend="openai", model="qwen3:8b", base_url=url, api_key="k"), tmp_path)

    assert served("http://gpu-1:8000/v1") != served("http://gpu-2:8000/v1")
    assert served("http://gpu-1:8000/v1") == served("http://gpu-1:8000/v1")
    assert "gpu-1" not in served("http://gpu-1:8000/v1")  # a digest, never the host itself
