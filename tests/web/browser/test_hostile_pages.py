"""The page types the phone walk does not reach, each through axe-core in headless Chromium, with
hostile text in every untrusted field: the arbitration page (a dialogue and two annotators'
reasons), the lead's campaign and participants pages (people's names), the error pages (400, 403,
404, the static 500 page), the login page after a failed login and the trace list with a refused
filter; and the trace list's Models column and the trace detail's earlier turns with hostile,
right-to-left and unbroken text at 360 and 1280 px. Nothing critical or serious, no page wider
than the screen, no script or dialog ran."""

from __future__ import annotations

from typing import Any

import pytest

from psychoalign.textio import INVISIBLE
from psychoalign.web.app import _ERROR_PAGE
from tests.web.browser.conftest import Lab, run_async
from tests.web.browser.test_lab import Session
from tests.web.browser.test_phone import axe_source, check
from tests.web.star.test_lab import task_id
from tests.weblab import PASSWORD, Browser

pytestmark = pytest.mark.browser

#: Markup, attribute breakers, an injected image, a ``javascript:`` URL, a bidi override, both
#: isolates (RLI, LRI), a zero-width space and a zero-width joiner.
HOSTILE = (
    '<script>alert(1)</script>"onmouseover=alert(2) x=\'"><img src=x onerror=alert(3)>javascript:alert(4)'
    "\u202eevil\u202c\u2067rli\u2069\u2066lri\u2069\u200b\u200dzwj"
)
#: Every piece of hostile text the page shows as text, and whether the browser isolates its
#: direction (``unicode-bidi`` of its nearest ``<bdi>`` or ``dir=auto`` element); any element the
#: text would have made had it been markup.
ISOLATION = """() => {
  const out = [], walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node, shown = 0;
  while ((node = walk.nextNode())) {
    if (!node.data.includes('alert(3)')) continue;
    shown++;
    const el = node.parentElement;
    if (el.closest('textarea, option')) continue;
    const iso = el.closest('bdi, [dir=auto]');
    const bidi = iso ? getComputedStyle(iso).unicodeBidi : 'none';
    if (!['isolate', 'isolate-override', 'plaintext'].includes(bidi))
      out.push(`${el.tagName} (unicode-bidi: ${bidi}): ${node.data.slice(0, 40)}`);
  }
  if (document.querySelector('img[src="x"], [onerror], [onmouseover], a[href^="javascript:" i]'))
    out.push('an element made from the hostile text');
  return [shown, out];
}"""


def isolated(page: Any, name: str, found: list[str]) -> None:
    """The hostile text is on the page, each piece direction-isolated by the browser, none of it markup."""
    shown, problems = page.evaluate(ISOLATION)
    if not shown:
        found.append(f"{name}: the hostile text is not on the page")
    found.extend(f"{name}: {p}" for p in problems)


