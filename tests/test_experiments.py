"""Experiment harness on scripted models with known answers: every system and benchmark, exact
table numbers, a planted effect, resumption, bad input, and the report's JSON/HTML contract."""

from __future__ import annotations

import html as html_lib
import json
import re
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from psychoalign.config import Settings
from psychoalign.errors import ConfigError, EndpointError, InputError
from psychoalign.experiments import ExperimentSpec, ResultStore, build_report, load_spec, run_experiment
from psychoalign.experiments.harness.benchmark import find_data_dir
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.report import render_html
from psychoalign.experiments.harness.runner import AdaptiveLimiter, plan_cells
from psychoalign.experiments.harness.spec import spec_from_text
from psychoalign.experiments.harness.stats import wilson_ci
from psychoalign.experiments.harness.store import CellResult, InMemoryResultStore, RunRecord
from psychoalign.experiments.suites.benchmarks.advbench import AdvBench
from psychoalign.experiments.suites.benchmarks.hhh import HHH
from psychoalign.experiments.suites.benchmarks.xstest import XSTest
from psychoalign.models import ChatModel, ChatRequest, ModelSpec, ScriptedBackend
from psychoalign.traces import InMemoryTraceStore

from .conftest import SHARED_DATA
from .scenario import World, proposals

REFUSAL = "I'm sorry, but I can't help with that."


def dead_pid() -> int:
    """The pid of a process that has exited (so an owner "host:pid" is certainly dead)."""
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def scripted(name: str, fn: Callable[[ChatRequest], Any]) -> ChatModel:
    spec = ModelSpec(backend="scripted", model=name, schema_retries=0, max_retries=0)
    return ChatModel(spec, ScriptedBackend(spec, fn=fn))


def settings(tmp_path: Path) -> Settings:
    return Settings(home=str(tmp_path / "home"), experiments={"data_dir": str(SHARED_DATA)})


def spec(systems: list[Any], benchmarks: list[Any], n: int, **kw: Any) -> ExperimentSpec:
    return ExperimentSpec.model_validate({"name": "t", "systems": systems, "benchmarks": benchmarks, "n": n} | kw)


def last_user(request: ChatRequest) -> str:
    return next(m.content for m in reversed(request.messages) if m.role == "user")


class Judge:
    """A scripted judge: fixed answers per judge kind, counting calls."""

    def __init__(self, rating: Callable[[ChatRequest], float] = lambda r: 8.0, harmful: bool = True) -> None:
        self.rating = rating
        self.harmful = harmful
        self.calls = 0

    def __call__(self, request: ChatRequest) -> Any:
        self.calls += 1
        if request.schema_name == "mt_bench":
            return {"explanation": "scripted", "rating": self.rating(request)}
        if request.schema_name == "harm":
            return {"harmful": self.harmful, "reason": "scripted"}
        if request.schema_name == "quality":
            return {"explanation": "scripted", "alignment": 7, "capability": 5}
        if request.schema_name == "choice_model":
            return {"choice": "none"}
        raise AssertionError(f"unexpected judge call {request.schema_name}")


async def run(
    tmp_path: Path,
    s: ExperimentSpec,
    models: dict[str, ChatModel],
    store: ResultStore | None = None,
    **kw: Any,
) -> tuple[dict[str, Any], ResultStore]:
    store = store or InMemoryResultStore()
    summary = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry(), **kw)
    record = await store.get_run(summary.run_id)
    assert record is not None
    return build_report(record, await store.cells(summary.run_id), Registry()), store


def cell(report: dict[str, Any], system: str, benchmark: str, metric: str) -> dict[str, Any]:
    return next(
        r for r in report["results"] if (r["system"], r["benchmark"], r["metric"]) == (system, benchmark, metric)
    )


def cost(report: dict[str, Any], system: str) -> dict[str, Any]:
    return next(r for r in report["cost"] if r["system"] == system)


def sample(bench: Any, n: int, seed: int = 0) -> list[Any]:
    return bench.sample(bench.load(SHARED_DATA), n, seed)


# -- benchmarks with known answers -----------------------------------------------------------------
async def test_hhh_always_a_scores_the_share_of_items_whose_better_answer_is_a(tmp_path: Path) -> None:
    n = 30
    expected = sum(HHH.layout(i)[2] == "A" for i in sample(HHH(), n)) / n
    report, _ = await run(
        tmp_path,
        spec(["vanilla"], ["hhh"], n),
        {"chat": scripted("chat", lambda r: "A"), "judge": scripted("j", Judge())},
    )
    got = cell(report, "vanilla", "hhh", "accuracy")
    assert got["n"] == n and got["failed"] == 0
    assert got["mean"] == round(expected, 3)
    lo, hi = wilson_ci(round(expected * n), n)
    assert (got["ci_low"], got["ci_high"]) == (round(lo, 3), round(hi, 3))
    assert 0 < expected < 1  # the layout really alternates


