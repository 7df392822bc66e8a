"""STAR campaign work spread. Run: .venv/bin/python bench/star_campaign.py [--instructions 200]

A simulated campaign (scripted personas and target, SQLite) against the built-in policy, as in
issue #10's report (200 attacks, 42 personas: one persona ran 99 of them). Prints how red-teaming
and annotation work is spread over the personas, the in-/out-group split of attackers and
annotators, and the wall time.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from pathlib import Path

from psychoalign.config import Settings
from psychoalign.models import ChatModel, ModelSpec, ScriptedBackend
from psychoalign.star import load_policy
from psychoalign.star.campaign import CampaignConfig, run_campaign
from psychoalign.star.store import SQLStarStore


def scripted(reply: object) -> ChatModel:
    spec = ModelSpec(backend="scripted", schema_retries=0, max_retries=0)
    return ChatModel(spec, ScriptedBackend(spec, replies=[reply], cycle=True))  # type: ignore[list-item]


async def main(n: int, per_identity: int) -> None:
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
    print(f"STAR campaign, {n} instructions, {personas} personas ({per_identity} per identity), scripted models")
    print(f"  dialogues                     {report.dialogues} submitted, {report.refused_attacks} refused")
    print(f"  attacks per persona           max {max(attacks.values())}, personas with none {personas - len(attacks)}")
    most = max(out_attacks.values(), default=0)
    print(f"  out-group attacks             {sum(out_attacks.values())}, max by one persona {most}")
    for kind, w in report.work.items():
        print(f"  {kind:28s}  {w['personas']} personas, {w['min']}-{w['max']} tasks each")
    print(f"  annotations in / out group    {report.annotations_in_group} / {report.annotations_out_group}")
    print(f"  arbitrations                  {report.arbitrations}")
    print(f"  shortfall                     {sum(s['open_tasks'] for s in report.shortfall)} open tasks")
    print(f"  wall time                     {seconds:.1f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--instructions", type=int, default=200)
    parser.add_argument("--per-identity", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.instructions, args.per_identity))
