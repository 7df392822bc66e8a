"""Loading ahead of the first call: each spec's backend loads in a thread of its own, a failure is
left for the first call, `negotiate` preloads the EVALUATOR's and the DRIVE's models, and the
embedded model's default threads count this process's own work as idle."""

from __future__ import annotations

import io
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest

from psychoalign.cli import negotiate as negotiate_cli
from psychoalign.config import Settings
from psychoalign.errors import BackendUnavailableError
from psychoalign.models import Backend, ChatRequest, Completion, ModelSpec, local, registry
from psychoalign.models import classifier as classifier_module
from psychoalign.models.classifier import ClassifierBackend
from psychoalign.models.local import LocalBackend


class Recording(Backend):
    name: ClassVar[str] = "recording"
    loaded: ClassVar[list[tuple[str | None, str]]] = []
    fail: ClassVar[bool] = False

    async def complete(self, request: ChatRequest) -> Completion:
        raise NotImplementedError

    def preload(self) -> None:
        if self.fail:
            raise BackendUnavailableError("weights missing")
        self.loaded.append((self.spec.model, threading.current_thread().name))


@pytest.fixture
def recording(monkeypatch: pytest.MonkeyPatch) -> type[Recording]:
    Recording.loaded, Recording.fail = [], False
    monkeypatch.setattr(registry, "backend_class", lambda name: Recording)
    return Recording


def test_each_spec_loads_in_a_thread_of_its_own(recording: type[Recording]) -> None:
    specs = [ModelSpec(backend="scripted", model="a"), ModelSpec(backend="scripted", model="b")]
    threads = registry.preload(specs)
    for thread in threads:
        thread.join()
    assert sorted(recording.loaded) == [("a", "preload-scripted"), ("b", "preload-scripted")]
    assert not any(thread.daemon for thread in threads)  # the process never exits in mid-load


def test_a_failed_preload_is_left_for_the_first_call(
    recording: type[Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    recording.fail = True
    escaped: list[Any] = []
    monkeypatch.setattr(threading, "excepthook", escaped.append)
    for thread in registry.preload([ModelSpec(backend="scripted")]):
        thread.join()
    assert escaped == [] and recording.loaded == []


def test_the_classifier_and_the_embedded_model_preload_what_their_first_call_loads(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    sentinel = object()
    monkeypatch.setattr(classifier_module, "load_classifier", lambda path=None: sentinel)
    backend = ClassifierBackend(ModelSpec(backend="classifier"))
    backend.preload()
    assert backend.classifier is sentinel
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"GGUF")
    loads: list[tuple[Path, int, int | None]] = []
    monkeypatch.setattr(local, "_load", lambda path, n_ctx, n_threads: loads.append((path, n_ctx, n_threads)))
    spec = ModelSpec(backend="local", model=str(gguf))
    LocalBackend(spec).preload()
    assert loads == [(gguf, spec.n_ctx, spec.n_threads)]  # the key the first call looks up


def test_negotiate_preloads_the_evaluator_and_the_drive_unless_the_agents_are_remote(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[list[ModelSpec]] = []
    monkeypatch.setattr(negotiate_cli, "preload", asked.append)
    settings = Settings()
    negotiate_cli._preload_first_roles(settings)
    assert asked == [[settings.model_spec("evaluator"), settings.model_spec("drive")]]
    assert [spec.backend for spec in asked[0]] == ["classifier", "local"]  # the embedded default
    remote = Settings.model_validate(
        {"a2a": {"urls": {role: f"http://127.0.0.1:1/{role}" for role in ("drive", "evaluator", "mediator")}}}
    )
    negotiate_cli._preload_first_roles(remote)
    assert len(asked) == 1


def _proc(monkeypatch: pytest.MonkeyPatch, stat: list[str], own: list[str]) -> None:
    """Successive contents of /proc/stat and /proc/self/stat, one per read."""
    reads = {"/proc/stat": iter(stat), "/proc/self/stat": iter(own)}
    monkeypatch.setattr(local, "open", lambda path, **kw: io.StringIO(next(reads[path])), raising=False)
    monkeypatch.setattr(local.time, "sleep", lambda seconds: None)
    monkeypatch.setattr(local.os, "cpu_count", lambda: 2)


def _self_stat(cpu_ticks: int) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime …
    return f"4242 (python 3 (x)) R 1 1 1 0 -1 0 0 0 0 0 {cpu_ticks} 0 0 0 20 0"


def test_this_process_s_own_work_counts_as_idle_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    # Over the window both cores were busy (100 ticks, none idle); half of them were this process.
    _proc(
        monkeypatch,
        ["cpu  100 0 100 800 0 0 0 0 0 0\n", "cpu  200 0 100 800 0 0 0 0 0 0\n"],
        [_self_stat(10), _self_stat(60)],
    )
    assert local._idle_cores() == 1.0


def test_other_processes_work_takes_cores_away(monkeypatch: pytest.MonkeyPatch) -> None:
    _proc(
        monkeypatch,
        ["cpu  100 0 100 800 0 0 0 0 0 0\n", "cpu  200 0 100 800 0 0 0 0 0 0\n"],
        [_self_stat(10), _self_stat(10)],
    )
    assert local._idle_cores() == 0.0
