"""The runner: cells (system x benchmark x item), bounded adaptive concurrency, resumable.

Contract of :func:`run_experiment`:

* Every cell is claimed in the result store before it runs (:meth:`ResultStore.claim`), so a
  cell already ``done`` is never run again, and after a crash or ``kill -9`` a rerun of the same
  spec runs only the cells that are not done (failed ones are retried, with ``attempts`` counted).
* A cell that cannot be scored (the system or a judge failed) is stored ``failed`` with the
  reason; it is reported as failed and never counted as a score of zero.
* Concurrency is bounded by the spec and adaptive below that bound (AIMD): an HTTP 429/overload
  seen by any model call halves the limit, and every ``limit`` successful cells raise it by one.
* ``shard=(i, n)`` runs only the cells whose key hashes to ``i`` modulo ``n``: several machines
  can split one experiment over one PostgreSQL store.
* ``repeats`` > 1 runs each item that many times, each repeat a cell of its own (:mod:`.repeats`).
* The run's limits (:class:`.spec.RunLimits`: tokens, cost, time, failed cells) are checked as
  cells finish: once one is reached no new cell starts, the cells in flight finish, the
  cells claimed and not started are given back (:meth:`.store.ResultStore.release_many`), and
  the reason is returned (:attr:`RunSummary.stopped`) and stored in the run's meta (:mod:`.limits`).
* An interrupted run (Ctrl-C cancels its task) writes the cells that finished and gives back
  the claims on the rest, so a resume started at once runs them instead of finding them leased
  for ``lease_s`` seconds; a cell cut off mid-way stored nothing and runs again (:func:`_give_back`).
  A run interrupted once it is stored (before its first cell too) is marked so in its meta
  (``interrupted``: the cells it had stored and the command that resumes it), which
  ``experiment status`` shows; the run that completes on resume clears the mark.
* Per-sample limits (``limits.sample_time_s``, ``limits.sample_tokens``) bound each cell: past
  one the cell is cancelled and stored ``failed`` with ``limit: …`` (counted by ``limits.errors``),
  so a model that never answers costs one failed cell, never the run (:func:`_within_limits`).
* Cells run one at a time when a system's model is the embedded (``local``) model: it serves one
  call at a time, so cells in flight together would only queue for it, and each item's wall time
  would measure the queue, not the system (:func:`serial_models`).
"""

from __future__ import annotations

import asyncio
import functools
import gc
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ...config import Settings
from ...datasets import resolve_data_dir
from ...errors import ConfigError, PsychoAlignError
from ...judges.records import JudgeError
from ...models import ChatModel, Message
from ...traces import TraceStore
from ._flow import AdaptiveLimiter, _GroupCommit, _Silent
from ._identity import _calibrations, _check_identity, _measures_on_held_out, _stored_id
from .benchmark import Benchmark, Item
from .judging import Judges
from .labels import LabelFile, check_labels_apart, read_user_labels
from .limits import Budget
from .metering import CallMeter, ModelPool
from .provenance import (
    calibration_files,
    held_out_labels,
    judge_data_files,
    legacy_identities,
    model_files,
    run_identity,
)
from .registry import Registry, build_benchmark, default_registry
from .repeats import repeat_suffix
from .spec import ExperimentSpec, RunLimits
from .store import CellResult, ResultStore, RunRecord, current_owner
from .systems import CellContext, System, SystemFailedError, SystemReply, SystemSpec, build_system

__all__ = ["plan_cells", "run_experiment"]

_log = logging.getLogger(__name__)
_T = TypeVar("_T")


#: Attempts after which a cell whose judge gave unusable output gives up (``gave_up``).
GIVE_UP_AFTER = 2

#: Cells claimed per store transaction: at most, and at least (unless cells run one at a time).
CLAIM_BATCH = 64
CLAIM_MIN = 32


class RunProgress(Protocol):
    """What a run reports while it goes; the CLI draws it (a progress bar), a caller may log it.

    ``note`` comes before ``start``; ``advance`` once per cell that finished (durable) or that
    another owner holds, with the failures so far; ``stop`` once, whether the run ended or raised."""

    def note(self, message: str) -> None: ...

    def start(self, name: str, total: int) -> None: ...

    def advance(self, failed: int) -> None: ...

    def stop(self) -> None: ...


