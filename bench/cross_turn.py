"""What the cross-turn tension track costs per turn: reading a conversation's earlier turns.

    python bench/cross_turn.py [--quick]                                            # SQLite file
    python bench/cross_turn.py [--quick] --store postgresql://postgres@127.0.0.1:5432/test

Fills a trace store with ``--conversations`` scripted conversations of ``--turns`` turns each (real
negotiations on the scripted cross-turn world, so the traces have their
real size), then times ``TraceStore.conversation`` (the indexed query) plus turning each trace into
the track's signals, for the last turn of ``--reads`` conversations: what every turn of a served
conversation pays before its negotiation starts. Prints p50/p95 in milliseconds and the store size.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import captured, publish
from psychoalign.experiments.studies.cross_turn.world import Step, XTWorld
from psychoalign.negotiation import NegotiationParams
from psychoalign.negotiation.track import conversation_ref, turn_signal
from psychoalign.traces import SQLTraceStore


async def main(conversations: int, turns: int, reads: int, url: str | None, quick: bool, doc: bool) -> None:
    folder = Path(tempfile.mkdtemp(prefix="cross-turn-bench-"))
    schema = f"cross_turn_bench_{uuid.uuid4().hex[:8]}"
    admin: SQLTraceStore | None = None
    if url is not None and url.startswith("postgres"):  # a schema of its own, dropped afterwards
        admin = SQLTraceStore(url)
        async with admin.engine.begin() as conn:
            await conn.exec_driver_sql(f"CREATE SCHEMA {schema}")
        store = SQLTraceStore(url, connect_args={"server_settings": {"search_path": schema}})
    else:
        store = SQLTraceStore(url or f"sqlite:///{folder / 'traces.db'}")
    steps = [Step(f"s{t}", 95 - 3 * t) for t in range(turns)]
    world = XTWorld(steps)
    negotiator = world.negotiator(store, cross_turn=False)  # filling only: no reads while filling
    params = NegotiationParams()
    t0 = time.perf_counter()
    for c in range(conversations):
        for t in range(turns):
            ref = conversation_ref(f"bench-{c}", [s.message for s in steps[: t + 1]])
            await negotiator.negotiate(steps[t].message, conversation=ref)
    fill = time.perf_counter() - t0
    times = []
    for c in range(min(reads, conversations)):
        ref = conversation_ref(f"bench-{c}", [s.message for s in steps])
        t0 = time.perf_counter()
        earlier = await store.conversation(ref.look_up, limit=params.cross_turn_history)
        signals = [turn_signal(t, params) for t in earlier]
        times.append((time.perf_counter() - t0) * 1000)
        assert len(signals) == turns
    times.sort()
    p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
    kind = store.url.split(":", 1)[0].split("+", 1)[0]
    with captured() as out:
        print(
            f"store {kind}: {conversations * turns} traces ({conversations} conversations x "
            f"{turns} turns, filled in {fill:.1f} s); reading a {turns}-turn conversation's track: "
            f"p50 {statistics.median(times):.2f} ms, p95 {p95:.2f} ms over {len(times)} reads"
        )
    await store.close()
    shutil.rmtree(folder, ignore_errors=True)
    if doc:
        family = "postgresql" if kind.startswith("postgres") else kind
        publish(
            f"cross-turn-{family}",
            f"Cross-turn tension track, {'PostgreSQL' if family == 'postgresql' else 'SQLite'} — `bench/cross_turn.py`",
            out.getvalue(),
            [],
            quick=quick,
            note="What every turn of a served conversation pays before its negotiation starts: the indexed "
            "query for the conversation's earlier traces plus turning each into the track's signals, timed "
            "on the last turn of each conversation.",
        )
    if admin is not None:
        async with admin.engine.begin() as conn:
            await conn.exec_driver_sql(f"DROP SCHEMA {schema} CASCADE")
        await admin.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="50 conversations instead of 200")
    parser.add_argument("--conversations", type=int, default=None, help="conversations in the store (default 200)")
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--reads", type=int, default=100)
    parser.add_argument("--store", default=None, help="Store URL (default: a new SQLite file).")
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/performance.md alone")
    args = parser.parse_args()
    conversations = args.conversations or (50 if args.quick else 200)
    if args.turns < 1 or conversations < 1:
        sys.exit("error: --turns and --conversations must be at least 1")
    asyncio.run(main(conversations, args.turns, args.reads, args.store, args.quick, not args.no_doc))
