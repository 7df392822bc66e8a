"""The data folder contract: a missing or malformed benchmark file, or a missing folder, is a one-line error."""

from __future__ import annotations

from pathlib import Path

import pytest

from psychoalign.errors import ConfigError, InputError
from psychoalign.experiments import run_experiment
from psychoalign.experiments.harness.benchmark import find_data_dir
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.store import InMemoryResultStore
from tests.experiments.helpers import settings, spec


async def test_missing_or_malformed_benchmark_files(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "xstest").mkdir(parents=True)
    s = spec(["vanilla"], ["xstest"], 1)
    with pytest.raises(InputError, match=r"xstest_prompts\.csv is missing"):
        await run_experiment(s, settings(tmp_path), store=InMemoryResultStore(), data_dir=data, registry=Registry())
    (data / "xstest" / "xstest_prompts.csv").write_text("id,prompt,type,label\n1,hi,x,safe\n2,there,x,maybe\n")
    with pytest.raises(InputError, match=r"xstest_prompts.csv:3: needs a prompt and label"):
        await run_experiment(s, settings(tmp_path), store=InMemoryResultStore(), data_dir=data, registry=Registry())
    with pytest.raises(ConfigError, match="does not exist"):
        find_data_dir(str(tmp_path / "nowhere"))


def test_every_benchmark_class_describes_itself() -> None:
    """`experiment list` reads ``source`` from the classes, before any is built."""
    from psychoalign.experiments.harness.registry import default_registry

    for name, cls in default_registry().benchmarks.items():
        assert isinstance(cls.source, str) and cls.source, name
