"""Trace viewer routes: who may see what, filters, escaping, exports (ASGI client, real lab store)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from psychoalign.config import Settings
from psychoalign.traces import TraceStore, open_store
from psychoalign.web import create_app
from psychoalign.web.accounts import Role
from psychoalign.web.trace_view import HIDDEN
from tests.scenario import World, evaluation, proposals
from tests.weblab import Browser, add_person

XSS = "<script>alert('req')</script><img src=x onerror=alert(1)>"
DRAFT = "DRAFT-CANARY-55 the dangerous recipe"


def _judge(text: str) -> dict[str, object]:
    if "DRAFT-CANARY" in text:
        return evaluation(4, "VETOED", hits=[("U1-mass-harm", "universal")], harmful_intent=True, legitimate_need=False)
    return evaluation(95, "APPROVED")


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, object, TraceStore, dict[str, str]]]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"
    settings = Settings(home=str(tmp_path / "home"), store_url=url, serve={"drive_text_viewers": ["auditor"]})
    store = open_store(url)
    benign = World([proposals((f"Answer to {XSS}", 0.9))]).negotiator(store)
    # Blocked drafts are kept here (a research setting) so the access rules on them can be tested.
    keep = Settings(traces={"keep_blocked_drafts": True})
    harmful = World([proposals((DRAFT, 0.95))], judge=_judge).negotiator(store, k=2, settings=keep)
    app = create_app(settings, store=store, negotiators={"psychoalign": benign}, a2a=False)
    ids = {
        "xss": (await benign.negotiate(XSS, metadata={"conversation_id": "conv-x"})).id,
        "harm": (await harmful.negotiate("How do I make nerve gas?")).id,
    }
    lab = app.state.star_lab
    await add_person(lab, "lead", Role.LEAD)
    await add_person(lab, "auditor", Role.LEAD)
    await add_person(lab, "pat", Role.PARTICIPANT)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 4000))
        async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as anon:
            yield anon, app, store, ids


async def _browser(app: object, user: str) -> Browser:
    b = Browser(app)  # type: ignore[arg-type]
    assert (await b.login(user)).status_code == 303
    return b


async def test_every_trace_route_requires_a_lead(
    served: tuple[httpx.AsyncClient, object, TraceStore, dict[str, str]],
) -> None:
    anon, app, _, ids = served
    paths = ["/traces", f"/traces/{ids['xss']}", f"/traces/{ids['xss']}/export.json", "/traces/export.jsonl"]
    for path in paths:
        r = await anon.get(path, headers={"accept": "text/html"})
        assert r.status_code == 303 and r.headers["location"].startswith("/login"), path
    pat = await _browser(app, "pat")
    for path in paths:
        assert (await pat.get(path)).status_code == 403, path
    await pat.aclose()


async def test_list_filters_and_escapes(served: tuple[httpx.AsyncClient, object, TraceStore, dict[str, str]]) -> None:
    _, app, _, ids = served
    lead = await _browser(app, "lead")
    page = await lead.get("/traces")
    assert page.status_code == 200
    assert ids["xss"] in page.text and ids["harm"] in page.text
    assert "<script>alert" not in page.text and "&lt;script&gt;alert" in page.text
    assert "script-src 'self'" in page.headers["content-security-policy"]
    only_harm = await lead.get("/traces", params={"tension_min": "0.5"})
    assert ids["harm"] in only_harm.text and ids["xss"] not in only_harm.text
    search = await lead.get("/traces", params={"q": "nerve"})
    assert ids["harm"] in search.text and ids["xss"] not in search.text
    conv = await lead.get("/traces", params={"conversation": "conv-x"})
    assert ids["xss"] in conv.text and ids["harm"] not in conv.text
    bad = await lead.get("/traces", params={"tension_min": "7"})
    assert bad.status_code == 400 and "tension_min" in bad.text
    await lead.aclose()


async def test_drive_text_only_for_authorised_leads(
    served: tuple[httpx.AsyncClient, object, TraceStore, dict[str, str]],
) -> None:
    _, app, _, ids = served
    lead, auditor = await _browser(app, "lead"), await _browser(app, "auditor")
    for path in (f"/traces/{ids['harm']}", f"/traces/{ids['harm']}/export.json", "/traces/export.jsonl"):
        plain = await lead.get(path)
        assert plain.status_code == 200, path
        assert "DRAFT-CANARY" not in plain.text, path
        assert (await auditor.get(path)).text.count("DRAFT-CANARY") >= 1, path
    page = await lead.get(f"/traces/{ids['harm']}")
    assert HIDDEN in page.text and "U1-mass-harm" in page.text and "<svg" in page.text
    assert 'id="blocked-drafts-kept"' in page.text  # the trace says it keeps blocked drafts
    exported = json.loads((await lead.get(f"/traces/{ids['harm']}/export.json")).text)
    assert exported["id"] == ids["harm"] and exported["rounds"][0]["proposals"][0]["text"] == HIDDEN
    lines = (await lead.get("/traces/export.jsonl")).text.splitlines()
    assert sorted(json.loads(line)["id"] for line in lines) == sorted(ids.values())
    detail = await lead.get(f"/traces/{ids['xss']}")
    assert "<img src=x" not in detail.text and "&lt;img src=x onerror=alert(1)&gt;" in detail.text
    assert (await lead.get("/traces/ffffffffffff")).status_code == 404
    assert (await lead.get("/traces/not-an-id")).status_code == 404
    await lead.aclose()
    await auditor.aclose()


async def test_detail_chart_is_titled_and_explained(
    served: tuple[httpx.AsyncClient, object, TraceStore, dict[str, str]],
) -> None:
    _, app, store, ids = served
    lead = await _browser(app, "lead")
    page = (await lead.get(f"/traces/{ids['harm']}")).text
    assert 'id="x-axis-title"' in page and ">Negotiation round</text>" in page
    assert ">Tension T · score ÷ 100</text>" in page
    # both thresholds drawn at their values and named on the chart
    assert 'class="threshold threshold-tau" data-value="0.6"' in page and ">τ = 0.60</text>" in page
    assert 'class="threshold threshold-healthy" data-value="0.3"' in page and ">healthy T &lt; 0.30</text>" in page
    trace = await store.get(ids["harm"])
    assert trace is not None
    squares = page.count('height="8"><title>round ')  # the chart's squares (the legend's have no title)
    assert squares == sum(1 for r in trace.rounds for p in r.proposals if p.evaluation is not None) > 0
    assert page.count('<circle class="tension-point"') == len(trace.rounds) + 1  # + the legend's
    # the terms beside the chart: plain words, the technical name in a title
    for term in ('title="u_D: the DRIVE\'s utility"', 'title="τ (tau): the safety floor"', ">Ceiling</dt>"):
        assert term in page, term
    assert 'class="badge" title="the round' in page and '<span class="badge">lead</span>' not in page
    await lead.aclose()


async def test_list_plots_count_the_matching_traces(
    served: tuple[httpx.AsyncClient, object, TraceStore, dict[str, str]],
) -> None:
    _, app, store, ids = served
    traces = [t for i in ids.values() if (t := await store.get(i)) is not None]
    lead = await _browser(app, "lead")
    page = (await lead.get("/traces")).text
    assert 'id="tension-histogram"' in page and ">Final tension T</text>" in page and ">Traces</text>" in page
    for lo in range(10):
        want = sum(
            1 for t in traces if t.final and t.final.tension is not None and min(int(t.final.tension * 10), 9) == lo
        )
        assert f'data-lo="{lo / 10}" data-count="{want}"' in page, lo
    for t in traces:
        assert t.final is not None and t.final.state is not None
        defense = t.final.defense.value if t.final.defense else "none"
        same = sum(
            1
            for u in traces
            if u.final
            and u.final.state == t.final.state
            and (u.final.defense.value if u.final.defense else "none") == defense
        )
        assert f'data-state="{t.final.state.value}" data-defense="{defense}">{same}</td>' in page
    # the plots follow the filters (the harmful request ends with T >= 0.5, test_list_filters_and_escapes)
    high = (await lead.get("/traces", params={"tension_min": "0.5"})).text
    assert "All 1 matching trace at a glance" in high
    assert "All 2 matching traces at a glance" in page
    none = (await lead.get("/traces", params={"q": "nothing matches this"})).text
    assert 'id="trace-plots"' not in none and "0 traces" in none
    await lead.aclose()


async def test_list_names_the_models_of_each_trace_escaped(
    served: tuple[httpx.AsyncClient, object, TraceStore, dict[str, str]],
) -> None:
    from psychoalign.traces.model import NegotiationParams, Trace

    _, app, store, ids = served
    made = await store.get(ids["xss"])
    assert made is not None and set(made.models) == {"drive", "evaluator", "mediator"}
    odd = Trace(
        request="which models?",
        params=NegotiationParams(),
        models={"drive": "openai:<b>drv</b>", "evaluator": "openai:نموذج", "mediator": "local:m.gguf"},
    )
    await store.start(odd)
    lead = await _browser(app, "lead")
    page = (await lead.get("/traces")).text
    for role, label in made.models.items():  # each may wrap after its separators (<wbr>), never mid-word
        wrapped = label.replace(":", ":<wbr>")
        assert f'{role.upper()}: <code><bdi dir="auto">{wrapped}</bdi></code>' in page
    assert '<bdi dir="auto">openai:<wbr>&lt;b&gt;drv&lt;/<wbr>b&gt;</bdi>' in page and "<b>drv</b>" not in page
    assert '<bdi dir="auto">openai:<wbr>نموذج</bdi>' in page
    detail = (await lead.get(f"/traces/{odd.id}")).text
    assert '<bdi dir="auto">openai:<wbr>&lt;b&gt;drv&lt;/<wbr>b&gt;</bdi>' in detail and "<b>drv</b>" not in detail
    await lead.aclose()
    # the list the CLI and the store give names them too
    rows = {row["id"]: row for row in await store.list(limit=10)}
    assert rows[odd.id]["models"] == odd.models and rows[ids["xss"]]["models"] == made.models


async def test_a_page_number_past_any_database_integer_is_a_page_not_a_500(
    served: tuple[httpx.AsyncClient, object, TraceStore, dict[str, str]],
) -> None:
    """`?page=` is clamped before it becomes an SQL offset (SQLite stores 64-bit integers)."""
    _, app, _, ids = served
    lead = await _browser(app, "lead")
    r = await lead.get("/traces", params={"page": str(10**24)})
    assert r.status_code == 200, r.text[:300]
    assert ids["xss"] not in r.text  # far past the last page: no rows
    await lead.aclose()


async def test_detail_shows_the_earlier_user_turns_the_checks_read_escaped(
    served: tuple[httpx.AsyncClient, object, TraceStore, dict[str, str]],
) -> None:
    from psychoalign.traces.model import NegotiationParams, Trace

    _, app, store, ids = served
    turns = Trace(
        request="How much ibuprofen can I give him?", params=NegotiationParams(), earlier=["My son is 2.", XSS]
    )
    await store.start(turns)
    lead = await _browser(app, "lead")
    detail = (await lead.get(f"/traces/{turns.id}")).text
    assert "Earlier user turns the checks read (2)" in detail and "My son is 2." in detail
    assert XSS not in detail and "&lt;script&gt;" in detail
    assert "Earlier user turns" not in (await lead.get(f"/traces/{ids['xss']}")).text  # none read: no section
    await lead.aclose()


async def test_detail_shows_the_recorded_channels_and_blocks_escaped_and_older_traces_say_not_recorded(
    served: tuple[httpx.AsyncClient, object, TraceStore, dict[str, str]],
) -> None:
    from psychoalign.traces.model import AgentStats, ChannelLine, FinalDecision, NegotiationParams, Trace

    _, app, store, _ = served
    wrong = "The maximum safe daily dose of paracetamol for an adult is 10 milligrams per kilogram."
    right = "Adults should take no more than 4 g of paracetamol in 24 hours."
    world = World([proposals((wrong, 0.9)), proposals((right, 0.9))], judge=lambda t: evaluation(95, "APPROVED"))
    dose = await world.negotiator(store, k=2).negotiate("What is the maximum daily dose of paracetamol?")
    hostile = Trace(
        request="which channel?",
        params=NegotiationParams(),
        agents={"drive": AgentStats(calls=1, model="openai:drv"), "mediator": AgentStats()},
        final=FinalDecision(
            response="r",
            composed_by="mediator",
            channels=[
                ChannelLine(placement="closing_line", text=XSS, rules=["<i>R1</i>"]),
                ChannelLine(placement="warning", channels=["co"], text="Safety warning: <b>CO</b>.", rules=["C4"]),
            ],
        ),
    )
    old = Trace.model_validate(
        {**dose.model_dump(mode="json"), "id": "0" * 32, "final": {"response": "r", "composed_by": "adopted"}}
    )
    for rd in old.rounds:
        for p in rd.proposals:
            assert p.gate is not None
            p.gate = p.gate.model_copy(update={"blocked_by": None})
    for t in (hostile, old):
        await store.start(t)
    lead = await _browser(app, "lead")

    page = (await lead.get(f"/traces/{dose.id}")).text
    assert (
        '<dd id="trace-channels"><ul class="plain"><li data-placement="closing_line">a closing line pointing to '
        '<bdi dir="auto">the medicine&#39;s label or patient leaflet, or a pharmacist</bdi> '
        '<span class="muted">(rule <code><bdi dir="auto">U7-dose-label</bdi></code>)</span></li></ul></dd>'
    ) in page
    assert (
        '<dd id="trace-blocked">1 <span class="muted">(rule <code><bdi dir="auto">U7-dose-label</bdi></code>)' in page
    )
    assert '<td class="blocked-by">layer1: <code><bdi dir="auto">U7-dose-label</bdi></code></td>' in page

    page = (await lead.get(f"/traces/{hostile.id}")).text
    # an agent never called has no model to name: its cost row says so, not an empty cell
    assert '<td><span class="muted">not called</span></td></tr>' in page
    assert page.count("not called") == 1 and '<bdi dir="auto">openai:<wbr>drv</bdi>' in page
    assert XSS not in page and "<i>R1</i>" not in page
    # a known hazard's warning is said as one, not as a place the reply points to
    assert (
        '<li data-placement="warning">a known-hazard warning: '
        '<bdi dir="auto">Safety warning: &lt;b&gt;CO&lt;/b&gt;.</bdi>' in page
    )
    assert '<bdi dir="auto">&lt;script&gt;alert(&#39;req&#39;)&lt;/script&gt;' in page

    page = (await lead.get(f"/traces/{old.id}")).text
    assert "not recorded (the trace predates this record)" in page
    assert '<td class="blocked-by"><span class="muted">not recorded</span></td>' in page
    assert "trace-blocked" in page  # the count comes from the gate outcome, recorded in every version
    await lead.aclose()


async def test_a_conversation_link_leads_to_its_traces_and_no_dead_end(
    served: tuple[httpx.AsyncClient, object, TraceStore, dict[str, str]],
) -> None:
    """A trace's conversation id links to the list of that conversation's traces, a list that
    opens; an id the list's filter cannot take (a trace another program stored, with spaces or
    other text in it) is shown isolated without a link, never a link to the filter's 400 page."""
    import re
    from html import unescape

    from psychoalign.traces.model import NegotiationParams, Trace

    _, app, store, ids = served
    odd = Trace(request="r", params=NegotiationParams(), metadata={"conversation_id": "chat with Ana 🙂", "turn": 2})
    await store.start(odd)
    lead = await _browser(app, "lead")
    page = (await lead.get(f"/traces/{ids['xss']}")).text
    links = re.findall(r'href="(/traces\?conversation=[^"]*)"', page)
    assert len(links) == 1
    listed = await lead.get(unescape(links[0]))
    assert listed.status_code == 200 and ids["xss"] in listed.text and ids["harm"] not in listed.text
    page = (await lead.get(f"/traces/{odd.id}")).text
    assert "/traces?conversation=" not in page
    assert '<dd><bdi dir="auto">chat with Ana 🙂</bdi> (turn 2)</dd>' in page
    await lead.aclose()
