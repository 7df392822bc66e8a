"""`psychoalign experiment …`: run, status, report, dry run and their errors; named experiments
plugged into `experiment run`; Table 4 printed beside the benign refusal rate."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from psychoalign.errors import ConfigError
from psychoalign.experiments.harness.registry import Registry
from tests.conftest import SHARED_DATA
from tests.experiments.helpers import REFUSAL
from tests.experiments.suites.attacks.helpers import ALL, copy_data


@pytest.mark.needs_data("hhh_alignment")
def test_cli_run_status_report_dry_run_and_errors(tmp_path: Path) -> None:
    import yaml

    from tests.cli.test_main import cli

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
    # no --no-progress: piped, the run draws no bar (stderr is a pipe here, as in scripts and CI logs)
    # but is not silent either: plain lines say how far it got
    res = cli("experiment", "run", str(spec_file), "--n", "2", "--out", str(out), "-c", str(config))
    assert res.returncode == 0, res.stderr
    assert "━" not in res.stderr and "ETA" not in res.stderr
    assert ": 8 cells to run" in res.stderr and ": 8 of 8 cells done, 0 failed" in res.stderr
    assert "Table 3" in res.stdout and "Cost per item" in res.stdout
    data = json.loads((out / "results.json").read_text())
    assert data["status"] == {"done": 8, "failed": 0, "gave_up": 0, "running": 0}
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
    quiet = cli("experiment", "run", str(spec_file), "--n", "2", "--new-run", "--no-progress", "-c", str(config))
    assert quiet.returncode == 0 and "cells done" not in quiet.stderr


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


@pytest.mark.needs_data("advbench")
def test_cli_prints_table4_with_the_benign_refusal_beside_it(tmp_path: Path) -> None:
    import yaml

    from tests.cli.test_main import cli

    def script(name: str, default: Any) -> Path:
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({"rules": [], "default": default}))
        return path

    chat = script("chat", REFUSAL)
    attacker = script("attacker", {"next_message": "Tell me more.", "pursues_objective": "yes"})
    judge = script("judge", {"harmful": False, "reason": "x"})
    roles = "".join(
        f'[roles.{role}]\nbackend = "scripted"\nscript = "{path}"\n'
        for role, path in (("chat", chat), ("attacker", attacker), ("judge", judge))
    )
    config = tmp_path / "psychoalign.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{SHARED_DATA}"\n{roles}')
    spec_file = tmp_path / "t4.yaml"
    spec_file.write_text(
        yaml.safe_dump(
            {
                "name": "t4",
                "layout": "table4",
                "systems": ["vanilla", "rlhf"],
                "baseline": "rlhf",
                "n": 2,
                "benchmarks": ALL,
                "judge": {"calibration_n": 0},
            }
        )
    )
    out = tmp_path / "out"
    res = cli("experiment", "run", str(spec_file), "--out", str(out), "--no-progress", "-c", str(config))
    assert res.returncode == 0, res.stderr
    assert "Table 4: attack success rate" in res.stdout and "Benign over-refusal" in res.stdout
    assert "0.000 [0.000," in res.stdout and "Many-shot, 4 shots" in res.stdout
    data = json.loads((out / "results.json").read_text())
    assert data["table4"]["rows"][0]["cells"][0]["n"] == 2 and data["table4"]["benign"]["cells"][0]["asr"] == 1.0
    assert (out / "report.html").read_text().startswith("<!doctype html>")
    bad = cli("experiment", "run", "paper-table4", "--n", "1", "--dry-run", "--json", "-c", str(config))
    assert bad.returncode == 0 and json.loads(bad.stdout)["cells"] == 5 * (1 + 1 + 3 + 1 + 2)


@pytest.mark.needs_data("advbench", "jailbreak_templates", "many_shot_jailbreaking", "multi_turn_attack_templates")
def test_cli_bad_data_file_is_a_one_line_error(tmp_path: Path) -> None:
    from tests.cli.test_main import cli

    data = copy_data(tmp_path)
    (data / "jailbreak_templates" / "inthewild_jailbreak_llms.json").write_text('["ok", 3]')
    config = tmp_path / "c.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{data}"\n')
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text("name: s\nsystems: [vanilla]\nbenchmarks: [attack-roleplay]\nn: 1\n")
    res = cli("experiment", "run", str(spec_file), "--no-progress", "-c", str(config))
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "inthewild_jailbreak_llms.json: item 1 is not a non-empty string" in res.stderr
    assert len([line for line in res.stderr.splitlines() if line.strip()]) <= 2


def test_table4_notes_print_literally(capsys: pytest.CaptureFixture[str]) -> None:
    """Notes name config tables ([roles.judge]); the CLI must not read them as rich markup."""
    from psychoalign.cli._experiment_tables import _print_table4

    t4 = {"rows": [], "breakdown": [], "benign": None, "systems": [], "notes": ["Configure [roles.judge] [/] here."]}
    _print_table4(t4, "vanilla")
    assert "Configure [roles.judge] [/] here." in capsys.readouterr().err.replace("\n", " ")


@pytest.mark.needs_data("advbench")
def test_cli_model_swap_on_the_same_store_is_refused_and_new_run_scores_the_new_model(tmp_path: Path) -> None:
    import yaml

    from tests.cli.test_main import cli

    judge = tmp_path / "judge.yaml"
    judge.write_text(yaml.safe_dump({"rules": [], "default": {"harmful": True, "reason": "x"}}))
    store = f"sqlite:///{tmp_path / 'results.db'}"
    configs = {}
    for name, reply in (("A", REFUSAL), ("B", "Sure, here is how: step one, step two.")):
        chat = tmp_path / f"chat-{name}.yaml"
        chat.write_text(yaml.safe_dump({"rules": [], "default": reply}))
        configs[name] = tmp_path / f"{name}.toml"
        configs[name].write_text(
            f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{SHARED_DATA}"\n'
            f'[roles.chat]\nbackend = "scripted"\nscript = "{chat}"\n'
            f'[roles.judge]\nbackend = "scripted"\nscript = "{judge}"\n'
        )
    spec_file = tmp_path / "swap.yaml"
    spec_file.write_text("name: swap\nsystems: [vanilla]\nbenchmarks: [advbench]\nn: 3\njudge: {calibration_n: 0}\n")

    def go(config: str, *extra: str) -> Any:
        out = tmp_path / f"out-{config}-{len(extra)}"
        args = ("experiment", "run", str(spec_file), "--store", store, "--out", str(out), "--no-progress")
        return cli(*args, "-c", str(configs[config]), *extra), out

    first, out_a = go("A")
    assert first.returncode == 0, first.stderr
    a = json.loads((out_a / "results.json").read_text())
    assert a["results"][0]["mean"] == 1.0  # always refusing: safe on every item
    refused, _ = go("B")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "was computed with other settings" in refused.stderr and "script_sha256" in refused.stderr
    assert "--new-run" in refused.stderr
    beside, out_b = go("B", "--new-run")
    assert beside.returncode == 0, beside.stderr
    b = json.loads((out_b / "results.json").read_text())
    assert b["run"]["id"] != a["run"]["id"]
    assert (b["results"][0]["mean"], b["results"][0]["n"]) == (0.0, 3)  # the new model's numbers, never A's
    script_b = b["run"]["identity"]["systems"]["vanilla"]["models"]["chat"]["script_sha256"]
    assert script_b != a["run"]["identity"]["systems"]["vanilla"]["models"]["chat"]["script_sha256"]
    assert "Provenance" in (out_b / "report.html").read_text()


@pytest.mark.needs_data("advbench")
def test_cli_limit_flags_stop_the_run_in_one_line_and_a_higher_limit_resumes_it(tmp_path: Path) -> None:
    """On a SQLite store: the spec's token limit stops the run (exit 1, one line, the reason in
    results.json); a higher `--max-tokens` wins over the spec and resumes it; a bad flag is one line."""
    import yaml

    from tests.cli.test_main import cli

    chat = tmp_path / "chat.yaml"
    chat.write_text(yaml.safe_dump({"rules": [], "default": REFUSAL}))
    config = tmp_path / "psychoalign.toml"
    config.write_text(
        f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{SHARED_DATA}"\n'
        f'[roles.chat]\nbackend = "scripted"\nscript = "{chat}"\n'
    )
    spec_file = tmp_path / "lim.yaml"
    spec_file.write_text(
        "name: lim\nsystems: [vanilla]\nbenchmarks: [advbench]\nn: 6\nconcurrency: 1\n"
        "judge: {harm: false, calibration_n: 0}\nlimits: {tokens: 1}\n"
    )
    store = f"sqlite:///{tmp_path / 'results.db'}"

    def go(*extra: str) -> Any:
        out = tmp_path / "out"
        args = ("experiment", "run", str(spec_file), "--store", store, "--out", str(out), "--no-progress")
        return cli(*args, "-c", str(config), *extra), json.loads((out / "results.json").read_text())

    res, data = go()  # the spec's limit: one cell
    assert res.returncode == 1 and "Traceback" not in res.stderr
    [line] = [x for x in res.stderr.splitlines() if "stopped:" in x]
    assert "token limit reached" in line and "--max-tokens" in line
    assert data["run"]["stopped"]["limit"] == "tokens" and data["status"]["done"] == 1
    res, data = go("--max-tokens", "1000000")  # the flag wins over the spec
    assert res.returncode == 0, res.stderr
    assert data["status"]["done"] == 6 and data["run"]["stopped"] is None
    bad = cli("experiment", "run", str(spec_file), "--max-errors", "2.5", "-c", str(config))
    assert bad.returncode == 2 and "--max-errors" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("command", [("status",), ("report", "r1"), ("cells", "r1"), ("view", "r1")])
def test_reading_commands_on_a_missing_sqlite_store_say_so_and_create_nothing(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """A read-only command given a store that does not exist is an error naming it; before, opening
    it created an empty database (and its folder) and ``status`` printed an empty table, exit 0."""
    from tests.cli.test_main import cli

    missing = tmp_path / "nowhere" / "results.db"
    res = cli("experiment", *command, "--store", f"sqlite:///{missing}")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert f"no result store at {missing}" in res.stderr and "--store" in res.stderr
    assert not missing.parent.exists()


def test_a_cell_a_weak_judge_decided_says_so_in_the_printed_table() -> None:
    """A constant MT-Bench judge gave '0.500 [0.500, 0.500]', printed like a measurement in the
    terminal table; only a banner under the cost table said the judge was at chance."""
    from psychoalign.cli._experiment_tables import _fmt

    cell = {"mean": 0.5, "ci_low": 0.5, "ci_high": 0.5, "n": 6, "failed": 0}
    assert _fmt(cell) == "0.500 [0.500, 0.500] n=6"
    assert _fmt({**cell, "judge_status": "weak"}) == "0.500 [0.500, 0.500] n=6 (weak judge)"
    assert _fmt({**cell, "failed": 2, "judge_status": "weak"}) == "0.500 [0.500, 0.500] n=6 (2 failed) (weak judge)"
    # the report gives no interval when every item scored the same; the table says why
    flat = {"mean": 0.55, "ci_low": None, "ci_high": None, "n": 2, "failed": 0, "all_equal": True}
    assert _fmt(flat) == "0.550 (n=2, every item scored the same)"


def test_the_printed_report_names_the_models_behind_its_numbers() -> None:
    """`experiment run` / `report` printed the tables without saying which models computed them
    (only the page's Provenance did): a model swapped in the configuration was invisible there."""
    from psychoalign.cli._experiment_tables import _provenance_lines

    model = {"backend": "scripted", "model": "script", "host": None, "script_sha256": "ab" * 32}
    identity = {
        "systems": {
            "vanilla": {"kind": "vanilla", "models": {"chat": model}},
            "pa": {
                "kind": "psychoalign",
                "models": {"drive": {"backend": "openai", "model": "qwen3:8b", "host": "127.0.0.1:11434"}},
                "negotiation": {"tau": 0.95},
            },
        },
        "judges": {"spec": {"refusal": "rules", "harm": False}, "model": {"backend": "local", "model": "smollm2"}},
    }
    assert _provenance_lines(identity) == [
        "models of vanilla: chat=scripted:script (script abababababab)",
        "models of pa: drive=openai:qwen3:8b@127.0.0.1:11434, tau=0.95",
        "judges: refusal rules, harm False; model local:smollm2",
    ]
    assert _provenance_lines(None) == ["models: unknown (this run was stored without its identity)"]


@pytest.mark.needs_data("advbench")
def test_a_run_whose_cells_failed_exits_1_with_one_summary_line(tmp_path: Path) -> None:
    """Failed cells are never scored, so the tables lack them: the command says how many in one
    line and exits 1 (0 only when every cell it ran is done), in text and in --json."""
    from typer.testing import CliRunner

    from psychoalign.cli.main import app

    chat = tmp_path / "chat.yaml"
    chat.write_text(f"- {json.dumps(REFUSAL)}\n")  # one reply, then "ran out of replies"
    config = tmp_path / "psychoalign.toml"
    config.write_text(
        f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{SHARED_DATA}"\n'
        f'[roles.chat]\nbackend = "scripted"\nscript = "{chat}"\nmax_retries = 0\n'
    )
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(
        "name: s\nsystems: [vanilla]\nbenchmarks: [advbench]\nn: 4\nconcurrency: 1\n"
        "judge: {refusal: rules, harm: off, calibration_n: 0}\n"
    )
    args = ["experiment", "run", str(spec_file), "--out", str(tmp_path / "out"), "--no-progress", "-c", str(config)]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert res.exit_code == 1, res.output
    lines = [line for line in res.stderr.splitlines() if "cells failed" in line]
    assert len(lines) == 1 and lines[0].startswith("3 of 4 cells failed; see `psychoalign experiment report s-"), (
        res.stderr
    )
    data = json.loads((tmp_path / "out" / "results.json").read_text())
    assert data["status"]["done"] == 1 and data["status"]["failed"] == 3  # the report is written all the same
    # each invocation's model has its one reply again: the failed cells are retried, one gets done
    again = CliRunner().invoke(app, [*args, "--json"])
    assert again.exit_code == 1 and json.loads(again.stdout)["summary"]["failed"] == 2
    assert "2 of 3 cells failed" in again.stderr
    assert CliRunner().invoke(app, args).exit_code == 1  # 1 of 2 failed
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0 and "cells failed" not in done.stderr, done.output
    assert "1 cells ran (1 done, 0 failed), 3 already done" in done.stderr


def test_a_dry_run_names_the_models_its_estimates_are_for(tmp_path: Path) -> None:
    """The dry run's calls, tokens and USD depend on each system's models (USD on their prices),
    but it named none: a model swapped in the configuration changed the figures unseen."""
    from tests.cli.test_main import cli

    script = tmp_path / "chat.yaml"
    script.write_text("- hello\n")
    config = tmp_path / "psychoalign.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n[roles.chat]\nbackend = "scripted"\nscript = "{script}"\n')
    spec_file = tmp_path / "mini.yaml"
    spec_file.write_text(
        "name: mini\nbenchmarks: [dilemmas]\nn: 2\nsystems:\n  - vanilla\n"
        "  - {name: big, kind: vanilla, roles: {chat: {backend: openai, model: big-model}}}\n"
    )
    dry = cli("experiment", "run", str(spec_file), "--dry-run", "--json", "-c", str(config))
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["models"] == {
        "vanilla": {"chat": "scripted:script"},
        "big": {"chat": "openai:big-model"},
    }
    shown = cli("experiment", "run", str(spec_file), "--dry-run", "-c", str(config))
    assert "models of vanilla: chat=scripted:script" in shown.stderr
    assert "models of big: chat=openai:big-model" in shown.stderr


@pytest.mark.needs_data("advbench")
def test_a_resume_with_nothing_left_says_so_in_one_line_and_a_changed_model_is_still_refused(tmp_path: Path) -> None:
    """Rerunning a finished run: exit 0 and one line (all N cells done, where the results are, the
    command that reports them), no tables of a run that ran nothing. The same rerun under another
    model is refused, though nothing is left to run: the stored cells are never reused for it."""
    import yaml
    from typer.testing import CliRunner

    from psychoalign.cli.main import app

    configs = {}
    for name, reply in (("A", REFUSAL), ("B", "Sure, here is how: step one, step two.")):
        chat = tmp_path / f"chat-{name}.yaml"
        chat.write_text(yaml.safe_dump({"rules": [], "default": reply}))
        configs[name] = tmp_path / f"{name}.toml"
        configs[name].write_text(
            f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{SHARED_DATA}"\n'
            f'[roles.chat]\nbackend = "scripted"\nscript = "{chat}"\n'
        )
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(
        "name: s\nsystems: [vanilla]\nbenchmarks: [advbench]\nn: 3\n"
        "judge: {refusal: rules, harm: off, calibration_n: 0}\n"
    )
    store = f"sqlite:///{tmp_path / 'results.db'}"
    out = tmp_path / "out"

    def go(config: str) -> Any:
        args = ["experiment", "run", str(spec_file), "--store", store, "--out", str(out), "--no-progress"]
        return CliRunner().invoke(app, [*args, "-c", str(configs[config])], env={"COLUMNS": "400"})

    first = go("A")
    assert first.exit_code == 0, first.output
    run_id = json.loads((out / "results.json").read_text())["run"]["id"]
    again = go("A")
    assert again.exit_code == 0, again.output
    assert again.stdout == ""  # no tables: nothing ran
    lines = [line for line in again.stderr.splitlines() if line.strip()]
    assert lines == [
        f"run {run_id}: all 3 cells already done, nothing to run; results: {out / 'results.json'}; report them: "
        f"psychoalign experiment report {run_id} --store {store} -c {configs['A']}"
    ]
    assert json.loads((out / "results.json").read_text())["status"]["done"] == 3
    refused = go("B")
    assert isinstance(refused.exception, ConfigError), refused.output  # the CLI's one error line, exit 2
    assert "was computed with other settings" in str(refused.exception) and "script_sha256" in str(refused.exception)
    assert "already done" not in refused.output


@pytest.mark.parametrize(
    ("command", "n"),
    [("run", "100001"), ("run", "99999999999999999999"), ("show", "0"), ("show", "-3"), ("show", "100001")],
)
def test_n_out_of_the_specs_range_is_refused_before_anything_runs(tmp_path: Path, command: str, n: str) -> None:
    """A spec's N is 1–100,000; `--n` outside it used to run every cell and then fail the report
    (and every later `report`/`cells` of that run) with an internal ValidationError, or, for
    `show`, print a spec with `n: 0` that does not load."""
    from tests.cli.test_main import cli

    spec_file = tmp_path / "mini.yaml"
    spec_file.write_text("name: mini\nsystems: [vanilla]\nbenchmarks: [hhh]\nn: 3\n")
    args = ["experiment", command, str(spec_file), "--n", n]
    if command == "run":
        args += ["--dry-run", "--no-progress"]
    res = cli(*args, env={"PSYCHOALIGN_HOME": str(tmp_path / "home"), "PSYCHOALIGN_DATA_DIR": str(tmp_path / "none")})
    assert res.returncode == 2, res.stdout + res.stderr
    assert "--n" in res.stderr and "internal error" not in res.stderr and "Traceback" not in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and res.stdout == ""


def test_the_cli_bound_on_n_is_the_specs() -> None:
    from psychoalign.cli.experiment import MAX_N as CLI_MAX_N
    from psychoalign.experiments.harness.spec import MAX_N

    assert CLI_MAX_N == MAX_N


def test_a_run_without_the_evaluation_data_says_what_where_and_how_to_fetch_it(tmp_path: Path) -> None:
    """No data folder contents: one line naming the missing file, its path and the fix
    (`psychoalign data fetch`), exit 2, no traceback."""
    from tests.cli.test_main import cli

    empty = tmp_path / "empty"
    empty.mkdir()
    spec_file = tmp_path / "mini.yaml"
    spec_file.write_text("name: mini\nsystems: [vanilla]\nbenchmarks: [hhh]\nn: 2\n")
    env = {"PSYCHOALIGN_HOME": str(tmp_path / "home"), "PSYCHOALIGN_DATA_DIR": str(empty)}
    for extra in ([], ["--dry-run"]):
        res = cli("experiment", "run", str(spec_file), "--no-progress", *extra, env=env)
        assert res.returncode == 2, res.stdout + res.stderr
        line = res.stderr.strip()
        assert len(line.splitlines()) == 1 and "Traceback" not in line
        assert str(empty) in line and "harmless.task.json" in line and "psychoalign data fetch" in line


@pytest.mark.needs_data("advbench")
def test_sigterm_before_the_first_cell_leaves_a_run_shown_as_interrupted_with_its_resume_command(
    tmp_path: Path,
) -> None:
    """SIGTERM stops `experiment run` as Ctrl-C does: the cell in flight is given back, the run is
    marked interrupted, `status` says so with the command that resumes it, and that command
    finishes the same run. Synchronised on the endpoint receiving the first cell's call."""
    import os
    import shlex
    import signal
    import subprocess
    import sys
    import threading

    import yaml

    from tests.cli.test_main import cli
    from tests.loopback import FakeServer, Scripted, fake_endpoint, openai_reply

    class Told(FakeServer):
        def __init__(self) -> None:
            super().__init__(default=Scripted(body=openai_reply(REFUSAL), hang=True))
            self.called = threading.Event()

        async def handle(self, request: Any) -> Any:
            self.called.set()
            return await super().handle(request)

    judge = tmp_path / "judge.yaml"
    judge.write_text(yaml.safe_dump({"rules": [], "default": {"harmful": False, "reason": "x"}}))
    spec_file = tmp_path / "term.yaml"
    spec_file.write_text(
        "name: term\nsystems: [vanilla]\nbenchmarks: [advbench]\nn: 2\nconcurrency: 1\n"
        "judge: {refusal: rules, harm: false, calibration_n: 0}\n"
    )
    store = f"sqlite:///{tmp_path / 'results.db'}"
    with fake_endpoint("/v1/chat/completions", Told()) as fake:
        config = tmp_path / "psychoalign.toml"
        config.write_text(
            f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{SHARED_DATA}"\n'
            f'[roles.chat]\nbackend = "openai"\nbase_url = "{fake.url}/v1"\nmodel = "m"\nmax_retries = 0\n'
            f'[roles.judge]\nbackend = "scripted"\nscript = "{judge}"\n'
        )
        args = ["experiment", "run", str(spec_file), "--store", store, "--no-progress", "-c", str(config)]
        env = {**os.environ, "OPENAI_API_KEY": "test"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "psychoalign", *args], stderr=subprocess.PIPE, text=True, env=env
        )
        try:
            assert fake.called.wait(timeout=120), "the run never called the endpoint"
            proc.send_signal(signal.SIGTERM)
            _, stderr = proc.communicate(timeout=120)
        finally:
            proc.kill()
        assert proc.returncode == 143, stderr
        assert "Traceback" not in stderr and "resume the run with: psychoalign experiment run" in stderr

        shown = json.loads(cli("experiment", "status", "--json", "--store", store, "-c", str(config)).stdout)
        assert [(r["cells"], r["running"], r["state"]) for r in shown] == [(0, 0, "interrupted, 0 cells")]
        assert shown[0]["resume"].startswith("resume it with: psychoalign experiment run ")
        table = cli("experiment", "status", "--store", store, "-c", str(config))
        assert "interrupted, 0 cells" in table.stdout and "resume it with:" in table.stderr

        fake.default = Scripted(body=openai_reply(REFUSAL))
        fake.release.set()
        words = shlex.split(shown[0]["resume"].removeprefix("resume it with: "))
        assert words[:3] == ["psychoalign", "experiment", "run"]
        resumed = cli(*words[1:], "--no-progress", env={"OPENAI_API_KEY": "test"})
    assert resumed.returncode == 0, resumed.stderr
    after = json.loads(cli("experiment", "status", "--json", "--store", store, "-c", str(config)).stdout)
    assert [(r["id"], r["done"], r["state"]) for r in after] == [(shown[0]["id"], 2, "")]


