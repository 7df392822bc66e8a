"""The lead's results and the campaign's launch, through the lab's pages: the results panel and its
JSON route (same auth, unchanged answers when nothing changed), the analysis report cached until
the data changes and readable without the paper, drafts that nobody takes before launch, the
launch checks (a target that cannot be built, the areas, people), and a red teamer's begin that
fails cleanly when the target cannot be built."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from fastapi import FastAPI

from psychoalign.config import Settings
from psychoalign.web.accounts import Role
from psychoalign.web.star import StarLab
from psychoalign.web.star import results as results_module
from tests.web.star.test_lab import browser, create_campaign, launch, rate, red_team, task_id
from tests.weblab import Browser, add_person, lab_app, lab_settings

ROLES = ["red_teamer", "annotator", "arbitrator"]


async def rated_campaign(app: FastAPI, star: StarLab, name: str, ratings: tuple[int, int]) -> Browser:
    """A live campaign of one dialogue, red-teamed by ``rt`` and annotated with ``ratings``."""
    await add_person(star, "lead", Role.LEAD)
    for who in ("rt", "a1", "a2"):
        await add_person(star, who, roles=ROLES)
    lead = await browser(app, "lead")
    await create_campaign(lead, name, ["sexually-explicit"], n=1)
    await red_team(await browser(app, "rt"), ["hello"])
    await rate(await browser(app, "a1"), "annotate", ratings[0], "first view")
    await rate(await browser(app, "a2"), "annotate", ratings[1], "second view")
    return lead


def visible_text(html: str) -> str:
    """What a reader sees without hovering: tags, tooltips and the collapsed method notes left out."""
    html = re.sub(r"<details.*?</details>", " ", html, flags=re.S)
    return re.sub(r"<[^>]+>", " ", html)


async def test_the_panel_shows_agreement_break_rates_arbitration_and_coverage(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    lead = await rated_campaign(app, star, "panel", (1, 4))
    page = (await lead.get("/lead/campaigns/panel")).text
    assert 'id="results"' in page and 'data-results-url="/lead/campaigns/panel/results.json"' in page
    assert '<span id="results-alpha-n">1</span> dialogue rated twice' in page
    # one item: no figure, so no caveat about how far it can swing (the caveat sits beside a figure only)
    assert 'id="results-small-sample"' not in page and "not estimable yet" in page
    assert "95% interval" not in page
    assert "1 of 1 dialogue rated twice · 0 arbitrated" in page
    assert "1 of 1 planned dialogue submitted" in page
    table = page[
        page.index('id="results-break-rates"') : page.index("</table>", page.index('id="results-break-rates"'))
    ]
    # two ratings: the count, not a rate of 50 % that reads as a finding
    assert "sexually-explicit" in table and "<td>1 of 2 <span" in table and "too few ratings for a rate" in table, table
    assert "50 %" not in table

    first = (await lead.get("/lead/campaigns/panel/results.json")).json()
    assert first["changed"] is True and first["results"]["alpha"]["items"] == 1
    assert first["results"]["arbitration"] == {"rated_twice": 1, "needed": 1, "arbitrated": 0, "rate": None}
    assert 'id="results-alpha-n">1<' in first["html"]
    # the page's version: nothing changed, a tiny answer
    same = (await lead.get(f"/lead/campaigns/panel/results.json?since={first['version']}")).json()
    assert same == {"version": first["version"], "changed": False}
    # an arbitration changes the data: a new version with the new figures
    await add_person(star, "arb", roles=ROLES)
    await rate(await browser(app, "arb"), "arbitrate", 2, "closer to the first")
    after = (await lead.get(f"/lead/campaigns/panel/results.json?since={first['version']}")).json()
    assert after["changed"] is True and after["version"] != first["version"]
    assert after["results"]["arbitration"]["arbitrated"] == 1 and "· 1 arbitrated" in after["html"]


async def test_the_results_route_is_the_leads_alone(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await rated_campaign(app, star, "mine", (2, 2))
    participant = await browser(app, "a1")
    assert (await participant.get("/lead/campaigns/mine/results.json")).status_code == 403
    assert (await Browser(app).get("/lead/campaigns/mine/results.json")).status_code in (303, 401, 403)
    lead = await browser(app, "lead")
    assert (await lead.get("/lead/campaigns/nowhere/results.json")).status_code == 404


async def test_the_report_is_built_once_per_data_version_and_reads_without_the_paper(
    lab: tuple[FastAPI, StarLab], monkeypatch: pytest.MonkeyPatch
) -> None:
    app, star = lab
    lead = await rated_campaign(app, star, "rep", (1, 4))
    built: list[str] = []
    original = results_module.build_report

    def counting(name: str, rows: list[dict[str, Any]], people: list[dict[str, Any]], version: str | None) -> str:
        built.append(name)
        return original(name, rows, people, version)

    monkeypatch.setattr(results_module, "build_report", counting)
    first = await lead.get("/lead/campaigns/rep/report")
    assert first.status_code == 200 and "sandbox" in first.headers["content-security-policy"]
    again = await lead.get("/lead/campaigns/rep/report")
    assert again.text == first.text and built == ["rep"]  # the same data: not built again
    await add_person(star, "arb", roles=ROLES)
    await rate(await browser(app, "arb"), "arbitrate", 2, "closer to the first")
    third = await lead.get("/lead/campaigns/rep/report")
    assert built == ["rep", "rep"] and third.text != first.text
    # each report names the state of the store it read: one dialogue and two annotations, then the arbitration too
    assert "Read from the lab&#x27;s store: campaign rep with 3 submitted task(s)" in first.text
    assert "Read from the lab&#x27;s store: campaign rep with 4 submitted task(s)" in third.text
    assert "Campaigns read: rep (1 dialogues: submitted 1)" in third.text

    html = third.text
    assert "href='/lead/campaigns/rep'>← Back to the campaign rep</a>" in html  # the way back to the lab
    shown = visible_text(html)
    for jargon in ("nominal_broken", "D_o(item)", "arbitrator_sided_with", "dialogues_with_two_annotations"):
        assert jargon not in shown, jargon
    assert "title='nominal_broken: nominal alpha on the ratings reduced to two values" in html  # in the tooltip
    assert "D_o(item)/D_e" in html  # explained in a tooltip, not shown raw
    # arbitration as a table, not JSON
    assert "<td>of those, two or more steps apart (arbitration needed)</td><td>1</td>" in html
    assert "<pre" not in html
    # one item: no interval, a small-sample warning instead
    assert "Small sample:" in html and "none: fewer than 10 items" in html
    # consistent with itself: raters found, so the groups section says why it compares none
    if "raters found there" in html:
        assert "no rater attributes (demographics" not in html


async def test_a_draft_is_taken_by_nobody_until_its_lead_launches_it(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    await create_campaign(lead, "soon", ["sexually-explicit", "hate-speech"], n=4, live=False)
    assert await star.store.campaign_status("soon") == "draft"
    page = (await lead.get("/lead/campaigns/soon?msg=campaign_draft")).text
    assert 'id="campaign-status">draft<' in page and "Created as a draft" in page
    # the areas red teamers will read beside each rule: hate speech under its own area
    areas = page[page.index('id="launch-areas"') : page.index("</table>", page.index('id="launch-areas"'))]
    assert "Generate hateful or discriminatory content" in areas and "misinform" not in areas
    assert "hate-speech" in areas and "sexually-explicit" in areas
    records, _ = await star.store.plan_and_done("soon")
    assert {r["rule"]: r["area"] for r in records} == {"hate-speech": "hate", "sexually-explicit": "sexual"}
    # nobody is there yet: the launch says so before anyone is asked
    assert 'id="launch-warnings"' in page and "red-teaming task" in page and "no annotator can take" in page
    # a participant sees nothing of a draft
    await add_person(star, "p", roles=ROLES)
    p = await browser(app, "p")
    tasks = (await p.get("/tasks")).text
    assert 'id="none-red_team"' in tasks
    assert (await p.post("/tasks/claim", {"kind": "red_team"})).headers["location"] == "/tasks?msg=no_task"
    # launching needs the areas confirmed, and "anyway" while people are short
    await lead.get("/lead/campaigns/soon")
    r = await lead.post("/lead/campaigns/soon/status", {"action": "launch"})
    assert r.status_code == 400 and "confirm the areas" in r.text
    r = await lead.post("/lead/campaigns/soon/status", {"action": "launch", "areas_ok": "yes"})
    assert r.status_code == 409 and "not launched:" in r.text and "launch anyway" in r.text
    assert (await lead.post("/lead/campaigns/soon/status", {"action": "pause"})).status_code == 409  # a draft
    assert await star.store.campaign_status("soon") == "draft"
    await launch(lead, "soon")
    assert await star.store.campaign_status("soon") == "live"
    assert (await lead.post("/lead/campaigns/soon/status", {"action": "launch", "areas_ok": "yes"})).status_code == 409
    r = await p.post("/tasks/claim", {"kind": "red_team"})
    assert "msg" not in r.headers["location"] and "/tasks/" in r.headers["location"]


async def test_enough_people_launch_without_a_warning(lab: tuple[FastAPI, StarLab]) -> None:
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    for who in ("a", "b", "c"):
        await add_person(star, who, roles=ROLES)
    lead = await browser(app, "lead")
    await create_campaign(lead, "ready", ["sexually-explicit"], n=2, live=False)
    page = (await lead.get("/lead/campaigns/ready")).text
    assert 'id="launch-people-ok"' in page and 'id="launch-warnings"' not in page
    r = await lead.post("/lead/campaigns/ready/status", {"action": "launch", "areas_ok": "yes"})
    assert r.status_code == 303 and await star.store.campaign_status("ready") == "live"


@pytest.fixture
async def broken_target_lab(tmp_path: Path) -> AsyncIterator[tuple[FastAPI, StarLab]]:
    """A lab whose ``broken`` model role is a scripted model whose script has no replies, ``rules``
    or ``default``."""
    settings = lab_settings(tmp_path / "home")
    script = tmp_path / "home" / "no-rules.yaml"
    script.write_text("weather: sunny\n", encoding="utf-8")
    roles = {**settings.model_dump()["roles"], "broken": {"backend": "scripted", "script": str(script)}}
    app, star = lab_app(Settings(home=settings.home, roles=roles))
    yield app, star
    await star.close()


async def test_a_target_that_cannot_be_built_is_refused_at_launch_in_one_line(
    broken_target_lab: tuple[FastAPI, StarLab],
) -> None:
    app, star = broken_target_lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    await lead.get("/lead/campaigns/new")
    form = {"name": "bad", "instructions": "1", "target_kind": "model", "target_role": "broken"}
    assert (await lead.post("/lead/campaigns", {**form, "rules": ["sexually-explicit"]})).status_code == 303
    page = (await lead.get("/lead/campaigns/bad")).text
    assert 'id="launch-problems"' in page and 'id="launch-form"' not in page
    assert "the target (model role &#39;broken&#39;) cannot be built" in page
    r = await lead.post("/lead/campaigns/bad/status", {"action": "launch", "areas_ok": "yes", "anyway": "yes"})
    assert r.status_code == 409 and "not launched: the target (model role" in r.text
    assert "Traceback" not in r.text and await star.store.campaign_status("bad") == "draft"


async def test_a_red_teamers_begin_fails_cleanly_when_the_target_cannot_be_built(
    broken_target_lab: tuple[FastAPI, StarLab], caplog: pytest.LogCaptureFixture
) -> None:
    """A campaign live from before launch checks existed, with a target that cannot be built: the
    red teamer's begin is a page that says what to do (503), the task stays theirs, the log has why."""
    app, star = broken_target_lab
    await add_person(star, "lead", Role.LEAD)
    account = await add_person(star, "rt", roles=ROLES)
    lead = await browser(app, "lead")
    await lead.get("/lead/campaigns/new")
    form = {"name": "old", "instructions": "1", "target_kind": "model", "target_role": "broken"}
    assert (await lead.post("/lead/campaigns", {**form, "rules": ["sexually-explicit"]})).status_code == 303
    await star.store.set_campaign_status("old", "live")  # as a campaign stored by an older release is
    rt = await browser(app, "rt")
    r = await rt.post("/tasks/claim", {"kind": "red_team"})
    tid = task_id(r.headers["location"])
    await rt.follow(await rt.post(f"/tasks/{tid}/start"))
    r = await rt.post(f"/tasks/{tid}/begin", {"topic": "travel"})
    assert r.status_code == 503 and "cannot be reached" in r.text and "the task stays yours" in r.text
    assert "broken" not in r.text and "Traceback" not in r.text  # the role and the script are the lead's
    assert any("cannot be built" in rec.getMessage() for rec in caplog.records)
    assert [t.id for t in await star.store.claimed_tasks(account.participant_id or "")] == [tid]


