"""`psychoalign experiment view RUN` (the viewer on loopback) and `experiment cells --format parquet`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.cli.test_main import cli
from tests.web.test_experiments import EVIL_KEY, RUN, seed


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    url = f"sqlite+aiosqlite:///{tmp_path / 'store.db'}"
    asyncio.run(seed(url, plain=3))
    return url


def test_view_serves_the_run_on_loopback_until_stopped(store_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "PSYCHOALIGN_HOME": str(tmp_path / "home")}
    command = [sys.executable, "-m", "psychoalign", "experiment", "view", RUN[:8], "--store", store_url, "--port", "0"]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        banner = proc.stderr.readline()  # printed once the socket listens: requests queue until uvicorn runs
        found = re.search(r"(http://127\.0\.0\.1:\d+)/experiments/(\S+)", banner)
        assert found is not None, banner
        assert found.group(2) == RUN  # the prefix resolved to the run
        page = httpx.get(f"{found.group(1)}/experiments/{RUN}", timeout=60)
        assert page.status_code == 200 and "5 of 5 cells" in page.text
        assert "default-src 'none'" in page.headers["content-security-policy"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_view_refuses_other_addresses_and_unknown_runs(store_url: str) -> None:
    wide = cli("experiment", "view", RUN, "--store", store_url, "--host", "0.0.0.0")
    assert wide.returncode == 2 and "loopback only, not 0.0.0.0" in wide.stderr and "Traceback" not in wide.stderr
    missing = cli("experiment", "view", "nope", "--store", store_url)
    assert missing.returncode == 2 and "no run 'nope'" in missing.stderr and "Traceback" not in missing.stderr


def test_parquet_round_trips_what_jsonl_exports(store_url: str, tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet", reason="pyarrow is not installed (the parquet extra)")
    out = tmp_path / "cells.parquet"
    res = cli("experiment", "cells", RUN, "--store", store_url, "--format", "parquet", "-o", str(out))
    assert res.returncode == 0, res.stderr
    jsonl = cli("experiment", "cells", RUN, "--store", store_url, "--format", "jsonl")
    records = [json.loads(line) for line in jsonl.stdout.splitlines()]
    table = pq.read_table(str(out))
    assert table.num_rows == len(records) == 5
    assert str(table.schema.field("metrics.attack_success").type) == "double"
    assert str(table.schema.field("responses").type) == "list<element: string>"
    back = table.to_pylist()
    for row, record in zip(back, records, strict=True):
        for key in ("system", "benchmark", "item_id", "status", "attempts", "category", "wall_s", "error"):
            assert row[key] == record[key], key
        assert row["responses"] == record["responses"] and row["trace_ids"] == record["trace_ids"]
        assert json.loads(row["judges"]) == record["judges"] and json.loads(row["details"]) == record["details"]
        assert row["metrics.attack_success"] == record["metrics"].get("attack_success")
        assert row["started_at"].isoformat() == record["started_at"]
    evil = next(r for r in back if f"{r['system']}|{r['benchmark']}|{r['item_id']}" == EVIL_KEY)
    assert json.loads(evil["judges"])[0]["prompt"][0]["content"].startswith("Judge this <script>")
    chosen = cli(
        "experiment", "cells", RUN, "--store", store_url, "-f", "parquet", "--system", "vanilla", "-o", str(out)
    )
    assert chosen.returncode == 0 and pq.read_table(str(out)).num_rows == 3


def test_parquet_without_pyarrow_is_one_line_naming_the_extra(store_url: str, tmp_path: Path) -> None:
    shadow = tmp_path / "shadow" / "pyarrow"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('pyarrow is hidden for this test')\n")
    path = os.pathsep.join(p for p in (str(shadow.parent), os.environ.get("PYTHONPATH", "")) if p)
    out = tmp_path / "cells.parquet"
    res = cli(
        "experiment", "cells", RUN, "--store", store_url, "-f", "parquet", "-o", str(out), env={"PYTHONPATH": path}
    )
    assert res.returncode == 2 and not out.exists()
    assert "--format parquet needs pyarrow" in res.stderr and "pip install 'psychoalign[parquet]'" in res.stderr
    assert "Traceback" not in res.stderr
