"""Every page on a 390 px phone screen and through axe-core, in headless Chromium: no page is wider
than the screen (wide tables scroll inside their cards) and axe-core finds nothing critical or
serious, on the participant's, the lead's and the public pages and the analysis report.

axe-core is the copy the ``axe-playwright-python`` package ships (a dev dependency): nothing is
downloaded when the test runs."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.web.browser.conftest import Lab
from tests.web.browser.test_lab import Session, launch
from tests.weblab import PASSWORD

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def axe_source() -> str:
    from importlib import resources

    try:
        return (resources.files("axe_playwright_python") / "axe.min.js").read_text(encoding="utf-8")
    except ModuleNotFoundError:
        pytest.fail("axe-core is expected from the axe-playwright-python package: run `make install`")


def check(page: Any, axe: str, name: str, found: list[str]) -> None:
    """The page at 390 px: its width, then axe-core's critical and serious findings (into ``found``)."""
    page.set_viewport_size(PHONE)
    width = page.evaluate("document.documentElement.scrollWidth")
    if width > PHONE["width"]:
        wide = page.evaluate(
            """() => [...document.querySelectorAll('body *')]
                 .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
                 .slice(0, 3).map(e => e.tagName + '.' + e.className + '#' + e.id)"""
        )
        found.append(f"{name}: {width} px wide ({wide})")
    page.evaluate(axe)  # devtools evaluation: the pages' CSP does not apply to it
    result = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    for v in result["violations"]:
        if v["impact"] in ("critical", "serious"):
            targets = [n["target"] for n in v["nodes"]][:3]
            found.append(f"{name}: {v['impact']} {v['id']} {targets}")


def test_every_page_fits_a_phone_and_passes_axe(chromium: Any, live_lab: Lab) -> None:
    axe = axe_source()
    found: list[str] = []
    dialogs: list[str] = []
    anon = Session(chromium, live_lab, dialogs)
    anon.page.goto("/login")
    check(anon.page, axe, "login", found)
    anon.page.goto("/invite/not-a-token")
    check(anon.page, axe, "error page", found)

    lead = Session(chromium, live_lab, dialogs)
    lead.login("lead")
    page = lead.page
    check(page, axe, "campaigns (empty)", found)
    page.goto("/lead/campaigns/new")
    check(page, axe, "new campaign", found)
    page.fill("input[name=name]", "phone")
    page.fill("input[name=instructions]", "3")
    page.check("input[name=rules][value=sexually-explicit]")
    page.click("#create-campaign")
    page.wait_for_selector("#coverage")
    check(page, axe, "campaign (draft, its launch checks)", found)
    launch(page)
    page.goto("/lead/participants")
    page.fill("input[name=display_name]", "Invited Person With A Rather Long Name")
    page.click("#add")
    link = page.inner_text("#invite-link")
    for name in ("pat", "ann"):
        page.fill("input[name=display_name]", name.capitalize())
        page.fill("input[name=username]", name)
        page.fill("input[name=password]", PASSWORD)
        page.click("#add")
        page.wait_for_selector("#invite-result")
    check(page, axe, "participants", found)
    anon.page.goto(link)
    check(anon.page, axe, "invite", found)

    pat = Session(chromium, live_lab, dialogs)
    pat.login("pat")
    tab = pat.page
    check(tab, axe, "my tasks", found)
    tab.goto("/profile")
    check(tab, axe, "profile", found)
    tab.goto("/tasks")
    tab.click("#claim-red_team")
    tab.wait_for_selector("#content-warning")
    check(tab, axe, "content warning", found)
    tab.click("#start")
    tab.wait_for_selector("input[name=topic]")
    check(tab, axe, "red teaming: topic", found)
    tab.fill("input[name=topic]", "a very long topic " * 6)
    tab.click("#begin")
    for i, text in enumerate(["hello " * 60, "https://example.org/" + "a" * 120], start=1):
        tab.fill("#message", text)
        tab.click("#send")
        tab.wait_for_selector(f"#turn-count:has-text('{i} message{'' if i == 1 else 's'} sent')")
    check(tab, axe, "red teaming: dialogue", found)
    tab.check("input[name=assigned_rule_broken][value=yes]")
    tab.click("#finish")
    tab.wait_for_selector("p.flash:has-text('your work is submitted')")

    ann = Session(chromium, live_lab, dialogs)
    ann.login("ann")
    ann.page.click("#claim-annotate")
    ann.page.wait_for_selector("#content-warning")
    ann.page.click("#start")
    ann.page.wait_for_selector("#rating-form")
    check(ann.page, axe, "annotation", found)
    ann.shot("phone-annotation")

    page.goto("/lead")
    check(page, axe, "campaigns", found)
    page.goto("/lead/campaigns/phone")
    check(page, axe, "campaign", found)
    lead.shot("phone-campaign")
    page.goto("/traces")
    check(page, axe, "traces", found)
    # the report is served sandboxed (no script runs in it, axe-core neither): the same HTML, as
    # the browser got it, in a blank page
    report = page.request.get("/lead/campaigns/phone/report")
    assert report.ok and "sandbox" in report.headers["content-security-policy"]
    blank = lead.context.new_page()
    blank.set_content(report.text())
    check(blank, axe, "analysis report", found)
    assert found == []
    for person in (anon, lead, pat, ann):
        person.close()


def test_the_check_finds_a_wide_page_and_a_missing_alt(chromium: Any) -> None:
    """The check above is not vacuous: a page wider than the phone, an image without alt text and
    a page without lang are all reported."""
    context = chromium.new_context()
    page = context.new_page()
    page.set_content("<html><body><main><div style='width: 900px'>wide</div><img src='data:,'></main></body></html>")
    found: list[str] = []
    check(page, axe_source(), "broken", found)
    assert any(re.search(r"broken: 9[0-9]{2} px wide", f) for f in found), found
    assert any("critical image-alt" in f for f in found) and any("serious html-has-lang" in f for f in found)
    context.close()