async def test_the_flash_message_is_dropped_from_the_address_by_the_static_script() -> None:
    """The browser test checks the behaviour; here: the script does it, and no page script is inline."""
    script = (Path(results_module.__file__).parents[1] / "static" / "app.js").read_text(encoding="utf-8")
    assert "history.replaceState" in script and 'params.delete("msg")' in script


def test_panel_alpha_on_one_dialogue_is_not_reported() -> None:
    # One dialogue rated twice (1 and 4): alpha on one item is 0 by construction; the panel showed
    # "0.000 on 1 dialogue rated twice". Two dialogues: a value (with the small-sample warning).
    from psychoalign.web.star.results import panel_results

    one = panel_results([{"status": "submitted", "annotator1_rating": 1, "annotator2_rating": 4}], planned=1)
    assert one["alpha"]["items"] == 1 and one["alpha"]["value"] is None
    two = panel_results(
        [
            {"status": "submitted", "annotator1_rating": 1, "annotator2_rating": 2},
            {"status": "submitted", "annotator1_rating": 4, "annotator2_rating": 4},
        ],
        planned=2,
    )
    assert two["alpha"]["items"] == 2 and two["alpha"]["value"] is not None


async def test_the_report_of_a_campaign_nobody_joined_is_a_page_not_a_temporary_path(
    lab: tuple[FastAPI, StarLab],
) -> None:
    """A draft with no participants registered yet: an (empty) report, not a 409 naming a
    temporary file of the server and a `--raters-id-col` flag of the command line."""
    app, star = lab
    await add_person(star, "lead", Role.LEAD)
    lead = await browser(app, "lead")
    await create_campaign(lead, "fresh", ["sexually-explicit"], n=1, live=False)
    r = await lead.get("/lead/campaigns/fresh/report")
    assert r.status_code == 200, r.text[:300]
    assert "raters.json" not in r.text and "--raters-id-col" not in r.text