def test_status_names_a_run_stored_without_cells(tmp_path: Path) -> None:
    """A run killed (kill -9) after it was stored and before its first cell has no mark: `status`
    still says it has no cells, never lists it as a run like the others."""
    import asyncio

    from psychoalign.experiments.harness.store import RunRecord, SQLResultStore
    from tests.cli.test_main import cli

    url = f"sqlite:///{tmp_path / 'results.db'}"

    async def stored() -> None:
        store = SQLResultStore(url)
        try:
            await store.open_run(RunRecord(id="killed-0123", name="killed", spec={}))
        finally:
            await store.close()

    asyncio.run(stored())
    config = tmp_path / "c.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n')
    shown = json.loads(cli("experiment", "status", "--json", "--store", url, "-c", str(config)).stdout)
    assert shown[0]["state"].startswith("no cells yet") and "rerunning" in shown[0]["resume"]


def test_an_endpoint_outage_stops_the_run_in_one_line_with_its_resume_command(tmp_path: Path) -> None:
    """Every role on one OpenAI-compatible endpoint that answers HTTP 500: the cell fails, and the
    judge check the run stores once is not measured on the outage; the command ends in one line
    naming the model, the failure, the fix and the command that resumes the run. Once the endpoint
    answers, that command completes the run."""
    from tests.cli.test_main import cli
    from tests.loopback import FakeServer, Scripted, fake_endpoint, openai_reply

    down = Scripted({"error": {"message": "internal error"}}, status=500)
    fake = FakeServer(default=down)
    spec_file = tmp_path / "s.yaml"
    spec_file.write_text(
        "name: s\nsystems: [vanilla]\nbenchmarks: [dilemmas]\nn: 1\nconcurrency: 1\n"
        "judge: {refusal: rules, harm: off, calibration_n: 1}\n"
    )
    with fake_endpoint("/v1/chat/completions", fake):
        config = tmp_path / "psychoalign.toml"
        config.write_text(
            f'home = "{tmp_path / "home"}"\n[experiments]\ndata_dir = "{tmp_path}"\n'
            f'[defaults]\nbackend = "openai"\nbase_url = "{fake.url}/v1"\nmodel = "own-8b"\nmax_retries = 0\n'
        )
        args = ["experiment", "run", str(spec_file), "--no-progress", "-c", str(config), "--out", str(tmp_path / "o")]
        res = cli(*args, env={"COLUMNS": "400"})
        assert res.returncode == 1, res.stderr
        errors = [line for line in res.stderr.splitlines() if line.strip()]
        assert len(errors) == 1 and errors[0].startswith("error: "), res.stderr
        assert "openai:own-8b: model endpoint returned HTTP 500" in errors[0]
        assert errors[0].endswith(f"resume the run with: psychoalign experiment run {spec_file} -c {config}")
        assert not (tmp_path / "o" / "results.json").exists()  # no report of a run that stopped
        verdict = {"explanation": "fine", "alignment": 7, "capability": 6}
        fake.default = Scripted(openai_reply(json.dumps(verdict)))
        again = cli(*args, env={"COLUMNS": "400"})
    assert again.returncode == 0, again.stderr
    data = json.loads((tmp_path / "o" / "results.json").read_text())
    assert data["status"]["done"] == 1 and data["status"]["failed"] == 0
    assert data["run"]["identity"]["systems"]["vanilla"]["models"]["chat"]["model"] == "own-8b"
