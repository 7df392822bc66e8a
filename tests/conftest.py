from __future__ import annotations

import os
from pathlib import Path

import pytest

# The a2a-sdk package, imported before any bench script a test loads puts bench/ (which holds a
# bench/a2a.py) on sys.path: whichever order a subset of the suite is collected in, `a2a` is the SDK.
import a2a  # noqa: F401

ROOT = Path(__file__).resolve().parent.parent
#: The user-facing docs, whose commands and examples tests/test_docs.py runs and
#: tests/test_doc_commands.py checks against the CLI.
USER_DOCS = [
    ROOT / "README.md",
    ROOT / "CONTRIBUTING.md",
    *sorted((ROOT / "docs").glob("*.md")),
    ROOT / "examples" / "README.md",
    ROOT / "src" / "psychoalign" / "models" / "classifier_data" / "MODEL_CARD.md",
]
#: The public evaluation data the dataset tests read (never copied into the repo): read once, at
#: collection, before any test clears the PSYCHOALIGN_ variables. $PSYCHOALIGN_DATA_DIR, else
#: ../shared/data beside the checkout (the README's "Data" section).
SHARED_DATA = Path(os.environ.get("PSYCHOALIGN_DATA_DIR") or ROOT.parent / "shared" / "data")
#: CI has the data: PSYCHOALIGN_REQUIRE_DATA=1 turns a missing dataset into a failure, not a skip.
REQUIRE_DATA = os.environ.get("PSYCHOALIGN_REQUIRE_DATA") == "1"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "needs_data(*names): reads these dataset folders of the evaluation data (none named: the data "
        "directory as a whole); skipped when one is absent, a failure under PSYCHOALIGN_REQUIRE_DATA=1",
    )


def missing_data(*names: str) -> list[str]:
    """The dataset folders among ``names`` (none: the data directory itself) that are absent."""
    wanted = [SHARED_DATA / name for name in names] or [SHARED_DATA]
    return sorted(str(path.relative_to(SHARED_DATA)) if names else str(path) for path in wanted if not path.is_dir())


def pytest_runtest_setup(item: pytest.Item) -> None:
    """Dataset tests skip, all with the same reason, when their data is not there."""
    marks = list(item.iter_markers("needs_data"))
    if not marks:
        return
    missing = sorted({m for mark in marks for m in missing_data(*mark.args)})
    if not missing:
        return
    if REQUIRE_DATA:
        pytest.fail(f"PSYCHOALIGN_REQUIRE_DATA=1 but the evaluation data lacks {', '.join(missing)} ({SHARED_DATA})")
    pytest.skip(f"evaluation data not found at {SHARED_DATA} (README, Data: psychoalign data fetch)")


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
