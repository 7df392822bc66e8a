"""The possible-risk band (docs/negotiation.md, "The possible-risk band"): a request the crisis check
scores in its band, below routing, gets its reply as negotiated with the framework's soft crisis
line at the end, on every surface (library, CLI, ``/v1/chat/completions`` whole and streamed, A2A);
a routed request gets the crisis channel once, never the soft line beside it; a low score gets
nothing; ``crisis_band = false`` turns it off. Scripted agents: the EVALUATOR's evaluation carries
the band's score as the classifier backend's does; the classifier's own band is tested at the end."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from psychoalign.config import DeploymentSettings, Settings
from psychoalign.frameworks import load_framework
from psychoalign.models.classifier import SafetyClassifier
from psychoalign.models.crisis_check import CrisisCheck
from psychoalign.models.heads import Head
from psychoalign.traces import InMemoryTraceStore, Trace
from psychoalign.web import create_app
from tests.cli.test_main import cli
from tests.helpers import a2a_conversation, post_chat, streamed_text
from tests.models.test_classifier import tiny_encoder, tiny_weights
from tests.scenario import APPROVE, World, evaluation, proposals

ANSWER = "Most people sleep seven to nine hours a night."
BAND_REQUEST = "How long can a person go without sleep before it gets dangerous?"
KEY = "sk-band-0123456789abcdef"
SCORE = 0.31


def _band_line(framework: str = "general") -> str:
    channel = next(c for c in load_framework(framework).safe_channels if c.band_line)
    return channel.render_band_line()


def _judge(score: float | None, base: dict[str, Any] = APPROVE) -> Any:
    return lambda text: {**base, "crisis_band": score}


def _world(score: float | None = SCORE, base: dict[str, Any] = APPROVE) -> World:
    return World([proposals((ANSWER, 0.9))], judge=_judge(score, base))


def _band_fired(trace: Trace, framework: str = "general") -> None:
    assert trace.final is not None and trace.final.crisis_band == SCORE
    assert trace.final.response == f"{ANSWER}\n\n{_band_line(framework)}"
    line = trace.final.channels[-1]  # type: ignore[index]
    assert line.placement == "closing_line" and line.text == _band_line(framework) and line.rules == []


@pytest.mark.parametrize("framework", ["general", "medical", "child-safe"])
async def test_a_band_score_ends_the_answer_with_the_soft_line(framework: str) -> None:
    trace = await _world().negotiator(k=1).negotiate(BAND_REQUEST, framework=framework)
    _band_fired(trace, framework)
    assert "rephrase" not in trace.final.response.lower()  # type: ignore[union-attr]


async def test_a_low_score_gets_nothing() -> None:
    trace = await _world(None).negotiator(k=1).negotiate(BAND_REQUEST)
    assert trace.final is not None and trace.final.response == ANSWER and trace.final.crisis_band is None
    assert trace.final.channels == []


async def test_the_band_can_be_turned_off() -> None:
    trace = await _world().negotiator(k=1, crisis_band=False).negotiate(BAND_REQUEST)
    assert trace.final is not None and trace.final.response == ANSWER and trace.final.crisis_band is None


async def test_a_framework_without_a_band_line_adds_nothing() -> None:
    """content-moderation's moderators read self-harm posts all day: its crisis channel has no band line."""
    trace = await _world().negotiator(k=1).negotiate(BAND_REQUEST, framework="content-moderation")
    assert trace.final is not None and trace.final.response == ANSWER and trace.final.crisis_band is None


async def test_a_routed_request_gets_the_crisis_channel_once() -> None:
    fw = load_framework("general")
    crisis = next(c for c in fw.safe_channels if c.band_line)
    trace = await _world().negotiator(k=1).negotiate("What's the most painless way to kill myself?")
    assert trace.final is not None and trace.screen is not None and trace.screen.decided
    assert trace.final.response.count(crisis.text) == 1 and _band_line() not in trace.final.response
    assert trace.final.crisis_band is None


async def test_a_refused_band_request_gets_the_line_and_no_rephrase() -> None:
    veto = evaluation(10, "VETOED", harmful_intent=False)
    trace = await _world(SCORE, veto).negotiator(k=1).negotiate(BAND_REQUEST)
    assert trace.final is not None and trace.final.crisis_band == SCORE
    assert trace.final.response.endswith(_band_line()) and ANSWER not in trace.final.response
    assert "rephrase" not in trace.final.response.lower()


def _app(world: World, store: InMemoryTraceStore, settings: dict[str, Any] | None = None) -> Any:
    keys = [hashlib.sha256(KEY.encode()).hexdigest()]
    base = Settings.model_validate(settings or {})
    settings_ = base.model_copy(update={"deployments": {"psychoalign": DeploymentSettings(api_keys=keys)}})
    return create_app(settings_, store=store, negotiators={"psychoalign": world.negotiator(store, k=1)}, lab=False)


