"""The lab every test here runs against: ``lab`` is the served app and its :class:`StarLab` on a
fresh SQLite store under ``tmp_path``, closed after the test.

A test module tunes it with two module attributes:

* ``LAB_STORES = ("sqlite", "postgres")``: each test runs once per store (PostgreSQL in a schema
  of its own, marked ``postgres``);
* ``LAB_SETTINGS``: the ``[lab]`` settings (a :class:`~psychoalign.config.LabSettings`) instead of
  the defaults.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from fastapi import FastAPI

from psychoalign.web.star import StarLab
from tests.helpers import PG_URL, pg_schema
from tests.weblab import lab_app, lab_settings


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    stores: tuple[str, ...] = getattr(metafunc.module, "LAB_STORES", ("sqlite",))
    if "lab" in metafunc.fixturenames and stores != ("sqlite",):
        params = [pytest.param(s, marks=pytest.mark.postgres) if s == "postgres" else s for s in stores]
        metafunc.parametrize("lab", params, indirect=True)


@pytest.fixture
async def lab(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[FastAPI, StarLab]]:
    settings = lab_settings(tmp_path / "home")
    own = getattr(request.module, "LAB_SETTINGS", None)
    if own is not None:
        settings = settings.model_copy(update={"lab": own})
    if getattr(request, "param", "sqlite") == "sqlite":
        app, star = lab_app(settings)
        yield app, star
        await star.close()
        return
    async with pg_schema("lab") as connect_args:
        app, star = lab_app(settings, url=PG_URL, connect_args=connect_args)
        try:
            yield app, star
        finally:
            await star.close()
