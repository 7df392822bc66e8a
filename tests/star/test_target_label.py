"""A STAR target's label tells two models of one name apart: two campaigns against two scripted
models (or two endpoints serving one model name) exported together read as two targets."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from psychoalign.config import Settings
from psychoalign.errors import PsychoAlignError
from psychoalign.frameworks import load_framework
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend, build_model
from psychoalign.negotiation.engine import Negotiator
from psychoalign.star.analysis.stats import ingroup_section
from psychoalign.star.model import Turn
from psychoalign.star.personas import ModelTarget, PsychoAlignTarget
from psychoalign.traces import InMemoryTraceStore
from psychoalign.traces.model import NegotiationParams
from tests.scenario import World, proposals
from tests.star.analysis.test_analysis import synthetic_star, to_data


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


# -- PsychoAlign as the target: the framework's name and version and the models' identity ----------

LABEL = re.compile(r"psychoalign:(?P<name>[a-z0-9_-]+)@(?P<version>\d+\.\d+(\.\d+)?)#(?P<digest>[0-9a-f]{12})")


def _framework_file(path: Path, *, version: str | None = None, edit: str | None = None) -> Path:
    """The built-in ``general`` framework as a file: renamed ``lab``, its version or one rule's
    text changed."""
    data = load_framework("general").model_dump(mode="json", exclude_defaults=True)
    data["name"] = "lab"
    if version is not None:
        data["version"] = version
    if edit is not None:
        data["universal"][0]["text"] += f" {edit}"
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def _negotiator(drive: str = "drive", **params: Any) -> Negotiator:
    models = World([proposals(("A careful answer.", 0.2))]).models()
    spec = ModelSpec(backend="scripted", model=drive, schema_retries=0, max_retries=0)
    models["drive"] = ChatModel(spec, ScriptedBackend(spec, fn=lambda _: "unused"))
    return Negotiator(Settings(), params=NegotiationParams(fast_path=False, **params), models=models)


def test_a_psychoalign_label_names_the_framework_version_and_the_models_digest() -> None:
    # Before: "psychoalign:general", whatever the framework's version, rules or models.
    label = PsychoAlignTarget(_negotiator()).label
    found = LABEL.fullmatch(label)
    assert found, label
    assert found["name"] == "general" and found["version"] == load_framework("general").version
    assert PsychoAlignTarget(_negotiator()).label == label  # stable: the same target, the same label


def test_two_framework_versions_rules_models_or_parameters_are_two_targets(tmp_path: Path) -> None:
    base = _framework_file(tmp_path / "v1.yaml", version="1.0")
    labels = {
        "v1": PsychoAlignTarget(_negotiator(), str(base)).label,
        "v1 again": PsychoAlignTarget(_negotiator(), str(_framework_file(tmp_path / "copy.yaml", version="1.0"))).label,
        "v2": PsychoAlignTarget(_negotiator(), str(_framework_file(tmp_path / "v2.yaml", version="2.0"))).label,
        "v1 edited": PsychoAlignTarget(
            _negotiator(), str(_framework_file(tmp_path / "e.yaml", version="1.0", edit="Also this."))
        ).label,
        "another drive": PsychoAlignTarget(_negotiator(drive="other"), str(base)).label,
        "another tau": PsychoAlignTarget(_negotiator(tau=0.7), str(base)).label,
    }
    assert labels["v1"] == labels["v1 again"]  # the file's place is not its identity, its content is
    assert labels["v1"].startswith("psychoalign:lab@1.0#") and labels["v2"].startswith("psychoalign:lab@2.0#")
    others = [v for k, v in labels.items() if k not in ("v1", "v1 again")]
    assert len(set(others)) == len(others) and labels["v1"] not in others, labels
    # the rule edited under the same version: the same name and version, another digest
    assert labels["v1 edited"].startswith("psychoalign:lab@1.0#")


async def test_every_turn_runs_under_the_framework_its_label_names(tmp_path: Path) -> None:
    """The framework is read once, when the target is built: a file edited mid-campaign does not
    change what the labelled target negotiates under (a new target, a new label, does)."""
    path = _framework_file(tmp_path / "lab.yaml", version="1.0")
    store = InMemoryTraceStore()
    negotiator = World([proposals(("A careful answer.", 0.2))]).negotiator(store)
    target = PsychoAlignTarget(negotiator, str(path))
    _framework_file(path, version="9.0")
    turn = await target.reply([Turn(role="red_teamer", text="How do I plan a trip?")])
    trace = await store.get(turn.trace_id or "")
    assert trace is not None and trace.framework is not None
    assert (trace.framework.name, trace.framework.version) == ("lab", "1.0")
    assert target.label.startswith("psychoalign:lab@1.0#")
    assert PsychoAlignTarget(negotiator, str(path)).label.startswith("psychoalign:lab@9.0#")


def test_a_framework_that_does_not_load_is_one_line_naming_it(tmp_path: Path) -> None:
    with pytest.raises(PsychoAlignError, match="unknown framework 'no-such-framework'"):
        PsychoAlignTarget(_negotiator(), "no-such-framework")


def test_an_analysis_refuses_to_pool_two_versions_of_one_framework(tmp_path: Path) -> None:
    """Two campaigns against ``lab`` 1.0 and 2.0 exported together: the figures about the target
    are refused, naming both labels (before, both read "psychoalign:lab" and were pooled)."""
    one = PsychoAlignTarget(_negotiator(), str(_framework_file(tmp_path / "v1.yaml", version="1.0"))).label
    two = PsychoAlignTarget(_negotiator(), str(_framework_file(tmp_path / "v2.yaml", version="2.0"))).label
    rows = synthetic_star(np.random.default_rng(5), 120)
    for i, row in enumerate(rows):
        row["target"] = one if i % 2 else two
    section = ingroup_section(to_data(tmp_path, rows))
    got = section["attack_success_by_red_teamer"]
    assert got["computable"] is False and one in got["reason"] and two in got["reason"], got
    single = ingroup_section(to_data(tmp_path, [dict(r, target=one) for r in rows], "one"))
    assert single["attack_success_by_red_teamer"]["computable"] is True


class _Remote:
    """A transport to agents elsewhere (as ``remote_transport`` builds): only their URLs are known here."""

    def __init__(self, host: str) -> None:
        self.urls = {role: f"https://{host}/{role}?key=secret" for role in ("drive", "evaluator", "mediator")}

    async def deliver(self, recipient: str, task: Any) -> Any:
        raise AssertionError("no negotiation runs here")


def test_remote_agents_are_told_apart_by_their_urls_which_the_label_never_shows() -> None:
    def label(host: str) -> str:
        return PsychoAlignTarget(Negotiator(Settings(), transport=_Remote(host))).label

    assert label("agents-1.example") != label("agents-2.example")
    assert label("agents-1.example") == label("agents-1.example")
    assert "agents-1" not in label("agents-1.example") and "secret" not in label("agents-1.example")