async def test_the_gateway_reply_ends_with_the_soft_line() -> None:
    store = InMemoryTraceStore()
    body = {"model": "psychoalign", "messages": [{"role": "user", "content": BAND_REQUEST}]}
    r = await post_chat(_app(_world(), store), body, KEY)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == f"{ANSWER}\n\n{_band_line()}"


async def test_the_gateway_stream_ends_with_the_soft_line() -> None:
    store = InMemoryTraceStore()
    app = _app(_world(), store, {"serve": {"stream_window": 16, "stream_lookahead": 32}})
    body = {"model": "psychoalign", "messages": [{"role": "user", "content": BAND_REQUEST}], "stream": True}
    r = await post_chat(app, body, KEY)
    assert r.status_code == 200, r.text
    assert streamed_text(r) == f"{ANSWER}\n\n{_band_line()}"
    trace = await store.get(r.headers["x-psychoalign-trace-id"])
    assert trace is not None and trace.final is not None and trace.final.crisis_band == SCORE


async def test_the_a2a_reply_ends_with_the_soft_line() -> None:
    store = InMemoryTraceStore()
    world = _world()
    app = create_app(Settings(), store=store, negotiators={"psychoalign": world.negotiator(store, k=1)}, lab=False)
    (answer,) = await a2a_conversation(app, (BAND_REQUEST,))
    assert answer == f"{ANSWER}\n\n{_band_line()}"


def _config(tmp_path: Path, score: float | None, extra: str = "") -> Path:
    scripts = {
        "drive": {"default": proposals((ANSWER, 0.9))},
        "evaluator": {"default": {**APPROVE, "crisis_band": score}},
        "mediator": {"default": {"response": "composed"}},
    }
    lines = [f'home = "{tmp_path / "home"}"\n', extra]
    for role, script in scripts.items():
        path = tmp_path / f"{role}.yaml"
        path.write_text(yaml.safe_dump({"rules": [], "default": script["default"]}))
        lines.append(f'[roles.{role}]\nbackend = "scripted"\nscript = "{path}"\n')
    config = tmp_path / "psychoalign.toml"
    config.write_text("\n".join(lines))
    return config


#: The CLI runs the shipped crisis check itself beside a scripted EVALUATOR (test_crisis_every_backend.py):
#: a request it scores far below any band, so the scripted EVALUATOR's band is what shows.
CLI_REQUEST = "How do I repot a basil plant?"


def test_the_cli_prints_the_soft_line_and_a_config_turns_it_off(tmp_path: Path) -> None:
    out = cli("negotiate", "--config", str(_config(tmp_path, SCORE)), "--json", "--no-store", CLI_REQUEST)
    assert out.returncode == 0, out.stderr
    final = json.loads(out.stdout)["final"]
    assert final["response"] == f"{ANSWER}\n\n{_band_line()}" and final["crisis_band"] == SCORE
    table = cli("negotiate", "--config", str(_config(tmp_path, SCORE)), "--no-store", CLI_REQUEST)
    assert table.returncode == 0 and _band_line() in " ".join(table.stdout.split())
    off = _config(tmp_path, SCORE, "[negotiation]\ncrisis_band = false\n")
    out = cli("negotiate", "--config", str(off), "--json", "--no-store", CLI_REQUEST)
    final = json.loads(out.stdout)["final"]
    assert final["response"] == ANSWER and final["crisis_band"] is None


def test_the_classifier_puts_a_score_below_routing_in_the_band(monkeypatch: pytest.MonkeyPatch) -> None:
    """One harm word: the head's score is 0.95, below its 0.99 threshold (not routed), above the 0.5
    floor: in the band. None: 0.05, below the floor. Two: 0.9999, routed, never the band."""
    from psychoalign.models import crisis_check

    head = Head(coef=[6.0, 0.0, 0.0], intercept=-3.0, threshold=0.99)
    check = CrisisCheck(version="tiny-crisis", encoder="tiny", dim=3, head=head, exemplars_sha256="0" * 64)
    monkeypatch.setitem(crisis_check.CRISIS_BAND_FLOORS, "tiny-crisis", 0.5)
    clf = SafetyClassifier(tiny_weights(), tiny_encoder, check)
    one = clf.crisis_band("how does poison work")
    assert one is not None and abs(one - 0.9526) < 1e-3 and not clf.crisis("how does poison work")
    assert clf.crisis_band("how do eggs boil") is None
    assert clf.crisis_band("poison to kill") is None and clf.crisis("poison to kill")
    fw = load_framework("general")
    assert clf.evaluate("how does poison work", "(no answer yet)", fw)["crisis_band"] == pytest.approx(0.9526, abs=1e-3)
    monkeypatch.delitem(crisis_check.CRISIS_BAND_FLOORS, "tiny-crisis")
    assert SafetyClassifier(tiny_weights(), tiny_encoder, check).crisis_band("how does poison work") is None
