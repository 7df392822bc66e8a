"""Lead pages for people: participants and lead accounts (create, invite, import, task roles,
deactivate, reactivate, a new invite link, lift a login backoff).

Every route declares :func:`require_lead`. Only leads see identities (usernames next to
pseudonymous participant ids).
"""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Depends, Form, HTTPException, Request, UploadFile
from fastapi.responses import RedirectResponse, Response

from ...errors import InputError
from ...star.model import Participant
from ...star.store.rules import EXPERTISE
from ..accounts import OWNER_ID, Account, Role
from ..auth import Credentials, PageTemplates
from ..security import LeadAccount, Security, csrf_protect
from ..templating import Templates
from .lab import StarLab
from .lead import ROLES, upload_text
from .participant import Lab

router = APIRouter(prefix="/lead", dependencies=[Depends(csrf_protect)])


class NewAccountForm(Credentials):
    """A new account: its name as shown, and its role (a password left empty: an invite link instead)."""

    display_name: str = ""
    role: str = "participant"


@router.get("/participants")
async def participants_page(request: Request, account: LeadAccount, lab: Lab, templates: PageTemplates) -> Response:
    """Lead: every account with its pseudonym, roles and questionnaire answers."""
    return await _participants_render(request, lab, templates)


async def _new_participant(
    lab: StarLab, display_name: str, roles: list[str], *, username: str | None = None, password: str | None = None
) -> Account:
    roles = [r for r in roles if r in ROLES] or list(ROLES)
    account = await lab.accounts.create_account(
        Role.PARTICIPANT, username=username, password=password, display_name=display_name
    )
    assert account.participant_id is not None
    await lab.store.add_participants([Participant(id=account.participant_id, roles=roles)])
    return account


def _check_roles(role: str, roles: list[str]) -> None:
    """The account role and task roles a form sent: a forged value is refused, not dropped."""
    accounts = [r.value for r in Role]
    if role not in accounts:
        raise InputError(f"role: {role!r} is not an account role; choose {' or '.join(accounts)}")
    unknown = sorted(set(roles) - set(ROLES))
    if unknown:
        raise InputError(f"roles: {unknown[0]!r} is not a task role; choose from {', '.join(ROLES)}")


@router.post("/participants")
async def participants_add(
    request: Request, account: LeadAccount, lab: Lab, templates: PageTemplates, form: Annotated[NewAccountForm, Form()]
) -> Response:
    """Lead: create a participant (or lead) with a password, or without one and get a one-time invite link."""
    display_name, username, password, role = form.display_name, form.username, form.password, form.role
    roles = [str(r) for r in (await request.form()).getlist("roles")]
    invite_url = None
    try:
        _check_roles(role, roles)
        if role == Role.LEAD:
            created = await lab.accounts.create_account(
                Role.LEAD, username=username or None, password=password or None, display_name=display_name
            )
        else:
            created = await _new_participant(
                lab, display_name, roles, username=username or None, password=password or None
            )
        if not password:
            days = request.app.state.security.settings.invite_days
            invite = await lab.accounts.create_invite(created.id, ttl=timedelta(days=days))
            invite_url = _invite_url(request, invite.token)
    except InputError as exc:
        return await _participants_render(request, lab, templates, error=exc.message, status_code=400)
    return await _participants_render(request, lab, templates, invite=(created, invite_url))


async def _participants_render(
    request: Request,
    lab: StarLab,
    templates: Templates,
    *,
    invite: tuple[Account, str | None] | None = None,
    invites: list[tuple[Account, str]] | None = None,
    error: str | None = None,
    status_code: int = 200,
    reinvite: bool = False,
) -> Response:
    people = {p.id: p for p in await lab.store.list_participants()}
    me = await request.app.state.security.account(request)
    return await templates.render(
        request,
        "star/participants.html",
        {
            "accounts": await lab.accounts.list_accounts(),
            "people": people,
            "roles": ROLES,
            "invite": invite,
            "invites": invites or [],
            "error": error,
            "reinvite": reinvite,
            "invited": await lab.accounts.invited_accounts(),
            "me": me,
            "owner_id": OWNER_ID,
        },
        status_code=status_code,
    )


def _invite_url(request: Request, token: str) -> str:
    """The link to send: under ``serve.public_url`` when configured (behind a proxy the request's
    own host may be an internal one), else the address the lead is using."""
    lab: StarLab = request.app.state.star_lab
    base = lab.settings.serve.public_url or str(request.base_url)
    return base.rstrip("/") + f"/invite/{token}"


#: The keys of one line of a participants import file.
IMPORT_KEYS = ("display_name", "roles", "expertise")


def _import_list(row: dict[str, object], key: str, allowed: Collection[str], default: list[str]) -> list[str]:
    """``row[key]``: a list of known labels. A string (``"medical"``), a label that is not one
    (``"Medical doctor"``) or another type is refused: kept, it would silently match nothing."""
    value = row.get(key, default)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f'{key} must be a list of strings, e.g. "{key}": ["{sorted(allowed)[-1]}"]')
    unknown = sorted(set(value) - set(allowed))
    if unknown:
        raise ValueError(f"unknown {key} {unknown}: use {', '.join(sorted(allowed))}")
    return value


def _import_entry(row: object) -> tuple[str, list[str], list[str]]:
    """One line of a participants import: (display name, task roles, expertise), checked."""
    if not isinstance(row, dict):
        raise ValueError("not an object")
    extra = sorted(str(k) for k in row if k not in IMPORT_KEYS)
    if extra:
        raise ValueError(f"unknown key {extra[0]!r}: a line has {', '.join(IMPORT_KEYS)}")
    name = row.get("display_name", "")
    if not isinstance(name, str):
        raise ValueError("display_name must be a string")
    roles = _import_list(row, "roles", ROLES, list(ROLES))
    expertise = _import_list(row, "expertise", EXPERTISE, [])
    if "\x00" in name:  # a "\u0000" escape: not storable
        raise ValueError("a NUL character (\\u0000): remove it")
    return name[:200], roles, expertise


