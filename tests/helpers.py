"""Small helpers shared by tests."""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from psychoalign.models import ModelSpec
from psychoalign.storage import create_engine_for

#: The PostgreSQL server the ``postgres``-marked tests use.
PG_URL = os.environ.get("PSYCHOALIGN_TEST_PG", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")


def fast_spec(**kw: object) -> ModelSpec:
    """A spec with tiny backoff so retry tests run in milliseconds."""
    base: dict[str, object] = {"backoff_base_s": 0.001, "backoff_max_s": 0.01, "timeout_s": 5.0}
    base.update(kw)
    return ModelSpec.model_validate(base)


def json_keys(value: Any) -> list[str]:
    """Every key of a JSON value, at any depth (in objects inside lists too)."""
    if isinstance(value, dict):
        return [k for key, v in value.items() for k in (key, *json_keys(v))]
    if isinstance(value, list):
        return [k for v in value for k in json_keys(v)]
    return []


@asynccontextmanager
async def pg_schema(prefix: str) -> AsyncIterator[dict[str, Any]]:
    """A fresh schema ``<prefix>_<random>`` on :data:`PG_URL` for one test: yields the
    ``connect_args`` that put a store's connections in it, then drops it with everything in it
    (close the test's stores first)."""
    schema = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine_for(PG_URL)
    async with admin.begin() as conn:
        await conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
    try:
        yield {"server_settings": {"search_path": schema}}
    finally:
        async with admin.begin() as conn:
            await conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        await admin.dispose()
