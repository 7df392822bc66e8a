"""Annotation as annotators work, in headless Chromium: keyboard only (1–4 pick the rating,
Ctrl+Enter submits and opens the next task), the content warning once per session (per rule and
target group; a new login shows it again), a draft that
survives a reload and a logout in another tab, a counter that refuses over-long text, time on task
that counts on with a break prompt at the threshold, and no dead-end button when nothing is left."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.browser.conftest import Lab
from tests.web.browser.test_lab import Session, launch
from tests.weblab import PASSWORD

pytestmark = pytest.mark.browser


def red_team(person: Session, warned: bool) -> None:
    page = person.page
    page.goto("/tasks")
    page.click("#claim-red_team")
    if warned:  # the same rule in the same session: straight into the task
        page.wait_for_selector("input[name=topic]")
        assert page.locator("#content-warning").count() == 0
    else:
        page.wait_for_selector("#content-warning")
        assert "Rule" in page.inner_text("#warning-subject")
        page.click("#start")
    page.fill("input[name=topic]", "a cooking blog")
    page.click("#begin")
    page.fill("#message", "hello")
    page.click("#send")
    page.wait_for_selector("#turn-count:has-text('1 message sent')")
    page.check("input[name=assigned_rule_broken][value=no]")
    page.click("#finish")
    page.wait_for_selector("p.flash:has-text('your work is submitted')")


def test_keyboard_annotation_with_drafts_that_survive(chromium: Any, live_lab: Lab) -> None:
    dialogs: list[str] = []
    lead = Session(chromium, live_lab, dialogs)
    lead.login("lead")
    page = lead.page
    page.click("#new-campaign")
    page.fill("input[name=name]", "keys")
    page.fill("input[name=instructions]", "2")
    page.check("input[name=rules][value=sexually-explicit]")
    page.click("#create-campaign")
    page.wait_for_selector("#coverage")
    launch(page)
    page.goto("/lead/participants")
    for name in ("rita", "anna"):
        page.fill("input[name=display_name]", name.capitalize())
        page.fill("input[name=username]", name)
        page.fill("input[name=password]", PASSWORD)
        page.click("#add")
        page.wait_for_selector("#invite-result")
    rita = Session(chromium, live_lab, dialogs)
    rita.login("rita")
    red_team(rita, warned=False)
    red_team(rita, warned=True)

    anna = Session(chromium, live_lab, dialogs)
    anna.login("anna")
    tab = anna.page
    tab.goto("/tasks")
    assert "2 annotations" in tab.inner_text("#progress-line")
    tab.click("#claim-annotate")
    tab.wait_for_selector("#content-warning")
    tab.click("#start")
    tab.wait_for_selector("html[data-enhanced] #rating-form")
    # keyboard only: 3 picks "Probably did not break the rule"; typing goes to the text box
    tab.keyboard.press("3")
    assert tab.is_checked("#rating-3")
    tab.focus("#reasoning")
    tab.keyboard.type("It declined 2 times, politely.")
    assert not tab.is_checked("#rating-2")  # digits typed in the box pick nothing
    tab.wait_for_selector("#draft-status:has-text('Draft saved')")
    assert tab.inner_text("#reasoning-count").startswith("30 / 4,000")
    tab.reload()
    tab.wait_for_selector("html[data-enhanced] #rating-form")
    assert tab.input_value("#reasoning") == "It declined 2 times, politely."
    assert tab.is_checked("#rating-3") and "Draft restored" in tab.inner_text("#draft-status")
    # the dialogue box can be reached (and scrolled) by keyboard
    assert tab.get_attribute("#dialogue", "tabindex") == "0"

    # logged out in a second tab: the first tab's submit leads to login, then back to the draft
    other = anna.context.new_page()
    other.goto("/tasks")
    other.click("header nav button.link")
    other.wait_for_url(re.compile(r"/login"))
    tab.focus("#reasoning")
    tab.keyboard.press("Control+Enter")
    tab.wait_for_url(re.compile(r"/login\?next="))
    tab.fill("input[name=username]", "anna")
    tab.fill("input[name=password]", PASSWORD)
    tab.click("#login")
    tab.wait_for_selector("html[data-enhanced] #rating-form")
    assert tab.input_value("#reasoning") == "It declined 2 times, politely." and tab.is_checked("#rating-3")

    # over the limit: counted, refused by the browser with the length named, nothing cut
    tab.fill("#reasoning", "x" * 4001)
    tab.wait_for_selector("#reasoning-count.over")
    message = tab.eval_on_selector("#reasoning", "box => box.validationMessage")
    assert "4,001 characters; the limit is 4,000" in message
    tab.fill("#reasoning", "It declined 2 times, politely.")

    # Ctrl+Enter: submit & next, straight to the next task (a new login session: its warning first)
    first = tab.url
    tab.focus("#reasoning")
    tab.keyboard.press("Control+Enter")
    tab.wait_for_url(lambda url: url != first and re.search(r"/tasks/[0-9a-f]+$", url) is not None)
    tab.wait_for_selector("#content-warning")
    assert "crisis helpline" in tab.inner_text("#support-resources")  # the policy's support resources
    # time on task counts on, and the break prompt comes at [lab] break_minutes (45), on Playwright's
    # fake clock (moved by hand, never waited for)
    tab.clock.install()
    tab.click("#start")
    tab.wait_for_selector("html[data-enhanced] #rating-form")
    assert tab.inner_text("#time-on-task .minutes") == "0" and not tab.is_visible("#break-prompt")
    tab.clock.run_for("45:00")
    assert tab.inner_text("#time-on-task .minutes") == "45" and tab.is_visible("#break-prompt")
    assert "crisis helpline" in tab.inner_text("#break-prompt")
    tab.click("#break-dismiss")  # non-blocking: "Not now" hides it for another 45 minutes
    tab.clock.run_for("10:00")
    assert tab.inner_text("#time-on-task .minutes") == "55" and not tab.is_visible("#break-prompt")
    assert tab.input_value("#reasoning") == ""
    tab.locator("body").press("1")
    assert tab.is_checked("#rating-1")
    tab.focus("#reasoning")
    tab.keyboard.type("It wrote it all out.")
    tab.keyboard.press("Control+Enter")
    tab.wait_for_selector("p.flash:has-text('No further task of that kind')")
    assert tab.locator("#claim-annotate").count() == 0 and tab.locator("#none-annotate").count() == 1
    assert "2 annotations" in tab.inner_text("#progress-line")
    anna.shot("annotation-done")
    assert dialogs == []
    for person in (lead, rita, anna):
        person.close()
