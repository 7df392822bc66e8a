"""The per-cell experiment viewer: a run's cells with filters and pages, and one cell in full.

One router, two homes: ``psychoalign serve`` mounts it at ``/experiments`` for the lab's leads
(the trace viewer's rule: anonymous visitors get the login page, participants 403), and
``psychoalign experiment view RUN`` serves it alone on loopback (:func:`create_viewer_app`) for
the person whose result store it is. Read-only: GET routes only, no form changes anything. The
data comes through the harness (:mod:`~psychoalign.experiments.harness.cells`, the item text
through :mod:`~psychoalign.experiments.harness.export`), as ``experiment cells`` reads it; every
stored text (items, responses, judge prompts and replies, errors) is printed through the
``untrusted`` filter.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.params import Depends as DependsParam
from fastapi.responses import RedirectResponse, Response
from pydantic import ValidationError

from ..config import ServeSettings
from ..errors import ConfigError, InputError
from ..experiments.harness.cells import STATUSES, CellQuery, category_of, read_cell, read_cells, read_page
from ..experiments.harness.store import CellResult, ResultStore, RunRecord
from ..traces.model import Trace
from ..traces.store import TraceStore
from .auth import get_templates
from .methods import RouteMethods
from .origin import OriginGuard
from .security import SecurityHeadersMiddleware, refuse_nul
from .templating import Templates, page_number, static_files
from .trace_view import redacted, tension_chart

if TYPE_CHECKING:  # the benchmarks are loaded on the first cell page, not when the app is built
    from ..experiments.harness.registry import Registry

PAGE_SIZE = 50
#: Runs whose item texts are kept in memory (read once from the data folder per run).
TURN_CACHE = 8
#: Runs whose parsed cells are kept while their store's fingerprint stays the same.
CELL_CACHE = 2


@dataclass
class ExperimentSource:
    """Where the pages read from: the result store, the trace store (links and the negotiation
    summary), and what the item texts are read with: the registry that loads a run's benchmarks
    (default: the harness's, built on first use) and the configured data folder."""

    results: ResultStore
    traces: TraceStore | None
    registry: Registry | None = None
    data_dir_setting: str | None = None
    _turns: dict[str, tuple[dict[tuple[str, str], tuple[str, ...]], dict[str, str]]] = field(default_factory=dict)
    _cells: dict[str, tuple[str, list[CellResult]]] = field(default_factory=dict)

    async def cells(self, run_id: str) -> tuple[RunRecord, list[CellResult]]:
        """The run and all its cells (an unknown run is an :class:`InputError`). Parsing every
        cell is most of a list page's time, so the cells of the last runs are kept while the
        store's fingerprint of the run is unchanged (any claim or finish changes it)."""
        run = await self.results.get_run(run_id)
        if run is None:
            raise InputError(f"no run '{run_id}' in the store")
        mark = await self.results.fingerprint(run.id)  # before the read: what is kept is never older
        kept = self._cells.get(run.id)
        if mark is not None and kept is not None and kept[0] == mark:
            return run, kept[1]
        run, cells = await read_cells(self.results, run.id)
        if mark is not None:
            self._cells.pop(run.id, None)
            if len(self._cells) >= CELL_CACHE:
                self._cells.pop(next(iter(self._cells)))
            self._cells[run.id] = (mark, cells)
        return run, cells

    def _item_turns(self, run: RunRecord) -> tuple[dict[tuple[str, str], tuple[str, ...]], dict[str, str]]:
        from ..experiments.harness.benchmark import find_data_dir
        from ..experiments.harness.export import item_turns
        from ..experiments.harness.registry import default_registry

        if self.registry is None:
            self.registry = default_registry()
        try:
            data_dir: Path | None = find_data_dir(self.data_dir_setting)
        except ConfigError:
            data_dir = None  # the cell page says the item text could not be read
        try:
            return item_turns(run, self.registry, data_dir)
        except ValidationError:  # a spec this version no longer reads: the cells still show
            names = {b.get("name") if isinstance(b, dict) else b for b in run.spec.get("benchmarks") or ()}
            why = "item text not read: the run's spec does not validate under this version"
            return {}, {str(n): why for n in names if n}

    async def record(self, run: RunRecord, cell: CellResult) -> dict[str, Any]:
        """The cell as ``experiment cells`` exports it (the item's text read back from the data,
        once per run while the server runs)."""
        if run.id not in self._turns:
            if len(self._turns) >= TURN_CACHE:
                self._turns.pop(next(iter(self._turns)))
            self._turns[run.id] = await asyncio.to_thread(self._item_turns, run)
        from ..experiments.harness.export import cell_records

        turns, notes = self._turns[run.id]
        return cell_records([cell], turns, notes)[0]


def _filters(request: Request) -> dict[str, str]:
    names = ("system", "benchmark", "category", "status", "metric", "metric_min", "metric_max", "q")
    return {k: v.strip() for k in names if (v := request.query_params.get(k)) is not None and v.strip()}


def _query(filters: dict[str, str]) -> CellQuery:
    one = {"system": "systems", "benchmark": "benchmarks", "category": "categories", "status": "statuses"}
    values: dict[str, Any] = {many: [filters[k]] for k, many in one.items() if k in filters}
    for k in ("metric", "metric_min", "metric_max"):
        if k in filters:
            values[k] = filters[k]
    if "q" in filters:
        values["text"] = filters["q"]
    return CellQuery.model_validate(values)


def _describe(exc: ValidationError) -> str:
    err = exc.errors()[0]
    name = {"systems": "system", "benchmarks": "benchmark", "statuses": "status", "text": "q"}
    where = ".".join(name.get(str(p), str(p)) for p in err["loc"] if not isinstance(p, int)) or "filter"
    return f"filter '{where}': {err['msg'].removeprefix('Value error, ')}"


def cell_href(run_id: str, key: str) -> str:
    return f"/experiments/{quote(run_id, safe='')}/cells/{quote(key, safe='')}"


def _said(who: str, text: Any, note: str = "", trace_id: Any = None) -> dict[str, Any]:
    return {"who": who, "text": "" if text is None else str(text), "note": note, "trace_id": trace_id or None}


def exchanges(record: dict[str, Any]) -> list[dict[str, Any]]:
    """What was said, in order (who, text, a note, the trace of a reply): a multi-turn attack's
    dialogue, an adaptive attack's attempts, else the item's turns and the system's responses."""
    details = record["details"]
    dialogue = details.get("dialogue")
    if isinstance(dialogue, dict) and isinstance(dialogue.get("turns"), list):
        rows: list[dict[str, Any]] = []
        for t in dialogue["turns"]:
            note = "backtracked: not kept in the conversation" if t.get("backtracked") else ""
            rows.append(_said(f"attacker, turn {t.get('turn', '?')}", t.get("message"), note))
            judged = f"refusal judge: {t['refusal']}" if t.get("refusal") else ""
            rows.append(_said("target", t.get("response"), judged, t.get("trace_id")))
        return rows
    attempts = details.get("attempts")
    if isinstance(attempts, list) and attempts and all(isinstance(a, dict) for a in attempts):
        rows = []
        for i, a in enumerate(attempts, 1):
            label = (
                f"stream {a['stream']}, round {a.get('round', '?')}"
                if "stream" in a
                else f"attempt {a.get('attempt', i)}"
            )
            rows.append(_said(f"attack prompt ({label})", a.get("prompt")))
            score = f", score {a['score']}" if "score" in a else ""
            rows.append(
                _said("target", a.get("response"), ("succeeded" if a.get("success") else "did not succeed") + score)
            )
        return rows
    # without the item's text (no data folder) the page shows the export's item_note instead
    return [_said("item", t) for t in record["item_turns"]] + [_said("system", r) for r in record["responses"]]


def _pretty(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True)


def _facets(cells: Sequence[CellResult]) -> dict[str, list[str]]:
    return {
        "systems": sorted({c.system for c in cells}),
        "benchmarks": sorted({c.benchmark for c in cells}),
        "categories": sorted({c for c in map(category_of, cells) if c is not None}),
        "metrics": sorted({k for c in cells for k in c.metrics}),
        "statuses": list(STATUSES),
    }


def _page_context(
    run: RunRecord, filters: dict[str, str], page_no: int, cells: list[CellResult], total: int, every: int
) -> dict[str, Any]:
    return {
        "run": run,
        "filters": filters,
        "cells": cells,
        "total": total,
        "all": every,
        "page": page_no,
        "pages": max((total + PAGE_SIZE - 1) // PAGE_SIZE, 1),
        "error": None,
        "cell_href": cell_href,
        "run_href": f"/experiments/{quote(run.id, safe='')}",
        "page_query": urlencode(filters),
    }


async def _not_found(request: Request, templates: Templates, message: str) -> Response:
    return await templates.render(request, "error.html", {"status": 404, "message": message}, status_code=404)


def experiment_router(source: ExperimentSource, *, guard: Sequence[DependsParam] = ()) -> APIRouter:
    """The pages under ``/experiments``; ``guard``: who may see them (the served app's leads)."""
    router = APIRouter(prefix="/experiments", dependencies=[*guard, Depends(refuse_nul)])

    @router.get("", include_in_schema=False)
    async def list_runs(request: Request, templates: Templates = Depends(get_templates)) -> Response:
        runs = await source.results.list_runs()
        return await templates.render(request, "experiments/runs.html", {"runs": runs})

    @router.get("/{run_id}", include_in_schema=False)
    async def list_cells(run_id: str, request: Request, templates: Templates = Depends(get_templates)) -> Response:
        filters = _filters(request)
        page_no = page_number(request)
        try:
            fast = await read_page(source.results, run_id, _query(filters), page_no, PAGE_SIZE)
        except ValidationError:
            fast = None  # shown below with every cell's facets
        except InputError:
            return await _not_found(request, templates, "No experiment run with this id.")
        if fast is not None:
            # system, benchmark and status filters are the store's: only this page is read (a big
            # run's first load); the category and metric choices are then the page's own
            run, page = fast
            return await templates.render(
                request,
                "experiments/cells.html",
                _page_context(run, filters, page_no, page.cells, page.total, page.all)
                | {"facets": _facets(page.cells) | {"systems": page.systems, "benchmarks": page.benchmarks}},
            )
        try:
            run, cells = await source.cells(run_id)
        except InputError:
            return await _not_found(request, templates, "No experiment run with this id.")
        context: dict[str, Any] = {
            "run": run,
            "filters": filters,
            "facets": _facets(cells),
            "cells": [],
            "total": 0,
            "all": len(cells),
            "page": page_no,
            "pages": 1,
            "error": None,
            "cell_href": cell_href,
            "run_href": f"/experiments/{quote(run.id, safe='')}",
            "page_query": urlencode(filters),
        }
        try:
            query = _query(filters)
        except ValidationError as exc:
            context["error"] = _describe(exc)
            return await templates.render(request, "experiments/cells.html", context, status_code=400)
        chosen = [c for c in cells if query.matches(c)]
        context["total"] = len(chosen)
        context["pages"] = max((len(chosen) + PAGE_SIZE - 1) // PAGE_SIZE, 1)
        context["cells"] = chosen[(page_no - 1) * PAGE_SIZE : page_no * PAGE_SIZE]
        return await templates.render(request, "experiments/cells.html", context)

    @router.get("/{run_id}/cells/{key:path}", include_in_schema=False)
    async def show_cell(
        run_id: str, key: str, request: Request, templates: Templates = Depends(get_templates)
    ) -> Response:
        try:
            run, cell = await read_cell(source.results, run_id, key)
        except InputError:
            return await _not_found(request, templates, "No experiment run with this id.")
        if cell is None:
            return await _not_found(request, templates, "No cell with this key in the run.")
        record = await source.record(run, cell)
        traces: list[Trace | None] = []
        if source.traces is not None:
            traces = [await source.traces.get(t) for t in cell.trace_ids]
        context = {
            "run": run,
            "cell": cell,
            "record": record,
            "exchanges": exchanges(record),
            "traces": list(zip(cell.trace_ids, traces or [None] * len(cell.trace_ids), strict=True)),
            "judges": [{**j.model_dump(mode="json"), "verdict_text": _pretty(j.verdict)} for j in cell.judges],
            "details_text": _pretty(cell.details),
            "run_href": f"/experiments/{quote(run.id, safe='')}",
        }
        return await templates.render(request, "experiments/cell.html", context)

    return router


def _trace_pages(traces: TraceStore) -> APIRouter:
    """One trace at ``/traces/{id}`` for the viewer alone (the served app has the full trace viewer).
    The person running it reads their own store: DRIVE text is shown."""
    router = APIRouter(prefix="/traces")

    @router.get("", include_in_schema=False)
    async def no_list(request: Request, templates: Templates = Depends(get_templates)) -> Response:
        message = "This viewer shows the traces of a run's cells one at a time; `psychoalign serve` lists them all."
        return await _not_found(request, templates, message)

    async def _get(trace_id: str) -> Trace | None:
        ok = 4 <= len(trace_id) <= 32 and all(c in "0123456789abcdef" for c in trace_id)
        return await traces.get(trace_id) if ok else None

    @router.get("/{trace_id}", include_in_schema=False)
    async def show(trace_id: str, request: Request, templates: Templates = Depends(get_templates)) -> Response:
        trace = await _get(trace_id)
        if trace is None:
            return await _not_found(request, templates, "No trace with this id.")
        context = {"trace": trace, "view": redacted(trace, show_internal=True), "internal": True}
        return await templates.render(request, "traces/detail.html", {**context, "chart": tension_chart(trace)})

    @router.get("/{trace_id}/export.json", include_in_schema=False)
    async def export(trace_id: str) -> Response:
        trace = await _get(trace_id)
        if trace is None:
            return Response("no trace with this id\n", status_code=404, media_type="text/plain")
        headers = {"content-disposition": f'attachment; filename="trace-{trace.id}.json"'}
        body = json.dumps(redacted(trace, show_internal=True), ensure_ascii=False, indent=2)
        return Response(body, media_type="application/json", headers=headers)

    return router


def create_viewer_app(source: ExperimentSource, serve: ServeSettings, *, run_id: str | None = None) -> FastAPI:
    """``experiment view``: the pages alone, for loopback. No accounts: whoever reaches the port
    reads the store, so the command binds loopback only and every request's ``Host`` must be
    one of the server's names (no DNS rebinding) and no other site's page may call it
    (:class:`~.origin.OriginGuard` on every path). Same headers and CSP as the served pages.
    ``/`` opens ``run_id``'s cells (or the list of runs). Closes ``source``'s stores at shutdown."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await source.results.close()
            if source.traces is not None:
                await source.traces.close()

    app = FastAPI(
        title="PsychoAlign experiment viewer", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None
    )
    app.state.templates = Templates(None)
    app.mount("/static", static_files(), name="static")
    app.include_router(experiment_router(source))
    if source.traces is not None:
        app.include_router(_trace_pages(source.traces))
    home = f"/experiments/{quote(run_id, safe='')}" if run_id else "/experiments"

    @app.get("/", include_in_schema=False)
    async def index() -> RedirectResponse:
        return RedirectResponse(home, status_code=303)

    app.router.redirect_slashes = False  # RouteMethods redirects, path-only (never from the Host header)
    app.add_middleware(RouteMethods)
    app.add_middleware(OriginGuard, serve=serve, face=lambda path: "viewer")
    app.add_middleware(SecurityHeadersMiddleware)  # outermost: the guard's refusals carry the headers too
    return app