@router.post("/participants/import")
async def participants_import(
    request: Request, account: LeadAccount, lab: Lab, templates: PageTemplates, file: UploadFile | None = None
) -> Response:
    """Lead: import participants from JSONL (one ``{"display_name", "roles"?, "expertise"?}`` per line);
    each gets a one-time invite link. All or nothing: a bad line names itself and nothing is added."""
    try:
        text = await upload_text(file, "participants")
        if not text:
            raise InputError("choose a JSONL file to import")
        wanted = []
        for lineno, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                wanted.append(_import_entry(json.loads(line)))
            except (json.JSONDecodeError, ValueError, TypeError) as exc:
                raise InputError(
                    f"line {lineno}: {exc}", hint='expected {"display_name": ..., "roles": [...], "expertise": [...]}'
                ) from None
        days = request.app.state.security.settings.invite_days
        links = []
        for display_name, roles, expertise in wanted:
            created = await _new_participant(lab, display_name, roles)
            if expertise:
                assert created.participant_id is not None
                person = await lab.store.participant(created.participant_id)
                await lab.store.update_participant(person.model_copy(update={"expertise": expertise}))
            invite = await lab.accounts.create_invite(created.id, ttl=timedelta(days=days))
            links.append((created, _invite_url(request, invite.token)))
    except InputError as exc:
        return await _participants_render(request, lab, templates, error=str(exc), status_code=400)
    return await _participants_render(request, lab, templates, invites=links)


@router.post("/participants/{participant_id}/roles")
async def participant_roles(request: Request, participant_id: str, account: LeadAccount, lab: Lab) -> Response:
    """Lead: set which task roles a participant may take."""
    roles = [str(r) for r in (await request.form()).getlist("roles")]
    try:
        _check_roles(Role.PARTICIPANT, roles)
    except InputError as exc:
        raise HTTPException(status_code=400, detail=exc.message) from None
    try:
        person = await lab.store.participant(participant_id)
    except InputError:
        raise HTTPException(status_code=404, detail="no such participant") from None
    await lab.store.update_participant(person.model_copy(update={"roles": roles}))
    return RedirectResponse("/lead/participants?msg=saved", status_code=303)


async def _account_or_404(lab: StarLab, account_id: str) -> Account:
    found = await lab.accounts.get(account_id)
    if found is None:
        raise HTTPException(status_code=404, detail="no such account")
    return found


def _not_the_owner(target: Account) -> None:
    """The server owner's account signs in with the local token link alone: it takes no invite
    (that would give it a password) and is not locked out here (the next link would undo it)."""
    if target.id == OWNER_ID:
        raise HTTPException(
            status_code=400,
            detail="this is the server owner's account (the local token link of psychoalign serve): "
            "to turn that link off, start the server with serve.local_token = false or API keys",
        )


@router.post("/accounts/{account_id}/deactivate")
async def account_deactivate(account_id: str, account: LeadAccount, lab: Lab) -> Response:
    """Lead: lock an account out: its sessions end at once, its invite links stop working, and a
    participant's held tasks go back to the pool (their work so far stays, like a skip)."""
    target = await _account_or_404(lab, account_id)
    if target.id == account.id:
        raise HTTPException(status_code=400, detail="you cannot deactivate your own account")
    _not_the_owner(target)
    await lab.accounts.set_active(target.id, False)
    if target.participant_id:
        for task in await lab.store.claimed_tasks(target.participant_id):
            await lab.lab.stop(task.id, target.participant_id)
            store = await lab.store_for(task.campaign or "")
            try:
                await store.release(task.id, target.participant_id)
            except InputError:
                continue  # submitted or expired meanwhile
    return RedirectResponse("/lead/participants?msg=deactivated", status_code=303)


@router.post("/accounts/{account_id}/activate")
async def account_activate(account_id: str, account: LeadAccount, lab: Lab) -> Response:
    """Lead: let a deactivated account log in again (an account that never set a password needs an invite link)."""
    target = await _account_or_404(lab, account_id)
    if not target.has_password:
        raise HTTPException(status_code=400, detail="this person never set a password: send a new invite link")
    await lab.accounts.set_active(target.id, True)
    return RedirectResponse("/lead/participants?msg=activated", status_code=303)


@router.post("/accounts/{account_id}/invite")
async def account_invite(
    request: Request, account_id: str, account: LeadAccount, lab: Lab, templates: PageTemplates
) -> Response:
    """Lead: a new one-time link for an account (a lost or expired invite, or a forgotten password:
    accepting it sets a username and password). Earlier links of the account stop working."""
    target = await _account_or_404(lab, account_id)
    _not_the_owner(target)
    days = request.app.state.security.settings.invite_days
    invite = await lab.accounts.create_invite(target.id, ttl=timedelta(days=days))
    url = _invite_url(request, invite.token)
    return await _participants_render(request, lab, templates, invite=(target, url), reinvite=True)


@router.post("/accounts/{account_id}/unlock")
async def account_unlock(request: Request, account_id: str, account: LeadAccount, lab: Lab) -> Response:
    """Lead: lift every login backoff of an account (from every address and browser), e.g. after
    someone guessed at its password; the per-address limit of strangers' addresses stays."""
    target = await _account_or_404(lab, account_id)
    if target.username:
        security: Security = request.app.state.security
        await security.unlock(target.username)
    return RedirectResponse("/lead/participants?msg=unlocked", status_code=303)
