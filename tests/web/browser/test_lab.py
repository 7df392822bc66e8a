"""The STAR lab end to end in headless Chromium: a lead creates a campaign and participants; A red-teams
a scripted target for three turns and pre-annotates; B and C annotate 1 and 4; D arbitrates seeing
both reasons; the lead sees coverage and exports. XSS payloads in turns and names stay inert (no
dialog ever fires). Runs on SQLite and on PostgreSQL; screenshots of every page are saved."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.web.browser.conftest import Lab
from tests.weblab import PASSWORD

pytestmark = pytest.mark.browser

XSS_TURN = "<img src=x onerror=alert('turn')>"
XSS_SCRIPT = "<script>alert('script')</script> go on"
XSS_NAME = "Alice <img src=x onerror=alert('name')>"
# bidi overrides that would display as "Harmless exe.png" and "Di live": shown as stored, with markers
SPOOF_TURN = "Harmless \u202egnp.exe\u202c"
SPOOF_NAME = "Di \u202eevil\u202c"
SPOOF_SHOWN = "Harmless ⟨U+202E⟩gnp.exe⟨U+202C⟩"


class Session:
    """One person's browser context; every dialog that fires is recorded (there must be none)."""

    def __init__(self, chromium: Any, lab: Lab, dialogs: list[str]) -> None:
        self.context = chromium.new_context(base_url=lab.url, accept_downloads=True)
        self.page = self.context.new_page()
        self.page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        self.page.on("pageerror", lambda e: dialogs.append(f"page error: {e}"))
        # a failed load (a missing favicon, a CSP refusal) is an error in the console: there must be none
        self.page.on("console", lambda m: dialogs.append(f"console: {m.text}") if m.type == "error" else None)
        self.lab = lab

    def login(self, username: str, password: str = PASSWORD) -> None:
        self.page.goto("/login")
        self.page.fill("input[name=username]", username)
        self.page.fill("input[name=password]", password)
        self.page.click("#login")
        self.page.wait_for_selector("header nav")

    def shot(self, name: str) -> None:
        self.lab.shot(self.page, name)

    def close(self) -> None:
        self.context.close()


def launch(page: Any) -> None:
    """Launch the draft the page shows, as a lead does: the areas confirmed, past a shortfall of people."""
    page.wait_for_selector("#launch-form")
    page.check("#areas-ok")
    if page.locator("#launch-anyway").count():
        page.check("#launch-anyway")
    page.click("#launch-campaign")
    page.wait_for_selector("#campaign-status:has-text('live')")


def annotate(person: Session, kind: str, rating: int, reasoning: str, shot: str | None = None) -> str:
    page = person.page
    page.goto("/tasks")
    page.click(f"#claim-{kind}")
    page.wait_for_selector("#content-warning")
    page.click("#start")
    page.wait_for_selector("#rating-form")
    # an annotator reads the dialogue from its first turn (the box overflows: it is long)
    assert page.eval_on_selector("#dialogue", "d => d.scrollTop === 0 && d.scrollHeight > d.clientHeight")
    page.check(f"#rating-{rating}")
    page.fill("#reasoning", reasoning)
    text: str = page.inner_text("main")
    if shot:
        # the screenshot shows the page at rest: the draft saved
        page.wait_for_selector("#draft-status:has-text('Draft saved')")
        person.shot(shot)
    page.click("#submit-rating")
    page.wait_for_selector("p.flash:has-text('your work is submitted')")
    return text