def _rows(*pairs: tuple[int, int]) -> list[dict[str, Any]]:
    return [{"status": "submitted", "rule": "r", "annotator1_rating": a, "annotator2_rating": b} for a, b in pairs]


def test_panel_break_rate_needs_three_ratings() -> None:
    """One or two ratings in a rule × group cell make 0, 50 or 100 %: the panel gives the count and
    says why there is no rate; from three ratings on, the rate. Likewise the arbitration share."""
    from psychoalign.web.star.results import MIN_RATE_RATINGS, panel_results

    assert MIN_RATE_RATINGS == 3
    thin = panel_results(_rows((1, 4)), planned=1)["break_rates"]
    assert thin == [
        {"rule": "r", "group": "", "target": None, "ratings": 2, "broken": 1, "rate": None, "min_ratings": 3}
    ]
    enough = panel_results([*_rows((1, 4)), {"status": "submitted", "rule": "r", "annotator1_rating": 2}], planned=2)
    assert enough["break_rates"][0]["ratings"] == 3 and enough["break_rates"][0]["rate"] == 0.667
    # the same for the share of dialogues rated twice that needed an arbitrator
    one = panel_results([{**_rows((1, 4))[0], "arbitration_needed": True}], planned=1)["arbitration"]
    assert one == {"rated_twice": 1, "needed": 1, "arbitrated": 0, "rate": None}
    three = panel_results(
        [{**r, "arbitration_needed": r["annotator1_rating"] == 1} for r in _rows((1, 4), (2, 2), (3, 3))], planned=3
    )
    assert three["arbitration"] == {"rated_twice": 3, "needed": 1, "arbitrated": 0, "rate": 0.333}