@dataclass(frozen=True)
class Cell:
    system: SystemSpec
    benchmark: Benchmark
    item: Item
    repeat: str = ""  # :func:`.repeats.repeat_suffix`: empty when items run once

    @functools.cached_property
    def key(self) -> str:
        return f"{self.system.name}|{self.benchmark.name}|{self.item.id}{self.repeat}"


@dataclass
class RunSummary:
    run_id: str
    total: int = 0
    ran: int = 0
    done: int = 0
    failed: int = 0
    gave_up: int = 0
    skipped_done: int = 0
    busy_elsewhere: int = 0
    limiter_cuts: int = 0
    concurrency: int = 0
    wall_s: float = 0.0
    errors: list[str] = field(default_factory=list)
    stopped: str | None = None  # the limit that stopped the run early, in one line


def _llm_tiers(benchmarks: dict[str, Benchmark], judges: Judges) -> dict[str, float]:
    """The literature suites' LLM judge tiers this run uses (``auto`` resolved against the judge
    model), each with its success threshold, so each gets its own held-out calibration."""
    out: dict[str, float] = {}
    for b in benchmarks.values():
        tier_of = getattr(b, "tier", None)
        if getattr(b, "own_judge", None) is None or tier_of is None:
            continue
        tier = str(tier_of(judges))
        if tier in ("harmbench", "strongreject"):
            out[tier] = float(getattr(getattr(b, "opts", None), "success_threshold", 0.5))
    return out


def _first_leaf(group: BaseExceptionGroup[BaseException]) -> BaseException:
    first = group.exceptions[0]
    return _first_leaf(first) if isinstance(first, BaseExceptionGroup) else first


def _shard_of(key: str, n: int) -> int:
    return int(hashlib.sha256(key.encode()).hexdigest()[:8], 16) % n


def plan_cells(
    spec: ExperimentSpec, data_dir: Path, registry: Registry, shard: tuple[int, int] = (0, 1)
) -> tuple[list[Cell], dict[str, Benchmark]]:
    """Every cell of ``spec`` in this shard, interleaved by item so partial runs cover all systems."""
    cells, benchmarks, _, _ = _plan(spec, data_dir, registry, shard)
    return cells, benchmarks


def _plan(
    spec: ExperimentSpec, data_dir: Path, registry: Registry, shard: tuple[int, int]
) -> tuple[list[Cell], dict[str, Benchmark], dict[str, list[Item]], dict[str, list[Item]]]:
    """:func:`plan_cells`, every benchmark's sampled items (all shards': the run's identity) and
    every benchmark's items as loaded (what a judge's calibration file must keep apart from)."""
    benchmarks: dict[str, Benchmark] = {}
    sampled: dict[str, list[Item]] = {}
    loaded: dict[str, list[Item]] = {}
    cells: list[Cell] = []
    for bspec in spec.benchmarks:
        bench = build_benchmark(bspec.name, bspec.options, registry.benchmarks)
        benchmarks[bspec.name] = bench
        loaded[bspec.name] = bench.load(data_dir)
        items = bench.sample(loaded[bspec.name], spec.n_for(bspec), spec.seed)
        sampled[bspec.name] = items
        for item in items:
            for repeat in range(1, spec.repeats + 1):
                suffix = repeat_suffix(repeat, spec.repeats)
                for sspec in spec.systems:
                    cells.append(Cell(sspec, bench, item, suffix))
    i, n = shard
    if n > 1:
        cells = [c for c in cells if _shard_of(c.key, n) == i]
    return cells, benchmarks, sampled, loaded


class SampleLimitError(Exception):
    """A cell went past a per-sample limit (its message: ``limit: …``, naming it and the flag)."""