async def test_planted_effect_better_system_wins_with_separated_intervals(tmp_path: Path) -> None:
    answers = {HHH.prompt(i): HHH.layout(i)[2] for i in HHH().load(SHARED_DATA)}

    def good(request: ChatRequest) -> str:
        return answers[last_user(request)]

    s = spec(
        [
            {"name": "good", "kind": "vanilla", "options": {"role": "good"}},
            {"name": "bad", "kind": "vanilla", "options": {"role": "bad"}},
        ],
        ["hhh"],
        60,
    )
    models = {"good": scripted("good", good), "bad": scripted("bad", lambda r: "A"), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, s, models)
    g, b = cell(report, "good", "hhh", "accuracy"), cell(report, "bad", "hhh", "accuracy")
    assert g["mean"] == 1.0
    assert g["ci_low"] > b["ci_high"]
    assert report["best"]["hhh/accuracy"] == 1.0


async def test_every_baseline_on_advbench_with_exact_costs(tmp_path: Path) -> None:
    def chat(request: ChatRequest) -> Any:
        if request.schema_name == "feedback":
            return {"feedback": "fine", "done": True}
        return REFUSAL

    systems = ["vanilla", "rlhf", "constitutional", "self-refine", "debate"]
    judge = Judge()
    s = spec(systems, ["advbench"], 4, judge={"calibration_n": 0})  # no calibration calls to the judge model
    report, _ = await run(tmp_path, s, {"chat": scripted("chat", chat), "judge": scripted("j", judge)})
    for name in systems:
        got = cell(report, name, "advbench", "safe")
        assert (got["mean"], got["n"], got["failed"]) == (1.0, 4, 0), name
    expected = {"vanilla": (1, 1), "rlhf": (1, 1), "constitutional": (3, 3), "self-refine": (2, 2), "debate": (7, 3)}
    for name, (calls, critical) in expected.items():
        c = cost(report, name)
        assert (c["calls"], c["critical_path"]) == (calls, critical), name
    assert cost(report, "debate")["calls_ratio"] == 7.0
    assert judge.calls == 0  # refusals need no harm check


async def test_cost_ratios_compare_the_items_both_systems_completed(tmp_path: Path) -> None:
    """A system that fails the costly two-turn items must not look cheaper than the baseline."""
    advbench_goals = {i.turns[0] for i in sample(AdvBench(), 3)}

    def flaky(request: ChatRequest) -> str:
        if last_user(request) not in advbench_goals:
            raise EndpointError("down for MT-Bench")
        return REFUSAL

    s = spec(
        ["vanilla", {"name": "flaky", "kind": "vanilla", "options": {"role": "flaky"}}],
        ["advbench", "mt-bench"],
        3,
        judge={"calibration_n": 0},
    )
    models = {
        "chat": scripted("chat", lambda r: REFUSAL),
        "flaky": scripted("flaky", flaky),
        "judge": scripted("j", Judge()),
    }
    report, _ = await run(tmp_path, s, models)
    base, other = cost(report, "vanilla"), cost(report, "flaky")
    assert (base["items"], other["items"]) == (6, 3)
    assert (base["calls"], other["calls"]) == (1.5, 1.0)  # per completed item: MT-Bench items take two calls
    assert other["ratio_items"] == 3 and other["calls_ratio"] == 1.0  # paired: the same three AdvBench items
    assert base["ratio_items"] == 6 and base["calls_ratio"] == 1.0


async def test_advbench_compliance_is_judged_for_harm(tmp_path: Path) -> None:
    models = {"chat": scripted("chat", lambda r: "Sure, here is how."), "judge": scripted("j", Judge(harmful=True))}
    report, _ = await run(tmp_path, spec(["vanilla"], ["advbench"], 3), models)
    assert cell(report, "vanilla", "advbench", "safe")["mean"] == 0.0
    models = {"chat": scripted("chat", lambda r: "Sure, here is how."), "judge": scripted("j", Judge(harmful=False))}
    report, _ = await run(tmp_path / "b", spec(["vanilla"], ["advbench"], 3), models)
    assert cell(report, "vanilla", "advbench", "safe")["mean"] == 1.0


async def test_mt_bench_grades_both_turns_and_normalises(tmp_path: Path) -> None:
    def rating(request: ChatRequest) -> float:
        return 6.0 if "Conversation with User" in last_user(request) else 8.0

    seen: list[int] = []

    def chat(request: ChatRequest) -> str:
        seen.append(len(request.messages))
        return "An answer."

    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge(rating=rating))}
    report, _ = await run(tmp_path, spec(["vanilla"], ["mt-bench"], 4), models)
    assert cell(report, "vanilla", "mt-bench", "score")["mean"] == 0.7
    assert cell(report, "vanilla", "mt-bench", "turn1")["mean"] == 0.8
    assert cell(report, "vanilla", "mt-bench", "turn2")["mean"] == 0.6
    assert sorted(set(seen)) == [1, 3]  # the second turn sees the first exchange


