"""The trace viewer in headless Chromium: the list, one trace, and an XSS payload sent as a request
through the OpenAI-compatible API rendered inert (no dialog, no page error). Screenshots saved."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from psychoalign.traces import open_store
from psychoalign.web import create_app
from psychoalign.web.accounts import Role
from tests.scenario import World, evaluation, proposals
from tests.web.browser.conftest import LiveServer, artifacts_dir, run_async
from tests.web.browser.test_phone import axe_source, check
from tests.weblab import PASSWORD, lab_settings

pytestmark = pytest.mark.browser

XSS = "<img src=x onerror=alert('trace')> and <script>alert('req')</script> please"
ANSWER = "Here is a safe answer."


def _judge(text: str) -> dict[str, Any]:
    if "script" in text:
        return evaluation(5, "VETOED", hits=[("U1-mass-harm", "universal")])
    return evaluation(95, "APPROVED")


async def _seed_lead(store_url: str, home: Path) -> None:
    from psychoalign.web.star import StarLab

    lab = StarLab(lab_settings(home, store_url), store_url)
    try:
        await lab.accounts.create_account(Role.LEAD, username="lead", password=PASSWORD, display_name="Lead")
    finally:
        await lab.close()


@pytest.fixture
def viewer(tmp_path: Path) -> Iterator[str]:
    url = f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"
    home = tmp_path / "home"
    run_async(_seed_lead(url, home))
    store = open_store(url)
    world = World([proposals((ANSWER, 0.9), ("<script>alert('draft')</script>", 0.5))], judge=_judge)
    app = create_app(
        lab_settings(home, url), store=store, negotiators={"psychoalign": world.negotiator(store)}, a2a=False
    )
    with LiveServer(app) as server:
        body = {"model": "psychoalign", "messages": [{"role": "user", "content": XSS}]}
        for _ in range(2):
            r = httpx.post(f"{server.url}/v1/chat/completions", json=body, timeout=60)
            assert r.status_code == 200 and r.json()["choices"][0]["message"]["content"] == ANSWER
        yield server.url


def test_trace_list_and_detail_render_untrusted_text_inert(chromium: Any, viewer: str) -> None:
    shots = artifacts_dir() / "trace-viewer"
    shots.mkdir(parents=True, exist_ok=True)
    events: list[str] = []
    context = chromium.new_context(base_url=viewer)
    page = context.new_page()
    page.on("dialog", lambda d: (events.append(d.message), d.dismiss()))
    page.on("pageerror", lambda e: events.append(f"page error: {e}"))
    try:
        page.goto("/traces")
        page.fill("input[name=username]", "lead")
        page.fill("input[name=password]", PASSWORD)
        page.click("#login")
        page.wait_for_selector("#trace-table")
        rows = page.locator("#trace-table tbody tr")
        assert rows.count() == 2
        assert "<img src=x onerror=alert('trace')>" in rows.first.inner_text()  # shown as text
        page.screenshot(path=str(shots / "01-trace-list.png"), full_page=True)
        page.fill("#trace-search", "nothing matches this")
        page.click("#trace-filters button[type=submit]")
        page.wait_for_selector("text=0 traces")
        page.goto("/traces")
        page.locator("#trace-table tbody tr a").first.click()
        page.wait_for_selector("#trace-request")
        assert page.inner_text("#trace-request") == XSS
        assert page.inner_text("#trace-response") == ANSWER
        assert page.locator("svg.tension-chart circle").count() >= 1
        assert page.locator("img[src=x]").count() == 0  # the payload never became an element
        page.screenshot(path=str(shots / "02-trace-detail.png"), full_page=True)
        # the charts: titled axes, both thresholds named, the terms beside them; then a phone
        assert page.locator("#tension-chart text.axis-title").all_text_contents() == [
            "Negotiation round",
            "Tension T · score ÷ 100",
        ]
        assert page.locator("#tension-chart .threshold text").all_text_contents() == ["τ = 0.60", "healthy T < 0.30"]
        assert page.locator("#tension-terms dt").count() == 6
        found: list[str] = []
        axe = axe_source()
        check(page, axe, "trace detail", found)
        page.screenshot(path=str(shots / "03-trace-detail-phone.png"), full_page=True)
        page.goto("/traces")
        assert page.locator("#tension-histogram rect.bar").count() == 10
        assert page.inner_text("#state-defense td[data-state=healthy_equilibrium][data-defense=none]") == "2"
        check(page, axe, "trace list", found)
        page.screenshot(path=str(shots / "04-trace-list-phone.png"), full_page=True)
        assert found == []
    finally:
        context.close()
    assert events == []


def test_the_serve_banners_token_link_opens_the_trace_viewer_signed_in(chromium: Any, tmp_path: Path) -> None:
    """The link `psychoalign serve` prints, opened in a real browser: the trace viewer, signed in
    as the server's owner, the token gone from the address bar; the session cookie HttpOnly and
    SameSite=Lax; the page's logout form (its CSRF token) works, and the viewer is closed after."""
    token = "banner-token-for-the-browser-test"
    url = f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"
    app = create_app(lab_settings(tmp_path / "home", url), store=open_store(url), a2a=False, local_token=token)
    with LiveServer(app) as server:
        context = chromium.new_context(base_url=server.url)
        page = context.new_page()
        try:
            page.goto(f"/traces?token={token}")
            assert page.url == f"{server.url}/traces"
            page.wait_for_selector("text=0 traces.")
            assert "Server owner (local token link)" in page.inner_text("header")
            cookies = {c["name"]: c for c in context.cookies()}
            assert cookies["psa_session"]["httpOnly"] and cookies["psa_session"]["sameSite"] == "Lax"
            assert cookies["psa_local_token"]["httpOnly"] and cookies["psa_local_token"]["sameSite"] == "Strict"
            page.click("header form button")  # log out: a form with the session's CSRF token
            page.wait_for_selector("input[name=password]")
            page.goto("/traces")
            assert page.url.startswith(f"{server.url}/login")
        finally:
            context.close()
