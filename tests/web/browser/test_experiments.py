"""The experiment viewer (``experiment view``) in headless Chromium: the cell list and one cell of
hostile text at 390 px, through axe-core (nothing critical or serious), no page wider than the
screen, the stored XSS inert (no dialog, no page error). Screenshots saved."""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from tests.web.browser.conftest import LiveServer, artifacts_dir, run_async
from tests.web.browser.test_phone import axe_source, check
from tests.web.test_experiments import EVIL_KEY, RUN, negotiated_trace, seed, viewer_app

pytestmark = pytest.mark.browser


def test_cell_list_and_cell_fit_a_phone_pass_axe_and_stay_inert(chromium: Any, tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    run_async(seed(url, trace_id=run_async(negotiated_trace(url))))
    shots = artifacts_dir() / "experiment-viewer"
    shots.mkdir(parents=True, exist_ok=True)
    axe = axe_source()
    found: list[str] = []
    events: list[str] = []
    with LiveServer(viewer_app(url, tmp_path)) as server:
        context = chromium.new_context(base_url=server.url)
        page = context.new_page()
        page.on("dialog", lambda d: (events.append(d.message), d.dismiss()))
        page.on("pageerror", lambda e: events.append(f"page error: {e}"))
        try:
            page.goto("/")
            page.wait_for_selector("#cell-table")
            assert page.locator("#cell-table tbody tr").count() == 50
            check(page, axe, "cell list", found)
            page.screenshot(path=str(shots / "01-cell-list.png"), full_page=True)
            page.select_option("select[name=system]", "psychoalign")
            page.click("#cell-filters button[type=submit]")
            page.wait_for_selector("#cell-count:has-text('2 of 62')")
            assert "<script>alert('cell')</script>" in page.inner_text("#cell-table")  # shown as text
            check(page, axe, "filtered list", found)
            page.goto(f"/experiments/{RUN}/cells/{quote(EVIL_KEY, safe='')}")
            page.wait_for_selector("#judges")
            page.click("#judges details summary")  # the judge's prompt, opened
            check(page, axe, "cell", found)
            page.screenshot(path=str(shots / "02-cell.png"), full_page=True)
            page.click("#cell-traces a")
            page.wait_for_selector("#trace-response")
            check(page, axe, "trace", found)
            page.goto("/experiments")
            check(page, axe, "runs", found)
        finally:
            context.close()
    assert found == []
    assert events == []