def test_panel_alpha_without_variation_is_not_estimable(tmp_path: Path) -> None:
    """Every rating the same value on two dialogues: alpha is 0/0. The panel said "not yet: no
    dialogue has two ratings that vary" (both have two ratings); it says it is not estimable, and why."""
    from psychoalign.web.star.results import panel_results, render_panel
    from psychoalign.web.templating import Templates

    results = panel_results(_rows((2, 2), (2, 2)), planned=2)
    assert results["alpha"]["items"] == 2 and results["alpha"]["value"] is None
    html = render_panel(Templates(None), "c", results)
    alpha = html[html.index('id="results-alpha"') : html.index("</dd>", html.index('id="results-alpha"'))]
    assert "not estimable: every rating so far is the same value" in alpha, alpha
    assert "Small sample" not in alpha and "0.000" not in alpha  # no figure: nothing to swing
    one = render_panel(Templates(None), "c", panel_results(_rows((1, 4)), planned=1))
    assert "not estimable yet: agreement needs at least two dialogues rated twice" in one
    assert 'id="results-small-sample"' not in one
    none = render_panel(Templates(None), "c", panel_results([{"status": "submitted"}], planned=1))
    assert "not yet: no dialogue has two ratings" in none and "estimable" not in none
    assert 'id="results-small-sample"' not in none
    # a figure on fewer than 10 dialogues: the caveat beside it
    few = render_panel(Templates(None), "c", panel_results(_rows((1, 4), (2, 2), (3, 4)), planned=3))
    shown = few[few.index('id="results-alpha"') : few.index("</dd>", few.index('id="results-alpha"'))]
    assert 'id="results-small-sample"' in shown and "this figure can swing" in shown, shown


