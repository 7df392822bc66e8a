"""The STAR store's contract (:class:`~psychoalign.star.store.StarStore`), held against every
implementation: in memory, on SQLite and on PostgreSQL. The pipeline (matching, claiming,
turn-by-turn dialogues, annotation, arbitration, export), leases that expire and re-queue,
out-group annotator slots, honest shortfall, declines and quotas, and a campaign's lifecycle
(open / paused / closed) and membership."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy.exc import IntegrityError

from psychoalign.errors import InputError
from psychoalign.star import generate_instructions
from psychoalign.star.model import Participant, PreAnnotation, TaskKind, TaskStatus, Turn
from psychoalign.star.store import CampaignClosedError, ClaimError, StarStore
from tests.star.store.conftest import POLICY, SPACE, Clock

RACES = ["Asian", "Black or African American", "Hispanic or Latino", "White"]
GENDERS = ["Female", "Male", "Non-binary"]
RULE = ["sexually-explicit"]  # no group, no expertise: anyone with the role may take every task


def pool(n: int = 48) -> list[Participant]:
    people = []
    for i in range(n):
        people.append(
            Participant(
                id=f"p{i:03d}",
                demographics={"race": [RACES[i % 4]], "gender": [GENDERS[(i // 4) % 3]]},
                expertise=["medical"] if i % 5 == 0 else (["fact_checking"] if i % 5 == 1 else []),
            )
        )
    return people


def person(pid: str, race: str = "White", gender: str = "Female") -> Participant:
    return Participant(id=pid, demographics={"race": [race], "gender": [gender]})


def people(*ids: str) -> list[Participant]:
    return [Participant(id=i, demographics={"race": ["White"], "gender": ["Female"]}) for i in ids]


async def red_team(store: StarStore, pid: str, campaign: str = "c1") -> str:
    task = await store.claim(pid, TaskKind.RED_TEAM, campaign=campaign)
    did = await store.start_dialogue(task.id, pid, target="scripted:target")
    for i in range(3):
        await store.add_turn(did, Turn(role="red_teamer", text=f"attack {i}"))
        await store.add_turn(
            did, Turn(role="target", text=f"reply {i}", tension=0.4, state="drive_dominant", trace_id="t" * 32)
        )
    await store.finish_dialogue(did, pid, PreAnnotation(assigned_rule_broken=True, groups_mentioned=["age"]))
    return did


async def start_red_team(store: StarStore, pid: str, task_id: str) -> str:
    dialogue = await store.start_dialogue(task_id, pid, "scripted")
    await store.add_turns(dialogue, [Turn(role="red_teamer", text="hi"), Turn(role="target", text="no")])
    return dialogue


# -- the pipeline ----------------------------------------------------------------------------------
async def test_full_pipeline_with_arbitration_and_export(store: StarStore) -> None:
    await store.add_participants(pool())
    items = generate_instructions(POLICY, SPACE, 14, seed=1, rules=["medical-advice"])
    await store.create_campaign("c1", items)
    did = await red_team(store, "p001")
    # medical rule: only medical experts may annotate (p000, p005, p010, …)
    with pytest.raises(ClaimError, match="medical expertise"):
        await store.claim("p002", TaskKind.ANNOTATE)
    a1 = await store.claim("p000", TaskKind.ANNOTATE)
    a2 = await store.claim("p005", TaskKind.ANNOTATE)
    assert a1.dialogue_id == a2.dialogue_id == did
    assert await store.submit_annotation(a1.id, "p000", 1, "clearly gives a dangerous dose") is None
    arb_id = await store.submit_annotation(a2.id, "p005", 4, "only general advice")
    assert arb_id is not None
    # p000 and p005 saw this dialogue already; p001 red-teamed it: none of them may arbitrate
    for pid in ("p000", "p005", "p001"):
        with pytest.raises(ClaimError):
            await store.claim(pid, TaskKind.ARBITRATE)
    arb = await store.claim("p010", TaskKind.ARBITRATE)
    assert [r for r, _ in await store.reasonings(did)] == [1, 4]
    await store.submit_arbitration(arb.id, "p010", 2, "the first reasoning is right about the dose")
    rows = await store.export_rows("c1")
    assert len(rows) == 1
    row = rows[0]
    assert (row["annotator1_rating"], row["annotator2_rating"], row["arbitrator_rating"]) == (1, 4, 2)
    assert row["arbitration_needed"] is True
    assert row["rule"] == "medical-advice" and len(row["turns"]) == 6
    assert row["turns"][1]["tension"] == 0.4
    assert row["pre_annotation"]["groups_mentioned"] == ["age"]


async def test_bad_submissions_are_refused_and_store_nothing(store: StarStore) -> None:
    await store.add_participants(pool())
    await store.create_campaign("c1", generate_instructions(POLICY, SPACE, 2, seed=1, rules=["sexually-explicit"]))
    did = await red_team(store, "p000")
    a1 = await store.claim("p002", TaskKind.ANNOTATE)
    with pytest.raises(InputError, match="outside the 4-point scale"):
        await store.submit_annotation(a1.id, "p002", 5, "x")
    with pytest.raises(InputError, match="not claimed by"):
        await store.submit_annotation(a1.id, "p003", 2, "x")
    await store.submit_annotation(a1.id, "p002", 2, "probably")
    a2 = await store.claim("p003", TaskKind.ANNOTATE)
    assert await store.submit_annotation(a2.id, "p003", 3, "probably not") is None  # 1 step apart: no arbitration
    assert (await store.export_rows())[0]["arbitrator_rating"] is None
    with pytest.raises(ClaimError):
        await store.claim("p004", TaskKind.ARBITRATE)
    with pytest.raises(InputError, match="already exists"):
        await store.add_participants([pool()[0], Participant(id="new-one")])
    assert "new-one" not in {p.id for p in await store.list_participants()}
    assert did


async def test_a_persona_rating_carries_the_model_that_wrote_it(store: StarStore) -> None:
    """Each rating names its writer's model when an LLM persona wrote it (exported per rating, so
    the analysis can tell two persona models apart within a campaign); a person's rating carries
    none; a model stamp on a person's rating, and a persona's rating without one, are refused with
    nothing stored."""
    sims = [
        Participant(id=f"sim-{i}", demographics={"race": ["White"], "gender": ["Female"]}, simulated=True)
        for i in range(3)
    ]
    await store.add_participants([*people("p000", "p001"), *sims])
    await store.create_campaign("c1", generate_instructions(POLICY, SPACE, 2, seed=1, rules=RULE))
    did = await red_team(store, "p000")
    a1 = await store.claim("p001", TaskKind.ANNOTATE)
    with pytest.raises(InputError, match="'p001' is a person, not a simulated persona"):
        await store.submit_annotation(a1.id, "p001", 1, "breaks it", model="scripted:a@0123456789ab")
    await store.submit_annotation(a1.id, "p001", 1, "breaks it")
    a2 = await store.claim("sim-0", TaskKind.ANNOTATE)
    with pytest.raises(InputError, match="empty or longer than 300"):
        await store.submit_annotation(a2.id, "sim-0", 4, "fine", model=" ")
    with pytest.raises(InputError, match="'sim-0' is a simulated persona: its rating needs the model") as unstamped:
        await store.submit_annotation(a2.id, "sim-0", 4, "fine")
    assert "model_label" in (unstamped.value.hint or "")
    assert await store.submit_annotation(a2.id, "sim-0", 4, "fine", model="scripted:a@0123456789ab") is not None
    arb = await store.claim("sim-1", TaskKind.ARBITRATE)
    await store.submit_arbitration(arb.id, "sim-1", 2, "the first is right", model="scripted:b@ba9876543210")
    [row] = await store.export_rows("c1")
    assert row["dialogue_id"] == did
    assert (row["annotator1_id"], row["annotator1_model"]) == ("p001", None)
    assert (row["annotator2_id"], row["annotator2_model"]) == ("sim-0", "scripted:a@0123456789ab")
    assert row["arbitrator_model"] == "scripted:b@ba9876543210"


async def test_group_matching_half_in_half_out_and_annotators_in_group(store: StarStore) -> None:
    await store.add_participants(pool(96))
    items = generate_instructions(POLICY, SPACE, 720, seed=2, rules=["hate-speech"])
    await store.create_campaign("c1", items)
    # every cell of 4 instructions gets 2 in-group and 2 out-group attacker slots
    statuses: Counter[str] = Counter()
    per_group: dict[str, Counter[str]] = {}
    for task in await store.list_tasks():
        r = task.requirement
        statuses[r["attacker"]] += 1
        per_group.setdefault(json.dumps(r["group"], sort_keys=True), Counter())[r["attacker"]] += 1
    assert abs(statuses["in"] - statuses["out"]) <= 1  # 50 % in-group within rounding
    assert all(abs(c["in"] - c["out"]) <= 1 for c in per_group.values())
    # an in-group red teamer gets only in-group tasks, an out-group one only out-group tasks
    dids = []
    for pid in ("p000", "p001", "p002", "p003"):
        task = await store.claim(pid, TaskKind.RED_TEAM)
        person = await store.participant(pid)
        assert person.in_group(task.requirement["group"]) is (task.requirement["attacker"] == "in")
        did = await store.start_dialogue(task.id, pid, "t")
        await store.add_turn(did, Turn(role="red_teamer", text="x"))
        await store.finish_dialogue(did, pid, PreAnnotation(assigned_rule_broken=False))
        dids.append((did, task.requirement["group"]))
    for _ in dids:
        for _ in range(2):
            for p in pool(96):
                try:
                    t = await store.claim(p.id, TaskKind.ANNOTATE)
                except ClaimError:
                    continue
                assert p.in_group(t.requirement["group"]) is True
                await store.submit_annotation(t.id, p.id, 2, "r")
                break


async def test_unknown_demographics_and_shortfall_and_relaxation(store: StarStore) -> None:
    shy = Participant(id="shy", demographics={"race": ["prefer not to say"], "gender": ["Female"]})
    await store.add_participants([shy])
    items = generate_instructions(POLICY, SPACE, 30, seed=3, rules=["stereotypes"])
    await store.create_campaign("c1", items)
    short = await store.shortfall("c1")
    assert short and all(s["eligible_participants"] == 0 for s in short)
    race_tasks = [s for s in short if "race" in s["requirement"]["group"]]
    assert race_tasks  # nobody can take race-targeted tasks: shortfall is reported per requirement
    taken = []
    reason = ""
    for _ in range(100):  # without relaxing she only ever gets gender-only tasks she matches
        try:
            taken.append(await store.claim("shy", TaskKind.RED_TEAM))
        except ClaimError as exc:
            reason = str(exc)
            break
    assert "demographics unknown" in reason
    assert taken and all("race" not in t.requirement["group"] for t in taken)
    relaxed = await store.claim("shy", TaskKind.RED_TEAM, relax=True)
    assert relaxed.relaxed is not None and relaxed.relaxed.startswith("relaxed:")


async def test_batch_assignment_respects_matching_and_balances_load(store: StarStore) -> None:
    people = pool(60)
    await store.add_participants(people)
    items = generate_instructions(POLICY, SPACE, 400, seed=9)
    await store.create_campaign("c1", items)
    result = await store.assign_all(TaskKind.RED_TEAM, campaign="c1")
    assert result["assigned"] + sum(s["open_tasks"] for s in result["shortfall"]) == 400
    by_id = {p.id: p for p in people}
    rows = [(t.participant_id, t.requirement, t.status) for t in await store.list_tasks()]
    loads = Counter(pid for pid, _, status in rows if status == "claimed")
    for pid, req, status in rows:
        if status == "claimed":
            r = req
            if "attacker" in r:
                assert by_id[pid].in_group(r["group"]) is (r["attacker"] == "in")
    assert max(loads.values()) - min(loads.values()) <= max(loads.values()) // 2 + 2
    again = await store.assign_all(TaskKind.RED_TEAM, campaign="c1")
    assert again["assigned"] == 0  # nothing assigned twice


async def test_the_export_streams_in_batches_with_the_same_rows(store: StarStore) -> None:
    await store.add_participants(pool())
    await store.create_campaign("c1", generate_instructions(POLICY, SPACE, 5, seed=3, rules=["medical-advice"]))
    dialogues = [await red_team(store, f"p00{i}") for i in (1, 2, 3, 4, 6)]
    a = await store.claim("p000", TaskKind.ANNOTATE)
    await store.submit_annotation(a.id, "p000", 2, "borderline")
    whole = await store.export_rows("c1")
    assert [r["dialogue_id"] for r in whole] == dialogues  # oldest first, each once
    for batch in (1, 2, 4):  # pages that split the campaign every way
        assert [r async for r in store.iter_export_rows("c1", batch=batch)] == whole
    rated = next(r for r in whole if r["dialogue_id"] == a.dialogue_id)
    assert rated["annotator1_rating"] == 2 and rated["annotator1_required"] is None
    assert all(len(r["turns"]) == 6 for r in whole)


# -- leases, out-group slots, batch assignment, declines and quotas --------------------------------
@pytest.mark.short_leases
async def test_an_expired_red_team_lease_requeues_the_instruction(store: StarStore, clock: Clock) -> None:
    await store.add_participants([person("a"), person("b")])
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 1, seed=1, rules=["sexually-explicit"]))
    task = await store.claim("a", TaskKind.RED_TEAM, campaign="c")
    assert task.lease_expires_at == clock.now + timedelta(seconds=60)
    did = await store.start_dialogue(task.id, "a", "t")
    await store.add_turn(did, Turn(role="red_teamer", text="first"))
    clock.advance(59)  # a turn renewed the lease: still held
    with pytest.raises(ClaimError):
        await store.claim("b", TaskKind.RED_TEAM, campaign="c")
    clock.advance(61)  # the holder vanished (kill -9, closed tab)
    again = await store.claim("b", TaskKind.RED_TEAM, campaign="c")
    assert again.id != task.id and again.instruction_id == task.instruction_id
    assert (await store.task(task.id)).status is TaskStatus.RELEASED
    with pytest.raises(InputError, match="not in progress"):
        await store.add_turn(did, Turn(role="red_teamer", text="too late"))
    with pytest.raises(InputError):
        await store.finish_dialogue(did, "a", PreAnnotation(assigned_rule_broken=False))
    rows = await store.export_rows("c")
    assert [r["status"] for r in rows] == ["abandoned"]
    assert [t["text"] for t in rows[0]["turns"]] == ["first"]  # nothing stored is lost


@pytest.mark.short_leases
async def test_an_expired_annotation_goes_back_to_others_but_not_to_its_holder(store: StarStore, clock: Clock) -> None:
    await store.add_participants([person(p) for p in ("a", "b", "c", "d")])
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 1, seed=1, rules=["sexually-explicit"]))
    task = await store.claim("a", TaskKind.RED_TEAM, campaign="c")
    did = await store.start_dialogue(task.id, "a", "t")
    await store.add_turns(did, [Turn(role="red_teamer", text="x"), Turn(role="target", text="y")])
    await store.finish_dialogue(did, "a", PreAnnotation(assigned_rule_broken=False))
    held = await store.claim("b", TaskKind.ANNOTATE, campaign="c")
    await store.claim("c", TaskKind.ANNOTATE, campaign="c")
    clock.advance(120)
    assert await store.expire_leases("c") == 2
    assert (await store.task(held.id)).status is TaskStatus.OPEN
    with pytest.raises(ClaimError, match="already saw"):
        await store.claim("b", TaskKind.ANNOTATE, campaign="c")
    got = await store.claim("d", TaskKind.ANNOTATE, campaign="c")
    assert got.dialogue_id == did
    short = await store.shortfall("c")
    assert short == [
        {
            "kind": "annotate",
            "requirement": {"matching": "none"},
            "reason": "every eligible participant has already seen the dialogue",
            "open_tasks": 1,
            "eligible_participants": 4,
        }
    ]


@pytest.mark.short_leases
async def test_outgroup_annotator_share_opens_in_and_out_slots(store: StarStore) -> None:
    people = [person(f"w{i}", "White", "Female") for i in range(4)] + [
        person(f"b{i}", "Black or African American", "Male") for i in range(4)
    ]
    await store.add_participants(people)
    items = [i for i in generate_instructions(POLICY, SPACE, 200, seed=5, rules=["hate-speech"]) if i.target_group]
    items = [i for i in items if i.target_group == {"race": "White"}][:4]
    await store.create_campaign("c", items, outgroup_annotator_share=0.5)
    assert (await store.campaign_settings("c")).outgroup_annotator_share == 0.5
    dialogues = []
    for pid in ("w0", "b0", "w1", "b1"):
        task = await store.claim(pid, TaskKind.RED_TEAM, campaign="c")
        did = await store.start_dialogue(task.id, pid, "t")
        await store.add_turn(did, Turn(role="red_teamer", text="x"))
        await store.finish_dialogue(did, pid, PreAnnotation(assigned_rule_broken=False))
        dialogues.append(did)
    reqs = [t.requirement for t in await store.list_tasks(kind=TaskKind.ANNOTATE)]
    assert sorted(r["annotator"] for r in reqs) == ["in"] * 4 + ["out"] * 4  # 50/50, one of each per dialogue
    result = await store.assign_all(TaskKind.ANNOTATE, campaign="c")
    assert result["assigned"] == 8 and result["shortfall"] == []
    for task_id, pid in result["assignments"].items():
        await store.submit_annotation(task_id, pid, 3, "probably fine")
    for row in await store.export_rows("c"):
        for i in (1, 2):
            assert row[f"annotator{i}_in_group"] is (row[f"annotator{i}_required"] == "in")
        assert {row["annotator1_required"], row["annotator2_required"]} == {"in", "out"}


@pytest.mark.short_leases
async def test_balanced_batch_assignment_with_a_cap(store: StarStore) -> None:
    await store.add_participants([person(f"p{i}") for i in range(7)])
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 30, seed=2, rules=["sexually-explicit"]))
    result = await store.assign_all(TaskKind.RED_TEAM, campaign="c", participant_ids=[f"p{i}" for i in range(6)])
    loads = {pid: list(result["assignments"].values()).count(pid) for pid in (f"p{i}" for i in range(7))}
    assert loads["p6"] == 0 and {loads[f"p{i}"] for i in range(6)} == {5}
    await store.create_campaign("d", generate_instructions(POLICY, SPACE, 10, seed=3, rules=["sexually-explicit"]))
    capped = await store.assign_all(TaskKind.RED_TEAM, campaign="d", max_per_participant=1)
    assert capped["assigned"] == 7
    assert capped["shortfall"][0]["reason"] == "every eligible participant is at the per-participant limit"
    await store.create_campaign("e", generate_instructions(POLICY, SPACE, 10, seed=5, rules=["sexually-explicit"]))
    first = await store.assign_all(TaskKind.RED_TEAM, campaign="e", limit=4)
    assert first["assigned"] == 4 and len(set(first["assignments"].values())) == 4  # a round: one each


@pytest.mark.short_leases
async def test_declines_quotas_and_people_shortfall(store: StarStore) -> None:
    """On both databases: a declined instruction is never offered to its decliner again (claim and
    batch), a per-person quota moves the next claim to another campaign, and a dialogue's two
    annotation tasks count as a shortfall of one when one eligible annotator is left."""
    doc = Participant(id="doc", expertise=["medical"], roles=["annotator"])
    await store.add_participants([person("a"), person("b"), doc])
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 2, seed=1, rules=["sexually-explicit"]))
    first = await store.claim("a", TaskKind.RED_TEAM, campaign="c")
    await store.release(first.id, "a", decline=True)
    second = await store.claim("a", TaskKind.RED_TEAM, campaign="c")
    assert second.instruction_id != first.instruction_id
    await store.release(second.id, "a", decline=True)
    with pytest.raises(ClaimError, match="skipped this instruction"):
        await store.claim("a", TaskKind.RED_TEAM, campaign="c")
    assert (await store.assign_all(TaskKind.RED_TEAM, campaign="c", participant_ids=["a"]))["assigned"] == 0
    await store.create_campaign(
        "q",
        generate_instructions(POLICY, SPACE, 3, seed=2, rules=["medical-advice"]),
        quota={"red_team": 1},
    )
    for pid in ("b", "a"):
        mine = await store.claim(pid, TaskKind.RED_TEAM, campaign="q")
        did = await store.start_dialogue(mine.id, pid, "t")
        await store.add_turns(did, [Turn(role="red_teamer", text="q"), Turn(role="target", text="a")])
        await store.finish_dialogue(did, pid, PreAnnotation(assigned_rule_broken=False))
    nxt = await store.claim("b", TaskKind.RED_TEAM)  # q's quota reached: c's task instead
    assert nxt.campaign == "c"
    short = await store.shortfall("q")
    assert {(s["kind"], s["open_tasks"], s["reason"]) for s in short} == {
        (
            "annotate",
            2,
            "too few eligible participants who have not seen the dialogue (each task needs another person)",
        ),
        ("red_team", 1, "every eligible participant reached the campaign's per-person quota"),
    }
    with pytest.raises(InputError, match="set when it is created"):
        await store.update_campaign_settings("q", quota={})


# -- a campaign's lifecycle and membership ---------------------------------------------------------
async def test_a_claim_skips_paused_campaigns_and_takes_them_again_on_resume(store: StarStore) -> None:
    await store.add_participants(people("a", "b", "c"))
    await store.create_campaign("old", generate_instructions(POLICY, SPACE, 2, seed=1, rules=RULE))
    await store.create_campaign("new", generate_instructions(POLICY, SPACE, 2, seed=2, rules=RULE))
    assert await store.campaign_statuses(["old", "new", "legacy"]) == {"old": "live", "new": "live", "legacy": "live"}
    held = await store.claim("a", TaskKind.RED_TEAM)
    assert held.campaign == "old"  # oldest first while both are open
    assert await store.set_campaign_status("old", "paused") == []
    assert await store.campaign_status("old") == "paused"
    # the older campaign's remaining open task is skipped: the claim takes the newer campaign's
    assert (await store.claim("b", TaskKind.RED_TEAM)).campaign == "new"
    with pytest.raises(ClaimError):
        await store.claim("c", TaskKind.RED_TEAM, campaign="old")
    # a batch assignment leaves the paused campaign alone too
    batch = await store.assign_all(TaskKind.RED_TEAM, participant_ids=["c"])
    assert {(await store.task(t)).campaign for t in batch["assignments"]} == {"new"}
    assert (await store.task_counts("old"))["red_team"] == {"open": 1, "claimed": 1}
    # the task held when the campaign was paused is finished and opens its annotations
    dialogue = await start_red_team(store, "a", held.id)
    opened = await store.finish_dialogue(dialogue, "a", PreAnnotation(assigned_rule_broken=True))
    assert len(opened) == 2
    with pytest.raises(ClaimError):  # the annotations wait for the campaign to resume
        await store.claim("b", TaskKind.ANNOTATE)
    await store.set_campaign_status("old", "live")
    assert (await store.claim("b", TaskKind.ANNOTATE)).campaign == "old"
    assert (await store.claim("c", TaskKind.RED_TEAM)).campaign == "old"


async def test_closing_releases_held_tasks_refuses_submissions_and_is_final(store: StarStore) -> None:
    await store.add_participants(people("a", "b", "c", "d"))
    await store.create_campaign("c1", generate_instructions(POLICY, SPACE, 3, seed=1, rules=RULE))
    first = await store.claim("a", TaskKind.RED_TEAM, campaign="c1")
    dialogue = await start_red_team(store, "a", first.id)
    await store.finish_dialogue(dialogue, "a", PreAnnotation(assigned_rule_broken=True))
    annotation = await store.claim("b", TaskKind.ANNOTATE)
    started = await store.claim("c", TaskKind.RED_TEAM)  # a dialogue under way when the lead closes
    started_dialogue = await start_red_team(store, "c", started.id)
    untouched = await store.claim("d", TaskKind.RED_TEAM)  # claimed, never started
    released = await store.set_campaign_status("c1", "closed")
    assert sorted(released) == sorted([(annotation.id, "b"), (started.id, "c"), (untouched.id, "d")])
    assert await store.claimed_tasks("b") == [] and await store.claimed_tasks("c") == []
    assert (await store.dialogue_info(started_dialogue))["status"] == "abandoned"  # its turns kept
    assert len(await store.dialogue_turns(started_dialogue)) == 2
    # submissions are refused with the reason, whatever the task's state
    with pytest.raises(CampaignClosedError, match="closed by its lead"):
        await store.submit_annotation(annotation.id, "b", 1, "it broke the rule")
    with pytest.raises(CampaignClosedError):
        await store.add_turns(started_dialogue, [Turn(role="red_teamer", text="more")])
    with pytest.raises(CampaignClosedError):
        await store.finish_dialogue(started_dialogue, "c", PreAnnotation(assigned_rule_broken=False))
    with pytest.raises(CampaignClosedError):
        await store.start_dialogue(untouched.id, "d", "scripted")
    for kind in (TaskKind.RED_TEAM, TaskKind.ANNOTATE):
        with pytest.raises(ClaimError):
            await store.claim("b", kind)
    assert (await store.assign_all(TaskKind.ANNOTATE))["assigned"] == 0
    # final: neither resumed nor paused; closing again is a no-op that releases nothing more
    for status in ("live", "paused", "draft"):
        with pytest.raises(InputError, match="final"):
            await store.set_campaign_status("c1", status)
    assert await store.set_campaign_status("c1", "closed") == []
    assert await store.campaign_status("c1") == "closed"
    # the submitted work stays in the export
    rows = await store.export_rows("c1")
    assert {r["status"] for r in rows} == {"submitted", "abandoned"}
    with pytest.raises(InputError, match="unknown campaign status"):
        await store.set_campaign_status("c1", "archived")
    with pytest.raises(InputError, match="no campaign"):
        await store.set_campaign_status("nowhere", "paused")


async def test_a_draft_takes_no_claims_until_it_is_launched(store: StarStore) -> None:
    await store.add_participants(people("a", "b"))
    await store.create_campaign("d", generate_instructions(POLICY, SPACE, 2, seed=1, rules=RULE), status="draft")
    assert await store.campaign_status("d") == "draft"
    with pytest.raises(ClaimError):
        await store.claim("a", TaskKind.RED_TEAM)
    assert await store.available("a", TaskKind.RED_TEAM) == 0
    assert (await store.assign_all(TaskKind.RED_TEAM))["assigned"] == 0
    with pytest.raises(InputError, match="draft"):
        await store.set_campaign_status("d", "paused")
    assert await store.set_campaign_status("d", "live") == []
    held = await store.claim("a", TaskKind.RED_TEAM)
    assert held.campaign == "d"
    with pytest.raises(InputError, match="cannot become a draft"):
        await store.set_campaign_status("d", "draft")
    with pytest.raises(InputError, match="unknown campaign status"):
        await store.create_campaign("e", generate_instructions(POLICY, SPACE, 1, seed=2, rules=RULE), status="open")
    assert not await store.has_campaign("e")


async def test_the_data_version_changes_with_submitted_work_only(store: StarStore) -> None:
    await store.add_participants(people("a", "b"))
    await store.create_campaign("v", generate_instructions(POLICY, SPACE, 1, seed=1, rules=RULE))
    first = await store.data_version("v")
    held = await store.claim("a", TaskKind.RED_TEAM)
    dialogue = await start_red_team(store, "a", held.id)
    assert await store.data_version("v") == first  # claimed and talking: nothing submitted yet
    await store.finish_dialogue(dialogue, "a", PreAnnotation(assigned_rule_broken=True))
    second = await store.data_version("v")
    assert second != first
    annotation = await store.claim("b", TaskKind.ANNOTATE)
    assert await store.data_version("v") == second
    await store.submit_annotation(annotation.id, "b", 2, "probably")
    assert await store.data_version("v") not in (first, second)
    assert await store.data_version("elsewhere") != second


async def test_a_members_only_campaign_is_taken_by_its_members_alone(store: StarStore) -> None:
    await store.add_participants(people("m", "n", "x"))
    await store.create_campaign("club", generate_instructions(POLICY, SPACE, 3, seed=1, rules=RULE), members_only=True)
    await store.create_campaign("all", generate_instructions(POLICY, SPACE, 1, seed=2, rules=RULE))
    assert await store.members_only("club") is True and await store.members_only("all") is False
    assert await store.add_members("club", ["m", "n"]) == 2
    assert await store.add_members("club", ["m"]) == 0  # again: a no-op
    with pytest.raises(InputError, match="unknown participants"):
        await store.add_members("club", ["m", "ghost"])
    assert await store.members("club") == ["m", "n"]
    # the non-member gets the open campaign's task though the club's are older, then nothing
    assert (await store.claim("x", TaskKind.RED_TEAM)).campaign == "all"
    with pytest.raises(ClaimError, match="not a member of this campaign"):
        await store.claim("x", TaskKind.RED_TEAM)
    held = await store.claim("m", TaskKind.RED_TEAM)
    assert held.campaign == "club"
    # removing a member releases what they hold of the campaign; their claims stop
    assert await store.remove_member("club", "m") == [held.id]
    assert await store.claimed_tasks("m") == []
    with pytest.raises(ClaimError):
        await store.claim("m", TaskKind.RED_TEAM)
    assert (await store.shortfall("club")) == []  # n, still a member, may take the three
    # removing someone who is not a member (again, unknown, never added) changes nothing and says so
    for nobody in ("m", "ghost", "x"):
        with pytest.raises(InputError, match=f"'{nobody}' is not a member of campaign 'club'; nothing was changed"):
            await store.remove_member("club", nobody)
    assert await store.members("club") == ["n"]
    # without an eligible member the shortfall and a batch assignment say so
    await store.remove_member("club", "n")
    short = await store.shortfall("club")
    assert [(s["reason"], s["open_tasks"]) for s in short] == [
        ("no eligible participant is a member of the campaign", 3)
    ]
    batch = await store.assign_all(TaskKind.RED_TEAM, participant_ids=["n", "x"])
    assert batch["assigned"] == 0
    assert batch["shortfall"][0]["reason"] == "no eligible participant is a member of the campaign"
    # opened to everyone: the non-member takes it
    await store.set_members_only("club", False)
    assert (await store.claim("x", TaskKind.RED_TEAM)).campaign == "club"
    with pytest.raises(InputError):
        await store.set_members_only("nowhere", True)


# -- lookups and refusals --------------------------------------------------------------------------
async def test_tasks_are_listed_oldest_first_and_unknown_ids_are_refused(store: StarStore) -> None:
    await store.add_participants(people("a"))
    await store.create_campaign("c", generate_instructions(POLICY, SPACE, 3, seed=1, rules=RULE))
    await store.create_campaign("d", generate_instructions(POLICY, SPACE, 2, seed=2, rules=RULE))
    listed = await store.list_tasks()
    assert [t.campaign for t in listed] == ["c", "c", "c", "d", "d"]
    assert [t.id for t in await store.list_tasks("d", kind=TaskKind.RED_TEAM)] == [t.id for t in listed[3:]]
    assert await store.list_tasks("c", kind=TaskKind.ANNOTATE) == []
    taken = await store.claim("a", TaskKind.RED_TEAM)
    assert taken == listed[0].model_copy(
        update={"status": TaskStatus.CLAIMED, "participant_id": "a", "lease_expires_at": taken.lease_expires_at}
    )
    assert await store.task(taken.id) == taken
    assert await store.campaigns() == ["c", "d"] and await store.has_campaign("e") is False
    for lookup, what in (
        (lambda: store.task("nope"), "unknown task 'nope'"),
        (lambda: store.participant("nobody"), "unknown participant 'nobody'"),
        (lambda: store.instruction("c:nope"), "unknown instruction 'c:nope'"),
        (lambda: store.dialogue_info("nope"), "unknown dialogue 'nope'"),
        (lambda: store.dialogue_instruction("nope"), "unknown dialogue 'nope'"),
        (lambda: store.renew_lease("nope", "a"), "unknown task 'nope'"),
        (lambda: store.plan_and_done("e"), "no campaign 'e' in this store"),
        (lambda: store.update_participant(Participant(id="nobody")), "unknown participant 'nobody'"),
    ):
        with pytest.raises(InputError, match=what):
            await lookup()
    with pytest.raises(InputError, match="is not claimed by 'b'"):
        await store.renew_lease(taken.id, "b")
    with pytest.raises(InputError, match="unknown participant 'nobody'"):
        await store.claim("nobody", TaskKind.RED_TEAM)
    assert await store.dialogue_turns("nope") == [] and await store.dialogue_of_task(taken.id) is None


async def test_a_plan_is_stored_whole_or_not_at_all(store: StarStore) -> None:
    items = generate_instructions(POLICY, SPACE, 3, seed=1, rules=RULE)
    assert await store.create_campaign("c", items, quota={"annotate": 2}) == 3
    with pytest.raises((InputError, IntegrityError)):  # the same instruction twice in one campaign
        await store.create_campaign("c", items[2:] + items[:1])
    assert (await store.task_counts("c"))["red_team"] == {"open": 3}
    assert len((await store.plan_and_done("c"))[0]) == 3
    with pytest.raises(ValueError, match="quota for unknown task kinds"):
        await store.create_campaign("d", items, quota={"chat": 1})
    assert await store.campaigns() == ["c"] and await store.quotas(["c", "d"]) == {"c": {"annotate": 2}, "d": {}}
    with pytest.raises(InputError, match="already exists"):
        await store.add_participants([Participant(id="x"), Participant(id="x")])
    assert await store.list_participants() == []


async def test_available_counts_what_a_claim_would_give_one_per_dialogue(store: StarStore) -> None:
    await store.add_participants(people("red", "ann1", "ann2", "ann3"))
    await store.create_campaign("c1", generate_instructions(POLICY, SPACE, 3, seed=1, rules=RULE))
    assert await store.available("ann1", TaskKind.ANNOTATE) == 0  # nothing to annotate yet
    assert await store.available("red", TaskKind.RED_TEAM) == 3
    await red_team(store, "red")
    assert await store.available("red", TaskKind.RED_TEAM) == 2
    # two open annotation slots of one dialogue: one for each person, never both
    assert await store.available("ann1", TaskKind.ANNOTATE) == 1
    assert await store.available("red", TaskKind.ANNOTATE) == 0  # their own dialogue
    await store.claim("ann1", TaskKind.ANNOTATE)
    assert await store.available("ann1", TaskKind.ANNOTATE) == 0  # seen
    assert await store.available("ann2", TaskKind.ANNOTATE) == 1
    await store.claim("ann2", TaskKind.ANNOTATE)
    assert await store.available("ann3", TaskKind.ANNOTATE) == 0
    with pytest.raises(ClaimError):
        await store.claim("ann3", TaskKind.ANNOTATE)
    await store.set_campaign_status("c1", "paused")
    assert await store.available("red", TaskKind.RED_TEAM) == 0  # a paused campaign gives nothing
