"""`experiment run defense-accuracy`: the oracle and negotiated commands, their report files, and the
run against an OpenAI-compatible endpoint."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from psychoalign.cli import defense_accuracy as defense_accuracy_cli
from psychoalign.cli.experiment import experiment_registry
from psychoalign.config import Settings
from psychoalign.experiments.harness.stats import wilson_ci
from psychoalign.experiments.studies.defense_accuracy import (
    LABELS,
)
from psychoalign.negotiation import NegotiationParams, Negotiator
from tests.experiments.studies.helpers import ITEMS, defense_models
from tests.scenario import APPROVE


def test_the_experiment_is_registered() -> None:
    assert "defense-accuracy" in experiment_registry().commands


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

    def make(settings: Settings, *, params: NegotiationParams, store: Any = None, transport: Any = None) -> Negotiator:
        return Negotiator(settings, params=params, models=defense_models(items, True), store=store, transport=transport)

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


def test_defense_accuracy_end_to_end_against_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    """`experiment run defense-accuracy -c config.toml` with every role on an OpenAI-compatible
    server (a loopback fake answering like a capable model that classifies each item as labelled):
    the real HTTP backend, structured output, negotiation and report; every item right."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tests.loopback import openai_reply, serve

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
    # printed too, with the accuracy's interval: the figure names the models that made it
    lo, hi = wilson_ci(len(ITEMS), len(ITEMS))
    assert f"= 1.000 [{lo:.3f}, {hi:.3f}]" in result.output
    assert "models: drive=openai:capable-drive, evaluator=openai:capable-evaluator" in " ".join(result.output.split())
    assert {"drive_proposals", "evaluation", "final_response"} <= set(seen)  # it really went over HTTP


def test_every_negotiation_failing_is_an_error_not_an_accuracy_of_zero(tmp_path: Path) -> None:
    """An endpoint that refuses every call: the command printed "accuracy 0/3 = 0.000 [0.000,
    0.561]" and exited 0. Now it keeps the report (nothing run is lost), prints no accuracy and
    ends with one error line naming the first failure and the fix."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    from tests.loopback import serve

    async def chat(request: Request) -> JSONResponse:
        return JSONResponse({"error": {"message": "model not found"}}, status_code=404)

    with serve(Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"])])) as url:
        config = tmp_path / "down.toml"
        config.write_text(
            f'home = "{tmp_path / "home"}"\n[defaults]\nbackend = "openai"\nbase_url = "{url}/v1"\n'
            'model = "gone"\nmax_retries = 0\n'
        )
        out = tmp_path / "report"
        result = CliRunner().invoke(
            _app(defense_accuracy_cli.defense_accuracy_command),
            ["--config", str(config), "--no-store", "--out", str(out), "--n", "3"],
        )
    assert result.exit_code == 1, result.output
    assert "accuracy: not measured (every one of the 3 negotiations failed)" in result.output
    assert "0.000" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("error:")] or [str(result.exception)]
    assert "every one of the 3 negotiations failed (first: " in " ".join(errors)
    data = json.loads((out / "results.json").read_text())
    assert data["failed"] == 3 and data["accuracy"] is None and data["accuracy_ci"] is None
    assert data["not_measured"] == "every one of the 3 negotiations failed"