async def _within_limits(work: Awaitable[_T], meter: CallMeter, limits: RunLimits) -> _T:
    """``work`` (one cell), cut off once it runs ``limits.sample_time_s`` seconds or its system
    calls use more than ``limits.sample_tokens`` tokens: cancelled, and :class:`SampleLimitError`
    raised, so a cell whose model never answers ends as a failed cell instead of hanging the run."""
    if limits.sample_time_s is None and limits.sample_tokens is None:
        return await work
    task = asyncio.ensure_future(work)
    over: list[str] = []
    cap = limits.sample_tokens
    if cap is not None:

        def on_call(m: CallMeter) -> None:
            used = m.prompt_tokens + m.completion_tokens
            if used > cap and not over:
                over.append(f"limit: tokens: the cell's model calls used {used:,} tokens of {cap:,} (--sample-tokens)")
                task.cancel()

        meter.on_call = on_call
    try:
        return await asyncio.wait_for(task, limits.sample_time_s)
    except TimeoutError:
        raise SampleLimitError(
            f"limit: time: the cell ran past {limits.sample_time_s:g} s and was cut off (--sample-time)"
        ) from None
    except asyncio.CancelledError:
        current = asyncio.current_task()
        if not over or (current is not None and current.cancelling()):
            raise  # the run itself is being cancelled
        raise SampleLimitError(over[0]) from None
    finally:
        meter.on_call = None


def serial_models(systems: Sequence[System], pool: ModelPool) -> list[str]:
    """Labels of the models the systems call that serve one call at a time in this process (the
    embedded ``local`` backend: one llama.cpp context behind a lock)."""
    out: list[str] = []
    for system in systems:
        roles = getattr(system, "model_roles", None)
        for role in roles() if callable(roles) else getattr(system.info, "roles", ()):
            extra = system.spec.roles.get(role)
            spec = pool.spec(role, dict(extra) if extra else None)
            if spec.backend != "local":
                continue
            label = pool.label(role) if not extra else spec.label()
            if spec.model is None and label.endswith(":default"):
                from ...models.local import DEFAULT_MODEL

                label = f"local:{DEFAULT_MODEL}"
            if label not in out:
                out.append(label)
    return out


async def _give_back(store: ResultStore, run_id: str, owner: str, writer: _GroupCommit, held: set[str]) -> None:
    """After an interrupted run: write the cells that finished (they count, once), then give
    back the claims on the rest (:meth:`.store.ResultStore.release_many`), so a resume takes them
    at once instead of waiting out their leases. A cell cut off mid-way stored nothing and runs
    again. Best effort: a store that fails here leaves the leases to lapse, as after ``kill -9``."""
    try:
        await writer.flush()
    except Exception as exc:  # the store failing is what stopped the run: its cells run again
        _log.warning("finished cells of run %s not written after it stopped: %s", run_id, exc)
    if not held:
        return
    try:
        await store.release_many(run_id, sorted(held), owner)
    except Exception as exc:
        _log.warning("cells of run %s not given back (their leases lapse in %.0f s): %s", run_id, store.lease_s, exc)


async def _heartbeat(store: ResultStore, run_id: str, owner: str) -> None:
    """Renew this runner's leases every third of their length while its cells run (cancelled at
    the end), so another runner reclaims them only once this one has stopped. A failed renewal is
    retried at the next beat: a lease outlives two missed beats."""
    while True:
        await asyncio.sleep(store.lease_s / 3)
        try:
            await store.heartbeat(run_id, owner)
        except Exception as exc:
            _log.warning("lease heartbeat of run %s failed (retried in %.0f s): %s", run_id, store.lease_s / 3, exc)


async def run_experiment(
    spec: ExperimentSpec,
    settings: Settings,
    *,
    store: ResultStore,
    trace_store: TraceStore | None = None,
    models: dict[str, ChatModel] | None = None,
    registry: Registry | None = None,
    data_dir: Path | None = None,
    shard: tuple[int, int] = (0, 1),
    reclaim: bool = False,
    progress: RunProgress | None = None,
    max_cells: int | None = None,
    follow: bool = False,
    new_run: bool = False,
    clock: Callable[[], float] = time.monotonic,
    resume_command: str | None = None,
) -> RunSummary:
    """Run (or resume) ``spec``. ``models`` overrides role models (scripted tests, benchmarks);
    ``progress`` is told how the run goes; ``max_cells`` stops after that many cells have run
    (tests of resumption). ``follow``: after its own cells, wait for the cells other runners hold
    and take over each one whose lease lapses, so the run ends complete although a runner died.

    The run's identity (:mod:`.provenance`: resolved models, judges, data, package) is stored in
    its meta; resuming a run whose stored identity differs raises :class:`ConfigError` naming what
    changed. ``new_run`` runs under ``<spec run id>-<8 hex of the identity>`` instead: a run beside
    the spec's first one, resumed by the same identity.

    ``clock`` is what the time limit of ``spec.limits`` reads (tests inject one).

    Interrupted (its task cancelled: Ctrl-C, or SIGTERM in the CLI) once the run is stored, even
    before its first cell, it records ``interrupted`` in the run's meta: the cells stored by then
    and ``resume_command`` (the command that resumes it, shown by ``experiment status``)."""
    opened: list[str] = []
    try:
        return await _run_experiment(
            spec,
            settings,
            store=store,
            trace_store=trace_store,
            models=models,
            registry=registry,
            data_dir=data_dir,
            shard=shard,
            reclaim=reclaim,
            progress=progress,
            max_cells=max_cells,
            follow=follow,
            new_run=new_run,
            clock=clock,
            opened=opened,
        )
    except (asyncio.CancelledError, KeyboardInterrupt):
        if opened:
            await _mark_interrupted(store, opened[0], resume_command)
        raise