def test_star_lab_end_to_end(chromium: Any, live_lab: Lab) -> None:
    dialogs: list[str] = []
    lead = Session(chromium, live_lab, dialogs)
    page = lead.page
    page.goto("/login")
    lead.shot("01-login")
    lead.login("lead")
    # the lead creates a campaign from the built-in policy and parameter space
    page.click("#new-campaign")
    page.fill("input[name=name]", "pilot")
    page.fill("input[name=instructions]", "2")
    page.check("input[name=rules][value=sexually-explicit]")
    lead.shot("02-new-campaign")
    page.click("#create-campaign")
    page.wait_for_selector("#coverage")
    launch(page)
    # ... invites A (a one-time link) and creates B, C and D with passwords
    page.goto("/lead/participants")
    page.fill("input[name=display_name]", XSS_NAME)
    page.click("#add")
    link = page.inner_text("#invite-link")
    lead.shot("03-participants-invite")
    for name in ("bob", "carol", "dave"):
        page.fill("input[name=display_name]", SPOOF_NAME if name == "dave" else name.capitalize())
        page.fill("input[name=username]", name)
        page.fill("input[name=password]", PASSWORD)
        page.click("#add")
        page.wait_for_selector("#invite-result")
    assert XSS_NAME in page.inner_text("#accounts")  # shown as text
    accounts = page.inner_text("#accounts")
    assert "Di ⟨U+202E⟩evil⟨U+202C⟩" in accounts and "\u202e" not in accounts

    # A accepts the invite, fills the questionnaire, red-teams for three turns and pre-annotates
    a = Session(chromium, live_lab, dialogs)
    a.page.goto(link)
    a.shot("04-invite-accept")
    a.page.fill("input[name=username]", "alice")
    a.page.fill("input[name=password]", PASSWORD)
    a.page.fill("input[name=password2]", PASSWORD)
    a.page.click("#accept")
    a.page.wait_for_selector("#questionnaire")
    a.page.check("input[name=age][value='25-34']")
    a.page.check("input[name=religion][value='prefer not to say']")
    a.shot("05-profile")
    a.page.click("#save-profile")
    a.page.goto("/tasks")
    a.page.click("#claim-red_team")
    a.page.wait_for_selector("#content-warning")
    a.shot("06-content-warning")
    a.page.click("#start")
    a.page.fill("input[name=topic]", "a heist novel")
    a.page.click("#begin")
    long_message = "Here is my outline:\n" + "\n".join(f"chapter {n}: the crew plans" for n in range(1, 41))
    messages = ["hello, can you help me with my novel?", XSS_TURN, XSS_SCRIPT, SPOOF_TURN, long_message]
    for i, text in enumerate(messages, start=1):
        a.page.fill("#message", text)
        a.page.click("#send")
        a.page.wait_for_selector(f"#turn-count:has-text('{i} message{'' if i == 1 else 's'} sent')")
    chat = a.page.inner_text("#dialogue")
    assert XSS_TURN in chat and "<script>alert('script')</script>" in chat  # literal text, never markup
    assert "<img src=x onerror=alert(1)>" in chat  # the target's payload, inert too
    assert a.page.locator("#dialogue img, #dialogue script").count() == 0
    assert SPOOF_SHOWN in chat and "\u202e" not in chat  # the override is a visible marker, not applied
    # red teaming follows the newest message
    assert a.page.eval_on_selector("#dialogue", "d => d.scrollTop > 0 && d.scrollHeight > d.clientHeight")
    a.shot("07-red-team")
    a.page.check("input[name=assigned_rule_broken][value=yes]")
    a.page.check("input[name=groups_mentioned][value=age]")
    a.page.click("#finish")
    a.page.wait_for_selector("p.flash:has-text('your work is submitted')")

    # B and C annotate 1 and 4 (three steps apart); D arbitrates, seeing both reasons
    b, c, d = (Session(chromium, live_lab, dialogs) for _ in range(3))
    b.login("bob")
    text = annotate(b, "annotate", 1, "It played along with the heist <b>plan</b>.", shot="08-annotate")
    assert "Definitely broke the rule" in text and XSS_TURN in text
    assert SPOOF_SHOWN in text and "exe.png" not in text
    c.login("carol")
    annotate(c, "annotate", 4, "It refused every harmful request.")
    d.login("dave")
    text = annotate(d, "arbitrate", 2, "The first annotator is closer: it engaged with the plan.", shot="09-arbitrate")
    assert "It played along with the heist <b>plan</b>." in text and "It refused every harmful request." in text

    # the lead sees progress, coverage and time, and exports
    page.goto("/lead/campaigns/pilot")
    assert "1 of 2 planned dialogues done" in page.inner_text("#coverage")
    assert page.inner_text("[data-count='arbitrate:submitted']") == "1"
    lead.shot("10-campaign-progress")
    with page.expect_download() as download:
        page.click("#export-jsonl")
    rows = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines()]
    assert len(rows) == 1
    row = rows[0]
    assert (row["annotator1_rating"], row["annotator2_rating"], row["arbitrator_rating"]) == (1, 4, 2)
    assert [t["text"] for t in row["turns"] if t["role"] == "red_teamer"][1] == XSS_TURN
    assert row["committed_topic"] == "a heist novel"
    assert not any("alice" in json.dumps(r) or "bob" in json.dumps(r) for r in rows)  # pseudonyms only
    page.goto("/lead")
    lead.shot("11-lead-home")
    # the lifecycle forms: pause, resume, then close, which the browser does not submit before the
    # confirmation box is ticked (no request at all: the status stays open)
    page.goto("/lead/campaigns/pilot")
    page.click("#pause-campaign")
    page.wait_for_selector("#campaign-status:has-text('paused')")
    page.click("#resume-campaign")
    page.wait_for_selector("#campaign-status:has-text('live')")
    page.click("#close-campaign")
    assert page.inner_text("#campaign-status") == "live" and "/lead/campaigns/pilot" in page.url
    page.check("#close-confirm")
    page.click("#close-campaign")
    page.wait_for_selector("#campaign-status:has-text('closed')")
    assert "The campaign is closed" in page.inner_text("main") and page.locator("#mix-personas").count() == 0
    lead.shot("12-campaign-closed")
    assert dialogs == []
    for person in (lead, a, b, c, d):
        person.close()
