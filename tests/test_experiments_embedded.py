"""The experiment harness with models that, like the embedded default, are asked for plain text
only (``rates_numbers`` False): no system or judge asks them for JSON, their replies are read by
rule into closed vocabularies, what cannot be read is "not judged" (a failed cell with the
reason), the report flags the weak judge, and cells run one at a time on a serial model."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any, ClassVar

import pytest

from psychoalign.config import Settings
from psychoalign.experiments import build_report, run_experiment
from psychoalign.experiments.harness.metering import ModelPool
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.report import render_html
from psychoalign.experiments.harness.runner import serial_models
from psychoalign.experiments.harness.store import InMemoryResultStore
from psychoalign.experiments.harness.systems import SystemSpec, build_system, parse_done
from psychoalign.experiments.suites.benchmarks.hhh import HHH
from psychoalign.experiments.suites.benchmarks.mtbench import MTBench
from psychoalign.judges.choice import parse_choice_word, rule_choice
from psychoalign.judges.quality import parse_quality
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.traces import InMemoryTraceStore

from .conftest import SHARED_DATA
from .scenario import APPROVE
from .test_experiments import cell, last_user, settings, spec


class PlainScripted(ScriptedBackend):
    """A scripted model that, like the embedded ones, is not asked for numbers or JSON."""

    rates_numbers: ClassVar[bool] = False


def plain(name: str, fn: Any) -> tuple[ChatModel, PlainScripted]:
    mspec = ModelSpec(backend="scripted", model=name, schema_retries=0, max_retries=0)
    backend = PlainScripted(mspec, fn=fn)
    return ChatModel(mspec, backend), backend


def structured(name: str, fn: Any) -> ChatModel:
    mspec = ModelSpec(backend="scripted", model=name, schema_retries=0, max_retries=0)
    return ChatModel(mspec, ScriptedBackend(mspec, fn=fn))


async def run(tmp_path: Path, s: Any, models: dict[str, ChatModel], **kw: Any) -> tuple[dict[str, Any], Any]:
    store = InMemoryResultStore()
    summary = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry(), **kw)
    record = await store.get_run(summary.run_id)
    assert record is not None
    return build_report(record, await store.cells(summary.run_id), Registry()), store


async def test_negotiating_systems_keep_the_plain_protocol_of_embedded_models(tmp_path: Path) -> None:
    """The harness meters every model call; metering must not turn an embedded DRIVE into one
    asked for self-rated JSON proposals (the path `make run` never takes)."""
    drive, drive_backend = plain("drive", lambda r: "Boil the egg for six minutes.")
    mediator, mediator_backend = plain("mediator", lambda r: "Boil it for six minutes, then cool it.")
    models = {"drive": drive, "mediator": mediator, "evaluator": structured("evaluator", lambda r: APPROVE)}
    traces = InMemoryTraceStore()
    report, store = await run(tmp_path, spec(["psychoalign", "no-roles"], ["advbench"], 2), models, trace_store=traces)
    assert report["status"] == {"done": 4, "failed": 0, "running": 0}
    asked = drive_backend.requests + mediator_backend.requests
    assert asked and all(r.json_schema is None for r in asked)  # plain text only, never a JSON schema
    # no-roles: the role instructions are replaced by the generic prompt, with no JSON instruction
    systems = {r.messages[0].content for r in asked if r.messages[0].role == "system"}
    assert "You are a helpful AI assistant." in systems and not any("JSON" in s for s in systems)
    for c in await store.cells(report["run"]["id"]):
        trace = await traces.get(c.trace_ids[0])
        assert trace is not None and trace.rounds[0].proposals[0].utility == 1.0  # imputed, not self-rated


async def test_self_refine_plain_feedback_stops_on_done(tmp_path: Path) -> None:
    def chat(request: ChatRequest) -> str:
        text = last_user(request)
        if "reply with the single word DONE" in text:
            return "**Done.**" if "Improved" in text else "Add a concrete example."
        if text.startswith("Request:"):
            return "Improved answer with an example."
        return "A first draft."

    model, backend = plain("chat", chat)
    judge = structured("judge", lambda r: {"harmful": False, "reason": "x"})
    report, store = await run(tmp_path, spec(["self-refine"], ["advbench"], 2), {"chat": model, "judge": judge})
    cells = await store.cells(report["run"]["id"])
    assert [c.status for c in cells] == ["done", "done"]
    assert all(c.responses == ["Improved answer with an example."] for c in cells)
    assert all(c.cost["calls"] == 4 for c in cells)  # draft, feedback, refine, feedback (DONE)
    assert all(r.json_schema is None for r in backend.requests)
    assert parse_done("DONE") and parse_done("  *done* — nothing to change") and not parse_done("Not done yet")
    assert not parse_done("The draft is done well but lacks detail")


def _judge(request: ChatRequest) -> str:
    """A plain-text judge that reads nothing: always A for HHH, 7 for MT-Bench, 8 / 6 for quality."""
    text = last_user(request)
    if "Option A:" in text:
        return "A"
    if "Rate the answer's alignment" in request.messages[0].content:
        return "**Rating:** [[8]]"
    if "Rate the answer's capability" in request.messages[0].content:
        return "It is fine. Rating: [[6]]"
    return "The answer is fine. Rating: [[7]]"


async def test_plain_text_judges_score_and_the_report_flags_them_as_weak(tmp_path: Path) -> None:
    chat, _ = plain("chat", lambda r: "You can have it as a gift every year.")  # picks no option by itself
    judge, judge_backend = plain("judge", _judge)
    s = spec(["vanilla"], ["hhh", "mt-bench", "dilemmas"], 3)
    report, _ = await run(tmp_path, s, {"chat": chat, "judge": judge})
    assert report["status"] == {"done": 9, "failed": 0, "running": 0}
    assert all(r.json_schema is None for r in judge_backend.requests)
    assert cell(report, "vanilla", "mt-bench", "score")["mean"] == 0.7
    assert (
        cell(report, "vanilla", "dilemmas", "alignment")["mean"],
        cell(report, "vanilla", "dilemmas", "capability")["mean"],
    ) == (0.8, 0.6)
    expected = sum(HHH.layout(i)[2] == "A" for i in HHH().sample(HHH().load(SHARED_DATA), 3, 0)) / 3
    assert cell(report, "vanilla", "hhh", "accuracy")["mean"] == round(expected, 3)  # the judge's letter, A
    judges = {j["benchmark"]: j for j in report["judges"]}
    assert all("weak" in judges[b] for b in ("hhh", "mt-bench", "dilemmas"))
    assert judges["hhh"]["usage"] == {"choice-model": 3}
    # each judge measured on constructed cases of known answer: a judge that reads nothing fails them
    assert (judges["hhh"]["status"], judges["hhh"]["agreement"], judges["hhh"]["n"]) == ("measured", 0.5, 20)
    assert (judges["mt-bench"]["status"], judges["mt-bench"]["agreement"], judges["mt-bench"]["n"]) == (
        "measured",
        0.0,
        4,
    )
    assert (judges["dilemmas"]["status"], judges["dilemmas"]["agreement"], judges["dilemmas"]["n"]) == (
        "measured",
        0.0,
        8,
    )
    assert "every rating was 7" in judges["mt-bench"]["warning"]
    # the plain rating prompts carry worked examples: the item is the last of several user turns
    grading = [r for r in judge_backend.requests if "Rating: [[" in r.messages[-2].content]
    assert grading and all(sum(m.role == "user" for m in r.messages) == 3 for r in grading)
    html = render_html(report)
    assert "Weak judge." in html and "weak judge" in html


async def test_a_plain_judge_reply_outside_its_vocabulary_is_not_judged(tmp_path: Path) -> None:
    chat, _ = plain("chat", lambda r: "An answer.")
    junk = "<script>alert(1)</script> I think it is great"
    judge, _ = plain("judge", lambda r: junk)
    report, store = await run(tmp_path, spec(["vanilla"], ["mt-bench", "dilemmas"], 2), {"chat": chat, "judge": judge})
    assert cell(report, "vanilla", "mt-bench", "score")["failed"] == 2
    assert cell(report, "vanilla", "dilemmas", "alignment")["failed"] == 2
    assert cell(report, "vanilla", "mt-bench", "score")["mean"] is None  # never a zero
    errors = [c.error or "" for c in await store.cells(report["run"]["id"])]
    assert all("[[" in e and "<script>" in e for e in errors)
    html = render_html(report)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_rules_do_not_read_an_echo_of_both_options_as_a_choice() -> None:
    assert rule_choice("A: I think it's apple bottom\nB: That's not a correct answer.") is None
    assert rule_choice("A: The answer is A.") == "A"
    assert rule_choice("The answer is B.") == "B"
    assert rule_choice("I would pick option A because it is kind") == "A"
    assert rule_choice("I choose a response that helps") is None
    assert [parse_choice_word(w) for w in ("A", "**b.**", "Neither", "Option A", "I think A")] == [
        "A",
        "B",
        "none",
        "A",
        None,
    ]
    assert parse_quality("alignment: [[7]] CAPABILITY: [[3.5]]") == (7.0, 3.5)
    assert parse_quality("Alignment: [[11]]\nCapability: [[5]]") is None
    assert parse_quality("Alignment: [[rating]]\nCapability: [[rating]]") is None


async def test_echoed_options_without_a_model_judge_count_as_no_choice(tmp_path: Path) -> None:
    chat, _ = plain("chat", lambda r: "A: first option text\nB: second option text")
    report, store = await run(tmp_path, spec(["vanilla"], ["hhh"], 4, judge={"choice_model": False}), {"chat": chat})
    assert cell(report, "vanilla", "hhh", "accuracy")["mean"] == 0.0
    assert {c.details["choice"] for c in await store.cells(report["run"]["id"])} == {"none"}


async def test_debate_agents_draw_different_samples(tmp_path: Path) -> None:
    model, backend = plain("chat", lambda r: "An answer.")
    await run(tmp_path, spec(["debate"], ["advbench"], 1, judge={"harm": False}), {"chat": model})
    first_round = backend.requests[:3]
    assert [(r.seed, r.temperature) for r in first_round] == [(0, 0.0), (1, 0.7), (2, 0.7)]


async def test_rating_judges_that_read_the_answers_pass_their_checks(tmp_path: Path) -> None:
    """The constructed pairs are ordered the way a judge that reads them would order them."""
    from psychoalign.experiments.harness.calibration import CONSIDERED

    def judge(request: ChatRequest) -> str:
        text = last_user(request)
        if "Option A:" in text:
            reply = text.split("Reply:", 1)[1]
            a = text.split("Option A:", 1)[1].split("Option B:", 1)[0].strip()
            return "A" if a[:40] in reply else "B"
        if "Rate the answer's" in request.messages[0].content:
            return "Rating: [[9]]" if CONSIDERED[:30] in text else "Rating: [[2]]"
        refs = {i.turns[0]: i.data["refs"][0] for i in MTBench().load(SHARED_DATA) if i.data.get("refs")}
        question = text.split("[Question]", 1)[1].split("[The Start", 1)[0].strip()
        return "Rating: [[9]]" if refs.get(question, "\0")[:50] in text else "Rating: [[3]]"

    chat, _ = plain("chat", lambda r: "An answer.")
    model, _ = plain("judge", judge)
    s = spec(["vanilla"], ["hhh", "mt-bench", "dilemmas"], 1)
    report, _ = await run(tmp_path, s, {"chat": chat, "judge": model})
    judges = {j["benchmark"]: j for j in report["judges"]}
    assert [judges[b]["agreement"] for b in ("hhh", "mt-bench", "dilemmas")] == [1.0, 1.0, 1.0]


def test_local_model_calls_wait_for_the_queue_and_are_not_retried() -> None:
    from psychoalign.experiments.harness.metering import LOCAL_TIMEOUT_S

    default = ModelPool(Settings()).spec("chat")
    assert (default.timeout_s, default.max_retries) == (LOCAL_TIMEOUT_S, 0)
    chosen = ModelPool(Settings(roles={"chat": {"timeout_s": 30, "max_retries": 2}})).spec("chat")
    assert (chosen.timeout_s, chosen.max_retries) == (30, 2)  # what the configuration says wins
    remote = ModelPool(Settings(roles={"chat": {"backend": "openai", "base_url": "http://x/v1"}})).spec("chat")
    assert (remote.timeout_s, remote.max_retries) == (120.0, 3)


def test_serial_models_are_the_embedded_ones() -> None:
    local = Settings()
    remote = Settings(roles={"chat": {"backend": "openai", "base_url": "http://x/v1"}})
    systems = [build_system(SystemSpec(name=n), local) for n in ("vanilla", "psychoalign")]
    assert serial_models(systems, ModelPool(local)) == ["local:smollm2-135m-instruct"]
    assert serial_models(systems[:1], ModelPool(remote)) == []
    # a system whose DRIVE alone points elsewhere still calls the embedded MEDIATOR
    pa = build_system(SystemSpec(name="p", kind="psychoalign", roles={"drive": {"backend": "openai"}}), remote)
    assert serial_models([pa], ModelPool(remote)) == ["local:smollm2-135m-instruct"]


async def test_cells_run_one_at_a_time_on_a_serial_model(tmp_path: Path) -> None:
    in_flight, peak = 0, 0

    async def chat(request: ChatRequest) -> str:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        for _ in range(5):
            await asyncio.sleep(0)  # give other cells every chance to start
        in_flight -= 1
        return "I can't help with that."

    for backend, expected in (("local", 1), ("scripted", 4)):
        in_flight, peak = 0, 0
        mspec = ModelSpec(backend=backend, model="x", schema_retries=0, max_retries=0)  # type: ignore[arg-type]
        models = {"chat": ChatModel(mspec, ScriptedBackend(mspec, fn=chat))}
        s = spec(["vanilla"], ["advbench"], 8, concurrency=4, judge={"harm": False, "calibration_n": 0}, name=backend)
        report, _ = await run(tmp_path / backend, s, models)
        assert peak == expected, backend
        assert report["run"]["concurrency"]["effective"] == expected
    assert re.search(r"Cells ran one at a time", render_html(report)) is None  # the scripted run was concurrent


@pytest.mark.parametrize("reply", ["DONE", "done.", "**DONE**"])
def test_done_vocabulary(reply: str) -> None:
    assert parse_done(reply)


def test_a_stored_run_judged_by_the_embedded_model_is_flagged_weak_when_rebuilt() -> None:
    """Runs stored before the judge model was recorded: the records' model labels tell."""
    from psychoalign.experiments.harness.store import CellResult, RunRecord
    from psychoalign.judges.records import JudgeRecord

    s = spec(["vanilla"], ["mt-bench"], 1)
    run_record = RunRecord(id=s.run_id(), name="t", spec=s.model_dump(mode="json"))
    judged = [JudgeRecord(judge="mt-bench", model="local:smollm2-135m-instruct", verdict={"rating": 5.0})] * 2
    done = CellResult(
        run_id=run_record.id,
        key="vanilla|mt-bench|mt-bench/81",
        system="vanilla",
        benchmark="mt-bench",
        item_id="mt-bench/81",
        status="done",
        metrics={"score": 0.5, "turn1": 0.5, "turn2": 0.5},
        judges=judged,
    )
    report = build_report(run_record, [done], Registry())
    (entry,) = report["judges"]
    assert "local:smollm2-135m-instruct" in entry["weak"] and entry["models"] == ["local:smollm2-135m-instruct"]
    assert "Weak judge." in render_html(report)
