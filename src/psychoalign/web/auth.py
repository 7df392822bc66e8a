"""Login, logout and invite pages, and :func:`install_security`, which wires the security layer into an app."""

from __future__ import annotations

import inspect
import math
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Form, Request
from fastapi.exception_handlers import http_exception_handler, request_validation_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..config import LabSettings
from ..errors import InputError
from .accounts import Account, AccountStore, Role
from .security import (
    LoginRequiredError,
    Security,
    SecurityHeadersMiddleware,
    csrf_protect,
    current_account,
    login_redirect,
    require_login,
    safe_next,
)
from .templating import Templates, static_files

router = APIRouter(dependencies=[Depends(csrf_protect)])


async def get_templates(request: Request) -> Templates:
    """Async on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, per request."""
    templates: Templates = request.app.state.templates
    return templates


#: A route parameter for the page templates.
PageTemplates = Annotated[Templates, Depends(get_templates)]


class Credentials(BaseModel):
    """The username and password a form sends (login, invite, new account); a field left out is empty."""

    username: str = ""
    password: str = ""


class LoginForm(Credentials):
    next: str = "/"


class InviteForm(Credentials):
    password2: str = ""


def home_for(account: Account) -> str:
    return "/lead" if account.role is Role.LEAD else "/tasks"


@router.get("/", include_in_schema=False)
async def index(account: Account | None = Depends(current_account)) -> RedirectResponse:
    """Public: sends each role to its home page."""
    return RedirectResponse(home_for(account) if account else "/login", status_code=303)


@router.get("/login", response_class=HTMLResponse)
async def login_page(
    request: Request,
    templates: PageTemplates,
    next: str = "/",
    account: Account | None = Depends(current_account),
) -> Response:
    """Public."""
    if account is not None:
        return RedirectResponse(home_for(account), status_code=303)
    return await templates.render(request, "login.html", {"next": safe_next(next), "error": None})


@router.post("/login", response_class=HTMLResponse)
async def login_submit(request: Request, templates: PageTemplates, form: Annotated[LoginForm, Form()]) -> Response:
    """Public (CSRF-checked against the pre-session cookie); throttled per (username, address), per
    address, and per known browser (security.py)."""
    username, password, next = form.username, form.password, form.next
    security: Security = request.app.state.security
    context: dict[str, Any] = {"next": safe_next(next), "username": username[:64]}
    wait = await security.login_wait(request, username)
    if wait:
        context["error"] = f"Too many failed logins for this name from here. Try again in {_duration(wait)}."
        response = await templates.render(request, "login.html", context, status_code=429)
        response.headers["Retry-After"] = str(wait)
        return response
    account = await security.accounts.authenticate(username, password)
    if account is None:
        await security.accounts.record_login_failure(await security.throttle_keys(request, username))
        context["error"] = "Wrong username or password."
        return await templates.render(request, "login.html", context, status_code=401)
    target = safe_next(next)
    redirect = RedirectResponse(home_for(account) if target == "/" else target, status_code=303)
    await security.login(request, redirect, account)
    await security.login_succeeded(request, redirect, username)
    return redirect


def _duration(seconds: int) -> str:
    if seconds < 90:
        return f"{seconds} second{'s' if seconds != 1 else ''}"
    return f"{math.ceil(seconds / 60)} minutes"


@router.post("/logout")
async def logout(request: Request, _: Account = Depends(require_login)) -> Response:
    """Any logged-in account: revokes the server-side session."""
    security: Security = request.app.state.security
    response = RedirectResponse("/login?msg=logged_out", status_code=303)
    await security.logout(request, response)
    return response


async def _unknown_invite(request: Request, templates: Templates, advice: str = "") -> Response:
    message = "This invite link is unknown, used or expired." + (f" {advice}" if advice else "")
    return await templates.render(request, "error.html", {"status": 404, "message": message}, status_code=404)


@router.get("/invite/{token}", response_class=HTMLResponse)
async def invite_page(request: Request, token: str, templates: PageTemplates) -> Response:
    """Public: only a valid, unused, unexpired one-time token shows the form."""
    security: Security = request.app.state.security
    invited = await security.accounts.invite_account(token)
    if invited is None:
        return await _unknown_invite(request, templates, "Ask your lead for a new one.")
    return await templates.render(request, "invite.html", {"invited": invited, "token": token, "error": None})


@router.post("/invite/{token}", response_class=HTMLResponse)
async def invite_accept(
    request: Request, token: str, templates: PageTemplates, form: Annotated[InviteForm, Form()]
) -> Response:
    """Public (CSRF-checked): choose a username and password; the token then stops working."""
    username, password = form.username, form.password
    security: Security = request.app.state.security
    invited = await security.accounts.invite_account(token)
    if invited is None:
        return await _unknown_invite(request, templates)
    try:
        if password != form.password2:
            raise InputError("the two passwords differ")
        account = await security.accounts.accept_invite(token, username, password)
    except InputError as exc:
        context = {"invited": invited, "token": token, "error": str(exc), "username": username[:64]}
        return await templates.render(request, "invite.html", context, status_code=400)
    target = "/profile?msg=welcome" if account.role is Role.PARTICIPANT else "/lead?msg=welcome"
    response = RedirectResponse(target, status_code=303)
    await security.login(request, response, account)
    return response


def install_security(app: FastAPI, accounts: AccountStore, settings: LabSettings | None = None) -> Security:
    """Wire the security layer into ``app``: headers middleware, sessions/CSRF state, the page
    renderer, ``/static``, the login/logout/invite pages, and HTML error pages for browsers
    (JSON clients such as ``/v1`` keep JSON errors)."""
    security = Security(accounts, settings)
    app.state.security = security
    app.state.templates = Templates(security)
    app.add_middleware(SecurityHeadersMiddleware)
    app.mount("/static", static_files(), name="static")
    app.include_router(router)

    @app.exception_handler(LoginRequiredError)
    async def _login_required(request: Request, exc: LoginRequiredError) -> Response:
        # a session cookie the store no longer knows: the session expired or ended elsewhere, say so
        return login_redirect(exc, ended=security.session_cookie(request) in request.cookies)

    # A form field that does not parse (a number field sent as "abc", a missing select) is a
    # RequestValidationError, answered before any route runs: a page for a person in a browser,
    # as any other bad input; /v1 and other JSON clients keep the handler they had (the served
    # app's OpenAI-shaped error, FastAPI's otherwise).
    api_validation_error = app.exception_handlers.get(RequestValidationError, request_validation_exception_handler)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(request: Request, exc: RequestValidationError) -> Response:
        if "text/html" not in request.headers.get("accept", "") or request.url.path.startswith("/v1"):
            answer = api_validation_error(request, exc)
            response: Response = await answer if inspect.isawaitable(answer) else answer
            return response
        first = exc.errors()[0] if exc.errors() else {"loc": (), "msg": "invalid request"}
        field = ".".join(str(p) for p in first["loc"][1:])[:60]  # the message never quotes the input
        message = f"{field}: {first['msg']}" if field else str(first["msg"])
        templates: Templates = app.state.templates
        return await templates.render(request, "error.html", {"status": 400, "message": message}, status_code=400)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        if "text/html" not in request.headers.get("accept", ""):
            return await http_exception_handler(request, exc)
        message = exc.detail if isinstance(exc.detail, str) else "That did not work."
        templates: Templates = app.state.templates
        return await templates.render(
            request, "error.html", {"status": exc.status_code, "message": message}, status_code=exc.status_code
        )

    return security
