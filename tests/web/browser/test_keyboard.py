"""Keyboard only, in headless Chromium: a lead creates and launches a campaign, and a participant
signs in, red-teams a scripted target with hostile text (markup, a bidi override, a zero-width
space, an unbroken word) and pre-annotates, with Tab, Space and Enter alone. Every stop of the Tab
key shows a visible focus; every page of the walk is checked at 360 and 1280 px (no page wider
than the screen, nothing critical or serious from axe-core); untrusted text is shown escaped,
direction-isolated and with its invisible characters as markers; no script or dialog ran."""

from __future__ import annotations

from typing import Any

import pytest

from tests.web.browser.conftest import Lab
from tests.web.browser.test_lab import Session
from tests.web.browser.test_phone import axe_source
from tests.weblab import PASSWORD

pytestmark = pytest.mark.browser

SIZES = ({"width": 360, "height": 740}, {"width": 1280, "height": 800})
HOSTILE = "<img src=x onerror=alert(1)> hello \u202eevil\u202c\u200b " + "x" * 200


def _check(page: Any, axe: str, name: str, found: list[str]) -> None:
    """The page at each size: its width, and axe-core's critical and serious findings."""
    for size in SIZES:
        page.set_viewport_size(size)
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > size["width"]:
            found.append(f"{name} at {size['width']} px: {width} px wide")
        page.evaluate(axe)  # devtools evaluation: the pages' CSP does not apply to it
        result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
        for v in result["violations"]:
            if v["impact"] in ("critical", "serious"):
                found.append(f"{name} at {size['width']} px: {v['impact']} {v['id']}")


#: The focused element, and whether its focus shows (an outline or a focus shadow).
_FOCUS = """() => {
  const e = document.activeElement;
  if (!e || e === document.body) return null;
  const s = getComputedStyle(e);
  const shown = (s.outlineStyle !== 'none' && parseFloat(s.outlineWidth) > 0) || s.boxShadow !== 'none';
  return {shown, label: e.tagName + (e.id ? '#' + e.id : '') + (e.name ? '[' + e.name + ']' : '')};
}"""


def _tab_to(page: Any, selector: str, found: list[str], limit: int = 80) -> None:
    """Press Tab until ``selector`` has the focus, checking that every stop shows it."""
    for _ in range(limit):
        page.keyboard.press("Tab")
        focus = page.evaluate(_FOCUS)
        if focus and not focus["shown"]:
            found.append(f"{page.url}: no visible focus on {focus['label']}")
        if page.evaluate("s => document.activeElement.matches(s)", selector):
            return
    raise AssertionError(f"{selector} is not reachable with Tab on {page.url}")


def test_keyboard_only_campaign_and_red_teaming(chromium: Any, live_lab: Lab) -> None:
    axe = axe_source()
    found: list[str] = []
    dialogs: list[str] = []

    lead = Session(chromium, live_lab, dialogs)
    page = lead.page
    page.goto("/login")
    _check(page, axe, "login", found)
    _tab_to(page, "input[name=username]", found)
    page.keyboard.type("lead")
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_selector("header nav")
    page.goto("/lead/participants")
    _tab_to(page, "input[name=display_name]", found)
    page.keyboard.type("Kay " + HOSTILE)
    _tab_to(page, "input[name=username]", found)
    page.keyboard.type("kay")
    _tab_to(page, "input[name=password]", found)
    page.keyboard.type(PASSWORD)
    _tab_to(page, "#add", found)
    page.keyboard.press("Enter")
    page.wait_for_selector("#invite-result")
    _check(page, axe, "participants with a hostile name", found)
    assert page.locator("bdi[dir=auto]:has-text('⟨U+202E⟩evil')").count() >= 1

    page.goto("/lead/campaigns/new")
    _check(page, axe, "new campaign", found)
    _tab_to(page, "input[name=name]", found)
    page.keyboard.type("keys")
    _tab_to(page, "input[name=instructions]", found)
    page.keyboard.press("Control+a")
    page.keyboard.type("2")
    _tab_to(page, "input[name=rules][value=sexually-explicit]", found)
    page.keyboard.press("Space")
    _tab_to(page, "#create-campaign", found)
    page.keyboard.press("Enter")
    page.wait_for_selector("#launch-form")
    _check(page, axe, "campaign draft", found)
    _tab_to(page, "#areas-ok", found)
    page.keyboard.press("Space")
    if page.locator("#launch-anyway").count():
        _tab_to(page, "#launch-anyway", found)
        page.keyboard.press("Space")
    _tab_to(page, "#launch-campaign", found)
    page.keyboard.press("Enter")
    page.wait_for_selector("#campaign-status:has-text('live')")
    _check(page, axe, "live campaign", found)

    kay = Session(chromium, live_lab, dialogs)
    tab = kay.page
    kay.login("kay")
    _check(tab, axe, "my tasks", found)
    _tab_to(tab, "#claim-red_team", found)
    tab.keyboard.press("Enter")
    tab.wait_for_selector("#content-warning")
    _check(tab, axe, "content warning", found)
    _tab_to(tab, "#start", found)
    tab.keyboard.press("Enter")
    tab.wait_for_selector("input[name=topic]")
    _tab_to(tab, "input[name=topic]", found)
    tab.keyboard.type("topic " + HOSTILE)
    tab.keyboard.press("Enter")
    tab.wait_for_selector("#message")
    for i in (1, 2):
        _tab_to(tab, "#message", found)
        tab.keyboard.type(HOSTILE)
        _tab_to(tab, "#send", found)
        tab.keyboard.press("Enter")
        tab.wait_for_selector(f"#turn-count:has-text('{i} message{'' if i == 1 else 's'} sent')")
    _check(tab, axe, "red teaming with hostile turns", found)
    # the participant's words and the model's reply (an <img onerror> and a <script>): text, isolated
    assert tab.locator("img[src=x]").count() == 0
    assert tab.locator("bdi[dir=auto]:has-text('⟨U+202E⟩evil⟨U+202C⟩⟨U+200B⟩')").count() >= 2
    assert tab.locator("bdi[dir=auto]:has-text('<img src=x onerror=alert(1)> How can I help?')").count() >= 1
    _tab_to(tab, "input[name=assigned_rule_broken][value=yes]", found)
    tab.keyboard.press("Space")
    _tab_to(tab, "#finish", found)
    tab.keyboard.press("Enter")
    tab.wait_for_selector("p.flash:has-text('your work is submitted')")
    _check(tab, axe, "tasks after submitting", found)

    assert found == [], found
    assert dialogs == [], dialogs
    for person in (lead, kay):
        person.close()
