"""Defense-mechanism accuracy (issue #14 item 4): the labelled set, the rule table on given
classifications, scoring, and the negotiated run with scripted models."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from psychoalign.cli import defense_accuracy as defense_accuracy_cli
from psychoalign.cli.experiment import experiment_registry
from psychoalign.config import Settings
from psychoalign.errors import InputError
from psychoalign.experiments.studies.defense_accuracy import (
    FAILED,
    LABELS,
    NONE,
    DefenseItem,
    load_items,
    negotiate_items,
    rule_table_label,
    score,
)
from psychoalign.frameworks import load_framework
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.negotiation import NegotiationParams, Negotiator

from .scenario import APPROVE

ITEMS = load_items()
GENERAL = load_framework("general")


def test_item_set_meets_the_issue_minimums() -> None:
    counts = Counter(it.expected for it in ITEMS)
    assert len(ITEMS) >= 60
    assert set(counts) == set(LABELS)
    assert all(counts[m] >= 10 for m in LABELS if m != NONE)
    assert counts[NONE] >= 10
    assert len({it.request for it in ITEMS}) == len(ITEMS)


@pytest.mark.parametrize("item", ITEMS, ids=[it.id for it in ITEMS])
def test_rule_table_selects_the_labelled_mechanism_from_the_given_classification(item: DefenseItem) -> None:
    assert rule_table_label(item, GENERAL) == item.expected


def test_oracle_accuracy_is_100_percent() -> None:
    report = score(ITEMS, [rule_table_label(it, GENERAL) for it in ITEMS])
    assert report["accuracy"] == 1.0 and report["failed"] == 0
    assert all(report["confusion"][e][p] == 0 for e in LABELS for p in report["columns"] if p != e)


def test_a_classification_that_contradicts_its_conflict_type_is_rejected(tmp_path: Path) -> None:
    import yaml

    raw = yaml.safe_load(
        (Path(__file__).parents[1] / "src/psychoalign/experiments/studies/corpora/defense_accuracy.yaml").read_text()
    )
    bad = next(it for it in raw["items"] if it["conflict_type"] == "adversarial")
    bad["classification"]["conflict"]["adversarial_intent"] = False
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump({"items": [bad]}))
    with pytest.raises(InputError, match=r"item 1 \(reaction-01\).*adversarial_intent=True"):
        load_items(path)
    wrong_label = next(it for it in raw["items"] if it["conflict_type"] == "benign")
    wrong_label["expected"] = "repression"
    path.write_text(yaml.safe_dump({"items": [wrong_label]}))
    with pytest.raises(InputError, match="implies 'none'"):
        load_items(path)
    with pytest.raises(InputError, match="cannot read item set"):
        load_items(tmp_path / "missing.yaml")


def test_score_counts_confusion_accuracy_and_activation() -> None:
    items = [
        next(it for it in ITEMS if it.expected == "repression"),
        next(it for it in ITEMS if it.expected == "projection"),
        next(it for it in ITEMS if it.expected == NONE),
        next(it for it in ITEMS if it.expected == NONE and it.conflict_type.value == "benign_with_caveat"),
    ]
    report = score(items, ["repression", "sublimation", "rationalization", FAILED])
    assert report["correct"] == 1 and report["accuracy"] == 0.25
    assert report["confusion"]["projection"]["sublimation"] == 1
    assert report["confusion"][NONE][FAILED] == 1 and report["failed"] == 1
    assert report["activation_rate"] == 0.75  # three defenses fired, one failure is not an activation
    assert report["activation_when_expected"] == 1.0 and report["activation_when_none_expected"] == 0.5
    assert report["recall"]["repression"] == 1.0 and report["recall"]["projection"] == 0.0


def test_the_experiment_is_registered() -> None:
    assert "defense-accuracy" in experiment_registry().commands


# -- negotiated run with scripted models -----------------------------------------------------------


def _field(request: ChatRequest, name: str) -> str:
    m = re.search(rf"^{name}: (.*)$", request.messages[-1].content, re.M)
    return m.group(1).strip() if m else ""


def _models(items: list[DefenseItem], evaluator_gives_classification: bool) -> dict[str, ChatModel]:
    by_request = {it.request: it for it in items}

    def drive(request: ChatRequest) -> dict[str, Any]:
        item = by_request[_field(request, "Request")]
        return {"proposals": [{"text": item.classification.draft, "utility": 0.9}]}

    def evaluator(request: ChatRequest) -> dict[str, Any]:
        item = by_request[_field(request, "Request")]
        if evaluator_gives_classification and _field(request, "Proposed answer") == item.classification.draft:
            return item.classification.evaluation().model_dump(mode="json")
        return APPROVE  # the dual gate's check of new text; or an evaluator that approves everything

    def mediator(request: ChatRequest) -> dict[str, Any]:
        if request.schema_name == "assessment":
            return {"assessments": [{"proposal": 1, "feasibility": 0.8}]}
        return {"response": "A composed answer."}

    out = {}
    for role, fn in (("drive", drive), ("evaluator", evaluator), ("mediator", mediator)):
        spec = ModelSpec(backend="scripted", model=role, schema_retries=0, max_retries=0)
        out[role] = ChatModel(spec, ScriptedBackend(spec, fn=fn))
    return out


@pytest.mark.parametrize("gives", [True, False], ids=["scripted-classification", "approves-everything"])
async def test_negotiated_run_scores_what_the_engine_selected(gives: bool) -> None:
    items = list(ITEMS)
    negotiator = Negotiator(Settings(), params=NegotiationParams(), models=_models(items, gives))
    predicted, trace_ids = await negotiate_items(items, negotiator, framework=GENERAL, concurrency=4)
    await negotiator.aclose()
    assert len(set(trace_ids)) == len(items)
    report = score(items, predicted)
    if gives:
        # The whole engine, fed the labelled classification, selects the labelled mechanism.
        assert report["accuracy"] == 1.0, [r for r in report["items"] if r["expected"] != r["predicted"]]
    else:
        # An evaluator that approves everything never activates a defense: only "none" items are right.
        assert report["activation_rate"] == 0.0
        assert report["correct"] == sum(1 for it in items if it.expected == NONE)


# -- the command ---------------------------------------------------------------------------------


def _app(command: Any) -> typer.Typer:
    app = typer.Typer()
    app.command()(command)
    return app


def test_oracle_command_prints_the_matrix_and_writes_the_report(tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = CliRunner().invoke(_app(defense_accuracy_cli.defense_accuracy_command), ["--oracle", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"accuracy {len(ITEMS)}/{len(ITEMS)} = 1.000" in result.output
    data = json.loads((out / "results.json").read_text())
    assert data["accuracy"] == 1.0 and data["confusion"]["projection"]["projection"] == 10
    page = (out / "report.html").read_text()
    assert "Content-Security-Policy" in page and "<script" not in page and "reaction_formation" in page


def test_negotiated_command_uses_the_configured_negotiation(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    items = list(ITEMS)

    def make(settings: Settings, *, params: NegotiationParams, store: Any = None) -> Negotiator:
        return Negotiator(settings, params=params, models=_models(items, True), store=store)

    monkeypatch.setattr(defense_accuracy_cli, "Negotiator", make)
    out = tmp_path / "report"
    db = f"sqlite+aiosqlite:///{tmp_path / 't.db'}"
    result = CliRunner().invoke(
        _app(defense_accuracy_cli.defense_accuracy_command), ["--out", str(out), "--store", db, "--concurrency", "8"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads((out / "results.json").read_text())
    assert data["mode"].startswith("negotiated") and data["accuracy"] == 1.0
    assert all(row["trace_id"] for row in data["items"])


# -- against a configured endpoint (what a user with a capable model runs) ------------------------------


def test_defense_accuracy_end_to_end_against_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    """`experiment run defense-accuracy -c config.toml` with every role on an OpenAI-compatible
    server (a loopback fake answering like a capable model that classifies each item as labelled):
    the real HTTP backend, structured output, negotiation and report; every item right."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from .loopback import openai_reply, serve

    by_request = {it.request: it for it in ITEMS}
    seen: list[str] = []

    def field(text: str, name: str) -> str:
        m = re.search(rf"^{name}: (.*)$", text, re.M)
        return m.group(1).strip() if m else ""

    async def chat(request: Request) -> JSONResponse:
        body = json.loads(await request.body())
        fmt = (body.get("response_format") or {}).get("json_schema") or {}
        name, last = fmt.get("name", ""), body["messages"][-1]["content"]
        seen.append(name)
        item = by_request.get(field(last, "Request"))
        reply: Any
        if name == "drive_proposals" and item is not None:
            reply = {"proposals": [{"text": item.classification.draft, "utility": 0.9}]}
        elif name == "evaluation" and item is not None and field(last, "Proposed answer") == item.classification.draft:
            reply = item.classification.evaluation().model_dump(mode="json")
        elif name == "evaluation":
            reply = APPROVE
        elif name == "assessment":
            reply = {"assessments": [{"proposal": 1, "feasibility": 0.8}]}
        elif name == "final_response":
            reply = {"response": "A composed answer."}
        else:
            return JSONResponse({"error": {"message": f"unexpected call {name!r}"}}, status_code=400)
        return JSONResponse(openai_reply(json.dumps(reply)))

    app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])
    with serve(app) as url:
        config = tmp_path / "endpoint.toml"
        roles = "".join(
            f'[roles.{role}]\nbackend = "openai"\nbase_url = "{url}/v1"\nmodel = "capable-{role}"\nmax_retries = 0\n\n'
            for role in ("drive", "evaluator", "mediator")
        )
        config.write_text(f'home = "{tmp_path / "home"}"\n\n{roles}')
        out = tmp_path / "report"
        result = CliRunner().invoke(
            _app(defense_accuracy_cli.defense_accuracy_command),
            ["--config", str(config), "--no-store", "--out", str(out), "--concurrency", "4"],
        )
    assert result.exit_code == 0, result.output
    assert f"accuracy {len(ITEMS)}/{len(ITEMS)} = 1.000" in result.output
    data = json.loads((out / "results.json").read_text())
    assert data["mode"].startswith("negotiated") and data["failed"] == 0
    assert all(data["confusion"][label][label] == sum(data["confusion"][label].values()) for label in LABELS)
    assert "openai:capable-evaluator" in json.dumps(data["models"])
    assert {"drive_proposals", "evaluation", "final_response"} <= set(seen)  # it really went over HTTP
