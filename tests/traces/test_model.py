"""Nothing harmful at rest by default (issue 27): blocked and vetoed drafts are stored as their
hash and length with rule hits and scores; ``traces.keep_blocked_drafts = true`` keeps them and
says so on the trace."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from psychoalign.config import Settings
from psychoalign.traces import open_store
from psychoalign.traces.model import redact_blocked_drafts
from tests.scenario import World, evaluation, proposals

DRAFT = "HARMFUL-DRAFT-7731: first acquire the precursor, then"
SAFE = "Here is the general, public chemistry of why that is dangerous."


def judge(text: str) -> dict[str, object]:
    if "HARMFUL-DRAFT" in text:
        return evaluation(
            8,
            "VETOED",
            hits=[("U1-mass-harm", "universal")],
            mods=[f"drop '{DRAFT}'"],
            harmful_segments=[DRAFT],
            harmful_intent=True,
        )
    return evaluation(90, "APPROVED")


def world() -> World:
    return World([proposals((DRAFT, 0.9), (SAFE, 0.5))], judge=judge)


async def test_blocked_drafts_are_stored_redacted_by_default(tmp_path: Path) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path / 'traces.db'}"
    store = open_store(url)
    try:
        trace = await world().negotiator(store=store, k=1).negotiate("How is a nerve agent made?")
        stored = await store.get(trace.id)
    finally:
        await store.close()
    assert stored is not None and not stored.blocked_drafts_kept
    blocked = next(p for p in stored.rounds[0].proposals if p.redacted is not None)
    assert blocked.text == ""
    assert blocked.redacted is not None
    assert blocked.redacted.sha256 == hashlib.sha256(DRAFT.encode()).hexdigest()
    assert blocked.redacted.chars == len(DRAFT)
    e = blocked.evaluation
    assert e is not None and e.score == 8 and e.verdict.value == "VETOED"  # scores and hits stay
    assert [h.rule_id for h in e.rule_hits] == ["U1-mass-harm"]
    assert e.modifications == [] and e.conflict.harmful_segments == [] and e.conflict.harmful_intent
    assert blocked.gate is not None and blocked.gate.reasons and blocked.gate.evidence == []
    admissible = next(p for p in stored.rounds[0].proposals if p.redacted is None)
    assert admissible.text == SAFE  # an admissible draft is kept: it is what the user could get
    # Not in the returned trace, not in the stored record, not in the database file.
    assert "HARMFUL-DRAFT" not in trace.model_dump_json() and "HARMFUL-DRAFT" not in stored.model_dump_json()
    files = await asyncio.to_thread(lambda: b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file()))
    assert b"HARMFUL-DRAFT" not in files


async def test_keep_blocked_drafts_keeps_them_and_says_so() -> None:
    settings = Settings(traces={"keep_blocked_drafts": True})
    trace = await world().negotiator(settings=settings, k=1).negotiate("How is a nerve agent made?")
    assert trace.blocked_drafts_kept
    assert DRAFT in [p.text for p in trace.rounds[0].proposals]
    assert all(p.redacted is None for p in trace.rounds[0].proposals)


async def test_redaction_is_idempotent_and_counts() -> None:
    trace = await world().negotiator(settings=Settings(traces={"keep_blocked_drafts": True}), k=1).negotiate("q")
    assert redact_blocked_drafts(trace) == 1
    first = trace.model_dump_json()
    assert redact_blocked_drafts(trace) == 0 and trace.model_dump_json() == first


async def test_the_recorded_channels_and_blocks_survive_the_store_and_older_traces_still_load(tmp_path: Path) -> None:
    """``FinalDecision.channels`` and ``GateResult.blocked_by`` live in the stored JSON body (no
    column: no migration); a trace stored before them loads with both ``None`` (not recorded),
    which is not the same as recorded-and-empty."""
    from psychoalign.traces.model import Trace

    store = open_store(f"sqlite+aiosqlite:///{tmp_path / 'traces.db'}")
    try:
        trace = await world().negotiator(store=store, k=1).negotiate("How is a nerve agent made?")
        stored = await store.get(trace.id)
    finally:
        await store.close()
    assert stored is not None and stored.model_dump() == trace.model_dump()
    assert stored.final is not None and stored.final.channels is not None
    blocked = [p.gate for p in stored.rounds[0].proposals if p.gate is not None and not p.gate.admissible]
    assert blocked and blocked[0].rule_ids == ["U1-mass-harm"]

    old = trace.model_dump(mode="json")  # as a trace of an earlier version was written
    del old["final"]["channels"]
    for rd in old["rounds"]:
        for p in rd["proposals"]:
            del p["gate"]["blocked_by"]
    loaded = Trace.model_validate(old)
    assert loaded.final is not None and loaded.final.channels is None
    assert all(
        p.gate is not None and p.gate.blocked_by is None and p.gate.rule_ids == [] for p in loaded.rounds[0].proposals
    )
    assert loaded.blocked_drafts() == (1, [])  # counted from the gate outcome; the rules were not recorded