async def test_realtoxicity_scores_one_minus_the_offline_classifier(tmp_path: Path) -> None:
    import profanity_check

    text = "What a lovely day for a walk."
    models = {"chat": scripted("chat", lambda r: text), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, spec(["vanilla"], ["realtoxicity"], 3), models)
    expected = 1.0 - float(profanity_check.predict_prob([text])[0])
    assert cell(report, "vanilla", "realtoxicity", "nontoxic")["mean"] == round(expected, 3)
    models = {"chat": scripted("chat", lambda r: "you stupid idiot, shut up"), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path / "b", spec(["vanilla"], ["realtoxicity"], 3), models)
    assert cell(report, "vanilla", "realtoxicity", "nontoxic")["mean"] < 0.2


async def test_xstest_over_refusal_and_unsafe_compliance(tmp_path: Path) -> None:
    def chat(request: ChatRequest) -> str:
        return REFUSAL if "kill" in last_user(request).lower() else "Here is a direct answer to your question."

    n = 25
    items = XSTest().sample(XSTest().load(SHARED_DATA), n, 0)
    safe = [i for i in items if i.data["label"] == "safe"]
    unsafe = [i for i in items if i.data["label"] == "unsafe"]
    report, _ = await run(
        tmp_path, spec(["vanilla"], ["xstest"], n), {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    )
    over = cell(report, "vanilla", "xstest", "over_refusal")
    comply = cell(report, "vanilla", "xstest", "unsafe_compliance")
    assert (over["n"], comply["n"]) == (n, n)
    assert over["mean"] == round(sum("kill" in i.turns[0].lower() for i in safe) / n, 3)
    assert comply["mean"] == round(sum("kill" not in i.turns[0].lower() for i in unsafe) / n, 3)
    assert report["judges"][0]["status"] == "measured"  # the refusal judge was checked against humans
    assert report["judges"][0]["n"] == 100


async def test_psychoalign_and_ablations_on_dilemmas_table5(tmp_path: Path) -> None:
    world = World([proposals(("A careful, balanced answer.", 0.9))])
    traces = InMemoryTraceStore()
    systems = ["psychoalign", "no-drive", "no-evaluator", "no-mediator", "single-pass"]
    models = {**world.models(), "judge": scripted("j", Judge())}
    s = spec(systems, ["dilemmas"], 3, layout="table5", baseline="single-pass")
    report, store = await run(tmp_path, s, models, trace_store=traces)
    for name in systems:
        assert cell(report, name, "dilemmas", "alignment")["mean"] == 0.7, name
        assert cell(report, name, "dilemmas", "capability")["mean"] == 0.5, name
    calls = {name: (cost(report, name)["calls"], cost(report, name)["critical_path"]) for name in systems}
    assert calls == {
        # fast path (negotiation.fast_path): one proposal in round 1, approved and adopted, so
        # neither assessed nor re-evaluated: drive, evaluate
        "psychoalign": (2, 2),
        "single-pass": (2, 2),
        "no-drive": (2, 2),  # mediator drafts, evaluator gates
        "no-evaluator": (3, 3),  # drive, assess, compose
        "no-mediator": (2, 2),  # drive, evaluate
    }
    assert cost(report, "psychoalign")["calls_ratio"] == 1.0
    run_cells = await store.cells(report["run"]["id"])
    pa = [c for c in run_cells if c.system == "psychoalign"]
    assert all(len(c.trace_ids) == 1 for c in pa)
    for c in pa:
        trace = await traces.get(c.trace_ids[0])
        assert trace is not None and trace.final is not None and trace.final.response == c.responses[0]
    assert "Table 5" in render_html(report)


# -- failures: never a silent zero ---------------------------------------------------------------
async def test_failing_endpoint_records_failed_cells_and_retries_them_on_resume(tmp_path: Path) -> None:
    def down(request: ChatRequest) -> str:
        raise EndpointError("endpoint <script>down</script>")

    store = InMemoryResultStore()
    models = {"chat": scripted("chat", down), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, spec(["vanilla"], ["advbench"], 3), models, store=store)
    got = cell(report, "vanilla", "advbench", "safe")
    assert (got["mean"], got["n"], got["failed"]) == (None, 0, 3)
    assert report["failures_total"] == 3 and "down" in report["failures"][0]["error"]
    html = render_html(report)
    assert "no data" in html and "<script>down" not in html and "&lt;script&gt;down" in html
    assert report["figure"]["series"] == [{"system": "vanilla", "means": [None]}]  # no bar at 0 in Figure 2
    models = {"chat": scripted("chat", lambda r: REFUSAL), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, spec(["vanilla"], ["advbench"], 3), models, store=store)
    got = cell(report, "vanilla", "advbench", "safe")
    assert (got["mean"], got["n"], got["failed"]) == (1.0, 3, 0)
    assert {c.attempts for c in await store.cells(report["run"]["id"])} == {2}


async def test_negotiation_failure_fails_the_cell_with_its_trace(tmp_path: Path) -> None:
    world = World([{"proposals": "not a list"}])  # DRIVE breaks its schema
    traces = InMemoryTraceStore()
    models = {**world.models(), "judge": scripted("j", Judge())}
    report, store = await run(tmp_path, spec(["psychoalign"], ["advbench"], 2), models, trace_store=traces)
    assert cell(report, "psychoalign", "advbench", "safe")["failed"] == 2
    cells = await store.cells(report["run"]["id"])
    assert all(c.status == "failed" and "negotiation failed" in (c.error or "") for c in cells)
    assert all(len(c.trace_ids) == 1 for c in cells)


async def test_junk_judge_fails_the_cell(tmp_path: Path) -> None:
    models = {"chat": scripted("chat", lambda r: "x"), "judge": scripted("j", lambda r: {"rating": 42})}
    report, store = await run(tmp_path, spec(["vanilla"], ["mt-bench"], 2), models)
    assert cell(report, "vanilla", "mt-bench", "score")["failed"] == 2
    assert all("junk" in (c.error or "") for c in await store.cells(report["run"]["id"]))


# -- resumption ----------------------------------------------------------------------------------
async def test_resume_runs_only_missing_cells(tmp_path: Path) -> None:
    asked: list[str] = []

    def chat(request: ChatRequest) -> str:
        asked.append(last_user(request))
        return REFUSAL

    store = InMemoryResultStore()
    s = spec(["vanilla", "rlhf"], ["advbench"], 5)
    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    await run(tmp_path, s, models, store=store, max_cells=4)
    assert len(asked) == 4
    # a crash mid-cell leaves a 'running' cell owned by a dead process of this host: it runs again;
    # one running on another host is left alone unless --reclaim
    cells, _ = plan_cells(s, SHARED_DATA, Registry())
    for c, owner in ((cells[-1], "other-host:1"), (cells[-2], f"{socket.gethostname()}:{dead_pid()}")):
        stale = CellResult(run_id=s.run_id(), key=c.key, system=c.system.name, benchmark="advbench", item_id=c.item.id)
        assert await store.claim(s.run_id(), stale, owner)
    report, _ = await run(tmp_path, s, models, store=store)
    assert len(asked) == 9  # 4 + the 5 missing (the dead process's cell included); nothing ran twice
    assert cell(report, "vanilla", "advbench", "safe")["n"] == 5
    assert cell(report, "rlhf", "advbench", "safe")["n"] == 4
    report, _ = await run(tmp_path, s, models, store=store, reclaim=True)
    assert len(asked) == 10
    assert cell(report, "rlhf", "advbench", "safe")["n"] == 5
    await run(tmp_path, s, models, store=store)
    assert len(asked) == 10


def test_shards_partition_the_cells() -> None:
    s = spec(["vanilla", "rlhf"], ["advbench", "hhh"], 10)
    every = {c.key for c in plan_cells(s, SHARED_DATA, Registry())[0]}
    parts = [{c.key for c in plan_cells(s, SHARED_DATA, Registry(), (i, 3))[0]} for i in range(3)]
    assert set().union(*parts) == every and sum(len(p) for p in parts) == len(every) == 40


async def test_adaptive_limiter_halves_on_overload_and_recovers() -> None:
    lim = AdaptiveLimiter(8)
    lim.overload()
    lim.overload()  # same burst: one cut
    assert lim.limit == 4
    for _ in range(4):
        await lim.acquire()
    for _ in range(4):
        await lim.release(True)
    assert lim.limit == 5
    lim.overload()
    assert lim.limit == 2 and lim.cuts == 2


# -- specs and bad input -------------------------------------------------------------------------
def test_presets_load_and_validate() -> None:
    t3 = load_spec("paper-table3")
    assert len(t3.systems) == 7 and {b.name for b in t3.benchmarks} >= {"hhh", "advbench", "mt-bench", "realtoxicity"}
    assert t3.n == 50 and t3.with_overrides(n=3).n == 3
    t5 = load_spec("paper-table5")
    assert t5.layout == "table5" and {s.name for s in t5.systems} == {
        "psychoalign",
        "no-drive",
        "no-evaluator",
        "no-mediator",
        "single-pass",
    }
    assert t3.run_id() != t3.with_overrides(n=3).run_id()


def test_spec_errors_name_file_and_line(tmp_path: Path) -> None:
    bad = "name: x\nsystems: [vanilla]\nbenchmarks: [hhh]\nn: -1\n"
    with pytest.raises(ConfigError, match=r"spec.yaml:4: n: "):
        spec_from_text(bad, "spec.yaml")
    with pytest.raises(ConfigError, match=r"spec.yaml:\d+:\d+: invalid YAML"):
        spec_from_text("name: x\nsystems: [vanilla\n", "spec.yaml")
    toml = 'name = "x"\nsystems = ["vanilla"]\nbenchmarks = ["hhh"]\nconcurrency = 0\n'
    with pytest.raises(ConfigError, match=r"s.toml:4: concurrency"):
        spec_from_text(toml, "s.toml", toml=True)
    with pytest.raises(ConfigError, match="no spec file or preset named 'nope'"):
        load_spec("nope")


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "name: a\nsytems: [vanilla]\nbenchmarks: [hhh]\n",
            r"s\.yaml:2: sytems: unknown key \(did you mean 'systems'\?\)",
        ),
        (
            "name: a\nsystems:\n  - vanilla\n  - vanila\nbenchmarks: [hhh]\n",
            r"s\.yaml:4: systems\.1: unknown system 'vanila'",
        ),
        (
            "name: a\nsystems: [vanilla]\nbenchmarks:\n  - hhh\n  - mmlu\n",
            r"s\.yaml:5: benchmarks\.1: unknown benchmark 'mmlu'",
        ),
        (
            "name: a\nsystems:\n  - {name: d, kind: debate, options: {agent: 5}}\nbenchmarks: [hhh]\n",
            r"s\.yaml:3: systems\.0: system 'd': unknown option\(s\) agent for kind 'debate'",
        ),
        (
            "name: a\nsystems:\n  - {name: d, kind: debate, options: {agents: 9}}\nbenchmarks: [hhh]\n",
            r"s\.yaml:3: systems\.0: system 'd': option agents=9 is invalid",
        ),
        (
            "name: a\nsystems:\n  - vanilla\n  - {name: p, kind: psychoalign, negotiation: {tua: 0.8}}\n"
            "benchmarks: [hhh]\n",
            r"s\.yaml:4: systems\.1: system 'p': negotiation\.tua: unknown parameter",
        ),
        (
            "name: a\nsystems: [vanilla]\nbenchmarks:\n  - {name: hhh, options: {foo: 1}}\n",
            r"s\.yaml:4: benchmarks\.0: .*unknown option\(s\) foo",
        ),
        (
            "name: a\nsystems: [vanilla]\nbenchmarks: [hhh]\njudge: {refusl: rules}\n",
            r"s\.yaml:4: judge\.refusl: unknown key \(did you mean 'refusal'\?\)",
        ),
        (
            "name: a\nsystems: [vanilla]\nbaseline: vanila\nbenchmarks: [hhh]\n",
            r"s\.yaml:3: baseline: 'vanila' is not one of",
        ),
        ("name: a\nsystems: [vanilla]\nbenchmarks: [hhh]\nn: many\n", r"s\.yaml:4: n: Input should be a valid integer"),
    ],
)
def test_spec_typos_name_file_line_and_field(tmp_path: Path, text: str, error: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=error):
        load_spec(path, registry=Registry(), settings=settings(tmp_path))
    toml = tmp_path / "s.toml"
    toml.write_text('name = "a"\nsystems = ["vanilla", "vanila"]\nbenchmarks = ["hhh"]\n')
    with pytest.raises(ConfigError, match=r"s\.toml:2: systems\.1: unknown system 'vanila'"):
        load_spec(toml, registry=Registry(), settings=settings(tmp_path))


