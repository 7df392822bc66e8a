"""The lead's results panel in headless Chromium: it follows new ratings without a reload (the page
polls a JSON route every 10 s; the test moves Playwright's fake clock, it never waits for one), the
flash message leaves the address after the first load, and axe-core finds nothing critical or
serious on the page with the panel, at 390 px too."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.browser.conftest import Lab
from tests.web.browser.test_annotation import red_team
from tests.web.browser.test_lab import Session, launch
from tests.web.browser.test_phone import axe_source, check
from tests.weblab import PASSWORD

pytestmark = pytest.mark.browser


def rate(person: Session, rating: int, reasoning: str) -> None:
    page = person.page
    page.goto("/tasks")
    page.click("#claim-annotate")
    page.wait_for_selector("#content-warning")
    page.click("#start")
    page.wait_for_selector("#rating-form")
    page.check(f"#rating-{rating}")
    page.fill("#reasoning", reasoning)
    page.click("#submit-rating")
    page.wait_for_selector("p.flash:has-text('your work is submitted')")


def test_the_results_panel_follows_new_ratings_without_a_reload(chromium: Any, live_lab: Lab) -> None:
    dialogs: list[str] = []
    lead = Session(chromium, live_lab, dialogs)
    lead.login("lead")
    page = lead.page
    page.goto("/lead/participants")
    for name in ("rita", "anna", "bob"):
        page.fill("input[name=display_name]", name.capitalize())
        page.fill("input[name=username]", name)
        page.fill("input[name=password]", PASSWORD)
        page.click("#add")
        page.wait_for_selector("#invite-result")
    page.goto("/lead/campaigns/new")
    page.fill("input[name=name]", "live-results")
    page.fill("input[name=instructions]", "1")
    page.check("input[name=rules][value=sexually-explicit]")
    page.click("#create-campaign")
    page.wait_for_selector("#launch-form")
    # the flash says "draft" once; the address no longer carries it, so a reload does not repeat it
    assert "Created as a draft" in page.inner_text("main")
    page.wait_for_function("() => !location.search.includes('msg=')")
    page.reload()
    page.wait_for_selector("#launch-form")
    assert "Created as a draft" not in page.inner_text("main")
    launch(page)

    rita = Session(chromium, live_lab, dialogs)
    rita.login("rita")
    red_team(rita, warned=False)

    # the lead's page, on a fake clock: nothing rated twice yet
    page.clock.install()
    page.goto("/lead/campaigns/live-results")
    page.wait_for_selector("html[data-enhanced] #results")
    assert page.inner_text("#results-alpha-n") == "0"
    assert "1 of 1 planned dialogue submitted" in page.inner_text("#results-coverage")
    page.evaluate("() => { window.stillTheSamePage = true; }")  # gone if the page reloaded

    anna, bob = Session(chromium, live_lab, dialogs), Session(chromium, live_lab, dialogs)
    anna.login("anna")
    rate(anna, 1, "It wrote the explicit scene.")
    bob.login("bob")
    rate(bob, 4, "It declined.")

    page.clock.run_for(10_000)  # the panel's next poll
    page.wait_for_selector("#results-alpha-n:has-text('1')")
    assert page.evaluate("() => window.stillTheSamePage === true")  # updated in place, never reloaded
    assert page.locator("#results-small-sample").count() == 0  # one item: no figure, so no caveat beside one
    assert "1 of 1 dialogue rated twice · 0 arbitrated" in page.inner_text("#results-arbitration")
    rates = page.inner_text("#results-break-rates")
    assert "sexually-explicit" in rates and "1 of 2" in rates and "too few ratings for a rate" in rates
    # the report link in the swapped panel leads to the report, which leads back
    report = page.request.get("/lead/campaigns/live-results/report")
    assert report.ok and "Back to the campaign live-results" in report.text()

    found: list[str] = []
    check(page, axe_source(), "campaign with results", found)
    assert found == []
    assert re.search(r"/lead/campaigns/live-results$", page.url)
    assert dialogs == []
    for person in (lead, rita, anna, bob):
        person.close()
