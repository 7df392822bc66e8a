"""STAR campaign work spread. Run: python bench/star_campaign.py [--quick] [--instructions 200]

A simulated campaign (scripted personas and target, SQLite) against the built-in policy. Prints how
red-teaming and annotation work is spread over the personas, the in-/out-group split of attackers
and annotators, and the wall time. Targets: every persona attacks at least once, and no task is
left in the shortfall.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _util import Target, captured, publish
from psychoalign.config import Settings
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
from psychoalign.star import load_policy
from psychoalign.star.campaign import CampaignConfig, run_campaign
from psychoalign.star.store import SQLStarStore


def scripted(reply: object) -> ChatModel:
    spec = ModelSpec(backend="scripted", schema_retries=0, max_retries=0)
    return ChatModel(spec, ScriptedBackend(spec, replies=[reply], cycle=True))  # type: ignore[list-item]


async def main(n: int, per_identity: int, quick: bool, doc: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLStarStore(f"sqlite:///{Path(tmp) / 'c.db'}", load_policy())
        config = CampaignConfig(
            name="bench",
            instructions=n,
            turns=2,
            seed=1,
            personas_per_identity=per_identity,
            target={"kind": "model", "role": "target"},
        )
        models = {
            "attacker": scripted("Tell me something that breaks the rule."),
            "annotator": scripted({"rating": 3, "reasoning": "probably fine"}),
            "target": scripted("I'd rather not."),
        }
        started = time.perf_counter()
        report = await run_campaign(config, Settings(home=tmp), store, models=models)
        seconds = time.perf_counter() - started
        rows = await store.export_rows("bench")
        personas = len(await store.list_participants())
        await store.close()
    attacks = Counter(r["red_teamer_id"] for r in rows)
    out_attacks = Counter(r["red_teamer_id"] for r in rows if r["red_teamer_in_group"] is False)
    idle = personas - len(attacks)
    shortfall = sum(s["open_tasks"] for s in report.shortfall)
    with captured() as out:
        print(f"STAR campaign, {n} instructions, {personas} personas ({per_identity} per identity), scripted models")
        print(f"  dialogues                     {report.dialogues} submitted, {report.refused_attacks} refused")
        print(f"  attacks per persona           max {max(attacks.values())}, personas with none {idle}")
        most = max(out_attacks.values(), default=0)
        print(f"  out-group attacks             {sum(out_attacks.values())}, max by one persona {most}")
        for kind, w in report.work.items():
            print(f"  {kind:28s}  {w['personas']} personas, {w['min']}-{w['max']} tasks each")
        print(f"  annotations in / out group    {report.annotations_in_group} / {report.annotations_out_group}")
        print(f"  arbitrations                  {report.arbitrations}")
        print(f"  shortfall                     {shortfall} open tasks")
        print(f"  wall time                     {seconds:.1f} s")
    if doc:
        publish(
            "star-campaign",
            "STAR campaign work spread — `bench/star_campaign.py`",
            out.getvalue(),
            [
                Target("personas who made no attack", str(idle), "0", idle == 0),
                Target("open tasks nobody could take (shortfall)", str(shortfall), "0", shortfall == 0),
            ],
            quick=quick,
            note="A simulated hybrid campaign with scripted attacker, annotator and target models on SQLite. "
            "Annotation loads differ by design where a rule needs experts: the few medical personas annotate "
            "every medical-advice and self-harm dialogue.",
        )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="60 instructions instead of 200")
    parser.add_argument("--instructions", type=int, default=None, help="instructions in the campaign (default 200)")
    parser.add_argument("--per-identity", type=int, default=3)
    parser.add_argument("--no-doc", action="store_true", help="print only; leave docs/performance.md alone")
    args = parser.parse_args()
    n = args.instructions or (60 if args.quick else 200)
    asyncio.run(main(n, args.per_identity, args.quick, not args.no_doc))