async def _mark_interrupted(store: ResultStore, run_id: str, command: str | None) -> None:
    """Record in ``run_id``'s meta that it was interrupted, with how many cells it had stored and
    the command that resumes it. Best effort: the interruption is what the caller reports."""
    try:
        stored = await store.cells(run_id)
        done = sum(c.status == "done" for c in stored)
        await store.update_meta(run_id, {"interrupted": {"cells": len(stored), "done": done, "command": command}})
    except Exception:  # the store itself may be why the run stopped
        _log.warning("could not mark run %s as interrupted", run_id, exc_info=True)


async def _run_experiment(
    spec: ExperimentSpec,
    settings: Settings,
    *,
    store: ResultStore,
    trace_store: TraceStore | None = None,
    models: dict[str, ChatModel] | None = None,
    registry: Registry | None = None,
    data_dir: Path | None = None,
    shard: tuple[int, int] = (0, 1),
    reclaim: bool = False,
    progress: RunProgress | None = None,
    max_cells: int | None = None,
    follow: bool = False,
    new_run: bool = False,
    clock: Callable[[], float] = time.monotonic,
    opened: list[str],
) -> RunSummary:
    """:func:`run_experiment`'s body; ``opened`` gets the run's id once it is stored."""
    registry = registry or default_registry()
    # Not required to exist: benchmarks that ship their items (dilemmas) run without it; the
    # others name the missing file and how to get it.
    data_dir = data_dir or resolve_data_dir(configured=settings.experiments.data_dir).path
    if not (0 <= shard[0] < shard[1]):
        raise ConfigError(f"invalid shard {shard[0]}/{shard[1]}", hint="use --shard i/n with 0 <= i < n")
    started = time.perf_counter()
    systems: dict[str, System] = {s.name: build_system(s, settings, registry.systems) for s in spec.systems}
    cells, benchmarks, sampled, loaded = _plan(spec, data_dir, registry, shard)
    pool = ModelPool(settings, models)
    judges: Judges | None = None
    try:
        # the user's calibration files, read once: hashed into the identity, measured at the end
        labels: dict[str, LabelFile] = {name: read_user_labels(path, name) for name, path in spec.judge.labels.items()}
        for label_file in labels.values():  # a judge validated on the items it judges: refused
            check_labels_apart(label_file, {name: (benchmarks[name].needs, items) for name, items in loaded.items()})
        identity = run_identity(
            list(systems.values()),
            pool,
            spec.judge,
            sampled,
            repeats=spec.repeats,
            reducer=spec.reducer,
            labels=labels,
            held_out=held_out_labels(data_dir) if _measures_on_held_out(spec, benchmarks) else None,
            judge_files=judge_data_files(data_dir, {need for b in benchmarks.values() for need in b.needs}),
            calibration=calibration_files(data_dir, _calibrations(spec, benchmarks)),
        )
        legacy = legacy_identities(identity, list(systems.values()))
        run_id = await _stored_id(store, spec, identity, legacy, new_run)
        files = model_files(list(systems.values()), pool, spec.judge)
        existing = await store.get_run(run_id)
        if existing is not None and existing.id == run_id:  # not a run whose id it merely begins
            await _check_identity(store, existing, identity, legacy, data_dir, files)
        judge_meter = CallMeter()
        cache_path = Path(settings.home) / "cache" / "judges.sqlite"
        judges = Judges(spec.judge, pool, data_dir, cache_path=cache_path, meter=judge_meter, labels=labels)
        judges.prepare({need for b in benchmarks.values() for need in b.needs})
        # Stored only now that everything the run needs is built: a run that cannot start leaves
        # no empty run behind (`experiment status` listed one per failed --new-run).
        record = RunRecord(id=run_id, name=spec.name, spec=spec.model_dump(mode="json"), meta={"identity": identity})
        run = await store.open_run(record)
        opened.append(run.id)
        if existing is None or existing.id != run_id:  # another runner may have stored it meanwhile
            await _check_identity(store, run, identity, legacy, data_dir, files)
    except BaseException:
        if judges is not None:
            judges.close()
        await pool.aclose()
        raise
    summary = RunSummary(run_id=run.id, total=len(cells))
    try:
        stored_cells = await store.cells(run.id)
    except BaseException:  # interrupted (or the store failed) before the first cell
        judges.close()
        await pool.aclose()
        raise
    # done, or given up (a retry cannot change it): neither runs again
    done = {c.key for c in stored_cells if c.status in ("done", "gave_up")}
    todo = [c for c in cells if c.key not in done]
    summary.skipped_done = len(cells) - len(todo)
    if max_cells is not None:
        todo = todo[:max_cells]

    budget = Budget.of_run(
        spec.limits,
        total_cells=len(cells),
        stored=stored_cells,
        meta=run.meta,
        clock=clock,
        judge=judge_meter.summary,
    )
    del stored_cells
    halt = asyncio.Event()  # a limit was reached: start no new cell
    left = 0  # cells of this invocation not run because a limit was reached
    unstarted: list[str] = []  # of those, the ones claimed here: given back at the end
    held: set[str] = set()  # claimed here and not yet durable: given back if the run is interrupted

    def check_limits() -> bool:
        if summary.stopped is None and (why := budget.reached()) is not None:
            summary.stopped = why
            halt.set()
        return halt.is_set()

    serial = serial_models(list(systems.values()), pool)
    concurrency = 1 if serial else spec.concurrency
    summary.concurrency = concurrency
    shown: RunProgress = progress if progress is not None else _Silent()
    if serial and spec.concurrency > 1:
        shown.note(
            f"{', '.join(serial)} serves one call at a time: cells run one at a time "
            "(wall time per item is then the system's own, not time queued for the model)"
        )
    limiter = AdaptiveLimiter(concurrency)
    owner = current_owner()
    # Claimed cells wait here for a worker; the bound keeps claims close to the work (a crash
    # leaves at most this many cells 'running', and they are reclaimed as the owner is dead).
    claimed: asyncio.Queue[tuple[Cell, int] | None] = asyncio.Queue(maxsize=2 * concurrency)
    workers = min(concurrency, max(1, len(todo)))

    def row(cell: Cell, **done: Any) -> CellResult:
        """The cell's row: its identity (blank, as claimed), plus ``done``'s fields once it has run."""
        return CellResult(
            run_id=run.id,
            key=cell.key,
            system=cell.system.name,
            benchmark=cell.benchmark.name,
            item_id=cell.item.id,
            owner=owner,
            **done,
        )

    # A claim is one transaction (~0.6-0.9 ms of client CPU on SQLite however many cells it holds):
    # claim at least CLAIM_MIN cells at once, so a run at low concurrency does not pay it per cell.
    # On a serial model (cells take seconds) claim one at a time: 'running' then means running.
    batch_size = 1 if serial else min(CLAIM_BATCH, max(concurrency, CLAIM_MIN))

    async def producer() -> None:
        nonlocal left
        busy: list[Cell] = []  # held by other runners when asked
        for start in range(0, len(todo), batch_size):
            if check_limits():
                left += len(todo) - start
                break
            batch = todo[start : start + batch_size]
            got = await store.claim_many(run.id, [row(c) for c in batch], owner, reclaim=reclaim)
            held.update(got)
            for c in batch:
                if c.key in got:
                    await claimed.put((c, got[c.key]))
                else:
                    busy.append(c)
        if follow and not halt.is_set():
            await follow_others(busy)
        if follow and halt.is_set():
            left += len(busy)
        summary.busy_elsewhere += len(busy)
        for _ in busy:
            shown.advance(summary.failed)
        for _ in range(workers):
            await claimed.put(None)

    async def follow_others(busy: list[Cell]) -> None:
        """Poll the cells other runners hold (every third of a lease) until each is done, or
        lapsed and claimed here: a live runner's cell is never taken, a dead one's is finished."""
        while busy and not check_limits():
            await asyncio.sleep(store.lease_s / 3)
            status = {c.key: c.status for c in await store.cells(run.id)}
            finished = [c for c in busy if status.get(c.key) == "done"]
            summary.skipped_done += len(finished)  # done by the runner that held it
            for _ in finished:
                shown.advance(summary.failed)
            busy[:] = [c for c in busy if status.get(c.key) != "done"]
            got = await store.claim_many(run.id, [row(c) for c in busy], owner) if busy else {}
            held.update(got)
            for c in busy:
                if c.key in got:
                    await claimed.put((c, got[c.key]))
            busy[:] = [c for c in busy if c.key not in got]

    def durable(record: CellResult) -> None:
        held.discard(record.key)
        summary.ran += 1
        if record.status == "done":
            summary.done += 1
        else:
            summary.failed += 1
            summary.gave_up += record.status == "gave_up"
            if len(summary.errors) < 20:
                summary.errors.append(f"{record.key}: {record.error}")
        shown.advance(summary.failed)

    writer = _GroupCommit(store, durable, max_pending=concurrency)

    async def one(cell: Cell, attempts: int) -> bool:
        started_at = datetime.now(UTC)
        meter = CallMeter(on_overload=limiter.overload)
        ctx = CellContext(pool, meter, settings, trace_store, metadata={"run_id": run.id, "cell": cell.key})
        system = systems[cell.system.name]
        system_s = 0.0
        trace_ids: list[str] = []

        async def respond(messages: Sequence[Message]) -> SystemReply:
            nonlocal system_s
            t0 = time.perf_counter()
            try:
                reply = await system.respond(messages, ctx)
            except SystemFailedError as exc:
                if exc.trace_id:
                    trace_ids.append(exc.trace_id)
                raise
            finally:
                system_s += time.perf_counter() - t0
            return reply

        # The cell's record is built once, when it is finished (one validation, no copies).
        result: dict[str, Any]
        try:
            outcome = await _within_limits(cell.benchmark.run(cell.item, respond, judges), meter, spec.limits)
            result = {
                "status": "done",
                "metrics": outcome.metrics,
                "responses": outcome.responses,
                "judges": outcome.judges,
                "trace_ids": outcome.trace_ids,
                "details": outcome.details,
            }
        except SampleLimitError as exc:
            result = {"status": "failed", "error": str(exc), "trace_ids": trace_ids}
        except JudgeError as exc:
            # A judge's unusable output comes back the same on retry (temperature 0, cached): one
            # retry, then the cell gives up instead of being retried on every resume.
            if attempts >= GIVE_UP_AFTER:
                error = f"{exc} (gave up after {attempts} attempts: the judge answers this item the same way)"
                result = {"status": "gave_up", "error": error, "trace_ids": trace_ids}
            else:
                result = {"status": "failed", "error": str(exc), "trace_ids": trace_ids}
        except PsychoAlignError as exc:
            result = {"status": "failed", "error": str(exc), "trace_ids": trace_ids}
        except Exception as exc:  # a bug in a system or judge: record it, keep the run going
            _log.exception("cell %s failed unexpectedly", cell.key)
            result = {"status": "failed", "error": f"{type(exc).__name__}: {exc}", "trace_ids": trace_ids}
        record = row(
            cell,
            attempts=attempts,
            cost={**meter.summary(), "system_s": round(system_s, 6)},
            wall_s=system_s,
            started_at=started_at,
            finished_at=datetime.now(UTC),
            **result,
        )
        budget.add(record)  # spent when it ran, stored or not: the next cell sees the limit
        check_limits()
        await writer.submit(record)
        return record.status == "done"

    async def worker() -> None:
        nonlocal left
        while (job := await claimed.get()) is not None:
            if check_limits():
                left += 1
                unstarted.append(job[0].key)
                continue
            await limiter.acquire()
            ok = False
            try:
                ok = await one(*job)
            finally:
                await limiter.release(ok)

    # Everything alive before the cells run (modules, data, the plan) outlives the run: keep it out
    # of the garbage collector's full collections, which otherwise rescan it every few thousand
    # cells (~50 us of CPU per cell with the heavy libraries loaded). Undone when the run ends.
    gc.freeze()
    try:
        shown.start(spec.name, len(todo))
        beat = asyncio.create_task(_heartbeat(store, run.id, owner))
        try:
            try:
                async with asyncio.TaskGroup() as tg:
                    tg.create_task(producer())
                    for _ in range(workers):
                        tg.create_task(worker())
            except BaseExceptionGroup as group:  # a store failure stops the run: raise it as it is
                raise _first_leaf(group) from None
            await writer.flush()
            if unstarted:  # claimed, never run: another runner (or a rerun) takes them at once
                await store.release_many(run.id, unstarted, owner)
        except BaseException:  # Ctrl-C (the task cancelled), or a failure that stops the run
            await _give_back(store, run.id, owner, writer, held)
            raise
        finally:
            beat.cancel()
            shown.stop()
        stored = await store.get_run(run.id)
        meta = stored.meta if stored is not None else {}
        updates: dict[str, Any] = {}
        if any("refusal" in b.needs for b in benchmarks.values()) and meta.get("refusal_calibration") is None:
            from .calibration import refusal_agreement

            agreement = await refusal_agreement(judges, data_dir, spec.judge.calibration_n, spec.seed)
            updates["refusal_calibration"] = agreement
        if "choice" in judges.built() and judges.choice().model is not None and meta.get("choice_calibration") is None:
            from .calibration import CHOICE_CALIBRATION_N, choice_agreement

            n = min(CHOICE_CALIBRATION_N, spec.judge.calibration_n)
            updates["choice_calibration"] = await choice_agreement(judges, data_dir, n, spec.seed)
        if "mtbench" in judges.built() and meta.get("mtbench_calibration") is None:
            from .calibration import RATING_CALIBRATION_N, mtbench_discrimination

            n = min(RATING_CALIBRATION_N, spec.judge.calibration_n)
            result = await mtbench_discrimination(judges, data_dir, n, spec.seed)
            updates["mtbench_calibration"] = result
        if "quality" in judges.built() and meta.get("quality_calibration") is None:
            from .calibration import RATING_CALIBRATION_N, quality_discrimination

            n = min(RATING_CALIBRATION_N, spec.judge.calibration_n)
            updates["quality_calibration"] = await quality_discrimination(judges, n)
        harm_needed = spec.judge.harm_on and any("harm" in b.needs for b in benchmarks.values())
        if harm_needed and meta.get("harm_calibration") is None:
            from .calibration import harm_agreement

            harm = await harm_agreement(judges, data_dir, spec.judge.calibration_n, spec.seed)
            updates["harm_calibration"] = harm
        for tier, threshold in _llm_tiers(benchmarks, judges).items():
            if meta.get(f"{tier}_calibration") is None:
                from .calibration import literature_agreement

                n = spec.judge.calibration_n
                got = await literature_agreement(judges, tier, data_dir, n, spec.seed, threshold)
                updates[f"{tier}_calibration"] = got
        previous = meta.get("judge_cost") or {}
        total = {k: float(previous.get(k, 0)) + float(v) for k, v in judge_meter.summary().items()}
        updates["judge_cost"] = total
        updates["data_dir"] = str(data_dir)
        if judges.model_info is not None:
            updates["judge_model"] = judges.model_info
        updates["concurrency"] = {"spec": spec.concurrency, "effective": concurrency, "serial_models": serial}
        if not left:
            summary.stopped = None  # a limit reached by the last cell stopped nothing
        if meta.get("interrupted") is not None:
            updates["interrupted"] = None  # resumed and run to its end
        updates.update(budget.meta(summary.stopped))
        revisions = list(meta.get("revisions") or [])
        if identity["revision"] not in revisions:  # every code revision that computed cells of the run
            updates["revisions"] = [*revisions, identity["revision"]]
        await store.update_meta(run.id, updates)  # one transaction for all of them
    finally:
        gc.unfreeze()
        judges.close()
        await pool.aclose()
    summary.limiter_cuts = limiter.cuts
    summary.wall_s = time.perf_counter() - started
    return summary