async def _seed(url: str) -> None:
    """Over HTTP, as people do: named participants, a live campaign, a red-teaming dialogue and
    two annotations that disagree (so an arbitration waits)."""
    lead = Browser(base_url=url)
    assert (await lead.login("lead")).status_code == 303
    await lead.get("/lead/participants")
    for name in ("writer", "ann1", "ann2", "arb"):
        data = {"display_name": f"{name} {HOSTILE}", "username": name, "password": PASSWORD, "role": "participant"}
        r = await lead.post("/lead/participants", data)
        assert r.status_code == 200, r.text[:300]
    await lead.get("/lead/campaigns/new")
    form = {"name": "hostile", "instructions": "1", "target_kind": "model", "rules": ["sexually-explicit"]}
    assert (await lead.post("/lead/campaigns", form)).status_code == 303
    r = await lead.post("/lead/campaigns/hostile/status", {"action": "launch", "areas_ok": "yes", "anyway": "yes"})
    assert r.status_code == 303, r.text[:300]
    people = {}
    for name in ("writer", "ann1", "ann2"):
        people[name] = Browser(base_url=url)
        assert (await people[name].login(name)).status_code == 303
    writer = people["writer"]
    tid = task_id((await writer.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await writer.post(f"/tasks/{tid}/start")
    await writer.post(f"/tasks/{tid}/begin", {"topic": f"topic {HOSTILE}"})
    await writer.post(f"/tasks/{tid}/message", {"text": f"hello {HOSTILE}"})
    assert (await writer.post(f"/tasks/{tid}/finish", {"assigned_rule_broken": "yes"})).status_code == 303
    for name, rating in (("ann1", 1), ("ann2", 4)):
        person = people[name]
        tid = task_id((await person.post("/tasks/claim", {"kind": "annotate"})).headers["location"])
        await person.post(f"/tasks/{tid}/start")
        r = await person.post(f"/tasks/{tid}/rate", {"rating": str(rating), "reasoning": f"{name} says {HOSTILE}"})
        assert r.status_code == 303, r.text[:300]
    for person in (lead, *people.values()):
        await person.aclose()


def test_hostile_pages_and_error_pages_pass_axe(chromium: Any, live_lab: Lab) -> None:
    run_async(_seed(live_lab.url))
    axe = axe_source()
    found: list[str] = []
    dialogs: list[str] = []

    anon = Session(chromium, live_lab, dialogs)
    anon.page.goto("/login")
    anon.page.fill("input[name=username]", f"nobody {HOSTILE}")
    anon.page.fill("input[name=password]", "wrong password")
    anon.page.click("#login")
    anon.page.wait_for_selector("p.error")
    check(anon.page, axe, "login after a failed login", found)

    arb = Session(chromium, live_lab, dialogs)
    arb.login("arb")
    page = arb.page
    page.click("#claim-arbitrate")
    page.wait_for_selector("#content-warning")
    page.click("#start")
    page.wait_for_selector("#rating-form")
    assert "ann1 says" in page.inner_text("main") and "⟨U+202E⟩" in page.inner_text("main")
    page.fill("#reasoning", f"draft {HOSTILE}")
    check(page, axe, "arbitration", found)
    isolated(page, "arbitration", found)
    arb.shot("hostile-arbitration")
    page.goto("/lead")
    page.wait_for_selector("p.error")
    check(page, axe, "403 page", found)
    page.goto("/tasks/no-such-task")
    page.wait_for_selector("p.error")
    check(page, axe, "404 page", found)

    lead = Session(chromium, live_lab, dialogs)
    lead.login("lead")
    page = lead.page
    page.goto("/lead/campaigns/hostile")
    check(page, axe, "campaign with hostile names", found)
    isolated(page, "campaign", found)
    page.goto("/lead/participants")
    check(page, axe, "participants with hostile names", found)
    isolated(page, "participants", found)
    lead.shot("hostile-participants")
    page.goto("/traces?tension_min=7")
    page.wait_for_selector("p.error")
    check(page, axe, "trace list with a refused filter", found)
    page.goto("/lead/campaigns/hostile/export?format=xml")
    page.wait_for_selector("p.error")
    check(page, axe, "400 page", found)
    # the static 500 page (the crash handler's: no template), as a browser gets it
    blank = lead.context.new_page()
    blank.goto("/static/app.css")  # same origin, so its stylesheet link loads
    blank.set_content(_ERROR_PAGE.format(message="internal error (request id 42); the server log has the details"))
    check(blank, axe, "500 page", found)

    assert found == []
    assert [d for d in dialogs if "alert" in d or "page error" in d] == [], dialogs
    for person in (anon, arb, lead):
        person.close()


#: Right-to-left text (Arabic, Hebrew) and an unbroken string far wider than any screen.
ARABIC = "ما هي الجرعة الآمنة؟"
HEBREW = "מה המינון הבטוח?"
UNBROKEN = "x" * 400
LONG_MODEL = "openai:" + "very-long-model-name-" * 8 + UNBROKEN[:80]
WIDE = {"width": 1280, "height": 900}
NARROW = {"width": 360, "height": 800}
#: Labels as the embedded default and an endpoint name them: each wraps after a separator.
USUAL = {
    "drive": "local:/home/someone/.cache/psychoalign/models/smollm2-135m-instruct-q8_0.gguf",
    "evaluator": "classifier:evaluator-minilm-v14@068a239ede3a",
    "mediator": "openai:meta-llama/llama-3.1-8b-instruct@together",
}
SEPARATORS = ":/\\@-_."
#: Where each line of every model name in the trace list's Models column starts ``[[code, index]]``;
#: a line that starts after anything but a separator broke the name mid-word.
LINE_STARTS = """() => [...document.querySelectorAll('td.models code')].map(code => {
  const text = code.textContent, range = document.createRange(), starts = [];
  let node, offset = 0, top = null;
  const walk = document.createTreeWalker(code, NodeFilter.SHOW_TEXT);
  while ((node = walk.nextNode())) {
    for (let i = 0; i < node.length; i++, offset++) {
      range.setStart(node, i); range.setEnd(node, i + 1);
      const rect = range.getClientRects()[0];
      if (!rect) continue;
      if (top !== null && rect.top > top + 2) starts.push(offset);
      top = rect.top;
    }
  }
  return [text, starts];
})"""


async def _seed_traces(store_url: str) -> str:
    """A trace whose earlier turns and model names are hostile: markup, bidi controls, RTL text
    and one unbroken string; returned is its id."""
    from psychoalign.traces import open_store
    from psychoalign.traces.model import AgentStats, ChannelLine, FinalDecision, NegotiationParams, Trace

    store = open_store(store_url)
    try:
        # first: the list shows the newest first, the hostile trace on top
        await store.start(Trace(request="usual models", params=NegotiationParams(), models=USUAL))
        trace = Trace(
            request=f"and now? {HOSTILE}",
            params=NegotiationParams(),
            earlier=[f"first {HOSTILE}", f"{ARABIC} then", f"{HEBREW} then", UNBROKEN],
            models={"drive": LONG_MODEL, "evaluator": f"openai:{HOSTILE}", "mediator": f"local:{ARABIC}.gguf"},
            metadata={"conversation_id": f"conv {HOSTILE}", "turn": 5},
            agents={
                "drive": AgentStats(calls=1, model=LONG_MODEL),
                "evaluator": AgentStats(calls=1, model=HOSTILE),
                "mediator": AgentStats(),  # never called
            },
            final=FinalDecision(
                response="r",
                composed_by="template",
                channels=[ChannelLine(placement="in_reply", text=f"channel {HOSTILE}", rules=["U1-mass-harm"])],
            ),
        )
        await store.start(trace)
        return trace.id
    finally:
        await store.close()


def _fits(page: Any, viewport: dict[str, int], name: str, found: list[str]) -> None:
    page.set_viewport_size(viewport)
    width = page.evaluate("document.documentElement.scrollWidth")
    if width > viewport["width"]:
        found.append(f"{name}: {width} px wide at {viewport['width']} px")


def test_trace_pages_with_hostile_earlier_turns_and_model_names(chromium: Any, live_lab: Lab) -> None:
    """The trace detail's earlier turns and the list's Models column: shown as text, each field
    in its own direction isolate, no page wider than 360 or 1280 px, nothing serious for axe-core,
    and the earlier-turns disclosure takes a visible keyboard focus."""
    trace_id = run_async(_seed_traces(live_lab.store_url))
    axe = axe_source()
    found: list[str] = []
    dialogs: list[str] = []
    lead = Session(chromium, live_lab, dialogs)
    lead.login("lead")
    page = lead.page

    page.goto("/traces")
    page.wait_for_selector("#trace-table")
    cell = page.locator("#trace-table td.models").first
    assert LONG_MODEL in cell.inner_text() and "<script>alert(1)</script>" in cell.inner_text()
    assert cell.locator("code > bdi[dir=auto]").count() == 3
    assert page.locator("#trace-table script").count() == 0
    for viewport in (NARROW, WIDE):
        _fits(page, viewport, "trace list", found)
        # a model name wraps inside its cell: it never runs over the State, Defense... columns
        spill = page.evaluate(
            """() => [...document.querySelectorAll('td.models code')]
                 .filter(c => c.getBoundingClientRect().right > c.closest('td').getBoundingClientRect().right + 1)
                 .map(c => c.textContent.slice(0, 30))"""
        )
        if spill:
            found.append(f"trace list at {viewport['width']} px: model names overflow their cell {spill}")
        # a usual name wraps after its separators, never mid-word (the hostile unbroken run must)
        for text, starts in page.evaluate(LINE_STARTS):
            if text in USUAL.values():
                mid = [f"{text[:i]}|{text[i:]}" for i in starts if text[i - 1] not in SEPARATORS]
                if mid:
                    found.append(f"trace list at {viewport['width']} px: {text!r} broken mid-word at {mid}")
    check(page, axe, "trace list with hostile model names", found)
    lead.shot("hostile-trace-list")

    page.goto(f"/traces/{trace_id}")
    page.wait_for_selector("#trace-earlier", state="attached")
    page.click("details:has(#trace-earlier) > summary")
    page.wait_for_selector("#trace-earlier", state="visible")
    turns = page.locator("#trace-earlier > li > pre")
    assert turns.count() == 4
    first = turns.nth(0).inner_text()
    assert "<script>alert(1)</script>" in first and "⟨U+202E⟩" in first  # the override shown, not obeyed
    assert turns.nth(1).inner_text() == f"{ARABIC} then" and turns.nth(2).inner_text() == f"{HEBREW} then"
    assert turns.nth(3).inner_text() == UNBROKEN
    assert page.locator("#trace-earlier > li > pre > bdi[dir=auto]").count() == 4
    # each invisible control shown as a marker (a zero-width joiner is not one: it joins emoji)
    assert page.locator("#trace-earlier .ctl").count() == sum(ord(c) in INVISIBLE for c in HOSTILE) == 7
    assert page.locator("main script").count() == 0
    # the Cost table names the same models: isolated and with the controls shown there too
    cost = page.locator("table:has(th:text-is('Model')) td code")
    assert cost.count() == 2 and page.locator("table:has(th:text-is('Model')) td code > bdi[dir=auto]").count() == 2
    assert "⟨U+202E⟩" in cost.nth(1).inner_text()
    assert page.locator("table:has(th:text-is('Model')) td > span:text-is('not called')").count() == 1
    # the channel the engine put in the answer: its text isolated, the controls shown, no markup run
    channel = page.locator("#trace-channels li")
    assert channel.count() == 1 and channel.locator("bdi[dir=auto]").count() == 2  # the text and the rule id
    assert "<script>alert(1)</script>" in channel.inner_text() and "⟨U+202E⟩" in channel.inner_text()
    for viewport in (NARROW, WIDE):
        _fits(page, viewport, "trace detail", found)
    # keyboard: the disclosure's summary takes focus with a visible outline
    page.focus("details:has(#trace-earlier) > summary")
    page.keyboard.press("Shift+Tab")
    page.keyboard.press("Tab")  # reached by the keyboard, so :focus-visible applies
    assert page.evaluate("document.activeElement.matches('details:has(#trace-earlier) > summary')")
    outline = page.evaluate(
        "() => { const s = getComputedStyle(document.activeElement); return [s.outlineStyle, s.outlineWidth] }"
    )
    if outline[0] == "none" or outline[1] == "0px":
        found.append(f"trace detail: the earlier-turns summary has no visible focus ({outline})")
    check(page, axe, "trace detail with hostile earlier turns", found)
    lead.shot("hostile-trace-detail")

    assert not found, "\n".join(found)
    assert [d for d in dialogs if "alert" in d or "page error" in d] == [], dialogs
    lead.close()
