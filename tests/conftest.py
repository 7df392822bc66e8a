from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test sees the developer's keys, config file or data directory."""
    for name in list(os.environ):
        if name.startswith("PSYCHOALIGN_") or name.endswith("_API_KEY"):
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _sse_streams_open() -> None:
    """sse-starlette hooks uvicorn's exit handler and keeps the shutdown flag on a class, process
    wide: once one test stops a server gracefully, every later server's streams would end at once.
    A deployment runs one server per process; a test process runs many, so each test starts clear."""
    import sys

    sse = sys.modules.get("sse_starlette.sse")
    if sse is not None:
        sse.AppStatus.should_exit = False
