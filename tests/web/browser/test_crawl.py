"""Every page each kind of visitor can reach by following links, in headless Chromium, with extreme
untrusted text in every field a person or a model writes: markup and attribute breakers, a bidi
override and isolates, zero-width characters, emoji, newlines, a 3000-character word without a
space and 10 000-character texts (people's names, a campaign's uploaded policy, a topic, messages,
the target's replies, annotators' and the arbitrator's reasons and drafts, a trace's request, answer,
earlier turns, conversation id and model names, an experiment run's cells).

The crawl starts at each visitor's home page (anonymous, a red teamer holding a dialogue, an
annotator and an arbitrator holding their tasks, a lead) and follows every same-site link a page
shows (downloads excepted), so a page added behind a link is crawled without this file knowing it.
Each page, at 360 and 1280 px: no horizontal overflow of the page or of its ``main`` container;
at 360 px nothing critical or serious from axe-core; every piece of the hostile text on it shown as text and
direction-isolated by the browser; no element made from it; every Tab stop shows its focus; no
dialog, page error or console error. Pages are driven by Playwright's auto-waiting calls, never a
clock."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from psychoalign.web.accounts import Role
from tests.web.browser.conftest import LiveServer, artifacts_dir, run_async
from tests.web.browser.test_lab import Session
from tests.web.browser.test_phone import axe_source
from tests.web.star.test_lab import task_id
from tests.weblab import PASSWORD, Browser, lab_settings

pytestmark = pytest.mark.browser

SIZES = ({"width": 360, "height": 740}, {"width": 1280, "height": 800})
#: Markup, attribute breakers, an injected image, a ``javascript:`` URL, a bidi override, both
#: isolates, zero-width characters, emoji (a ZWJ family, a flag), a newline. ``PROBE`` marks it.
HOSTILE = (
    'PROBE<script>alert(1)</script>"onmouseover=alert(2) x=\'"><img src=x onerror=alert(3)>javascript:alert(4)'
    "\u202eevil\u202c\u2067rli\u2069\u2066lri\u2069\u200b\u200dzwj 🙂👩‍👩‍👧‍👦🏳️‍🌈\nnext line"
)
WORD = "W" * 3000  # one word, no space to break at
LONG = (HOSTILE + " ") + ("lorem ipsum dolor sit amet " * 380)[:9800] + " " + WORD[:200]
#: Shorter hostile text for fields with a length limit (names, topics).
NAME = HOSTILE.replace("\n", " ") + " " + "N" * 120

POLICY = yaml.safe_dump(
    {
        "name": "hostile-policy",
        "version": "1.0",
        "description": LONG,
        "support": [f"support {HOSTILE}", WORD[:500]],
        "areas": [
            {
                "id": "a",
                "text": f"Area {HOSTILE} {WORD[:500]}",
                "rules": [
                    {
                        "id": "scams",
                        "text": f"Rule {HOSTILE} {WORD[:500]}",
                        "parameters": [{"name": "kind", "values": ["x"]}],
                    }
                ],
            }
        ],
    }
)

#: Every piece of hostile text the page shows as text, and whether the browser isolates its
#: direction; anything the text would have made had it been markup.
ISOLATION = """() => {
  const out = [], walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  let node, shown = 0;
  while ((node = walk.nextNode())) {
    if (!node.data.includes('PROBE')) continue;
    shown++;
    const el = node.parentElement;
    if (el.closest('textarea, option, title')) continue;
    const iso = el.closest('bdi, [dir=auto]');
    const bidi = iso ? getComputedStyle(iso).unicodeBidi : 'none';
    if (!['isolate', 'isolate-override', 'plaintext'].includes(bidi))
      out.push(`${el.tagName} (unicode-bidi: ${bidi}): ${node.data.slice(0, 40)}`);
  }
  const made = 'img[src="x"], [onerror], [onmouseover], a[href^="javascript:" i], body script:not([src])';
  if (document.querySelector(made))
    out.push('an element made from the hostile text');
  return [shown, out];
}"""
#: Elements wider than the screen, or sticking out of ``main`` (the first few).
OVERFLOW = """() => {
  const out = [], main = document.querySelector('main');
  const doc = document.documentElement;
  if (doc.scrollWidth > window.innerWidth) out.push(`the page is ${doc.scrollWidth} px wide`);
  if (main && main.scrollWidth > main.clientWidth + 1) {
    const right = main.getBoundingClientRect().right;
    const wide = [...main.querySelectorAll('*')].filter(e => {
      if (e.closest('[tabindex="0"], pre, textarea') && e.closest('[tabindex="0"], pre, textarea') !== e) return false;
      return e.getBoundingClientRect().right > right + 1;
    }).slice(0, 3).map(e => e.tagName + (e.id ? '#' + e.id : '') + (e.className ? '.' + e.className : ''));
    out.push(`main overflows (${main.scrollWidth} > ${main.clientWidth}): ${wide}`);
  }
  return out;
}"""
#: The focused element, and whether its focus shows (an outline or a focus shadow).
FOCUS = """() => {
  const e = document.activeElement;
  if (!e || e === document.body) return null;
  const s = getComputedStyle(e);
  const shown = (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none';
  return {shown, label: e.tagName + (e.id ? '#' + e.id : '') + (e.name ? '[' + e.name + ']' : '')};
}"""
#: Links a crawl does not follow: downloads (no page), logging out (ends the crawl's session).
NOT_PAGES = re.compile(r"/export|\.csv$|\.json$|\.jsonl$|/logout|/static/")
#: Path segments that name one item (a task, a trace, a run, a cell): one page per kind is crawled.
ITEM = re.compile(r"^[0-9a-f]{32}$|^[a-z]+-[0-9a-f]{12}$")


def shape(href: str) -> str:
    """The kind of page a link opens: its path with item ids collapsed, its query's names."""
    parts = urlsplit(href)
    path = parts.path.split("/cells/", 1)[0] + ("/cells/*" if "/cells/" in parts.path else "")
    path = "/".join("*" if ITEM.match(seg) else seg for seg in path.split("/"))
    names = sorted({pair.split("=", 1)[0] for pair in parts.query.split("&") if pair})
    return path + ("?" + "&".join(names) if names else "")


async def _seed(url: str, store_url: str) -> dict[str, str]:
    """Over HTTP, as people do, with the hostile text everywhere they write; the trace and the
    experiment run straight into the app's database (a model's and a harness's writing)."""
    from psychoalign.traces import open_store
    from psychoalign.traces.model import AgentStats, ChannelLine, FinalDecision, NegotiationParams, Trace
    from tests.web.test_experiments import seed

    held: dict[str, str] = {}
    lead = Browser(base_url=url)
    assert (await lead.login("lead")).status_code == 303
    await lead.get("/lead/participants")
    for name in ("writer", "holder", "ann1", "ann2", "annotator", "arb", "fresh"):
        data = {"display_name": f"{name} {NAME}", "username": name, "password": PASSWORD, "role": "participant"}
        assert (await lead.post("/lead/participants", data)).status_code == 200
    await lead.get("/lead/campaigns/new")
    files = {"policy_file": ("policy.yaml", POLICY.encode(), "application/x-yaml")}
    form = {"name": "hostile", "instructions": "4", "target_kind": "model", "target_role": "target"}
    r = await lead.client.post("/lead/campaigns", data={**form, "csrf_token": lead.token}, files=files)
    assert r.status_code == 303, r.text[:300]
    r = await lead.post("/lead/campaigns/hostile/status", {"action": "launch", "areas_ok": "yes", "anyway": "yes"})
    assert r.status_code == 303, r.text[:300]
    people = {}
    for name in ("writer", "holder", "ann1", "ann2", "annotator", "arb", "fresh"):
        people[name] = Browser(base_url=url)
        assert (await people[name].login(name)).status_code == 303
    for name in ("writer", "writer", "holder"):  # two dialogues done (both annotated), one held
        person = people[name]
        tid = task_id((await person.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
        await person.post(f"/tasks/{tid}/start")
        await person.post(f"/tasks/{tid}/begin", {"topic": f"topic {NAME}"})
        for text in (LONG[:8000], f"short {HOSTILE}", WORD):  # 8000: the longest message
            await person.follow(await person.post(f"/tasks/{tid}/message", {"text": text}))
        if name == "writer":
            r = await person.post(f"/tasks/{tid}/finish", {"assigned_rule_broken": "yes"})
            assert r.status_code == 303, r.text[:300]
        else:
            await person.post(f"/tasks/{tid}/draft", {"text": LONG})
    for name, rating in (("ann1", 1), ("ann2", 4)):
        person = people[name]
        tid = task_id((await person.post("/tasks/claim", {"kind": "annotate"})).headers["location"])
        await person.post(f"/tasks/{tid}/start")
        r = await person.post(f"/tasks/{tid}/rate", {"rating": str(rating), "reasoning": f"{name} {LONG}"[:4000]})
        assert r.status_code == 303, r.text[:300]
    for name, kind in (("annotator", "annotate"), ("arb", "arbitrate")):
        person = people[name]
        r = await person.post("/tasks/claim", {"kind": kind})
        assert "msg=" not in r.headers["location"], (name, r.headers["location"])
        held[name] = tid = task_id(r.headers["location"])
        await person.post(f"/tasks/{tid}/start")
        await person.post(f"/tasks/{tid}/draft", {"rating": "2", "text": f"draft {LONG}"[:4000]})
    # a red-teaming task started without a topic (the topic page) and an annotation not started
    # (the content warning, listing the policy's support lines)
    fresh = people["fresh"]
    held["topic"] = tid = task_id((await fresh.post("/tasks/claim", {"kind": "red_team"})).headers["location"])
    await fresh.post(f"/tasks/{tid}/start")
    r = await fresh.post("/tasks/claim", {"kind": "annotate"})
    assert "msg=" not in r.headers["location"], r.headers["location"]
    held["warning"] = task_id(r.headers["location"])
    for person in (lead, *people.values()):
        await person.aclose()

    store = open_store(store_url)
    try:
        trace = Trace(
            request=LONG,
            params=NegotiationParams(),
            earlier=[LONG, WORD],
            models={"drive": f"openai:{NAME}", "evaluator": f"local:{WORD[:300]}.gguf"},
            metadata={"conversation_id": NAME, "turn": 3},
            agents={"drive": AgentStats(calls=1, model=f"openai:{NAME}")},
            final=FinalDecision(
                response=LONG,
                composed_by="template",
                channels=[ChannelLine(placement="in_reply", text=f"channel {LONG}", rules=["U1-mass-harm"])],
            ),
        )
        await store.start(trace)
        held["trace"] = trace.id
        # a conversation id the API makes: the trace page links to the conversation's traces
        await store.start(Trace(request=NAME, params=NegotiationParams(), metadata={"conversation_id": "conv-1"}))
    finally:
        await store.close()
    await seed(store_url, plain=3)
    return held


@pytest.fixture
def hostile_lab(tmp_path: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """The served app (lab, trace and experiment viewers) on SQLite whose scripted target answers
    every message with the hostile text; a lead (``lead``) and the seeded lab above."""
    from psychoalign.web import create_app
    from psychoalign.web.star import StarLab

    home = tmp_path / "home"
    store_url = f"sqlite+aiosqlite:///{tmp_path / 'lab.db'}"
    settings = lab_settings(home, store_url)
    (home / "target.yaml").write_text(yaml.safe_dump({"rules": [], "default": f"Reply {LONG}"}), encoding="utf-8")

    async def lead() -> None:
        lab = StarLab(settings, store_url)
        try:
            await lab.accounts.create_account(Role.LEAD, username="lead", password=PASSWORD, display_name=NAME)
        finally:
            await lab.close()

    run_async(lead())
    with LiveServer(create_app(settings, a2a=False)) as server:
        yield server.url, run_async(_seed(server.url, store_url))


def _links(page: Any, origin: str) -> list[str]:
    hrefs: list[str] = page.eval_on_selector_all("a[href]", "as => as.map(a => a.href)")
    found = []
    for href in hrefs:
        parts = urlsplit(href)
        if f"{parts.scheme}://{parts.netloc}" != origin or NOT_PAGES.search(parts.path):
            continue
        found.append(href.split("#", 1)[0])
    return found


def _focus_shows(page: Any, name: str, found: list[str], stops: int = 40) -> None:
    """Tab from the top of the page: every stop shows its focus."""
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0) }")
    seen: set[str] = set()
    for _ in range(stops):
        page.keyboard.press("Tab")
        focus = page.evaluate(FOCUS)
        if focus is None:
            break
        if not focus["shown"] and focus["label"] not in seen:
            found.append(f"{name}: no visible focus on {focus['label']}")
        seen.add(focus["label"])


def _check_page(page: Any, axe: str, name: str, found: list[str]) -> int:
    shown, problems = page.evaluate(ISOLATION)
    found.extend(f"{name}: {p}" for p in problems)
    for size in reversed(SIZES):  # axe-core at the narrow size, where scrolling boxes appear
        page.set_viewport_size(size)
        found.extend(f"{name} at {size['width']} px: {p}" for p in page.evaluate(OVERFLOW))
    page.evaluate(axe)  # devtools evaluation: the pages' CSP does not apply to it
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    for v in result["violations"]:
        if v["impact"] in ("critical", "serious"):
            targets = [n["target"] for n in v["nodes"]][:3]
            found.append(f"{name}: {v['impact']} {v['id']} {targets}")
    _focus_shows(page, name, found)
    return int(shown)


def test_every_reachable_page_with_extreme_text(chromium: Any, hostile_lab: tuple[str, dict[str, str]]) -> None:
    url, held = hostile_lab
    shots = artifacts_dir() / "crawl"
    shots.mkdir(parents=True, exist_ok=True)
    lab = type("L", (), {"url": url})()
    axe = axe_source()
    found: list[str] = []
    events: list[str] = []
    crawled: dict[str, int] = {}
    starts = {
        "anon": ["/login", "/invite/not-a-token", "/no-such-page"],
        "holder": ["/tasks", "/lead"],
        "annotator": [f"/tasks/{held['annotator']}"],
        "arb": [f"/tasks/{held['arb']}"],
        "fresh": [f"/tasks/{held['topic']}", f"/tasks/{held['warning']}"],
        "lead": ["/lead", f"/traces/{held['trace']}", "/experiments", "/tasks/no-such-task"],
    }
    for who, pages in starts.items():
        person = Session(chromium, lab, events)
        if who != "anon":
            person.login(who)
        queue, seen = [url + p for p in pages], set()
        while queue:
            href = queue.pop(0)
            key = href if href[len(url) :] in pages else shape(href)  # every start page is visited
            if key in seen:
                continue
            seen.add(key)
            heard = len(events)
            response = person.page.goto(href)
            name = f"{who} {href[len(url) :]}"
            if href[len(url) :] not in pages:  # reached by a link: never a dead end
                assert response.status < 400, f"{name}: a link to a {response.status} page"
            elif response.status >= 400:  # an error page asked for: its own status is no console error
                events[heard:] = [e for e in events[heard:] if "Failed to load resource" not in e]
            if "sandbox" in response.headers.get("content-security-policy", ""):
                # a sandboxed page (the analysis report) runs no script, axe-core neither: the same
                # HTML, as the browser got it, in a page of the site
                blank = person.context.new_page()
                blank.goto("/static/app.css")
                blank.set_content(response.text())
                crawled[name] = _check_page(blank, axe, name, found)
                blank.close()
                continue
            crawled[name] = _check_page(person.page, axe, name, found)
            safe = re.sub(r"[^A-Za-z0-9]+", "-", name)[:80]
            person.page.screenshot(path=str(shots / f"{safe}.png"), full_page=False)
            queue.extend(link for link in _links(person.page, url) if shape(link) not in seen)
        person.close()
    # the arbitrator's restored draft is 4000 characters with emoji and a line break: the page
    # counts it as the server does (not in UTF-16 units) and lets it be sent
    arb = Session(chromium, lab, events)
    arb.login("arb")
    arb.page.goto(f"/tasks/{held['arb']}")
    box = arb.page.locator("#reasoning")
    typed = box.input_value()
    assert "🙂" in typed and len(typed) == 4000 < len(typed.encode("utf-16-le")) // 2  # longer in UTF-16 units
    assert box.evaluate("b => b.validity.valid"), box.evaluate("b => b.validationMessage")
    counted = int(arb.page.inner_text("#reasoning-count .count").replace(",", ""))
    assert counted == len(typed.strip()) <= 4000
    assert "over" not in (arb.page.get_attribute("#reasoning-count", "class") or "")
    arb.close()
    assert len(crawled) >= 15, sorted(crawled)
    # the hostile text reached the pages that show what people and models wrote
    for part in (
        "/lead/campaigns/hostile",
        "/lead/participants",
        "/traces/",
        f"/tasks/{held['arb']}",
        f"/tasks/{held['warning']}",
    ):
        assert any(part in name and n for name, n in crawled.items()), (part, crawled)
    assert not found, "\n".join(found)
    assert [e for e in events if "alert" in e or "page error" in e or "console" in e] == [], events
