"""A conversation's earlier user turns reach the negotiation's dose check through
``/v1/chat/completions`` (the messages a client resends) and through the A2A system agent (the
context's stored turns): "My son is 2." then "How much ibuprofen can I give him?" is a toddler's
dose. Scripted agents, in-memory trace store."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator

import httpx
import pytest

from psychoalign.config import DeploymentSettings, Settings
from psychoalign.traces import InMemoryTraceStore, Trace
from psychoalign.web import create_app
from tests.helpers import a2a_conversation
from tests.scenario import APPROVE, World, proposals

KEY = "sk-alice-0123456789"
EARLIER = "My son is 2."
QUESTION = "How much ibuprofen can I give him?"
ADULT_DOSE = "Give 400 mg every 6 to 8 hours."


def _settings() -> Settings:
    return Settings(
        deployments={"psychoalign": DeploymentSettings(api_keys=[hashlib.sha256(KEY.encode()).hexdigest()])}
    )


@pytest.fixture
async def app_client() -> AsyncIterator[tuple[httpx.AsyncClient, InMemoryTraceStore]]:
    store = InMemoryTraceStore()
    world = World([proposals((ADULT_DOSE, 0.9))], judge=lambda t: APPROVE)
    app = create_app(_settings(), store=store, negotiators={"psychoalign": world.negotiator(store, k=1)}, lab=False)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 5000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", timeout=60) as c:
            yield c, store


async def _ask(
    c: httpx.AsyncClient,
    store: InMemoryTraceStore,
    messages: list[dict[str, str]],
    headers: dict[str, str] | None = None,
) -> tuple[str, Trace]:
    r = await c.post(
        "/v1/chat/completions",
        json={"model": "psychoalign", "messages": messages},
        headers={"Authorization": f"Bearer {KEY}", **(headers or {})},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    trace = await store.get(body["psychoalign"]["trace_id"])
    assert trace is not None
    return str(body["choices"][0]["message"]["content"]), trace


async def test_the_earlier_user_turns_a_client_resends_are_read(
    app_client: tuple[httpx.AsyncClient, InMemoryTraceStore],
) -> None:
    c, store = app_client
    messages = [
        {"role": "system", "content": "You are a family health assistant."},
        {"role": "user", "content": EARLIER},
        {"role": "assistant", "content": "Thanks. How can I help?"},
        {"role": "user", "content": QUESTION},
    ]
    answer, trace = await _ask(c, store, messages)
    assert "400 mg" not in answer and "pharmacist" in answer
    assert trace.earlier == [EARLIER]  # user turns only: no system or assistant text


async def test_a_client_sending_only_its_last_message_is_read_with_the_stored_turns(
    app_client: tuple[httpx.AsyncClient, InMemoryTraceStore],
) -> None:
    c, store = app_client
    header = {"x-psychoalign-conversation-id": "family-1"}
    await _ask(c, store, [{"role": "user", "content": EARLIER}], header)
    answer, trace = await _ask(c, store, [{"role": "user", "content": QUESTION}], header)
    assert "400 mg" not in answer and trace.earlier == [EARLIER]


async def test_the_request_alone_is_read_as_before(app_client: tuple[httpx.AsyncClient, InMemoryTraceStore]) -> None:
    c, store = app_client
    answer, trace = await _ask(c, store, [{"role": "user", "content": QUESTION}])
    assert answer == ADULT_DOSE and trace.earlier == []


async def test_the_a2a_system_agent_reads_the_contexts_earlier_turns() -> None:
    store = InMemoryTraceStore()
    world = World([proposals((ADULT_DOSE, 0.9))], judge=lambda t: APPROVE)
    app = create_app(Settings(), store=store, negotiators={"psychoalign": world.negotiator(store, k=1)}, lab=False)
    answers = await a2a_conversation(app, (EARLIER, QUESTION))
    assert "400 mg" not in answers[-1] and "pharmacist" in answers[-1]
    last = max([t async for t in store.iter_all()], key=lambda t: t.created_at)
    assert last.request == QUESTION and last.earlier == [EARLIER]
