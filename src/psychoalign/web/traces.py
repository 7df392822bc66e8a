"""Trace viewer pages: list with filters and search, one trace in full, exports.

Who may see what: every route requires a lead's session (participants get 403, anonymous
visitors the login page). DRIVE drafts and the EVALUATOR's free text are shown only to leads
named in ``serve.drive_text_viewers`` (see :mod:`.trace_view`). All forms here are GET forms
(filters: no state change, so no CSRF token is needed); every value is escaped by the templates.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlencode

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import ValidationError

from ..frameworks.loader import builtin_names
from ..traces.model import DefenseMechanism, NegotiationParams, SystemState, TraceStatus
from ..traces.query import TraceQuery, query_traces
from .accounts import Account
from .auth import PageTemplates
from .gateway import Gateway
from .security import LeadAccount, csrf_protect
from .templating import page_number
from .trace_view import redacted, tension_chart, trace_stats

FILTER_FIELDS = (
    "status",
    "state",
    "defense",
    "framework",
    "tension_min",
    "tension_max",
    "since",
    "until",
    "q",
    "conversation",
)
PAGE_SIZE = 50
EXPORT_BATCH = 500


def _filters(request: Request) -> dict[str, str]:
    return {k: v.strip() for k in FILTER_FIELDS if (v := request.query_params.get(k)) is not None and v.strip()}


def _conversation_filter(conversation_id: object) -> str | None:
    """The trace list's URL of a conversation's traces, when its id is one the list's filter takes
    (ids the API and the agent make always are; a trace stored by another program may hold any
    text there, and a link to the filter's 400 page would be a dead end)."""
    if not isinstance(conversation_id, str):
        return None
    try:
        TraceQuery(conversation=conversation_id)
    except ValidationError:
        return None
    return "/traces?" + urlencode({"conversation": conversation_id})


def _describe_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    field = ".".join(str(p) for p in err["loc"]) or "filter"
    return f"filter '{field}': {err['msg']}"


def trace_router(gateway: Gateway) -> APIRouter:
    router = APIRouter(prefix="/traces", dependencies=[Depends(csrf_protect)])
    viewers = set(gateway.settings.serve.drive_text_viewers)

    def may_see_internal(account: Account) -> bool:
        return account.username is not None and account.username in viewers

    def healthy_threshold() -> float:
        """The configured threshold drawn on the histogram (each trace keeps its own in its params)."""
        try:
            return NegotiationParams.model_validate(gateway.settings.negotiation).healthy_threshold
        except ValidationError:  # a bad setting is reported where the negotiator is built
            return float(NegotiationParams.model_fields["healthy_threshold"].default)

    def frameworks() -> list[str]:
        names = set(builtin_names())
        for dep in gateway.deployments.values():
            names.update(dep.frameworks())
        return sorted(names)

    @router.get("", include_in_schema=False)
    async def list_traces(request: Request, account: LeadAccount, templates: PageTemplates) -> Response:
        """Leads only."""
        filters = _filters(request)
        page_no = page_number(request)
        context: dict[str, Any] = {
            "filters": filters,
            "statuses": [s.value for s in TraceStatus],
            "states": [s.value for s in SystemState],
            "defenses": ["none", *(d.value for d in DefenseMechanism)],
            "frameworks": frameworks(),
            "page": page_no,
            "traces": [],
            "total": 0,
            "error": None,
            "query_string": request.url.query,
            "stats": None,
        }
        try:
            query = TraceQuery.model_validate({**filters, "limit": PAGE_SIZE, "offset": (page_no - 1) * PAGE_SIZE})
        except ValidationError as exc:
            context["error"] = _describe_error(exc)
            return await templates.render(request, "traces/list.html", context, status_code=400)
        result = await query_traces(gateway.store, query)
        context["traces"] = result.traces
        context["stats"] = await trace_stats(gateway.store, query, healthy=healthy_threshold())
        context["total"] = result.total
        context["pages"] = max((result.total + PAGE_SIZE - 1) // PAGE_SIZE, 1)
        context["export_query"] = urlencode([(k, v) for k, v in request.query_params.multi_items() if k != "page"])
        return await templates.render(request, "traces/list.html", context)

    @router.get("/export.jsonl", include_in_schema=False)
    async def export_traces(request: Request, account: LeadAccount) -> Response:
        """Leads only: every trace matching the filters, one JSON object per line (redacted
        unless the lead may see DRIVE text)."""
        try:
            base = TraceQuery.model_validate({**_filters(request), "limit": EXPORT_BATCH})
        except ValidationError as exc:
            return Response(_describe_error(exc) + "\n", status_code=400, media_type="text/plain")
        internal = may_see_internal(account)

        async def lines() -> AsyncIterator[bytes]:
            offset = 0
            while True:
                page = await query_traces(gateway.store, base.model_copy(update={"offset": offset}))
                for trace in page.traces:
                    yield (json.dumps(redacted(trace, show_internal=internal), ensure_ascii=False) + "\n").encode()
                offset += EXPORT_BATCH
                if offset >= page.total or not page.traces:
                    return

        headers = {"content-disposition": 'attachment; filename="traces.jsonl"'}
        return StreamingResponse(lines(), media_type="application/x-ndjson", headers=headers)

    @router.get("/{trace_id}", include_in_schema=False)
    async def show_trace(
        trace_id: str,
        request: Request,
        account: LeadAccount,
        templates: PageTemplates,
    ) -> Response:
        """Leads only; DRIVE text for drive_text_viewers only."""
        trace = await gateway.store.get(trace_id) if _valid_id(trace_id) else None
        if trace is None:
            return await templates.render(
                request, "error.html", {"status": 404, "message": "No trace with this id."}, status_code=404
            )
        internal = may_see_internal(account)
        context = {
            "trace": trace,
            "view": redacted(trace, show_internal=internal),
            "internal": internal,
            "chart": tension_chart(trace),
            "conversation_link": _conversation_filter(trace.metadata.get("conversation_id")),
        }
        return await templates.render(request, "traces/detail.html", context)

    @router.get("/{trace_id}/export.json", include_in_schema=False)
    async def export_trace(trace_id: str, account: LeadAccount) -> Response:
        """Leads only; redacted unless the lead may see DRIVE text."""
        trace = await gateway.store.get(trace_id) if _valid_id(trace_id) else None
        if trace is None:
            return Response("no trace with this id\n", status_code=404, media_type="text/plain")
        body = json.dumps(redacted(trace, show_internal=may_see_internal(account)), ensure_ascii=False, indent=2)
        headers = {"content-disposition": f'attachment; filename="trace-{trace.id}.json"'}
        return Response(body, media_type="application/json", headers=headers)

    return router


def _valid_id(trace_id: str) -> bool:
    return 4 <= len(trace_id) <= 32 and all(c in "0123456789abcdef" for c in trace_id)
