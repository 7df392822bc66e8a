"""Trace filters for the viewer: the same answers from memory, SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from psychoalign.traces import TraceStatus, TraceStore
from psychoalign.traces.query import TraceQuery, query_traces
from tests.scenario import World, evaluation, proposals
from tests.traces.test_store import store  # noqa: F401 - the memory/sqlite/postgres fixture

BAD = "Here is how to make the toxin: ..."


def _veto(text: str) -> dict[str, object]:
    if "toxin" in text:
        return evaluation(3, "VETOED", hits=[("U1-mass-harm", "universal")], harmful_intent=True, legitimate_need=False)
    return evaluation(95, "APPROVED")


async def _fill(store: TraceStore) -> dict[str, str]:  # noqa: F811
    benign = World([proposals(("Boil it 9 minutes.", 0.9))]).negotiator(store)
    harmful = World([proposals((BAD, 0.95))], judge=_veto).negotiator(store, k=2)
    ids = {}
    ids["egg"] = (await benign.negotiate("How do I boil an egg?", metadata={"conversation_id": "c-1"})).id
    ids["pct"] = (await benign.negotiate("Is 100% of 5_000 big?", metadata={"conversation_id": "c-2"})).id
    ids["toxin"] = (await harmful.negotiate("How do I make a toxin?", metadata={"conversation_id": "c-1"})).id
    ids["empty"] = (await benign.negotiate("   ")).id  # fails: empty request
    return ids


async def _ids(store: TraceStore, **filters: object) -> set[str]:  # noqa: F811
    page = await query_traces(store, TraceQuery.model_validate(filters))
    return {t.id for t in page.traces}


async def test_filters_agree_across_stores(store: TraceStore) -> None:  # noqa: F811
    ids = await _fill(store)
    everything = set(ids.values())
    assert await _ids(store) == everything
    assert await _ids(store, status="failed") == {ids["empty"]}
    assert await _ids(store, state="healthy_equilibrium") == {ids["egg"], ids["pct"]}
    toxin = await store.get(ids["toxin"])
    assert toxin is not None and toxin.final is not None and toxin.final.defense is not None
    assert await _ids(store, defense=toxin.final.defense.value) == {ids["toxin"]}
    assert ids["toxin"] not in await _ids(store, defense="none")
    assert await _ids(store, framework="general") == everything - {ids["empty"]}
    assert await _ids(store, framework="medical") == set()
    assert await _ids(store, tension_min=0.5) == {ids["toxin"]}
    assert await _ids(store, tension_max=0.2) == {ids["egg"], ids["pct"]}
    assert await _ids(store, q="EGG") == {ids["egg"]}
    assert await _ids(store, q="100%") == {ids["pct"]}  # LIKE wildcards are literal
    assert await _ids(store, q="5_0") == {ids["pct"]}
    assert await _ids(store, q="%") == {ids["pct"]}
    assert await _ids(store, conversation="c-1") == {ids["egg"], ids["toxin"]}
    now = datetime.now(UTC)
    assert await _ids(store, since=now - timedelta(hours=1), until=now + timedelta(hours=1)) == everything
    assert await _ids(store, since=now + timedelta(hours=1)) == set()
    page = await query_traces(store, TraceQuery(limit=2, offset=1))
    assert page.total == 4 and len(page.traces) == 2
    newest_first = [t.created_at for t in page.traces]
    assert newest_first == sorted(newest_first, reverse=True)
    assert all(t.status in (TraceStatus.COMPLETED, TraceStatus.FAILED) for t in page.traces)
