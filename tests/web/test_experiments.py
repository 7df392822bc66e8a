"""The per-cell experiment viewer (web/experiments.py): alone on loopback (``experiment view``) and
in the served app (``/experiments``, leads only). Filters, pages, one cell with hostile stored text
rendered inert, 404s, the Host/Origin checks, and who may see the served pages."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from psychoalign.config import DeploymentSettings, ServeSettings
from psychoalign.experiments.harness.spec import ExperimentSpec
from psychoalign.experiments.harness.store import CellResult, RunRecord, SQLResultStore
from psychoalign.judges.records import JudgeRecord
from psychoalign.models import Message
from psychoalign.traces import open_store
from psychoalign.web import experiments as viewer
from psychoalign.web.accounts import Role
from psychoalign.web.apikeys import hash_key
from psychoalign.web.experiments import ExperimentSource, create_viewer_app
from tests.scenario import World, proposals
from tests.weblab import Browser, add_person, lab_settings, served_app

RUN = "demo-0123456789ab"
XSS = "<script>alert('cell')</script>"
BIDI = "Harmless \u202egnp.exe\u202c"
EVIL_KEY = "psychoalign|harmbench|evil/1"
ANSWER = "A safe answer."


def spec() -> dict[str, Any]:
    return ExperimentSpec.model_validate(
        {
            "name": "demo",
            "systems": [{"name": "vanilla"}, {"name": "psychoalign"}],
            "benchmarks": [{"name": "harmbench"}],
        }
    ).model_dump(mode="json")


async def seed(url: str, *, plain: int = 60, trace_id: str | None = None) -> str:
    """A run with ``plain`` vanilla cells (attack_success alternating, two categories), one cell of
    hostile text (XSS and a bidi override in every stored field) and one failed cell."""
    store = SQLResultStore(url)
    try:
        await store.open_run(RunRecord(id=RUN, name="demo", spec=spec()))
        cells = [
            CellResult(
                run_id=RUN,
                key=f"vanilla|harmbench|hb-{i:03d}",
                system="vanilla",
                benchmark="harmbench",
                item_id=f"hb-{i:03d}",
                status="done",
                metrics={"attack_success": float(i % 2)},
                responses=[f"reply {i}"],
                details={"category": "cybercrime" if i % 3 == 0 else "harassment"},
                cost={"calls": 1.0, "tokens": 40.0},
                wall_s=0.25,
            )
            for i in range(plain)
        ]
        judge = JudgeRecord(
            judge="harmbench",
            model="judge-model",
            verdict={"success": True, "note": XSS},
            prompt=[Message(role="system", content=f"Judge this {XSS}"), Message(role="user", content=BIDI)],
            raw=f"yes <img src=x onerror=alert('raw')> {BIDI}",
        )
        cells.append(
            CellResult(
                run_id=RUN,
                key=EVIL_KEY,
                system="psychoalign",
                benchmark="harmbench",
                item_id="evil/1",
                status="done",
                metrics={"attack_success": 1.0},
                responses=[f"{XSS} {BIDI}"],
                judges=[judge],
                trace_ids=[trace_id or "0123456789abcdef"],
                details={"category": f"<b>{BIDI}</b>"},
                cost={"calls": 3.0, "cost_usd": 0.0012},
                wall_s=1.5,
            )
        )
        cells.append(
            CellResult(
                run_id=RUN,
                key="psychoalign|harmbench|broken",
                system="psychoalign",
                benchmark="harmbench",
                item_id="broken",
                status="failed",
                error=f"judge returned junk {XSS}",
            )
        )
        for c in cells:
            assert await store.claim(RUN, c, "seed")
        await store.finish_many(cells)
    finally:
        await store.close()
    return RUN


async def negotiated_trace(url: str) -> str:
    traces = open_store(url)
    try:
        trace = await World([proposals((ANSWER, 0.9))]).negotiator(traces).negotiate("How do I boil an egg?")
        return trace.id
    finally:
        await traces.close()


def viewer_app(url: str, tmp_path: Path) -> Any:
    source = ExperimentSource(SQLResultStore(url), open_store(url), data_dir_setting=str(tmp_path / "no-data"))
    return create_viewer_app(source, ServeSettings(), run_id=RUN)


@pytest.fixture
async def url(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    await seed(url, trace_id=await negotiated_trace(url))
    return url


@pytest.fixture
async def client(url: str, tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = viewer_app(url, tmp_path)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            yield c


def rows(page: httpx.Response) -> list[str]:
    """The item ids of the listed cells, in order."""
    return re.findall(r'<a href="/experiments/[^"]+/cells/[^"]+"><bdi dir="auto">([^<]*)</bdi></a>', page.text)


async def test_home_opens_the_run_and_pages_the_cells(client: httpx.AsyncClient) -> None:
    home = await client.get("/")
    assert home.status_code == 303 and home.headers["location"] == f"/experiments/{RUN}"
    first = await client.get(f"/experiments/{RUN}")
    assert first.status_code == 200
    assert "62 of 62 cells" in first.text and "Page 1 of 2" in first.text
    assert rows(first) == ["broken", "evil/1", *(f"hb-{i:03d}" for i in range(viewer.PAGE_SIZE - 2))]  # key order
    second = await client.get(f"/experiments/{RUN}", params={"page": 2})
    assert rows(second) == [f"hb-{i:03d}" for i in range(48, 60)]
    assert "default-src 'none'" in first.headers["content-security-policy"]
    runs = await client.get("/experiments")
    assert runs.status_code == 200 and f"/experiments/{RUN}" in runs.text


async def test_the_list_follows_the_store_while_cells_finish(client: httpx.AsyncClient, url: str) -> None:
    """The parsed cells are kept between pages only while no cell of the run was written."""
    before = await client.get(f"/experiments/{RUN}", params={"status": "failed"})
    assert rows(before) == ["broken"]
    store = SQLResultStore(url)
    try:
        [broken] = [c for c in await store.cells(RUN) if c.item_id == "broken"]
        assert await store.claim(RUN, broken, "rerun")
        await store.finish(
            broken.model_copy(update={"status": "done", "error": None, "metrics": {"attack_success": 0.0}})
        )
    finally:
        await store.close()
    after = await client.get(f"/experiments/{RUN}", params={"status": "failed"})
    assert rows(after) == []
    done = await client.get(f"/experiments/{RUN}", params={"status": "done", "system": "psychoalign"})
    assert rows(done) == ["broken", "evil/1"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"system": "psychoalign"}, ["broken", "evil/1"]),
        ({"status": "failed"}, ["broken"]),
        ({"status": "not_scored"}, ["broken"]),
        (
            {"category": "cybercrime", "metric": "attack_success", "metric_min": "1"},
            [f"hb-{i:03d}" for i in range(3, 60, 6)],
        ),
        (
            {"metric": "attack_success", "metric_max": "0", "q": "reply 4"},
            ["hb-004", *(f"hb-0{i}" for i in range(40, 50, 2))],
        ),
        ({"q": "junk"}, ["broken"]),
        ({"benchmark": "xstest"}, []),
    ],
)
async def test_the_list_filters(client: httpx.AsyncClient, params: dict[str, str], expected: list[str]) -> None:
    page = await client.get(f"/experiments/{RUN}", params=params)
    assert page.status_code == 200
    assert rows(page) == expected
    assert f"{len(expected)} of 62 cells" in page.text


async def test_a_bad_filter_is_a_400_naming_it(client: httpx.AsyncClient) -> None:
    page = await client.get(f"/experiments/{RUN}", params={"status": "finished"})
    assert page.status_code == 400 and "filter &#39;status&#39;: unknown status finished" in page.text
    page = await client.get(f"/experiments/{RUN}", params={"metric_min": "abc", "metric": "attack_success"})
    assert page.status_code == 400 and "metric_min" in page.text


async def test_one_cell_shows_everything_with_stored_text_inert(client: httpx.AsyncClient, url: str) -> None:
    page = await client.get(f"/experiments/{RUN}/cells/{quote(EVIL_KEY, safe='')}")
    assert page.status_code == 200
    text = page.text
    assert "<script>alert" not in text and "<img src=x" not in text and "\u202e" not in text
    assert "&lt;script&gt;alert(&#39;cell&#39;)&lt;/script&gt;" in text  # the response, shown as text
    assert "⟨U+202E⟩" in text  # the bidi override shown as a marker, not applied
    assert "Judge this &lt;script&gt;" in text  # the judge's prompt
    assert "yes &lt;img src=x onerror=alert(&#39;raw&#39;)&gt;" in text  # its raw reply
    assert "judge-model" in text and "cost usd" in text and "0.0012" in text and "1.500 s" in text
    link = re.search(r'href="/traces/([0-9a-f]+)"><code>', text)
    assert link is not None
    trace = await client.get(f"/traces/{link.group(1)}")
    assert trace.status_code == 200 and ANSWER in trace.text  # the negotiation, in the viewer too
    broken = await client.get(f"/experiments/{RUN}/cells/{quote('psychoalign|harmbench|broken', safe='')}")
    assert broken.status_code == 200 and "judge returned junk &lt;script&gt;" in broken.text


async def test_unknown_run_cell_or_trace_is_a_404(client: httpx.AsyncClient) -> None:
    for path in (
        "/experiments/no-such-run",
        f"/experiments/no-such-run/cells/{quote(EVIL_KEY, safe='')}",
        f"/experiments/{RUN}/cells/nothing",
        "/traces/0123456789abcdef",
        "/traces/not-hex",
    ):
        page = await client.get(path)
        assert page.status_code == 404, path
        assert "Not found" in page.text


async def test_a_foreign_host_or_origin_is_refused(client: httpx.AsyncClient) -> None:
    rebound = await client.get(f"/experiments/{RUN}", headers={"host": "evil.example"})
    assert rebound.status_code == 403 and "viewer: Host 'evil.example'" in rebound.text
    foreign = await client.get(f"/experiments/{RUN}", headers={"origin": "http://evil.example"})
    assert foreign.status_code == 403
    cross = await client.get(f"/experiments/{RUN}", headers={"sec-fetch-site": "cross-site"})
    assert cross.status_code == 403
    local = await client.get(f"/experiments/{RUN}", headers={"host": "localhost:8765"})
    assert local.status_code == 200


@pytest.mark.parametrize("keyed", [False, True], ids=["keyless", "keyed"])
async def test_the_served_pages_are_for_leads_only(tmp_path: Path, keyed: bool) -> None:
    """As the trace viewer: a lead's session, whether or not the deployments have API keys (a key
    of /v1 opens no page)."""
    url = f"sqlite+aiosqlite:///{tmp_path / 'app.db'}"
    await seed(url, plain=2)
    settings = lab_settings(tmp_path / "home", url)
    if keyed:
        keys = {name: DeploymentSettings(api_keys=[hash_key("pa-secret")]) for name in settings.deployments}
        settings = settings.model_copy(update={"deployments": keys})
    app = served_app(settings)
    async with app.router.lifespan_context(app):
        lab = app.state.star_lab
        await add_person(lab, "lead", Role.LEAD)
        await add_person(lab, "pat")
        anonymous = Browser(app)
        participant = Browser(app)
        lead = Browser(app)
        try:
            page = await anonymous.get(f"/experiments/{RUN}")
            assert page.status_code == 303 and page.headers["location"].startswith("/login?next=/experiments/")
            bearer = await anonymous.get("/experiments", headers={"authorization": "Bearer pa-secret"})
            assert bearer.status_code == 303 and bearer.headers["location"].startswith("/login")
            await participant.login("pat")
            assert (await participant.get(f"/experiments/{RUN}")).status_code == 403
            assert (await participant.get(f"/experiments/{RUN}/cells/{quote(EVIL_KEY, safe='')}")).status_code == 403
            await lead.login("lead")
            listed = await lead.get("/experiments")
            assert listed.status_code == 200 and 'href="/experiments"' in listed.text  # in the lead's menu too
            page = await lead.get(f"/experiments/{RUN}")
            assert page.status_code == 200 and rows(page) == ["broken", "evil/1", "hb-000", "hb-001"]
            cell = await lead.get(f"/experiments/{RUN}/cells/{quote(EVIL_KEY, safe='')}")
            assert cell.status_code == 200 and "&lt;script&gt;alert(&#39;cell&#39;)" in cell.text
            assert (await lead.post(f"/experiments/{RUN}", {})).status_code == 405  # read-only
        finally:
            for b in (anonymous, participant, lead):
                await b.aclose()


async def test_a_run_whose_spec_no_longer_validates_still_shows_its_cells(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'old.db'}"
    store = SQLResultStore(url)
    try:
        await store.open_run(RunRecord(id=RUN, name="old", spec={"benchmarks": [{"name": "harmbench"}], "gone": 1}))
        old = CellResult(run_id=RUN, key="vanilla|harmbench|x", system="vanilla", benchmark="harmbench", item_id="x")
        assert await store.claim(RUN, old, "seed")
        await store.finish(old.model_copy(update={"status": "done", "responses": ["an answer"]}))
    finally:
        await store.close()
    app = viewer_app(url, tmp_path)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8765") as c:
            page = await c.get(f"/experiments/{RUN}/cells/{quote('vanilla|harmbench|x', safe='')}")
    assert page.status_code == 200 and "an answer" in page.text
    assert "the run&#39;s spec does not validate under this version" in page.text
