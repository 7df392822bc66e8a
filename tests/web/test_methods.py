"""``RouteMethods`` on the served app: slash redirects never follow the Host header; OPTIONS and
405 name every method a path's routes take."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from tests.weblab import lab_settings, served_app


@pytest.fixture
async def client(tmp_path: Path) -> httpx.AsyncClient:
    app = served_app(lab_settings(tmp_path / "home"))
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


async def test_a_trailing_slash_redirect_is_path_only_whatever_the_host_header(client: httpx.AsyncClient) -> None:
    # Before: `GET /lead/` with `Host: evil.com` -> 307 Location: http://evil.com/lead
    for host in ("evil.com", "127.0.0.1"):
        r = await client.get("/lead/", headers={"host": host})
        assert r.status_code == 307 and r.headers["location"] == "/lead", (host, r.headers.get("location"))
    kept = await client.get("/lead/?page=2&q=a%20b", headers={"host": "evil.com"})
    assert kept.status_code == 307 and kept.headers["location"] == "/lead?page=2&q=a%20b"
    # the served page the redirect leads to is reached (a login redirect for an anonymous visitor)
    assert (await client.get("/lead")).status_code in (303, 307)
    # /v1 redirects path-only too (it refuses a foreign Host first)
    v1 = await client.post("/v1/chat/completions/", json={})
    assert v1.status_code == 307 and v1.headers["location"] == "/v1/chat/completions"


def test_a_slash_twin_that_would_read_as_another_host_is_not_a_location() -> None:
    """Defensive: were a route to serve ``//evil.com`` (a path parameter that takes slashes), the
    redirect from ``//evil.com/`` would be a scheme-relative URL to another site: none is made."""
    from starlette.routing import Route

    from psychoalign.web.methods import _slash_twin

    routes = [Route("/{rest:path}", lambda request: None)]
    scope = {"type": "http", "method": "GET", "query_string": b"", "root_path": ""}
    assert _slash_twin({**scope, "path": "//evil.com/", "raw_path": b"//evil.com/"}, routes) is None
    assert _slash_twin({**scope, "path": "/\\evil.com/", "raw_path": b"/\\evil.com/"}, routes) is None
    assert _slash_twin({**scope, "path": "/lead/", "raw_path": b"/lead/"}, routes) == "/lead"


async def test_options_and_405_list_every_method_a_path_takes(client: httpx.AsyncClient) -> None:
    # Before: `OPTIONS /login` -> 405 with `Allow: GET` although POST /login is served.
    options = await client.options("/login")
    assert options.status_code == 204 and options.headers["allow"] == "GET, HEAD, POST, OPTIONS"
    put = await client.put("/login")
    assert put.status_code == 405 and put.headers["allow"] == "GET, HEAD, POST"
    assert "script-src 'self'" in options.headers["content-security-policy"]  # outside the security headers
    # a GET-only page: HEAD runs as GET (HeadAsGet), OPTIONS lists both
    head = await client.head("/login")
    assert head.status_code == 200 and head.content == b""
    unknown = await client.options("/no-such-page")
    assert unknown.status_code == 404
