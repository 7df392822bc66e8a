"""What ``psychoalign models list`` shows is usable as written: every ``backend:model`` id it
lists is accepted wherever a model is configured, and resolves to the same id."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from psychoalign.cli.main import app
from psychoalign.config import load_settings
from psychoalign.errors import PsychoAlignError
from psychoalign.models import ModelSpec, build_model, resolved_label
from tests.helpers import V8_WEIGHTS


def _listed_ids() -> list[str]:
    result = CliRunner().invoke(app, ["models", "list", "--json"])
    assert result.exit_code == 0, result.output
    listed = json.loads(result.stdout)
    ids = set(listed["roles"].values())
    ids |= {f"{row['backend']}:{row['default_model']}" for row in listed["backends"]}
    return sorted(ids)


def _settings(tmp_path: Path, text: str) -> object:
    path = tmp_path / "p.toml"
    path.write_text(text)
    return load_settings(path, environ={})


def test_every_listed_id_is_accepted_as_a_role_model_and_resolves_to_itself(tmp_path: Path) -> None:
    ids = _listed_ids()
    assert "local:smollm2-135m-instruct" in ids and any(i.startswith("classifier:evaluator-minilm-v14@") for i in ids)
    for model_id in ids:
        for role in ("drive", "evaluator"):  # the evaluator's embedded default is the classifier, not local
            settings = _settings(tmp_path, f'[roles.{role}]\nmodel = "{model_id}"\n')
            spec = settings.model_spec(role)  # type: ignore[attr-defined]
            assert f"{spec.backend}:" == model_id.split(":", 1)[0] + ":", (role, model_id, spec)
            resolved = resolved_label(spec)  # the same id (a classifier's gains its weights hash)
            assert resolved == model_id or resolved.startswith(f"{model_id}@"), (role, model_id, resolved)


def test_the_id_spelling_in_every_place_a_model_is_given(tmp_path: Path) -> None:
    # the role's `backend:model` wins over a backend the defaults set for every role
    settings = _settings(
        tmp_path, '[defaults]\nbackend = "openai"\nmodel = "gpt-4o-mini"\n[roles.drive]\nmodel = "local:smollm2"\n'
    )
    assert settings.model_spec("drive").backend == "local"  # type: ignore[attr-defined]
    assert settings.model_spec("mediator").backend == "openai"  # type: ignore[attr-defined]
    # a model name whose colon is its own stays whole
    assert ModelSpec(backend="openai", model="qwen3:8b").model == "qwen3:8b"
    assert ModelSpec(model="openai:qwen3:8b") == ModelSpec(backend="openai", model="qwen3:8b")
    # a prefix that contradicts the backend given beside it is refused in one line
    with pytest.raises(PsychoAlignError, match="names backend 'local' but backend is 'openai'"):
        _settings(tmp_path, '[roles.drive]\nbackend = "openai"\nmodel = "local:smollm2"\n').model_spec("drive")  # type: ignore[attr-defined]


def test_a_classifier_id_pins_the_weights_it_names() -> None:
    shipped = build_model(ModelSpec(model="classifier:evaluator-minilm-v14"))
    label = shipped.backend.model_name  # evaluator-minilm-v14@<hash>
    assert build_model(ModelSpec(model=f"classifier:{label}")).backend.model_name == label
    with pytest.raises(PsychoAlignError, match="does not ship"):
        build_model(ModelSpec(model="classifier:evaluator-minilm-v14@000000000000"))


def test_an_earlier_classifier_is_refused_by_name_in_one_line_and_loads_by_its_path() -> None:
    # v8, shipped before v14: its weights are no longer in the package, so the name is refused
    # with the version that is shipped and where the earlier file is; its path still loads it.
    for name in ("classifier:evaluator-minilm-v8", "classifier:evaluator-minilm-v8@242e308abca2"):
        with pytest.raises(PsychoAlignError) as refused:
            build_model(ModelSpec(model=name))
        error = refused.value
        assert len(str(error).splitlines()) == 1
        assert error.message == (
            f"classifier '{name.removeprefix('classifier:')}' is not shipped with this psychoalign "
            "(it ships evaluator-minilm-v14)"
        )
        assert "bench/candidates/" in (error.hint or "") and "evaluator-minilm-v14" in (error.hint or "")
    earlier = build_model(ModelSpec(backend="classifier", model=str(V8_WEIGHTS)))
    assert earlier.backend.model_name == "evaluator-minilm-v8@242e308abca2"