def test_panel_says_when_its_ratings_are_by_llm_personas() -> None:
    """A campaign annotated by LLM personas showed "Agreement between annotators -0.172 (95%
    interval -0.54 to 0.24)" as if people had rated; the offline report said the raters were
    simulated, the lead's panel did not."""
    from psychoalign.web.star.results import panel_results, render_panel
    from psychoalign.web.templating import Templates

    rows = [
        {**r, "annotator1_simulated": True, "annotator2_simulated": i != 0}
        for i, r in enumerate(_rows((1, 4), (2, 2), (3, 4)))
    ]
    results = panel_results(rows, planned=3)
    assert results["simulated"] == {"ratings": 5, "of": 6, "models": {}}
    html = render_panel(Templates(None), "c", results)
    assert "5 of 6 ratings below are by LLM personas (simulated annotators)" in html
    people = render_panel(Templates(None), "c", panel_results(_rows((1, 4), (2, 2)), planned=2))
    assert "LLM personas" not in people and 'id="results-simulated"' not in people


def test_panel_says_when_its_persona_ratings_came_from_two_models() -> None:
    """Ratings name the model that wrote them: the panel pooled two persona models' ratings into
    one agreement and one set of break rates without a word; it names both above the figures."""
    from psychoalign.web.star.results import panel_results, render_panel
    from psychoalign.web.templating import Templates

    a, b = "model:openai:m@111111111111", "model:openai:<m>@222222222222"
    rows = [
        {**r, "annotator1_simulated": True, "annotator2_simulated": True, "annotator1_model": a, "annotator2_model": b}
        for r in _rows((1, 4), (2, 2), (3, 4))
    ]
    results = panel_results(rows, planned=3)
    assert results["simulated"]["models"] == {a: 3, b: 3}
    html = render_panel(Templates(None), "c", results)
    assert 'id="results-persona-models"' in html
    said = "written by 2 different models (<bdi>model:openai:&lt;m&gt;@222222222222</bdi>: 3; <bdi>" + a + "</bdi>: 3)"
    assert said in html  # escaped, each label isolated
    one = [{**r, "annotator2_model": a} for r in rows]
    assert 'id="results-persona-models"' not in render_panel(Templates(None), "c", panel_results(one, planned=3))


def test_panel_never_pools_two_targets_into_one_break_rate() -> None:
    """A campaign whose PsychoAlign target was built again under another framework version (the
    lab restarted after the framework file changed) red-teamed two targets: the panel gives each
    its own break rates and says why, as the report refuses to pool them (before: one rate)."""
    from psychoalign.web.star.results import panel_results, render_panel
    from psychoalign.web.templating import Templates
    from tests.web.test_probes import HOSTILE, DomCheck

    one, two = "psychoalign:general@1.0#0123456789ab", f"psychoalign:general@2.0#ba9876543210 PROBE{HOSTILE}"
    rows = [{**r, "target": one} for r in _rows((1, 1), (1, 2))] + [{**r, "target": two} for r in _rows((4, 4), (3, 4))]
    results = panel_results(rows, planned=4)
    assert results["targets"] == sorted([one, two])
    by_target = {r["target"]: (r["broken"], r["ratings"], r["rate"]) for r in results["break_rates"]}
    assert by_target == {one: (4, 4, 1.0), two: (0, 4, 0.0)}  # pooled, it read 4 of 8 (50 %)
    html = render_panel(Templates(None), "c", results)
    assert 'id="results-targets"' in html and "<th>Target</th>" in html
    check = DomCheck("panel")
    check.feed(html)
    assert not check.found and check.probes == 2, check.found  # the warning and the table cell
    single = panel_results([{**r, "target": one} for r in _rows((1, 1))], planned=1)
    assert single["break_rates"][0]["target"] is None
    assert 'id="results-targets"' not in render_panel(Templates(None), "c", single)
