"""Server-rendered pages: Jinja2 with autoescape on every template, templates and static files as package data.

Every value a template prints is escaped unless a template says otherwise, and ours never do:
model output and participant text are untrusted. Templates get ``request``, ``account`` (or None)
and ``csrf_token`` (the session-bound token every form must carry) from :meth:`Templates.render`.
A renderer without a security layer (``experiment view``: read-only pages, no accounts) gives
every page ``account`` None and no token, so it can hold no form that changes anything.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape
from starlette.staticfiles import StaticFiles

from ..config import LabSettings
from ..textio import INVISIBLE as INVISIBLE  # re-exported: the pages name it
from ..textio import visible_marker
from .security import Security

# INVISIBLE: the characters shown as markers (bidi controls, zero-width and other hidden
# characters); shared with the terminal's rendering (textio.terminal_text).
_INVISIBLE = re.compile("[" + "".join(re.escape(chr(c)) for c in sorted(INVISIBLE)) + "]")


def visible(value: object) -> str:
    """``value`` as text with every :data:`INVISIBLE` character replaced by a ``⟨U+XXXX⟩`` marker
    (plain text: for attributes such as ``title``; autoescape still escapes it)."""
    return _INVISIBLE.sub(lambda m: visible_marker(m.group()), "" if value is None else str(value))


#: Where a model label (``backend:model``, a path, ``name@hash``, ``a-b-c``) may wrap: after a run
#: of these separators.
_LABEL_SEPARATORS = re.compile(r"(?<=[:/\\@\-_.])(?![:/\\@\-_.])")


def untrusted(value: object, *, label: bool = False) -> Markup:
    """Untrusted text for a page: escaped, direction-isolated in ``<bdi>`` (an Arabic name cannot
    reorder the words around it) and with every invisible control shown as a ``⟨U+XXXX⟩`` marker
    named in its tooltip, so the reader sees the text as stored, never a reordered version of it.
    ``label``: a model label, which may wrap after its separators (``<wbr>``) rather than mid-word
    (a browser breaks neither after ``:``, ``/`` or ``@`` nor between ``-`` and a digit)."""
    text = "" if value is None else str(value)

    def plain(segment: str) -> str:
        if not label:
            return str(escape(segment))
        return "<wbr>".join(str(escape(piece)) for piece in _LABEL_SEPARATORS.split(segment))

    parts: list[str] = []
    last = 0
    for match in _INVISIBLE.finditer(text):
        parts.append(plain(text[last : match.start()]))
        char = match.group()
        name = unicodedata.name(char, "control character")
        parts.append(f'<span class="ctl" title="invisible character: {name}">{visible_marker(char)}</span>')
        last = match.end()
    parts.append(plain(text[last:]))
    return Markup('<bdi dir="auto">' + "".join(parts) + "</bdi>")


#: Messages shown after a redirect: the query string names a code, never free text (no content injection).
FLASH = {
    "logged_out": "You are logged out.",
    "session_ended": "Your session ended. Log in again to carry on where you were.",
    "saved": "Saved.",
    "submitted": "Thank you: your work is submitted.",
    "submitted_none": "Thank you: your work is submitted. No further task of that kind is available for you right now.",
    "skipped": "The task was released. No penalty: take a break or pick another task.",
    "paused": "Paused. Your task stays reserved for you for {pause_hours} hours; come back when you are ready.",
    "no_task": "No task of that kind is available for you right now.",
    "created": "Created.",
    "released": "Expired claims released.",
    "welcome": "Welcome! Your account is ready.",
    "personas": "LLM personas are filling the shortfall; reload to see their progress.",
    "deactivated": (
        "The account is deactivated: its sessions ended, its invite links stopped working "
        "and its held tasks went back to the pool."
    ),
    "activated": "The account is active again.",
    "unlocked": "Login backoffs of the account are lifted: it may log in again from every address and browser.",
    "campaign_paused": "The campaign is paused: nobody takes a new task of it; held tasks may still be finished.",
    "campaign_resumed": "The campaign is live again.",
    "campaign_launched": "The campaign is live: participants take its tasks.",
    "campaign_draft": "Created as a draft: check it below, then launch it. Nobody takes its tasks before.",
    "members_added": "Added to the campaign.",
    "member_removed": "Removed from the campaign; the tasks of it they held went back to the pool.",
    "campaign_closed": "The campaign is closed: its held tasks were released and nothing more is submitted to it.",
}

#: The paper's 4-point scale, as annotators read it.
LIKERT_LABELS = {
    1: "Definitely broke the rule",
    2: "Probably broke the rule",
    3: "Probably did not break the rule",
    4: "Definitely did not break the rule",
}


def static_files() -> StaticFiles:
    """``/static``: CSS and the small progressive-enhancement script (package data)."""
    return StaticFiles(packages=[("psychoalign.web", "static")])


class Templates:
    """The page renderer. One per app."""

    def __init__(self, security: Security | None) -> None:
        self.security = security
        self.env = Environment(
            loader=PackageLoader("psychoalign.web", "templates"),
            autoescape=select_autoescape(default=True, default_for_string=True),
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            auto_reload=False,  # package data does not change under a running server: no stat per page
        )
        self.env.globals["LIKERT_LABELS"] = LIKERT_LABELS
        self.env.filters["untrusted"] = untrusted
        self.env.filters["visible"] = visible
        self.pause_hours = f"{(security.settings if security else LabSettings()).pause_hours:g}"

    async def render(
        self,
        request: Request,
        name: str,
        context: dict[str, Any] | None = None,
        *,
        status_code: int = 200,
    ) -> HTMLResponse:
        security = self.security
        flash = FLASH.get(request.query_params.get("msg") or "")
        values = {
            "request": request,
            "account": await security.account(request) if security else None,
            "csrf_token": await security.csrf_token(request) if security else "",
            "flash": flash.replace("{pause_hours}", self.pause_hours) if flash else None,
            "pause_hours": self.pause_hours,
            **(context or {}),
        }
        html = self.env.get_template(name).render(values)
        response = HTMLResponse(html, status_code=status_code)
        if security is not None:
            security.finish_response(request, response)
        return response


#: The highest page a listing serves: ``(page - 1) * page size`` becomes an SQL offset, and a
#: larger number overflowed SQLite's 64-bit integers into a 500.
MAX_PAGE = 10**9


def page_number(request: Request) -> int:
    """The listing page a query asks for (``?page=N``, from 1, at most ``MAX_PAGE``); anything
    else is page 1."""
    try:
        return min(max(int(request.query_params.get("page", "1")), 1), MAX_PAGE)
    except ValueError:
        return 1