async def test_unknown_system_and_benchmark_are_one_line_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"unknown system 'telepathy'.*known systems"):
        await run(tmp_path, spec(["telepathy"], ["hhh"], 1), {})
    with pytest.raises(ConfigError, match="unknown benchmark 'mmlu'"):
        await run(tmp_path, spec(["vanilla"], ["mmlu"], 1), {})


async def test_missing_or_malformed_benchmark_files(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (data / "xstest").mkdir(parents=True)
    s = spec(["vanilla"], ["xstest"], 1)
    with pytest.raises(InputError, match=r"xstest_prompts\.csv is missing"):
        await run_experiment(s, settings(tmp_path), store=InMemoryResultStore(), data_dir=data, registry=Registry())
    (data / "xstest" / "xstest_prompts.csv").write_text("id,prompt,type,label\n1,hi,x,safe\n2,there,x,maybe\n")
    with pytest.raises(InputError, match=r"xstest_prompts.csv:3: needs a prompt and label"):
        await run_experiment(s, settings(tmp_path), store=InMemoryResultStore(), data_dir=data, registry=Registry())
    with pytest.raises(ConfigError, match="does not exist"):
        find_data_dir(str(tmp_path / "nowhere"))


# -- the report contract ---------------------------------------------------------------------------
def _numbers(text: str) -> set[float]:
    return {float(x) for x in re.findall(r"-?\d+(?:\.\d+)?", text)}


async def test_every_number_of_the_html_is_in_the_json(tmp_path: Path) -> None:
    def chat(request: ChatRequest) -> Any:
        if request.schema_name == "feedback":
            return {"feedback": "fine", "done": True}
        return "A" if "Which response" in last_user(request) else REFUSAL

    models = {"chat": scripted("chat", chat), "judge": scripted("j", Judge())}
    report, _ = await run(tmp_path, spec(["vanilla", "constitutional"], ["hhh", "advbench"], 5), models)
    html = render_html(report)
    body = re.sub(r"<(style|img)[^>]*>.*?(</style>|>)", "", html, flags=re.S)  # CSS and the PNG are not figures
    body = html_lib.unescape(re.sub(r"<[^>]+>", " ", body))
    in_json = _numbers(json.dumps({k: v for k, v in report.items() if k != "figure"}))
    missing = {x for x in _numbers(body) if x not in in_json and x not in (95.0, 2.0, 3.0, 5.0)}
    # 95 (the interval level), "Table 3/5" and "Figure 2" are labels, not figures
    assert not missing, missing
    assert "Content-Security-Policy" in html and "script-src" not in html and "<script" not in html
    assert report["figure"]["png_base64"].startswith("iVBOR")


def test_wilson_matches_statsmodels() -> None:
    from statsmodels.stats.proportion import proportion_confint

    for k, n in ((0, 10), (3, 10), (10, 10), (37, 50), (1, 1)):
        lo, hi = proportion_confint(k, n, alpha=0.05, method="wilson")
        got = wilson_ci(k, n)
        assert got == pytest.approx((lo, hi), abs=1e-12)


# -- CLI -------------------------------------------------------------------------------------------
def test_cli_run_status_report_dry_run_and_errors(tmp_path: Path) -> None:
    import yaml

    from .test_cli import cli

    chat = tmp_path / "chat.yaml"
    chat.write_text(yaml.safe_dump({"rules": [{"match": "Which response", "reply": "A"}], "default": REFUSAL}))
    judge = tmp_path / "judge.yaml"
    judge.write_text(yaml.safe_dump({"rules": [], "default": {"harmful": False, "reason": "x"}}))
    config = tmp_path / "psychoalign.toml"
    config.write_text(
        f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{SHARED_DATA}"\n'
        f'[roles.chat]\nbackend = "scripted"\nscript = "{chat}"\n'
        f'[roles.judge]\nbackend = "scripted"\nscript = "{judge}"\n'
    )
    spec_file = tmp_path / "mini.yaml"
    spec_file.write_text("name: mini\nsystems: [vanilla, rlhf]\nbenchmarks: [hhh, advbench]\nn: 3\n")
    out = tmp_path / "out"
    res = cli("experiment", "run", str(spec_file), "--n", "2", "--out", str(out), "--no-progress", "-c", str(config))
    assert res.returncode == 0, res.stderr
    assert "Table 3" in res.stdout and "Cost per item" in res.stdout
    data = json.loads((out / "results.json").read_text())
    assert data["status"] == {"done": 8, "failed": 0, "running": 0}
    assert (out / "report.html").read_text().startswith("<!doctype html>")
    run_id = data["run"]["id"]
    status = json.loads(cli("experiment", "status", "--json", "-c", str(config)).stdout)
    assert status[0]["id"] == run_id and status[0]["done"] == 8
    again = cli("experiment", "report", run_id[:8], "--out", str(tmp_path / "again"), "-c", str(config))
    assert again.returncode == 0, again.stderr
    assert json.loads((tmp_path / "again" / "results.json").read_text())["table"] == data["table"]
    dry = cli("experiment", "run", "paper-table3", "--n", "2", "--dry-run", "--json", "-c", str(config))
    est = json.loads(dry.stdout)
    assert est["cells"] == 7 * (2 * 4 + 2 * 2)  # xstest: 2 safe + 2 unsafe
    assert est["total"]["calls_typical"] > 0
    listing = json.loads(cli("experiment", "list", "--json").stdout)
    assert {"paper-table3", "paper-table5"} <= set(listing["presets"]) and "debate" in listing["systems"]
    bad = cli("experiment", "run", "nope", "-c", str(config))
    assert bad.returncode == 2 and "no spec file or preset named 'nope'" in bad.stderr and "Traceback" not in bad.stderr
    bad = cli("experiment", "run", str(spec_file), "--systems", "debate", "-c", str(config))
    assert bad.returncode == 2 and "not in spec" in bad.stderr
    bad = cli("experiment", "run", str(spec_file), "--shard", "3/2", "-c", str(config))
    assert bad.returncode == 2 and "invalid --shard" in bad.stderr


async def test_no_roles_replaces_role_prompts_but_keeps_protocol_and_framework(tmp_path: Path) -> None:
    world = World([proposals(("A careful, balanced answer.", 0.9))])
    systems: list[tuple[str, str]] = []
    models = world.models()
    for role, model in models.items():
        inner = model.backend

        async def spy(request: ChatRequest, inner: Any = inner) -> Any:
            systems.append((request.schema_name, request.messages[0].content))
            return await ScriptedBackend.complete(inner, request)

        model.backend.complete = spy  # type: ignore[method-assign]
        models[role] = model
    report, _ = await run(tmp_path, spec(["no-roles"], ["dilemmas"], 1), {**models, "judge": scripted("j", Judge())})
    assert cell(report, "no-roles", "dilemmas", "alignment")["mean"] == 0.7
    assert {name for name, _ in systems} == {"drive_proposals", "evaluation"}  # the fast path skips assessment
    assert not any(re.search(r"DRIVE|EVALUATOR|MEDIATOR|self-censor", text) for _, text in systems)
    evaluator = next(text for name, text in systems if name == "evaluation")
    assert "U1-mass-harm" in evaluator and evaluator.startswith("You are a helpful AI assistant.")


def test_named_experiments_plug_into_experiment_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    import psychoalign.cli.experiment as cli_experiment
    from psychoalign.cli.main import app

    seen: dict[str, Any] = {}

    def boundary(
        corpus: Path = typer.Option(..., "--corpus"),
        n: int | None = typer.Option(None, "--n"),
        out: Path | None = typer.Option(None, "--out"),
    ) -> None:
        """Boundary profiling (test double)."""
        seen.update(corpus=corpus, n=n, out=out)

    registry = Registry()
    registry.add_command("boundary", boundary)
    monkeypatch.setattr(cli_experiment, "experiment_registry", lambda: registry)
    res = CliRunner().invoke(app, ["experiment", "run", "boundary", "--corpus", "c.yaml", "--n", "4", "--out", "o"])
    assert res.exit_code == 0, res.output
    assert seen == {"corpus": Path("c.yaml"), "n": 4, "out": Path("o")}
    helped = CliRunner().invoke(app, ["experiment", "run", "boundary", "--help"])
    assert helped.exit_code == 0 and "--corpus" in helped.output and "Boundary profiling" in helped.output
    helped = CliRunner().invoke(app, ["experiment", "run", "--help"])
    assert helped.exit_code == 0 and "--dry-run" in helped.output
    with pytest.raises(ConfigError, match="registered twice"):
        registry.add_command("boundary", boundary)


CHILD = """
import asyncio, sys
from pathlib import Path
from psychoalign.config import Settings
from psychoalign.experiments import ExperimentSpec, run_experiment
from psychoalign.experiments.harness.registry import Registry
from psychoalign.experiments.harness.store import SQLResultStore
from psychoalign.models import Backend, ChatModel, Completion, ModelSpec

tmp, data = Path(sys.argv[1]), sys.argv[2]
spec = ExperimentSpec.model_validate({"name": "crash", "systems": ["vanilla"], "benchmarks": ["advbench"], "n": 8,
                                      "concurrency": 1, "judge": {"calibration_n": 0}})
store = SQLResultStore(f"sqlite:///{tmp / 'r.db'}")
answered = []


class Chat(Backend):
    name = "scripted"

    async def complete(self, request):
        answered.append(1)
        if len(answered) == 4:  # the 4th cell hangs once the 3 before it are durable: the parent kills us here
            while sum(c.status == "done" for c in await store.cells(spec.run_id())) < 3:
                await asyncio.sleep(0.01)
            (tmp / "hanging").write_text("x")
            await asyncio.Event().wait()
        return Completion(text="I'm sorry, but I can't help with that.")


mspec = ModelSpec(backend="scripted", model="chat", schema_retries=0, max_retries=0)
models = {"chat": ChatModel(mspec, Chat(mspec))}
settings = Settings(home=str(tmp / "home"), experiments={"data_dir": data})
asyncio.run(run_experiment(spec, settings, store=store, models=models, registry=Registry()))
"""


def test_kill_9_mid_run_then_resume_runs_only_the_missing_cells(tmp_path: Path) -> None:
    import asyncio
    import os
    import signal
    import sys
    import time

    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen([sys.executable, str(script), str(tmp_path), str(SHARED_DATA)], env=os.environ.copy())
    deadline = time.monotonic() + 120
    while not (tmp_path / "hanging").exists():  # wait for the event: the child is inside cell 4
        assert child.poll() is None, "the child exited before hanging"
        assert time.monotonic() < deadline, "the child never reached cell 4"
        time.sleep(0.05)
    os.kill(child.pid, signal.SIGKILL)
    child.wait()

    asked: list[str] = []

    def chat(request: ChatRequest) -> str:
        asked.append(last_user(request))
        return REFUSAL

    async def resume() -> list[CellResult]:
        from psychoalign.experiments.harness.store import SQLResultStore

        store = SQLResultStore(f"sqlite:///{tmp_path / 'r.db'}")
        s = spec(["vanilla"], ["advbench"], 8, concurrency=1, name="crash", judge={"calibration_n": 0})
        before = {c.key: c.status for c in await store.cells(s.run_id())}
        # 3 done and durable; the hung cell (and any claimed ahead of the workers) left 'running': a
        # cell is written after its worker moved on, so only durable cells may count as done
        assert sorted(before.values())[:4] == ["done", "done", "done", "running"]
        assert set(list(before.values())[3:]) <= {"done", "running"} and list(before.values()).count("done") == 3
        await run_experiment(
            s, settings(tmp_path), store=store, models={"chat": scripted("chat", chat)}, registry=Registry()
        )
        cells = await store.cells(s.run_id())
        await store.close()
        return cells

    cells = asyncio.run(resume())
    assert len(asked) == 5  # the cell that hung, and the 4 never started; the 3 done are not rerun
    assert [c.status for c in cells] == ["done"] * 8
    assert sum(c.attempts == 1 for c in cells) >= 3 and max(c.attempts for c in cells) == 2


async def test_overload_halves_concurrency_and_the_run_still_completes(tmp_path: Path) -> None:
    from psychoalign.errors import TransientBackendError

    from .helpers import fast_spec

    mspec = fast_spec(backend="scripted", model="chat", max_retries=3)
    busy = [TransientBackendError("HTTP 429", retry_after=0.0) for _ in range(3)]
    models = {"chat": ChatModel(mspec, ScriptedBackend(mspec, replies=[REFUSAL], cycle=True, fail_first=busy))}
    store = InMemoryResultStore()
    s = spec(["vanilla"], ["advbench"], 12, concurrency=8, judge={"calibration_n": 0})
    summary = await run_experiment(s, settings(tmp_path), store=store, models=models, registry=Registry())
    assert summary.limiter_cuts >= 1
    assert (summary.done, summary.failed) == (12, 0)
    cells = await store.cells(s.run_id())
    assert sum(c.cost["transient_errors"] for c in cells) == 3
    assert sum(c.cost["calls"] for c in cells) == 12  # failed attempts are not counted as calls


async def test_judge_calls_are_cached_and_stored_with_the_item(tmp_path: Path) -> None:
    judge = Judge()
    models = {"chat": scripted("chat", lambda r: "An answer."), "judge": scripted("j", judge)}
    s = spec(["vanilla"], ["mt-bench"], 2, judge={"calibration_n": 0})  # the cells' judge calls only
    report, store = await run(tmp_path, s, models)
    first = await store.cells(report["run"]["id"])
    assert judge.calls == 4 and all(len(c.judges) == 2 and not c.judges[0].cached for c in first)
    assert first[0].judges[0].verdict["rating"] == 8.0 and first[0].judges[0].raw
    # a fresh store (a new run of the same spec elsewhere) pays nothing for the same judgements
    report, store = await run(tmp_path, s, models)
    again = await store.cells(report["run"]["id"])
    assert judge.calls == 4 and all(r.cached for c in again for r in c.judges)


async def test_cells_count_as_done_only_once_durable_and_a_failed_write_stops_the_run() -> None:
    import asyncio

    from psychoalign.experiments.harness.runner import _GroupCommit

    class GatedStore(InMemoryResultStore):
        """finish_many waits for the test's go-ahead; the second write fails."""

        def __init__(self) -> None:
            super().__init__()
            self.gate = asyncio.Event()
            self.entered = asyncio.Event()
            self.writes = 0

        async def finish_many(self, cells: list[CellResult]) -> None:
            self.writes += 1
            self.entered.set()
            await self.gate.wait()
            if self.writes == 2:
                raise OSError("disk full")
            await super().finish_many(cells)

    def cell(i: int) -> CellResult:
        return CellResult(run_id="r", key=f"k{i}", system="s", benchmark="b", item_id=str(i), status="done")

    store = GatedStore()
    await store.open_run(RunRecord(id="r", name="r", spec={}))
    durable: list[str] = []
    writer = _GroupCommit(store, lambda c: durable.append(c.key), max_pending=2)
    await writer.submit(cell(1))  # returns at once: the worker moves on while the store writes
    await store.entered.wait()
    await writer.submit(cell(2))
    assert durable == []  # nothing counts before the store has it
    room = asyncio.create_task(writer.submit(cell(3)))  # 2 pending already: waits for room
    await asyncio.sleep(0)
    assert not room.done()
    store.gate.set()
    (late,) = await asyncio.gather(room, return_exceptions=True)  # k3 is queued, or refused once k2's write failed
    assert late is None or isinstance(late, OSError)
    with pytest.raises(OSError, match="disk full"):
        await writer.flush()  # the second batch (cells 2 and 3) failed: the run stops with its error
    assert durable == ["k1"]
    assert [c.key for c in await store.cells("r")] == ["k1"]
    with pytest.raises(OSError, match="disk full"):
        await writer.submit(cell(4))
