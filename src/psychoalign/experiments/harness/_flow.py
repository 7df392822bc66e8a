"""How cells flow through a run: results committed in groups, concurrency that adapts to the
endpoint's rate limits, and the silent progress of a run that shows none."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from .store import CellResult, ResultStore


class _Silent:
    """No progress shown (no :class:`~psychoalign.experiments.harness.runner.RunProgress` given)."""

    def note(self, message: str) -> None:
        pass

    def start(self, name: str, total: int) -> None:
        pass

    def advance(self, failed: int) -> None:
        pass

    def stop(self) -> None:
        pass


class _GroupCommit:
    """Writes finished cells durably, several per transaction when they finish together.

    A cell counts as done (summary, progress) only once it is durable (``on_durable``): after
    ``kill -9`` every cell reported done is in the store; cells that were in flight, or finished
    but not yet written, are still 'running' under a dead owner and run again on resume.

    The write is off the worker's path: :meth:`submit` returns at once, so the worker starts its
    next cell while the store writes (a worker waiting for each commit held its concurrency slot
    idle: ~5 ms per cell on SQLite). At most ``max_pending`` finished cells wait to be written; a
    worker that would exceed that waits for room. A failed write stops the run: the next
    :meth:`submit` and :meth:`flush` raise it.
    """

    def __init__(self, store: ResultStore, on_durable: Callable[[CellResult], None], max_pending: int) -> None:
        self.store = store
        self._on_durable = on_durable
        self._pending: list[CellResult] = []
        self._room = asyncio.Semaphore(max_pending)
        self._task: asyncio.Task[None] | None = None
        self._error: BaseException | None = None

    async def submit(self, cell: CellResult) -> None:
        self._raise_if_failed()
        await self._room.acquire()
        self._raise_if_failed()
        self._pending.append(cell)
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._drain())

    async def flush(self) -> None:
        """Wait until every submitted cell is durable; raise the write error if there was one."""
        while self._task is not None and not self._task.done():
            await asyncio.shield(self._task)
        self._raise_if_failed()

    def _raise_if_failed(self) -> None:
        if self._error is not None:
            raise self._error

    async def _drain(self) -> None:
        while self._pending and self._error is None:
            batch, self._pending = self._pending, []
            try:
                await self.store.finish_many(batch)
            except Exception as exc:
                self._error = exc
                return
            finally:
                for _ in batch:
                    self._room.release()
            for cell in batch:
                self._on_durable(cell)


class AdaptiveLimiter:
    """A semaphore whose size moves between 1 and ``maximum``: halved on overload, +1 after
    ``limit`` consecutive successes (additive increase, multiplicative decrease)."""

    def __init__(self, maximum: int) -> None:
        self.maximum = maximum
        self.limit = maximum
        self.in_flight = 0
        self.cuts = 0
        self._ok = 0
        self._cut_pending = False
        self._cond = asyncio.Condition()

    async def acquire(self) -> None:
        async with self._cond:
            await self._cond.wait_for(lambda: self.in_flight < self.limit)
            self.in_flight += 1

    async def release(self, ok: bool) -> None:
        async with self._cond:
            self.in_flight -= 1
            if ok:
                self._ok += 1
                self._cut_pending = False
                if self._ok >= self.limit and self.limit < self.maximum:
                    self.limit += 1
                    self._ok = 0
            self._cond.notify_all()

    def overload(self) -> None:
        """Called from a model call that saw 429/5xx. One cut per burst: the next cut needs a
        success in between, so a burst of 429s from one overload does not collapse the limit."""
        if self._cut_pending:
            return
        self._cut_pending = True
        self.limit = max(1, self.limit // 2)
        self._ok = 0
        self.cuts += 1
