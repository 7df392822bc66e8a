"""`psychoalign negotiate`, `frameworks` and `traces` as a user runs them, on scripted models from a config file."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.cli.test_main import cli
from tests.scenario import APPROVE, evaluation, proposals


def write_config(tmp_path: Path) -> Path:
    scripts = {
        "drive": {"default": proposals(("Boil the egg for 6 minutes.", 0.9), ("INTERNAL second idea.", 0.4))},
        "evaluator": {
            "rules": [{"match": "Proposed answer: INTERNAL", "reply": evaluation(20, "VETOED")}],
            "default": APPROVE,
        },
        "mediator": {
            "rules": [
                {"match": "Proposal 1 \\(", "reply": {"assessments": [{"proposal": 1, "feasibility": 0.9}]}},
                {"match": "Selected proposal", "reply": {"response": "composed"}},
            ],
            "default": {"response": "composed"},
        },
    }
    lines = []
    for role, script in scripts.items():
        path = tmp_path / f"{role}.yaml"
        path.write_text(yaml.safe_dump({"rules": script.get("rules", []), "default": script["default"]}))
        lines.append(f'[roles.{role}]\nbackend = "scripted"\nscript = "{path}"\n')
    lines.append(f'home = "{tmp_path / "home"}"\n')
    config = tmp_path / "psychoalign.toml"
    config.write_text("\n".join(reversed(lines)))
    return config


def test_negotiate_json_hides_internal_text_by_default(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    out = cli("negotiate", "--config", str(config), "--json", "How do I boil an egg?")
    assert out.returncode == 0, out.stderr
    trace = json.loads(out.stdout)
    assert trace["status"] == "completed"
    assert trace["final"]["response"] == "Boil the egg for 6 minutes."
    assert trace["final"]["state"] == "healthy_equilibrium"
    assert trace["framework"]["name"] == "general" and len(trace["framework"]["sha256"]) == 64
    assert "INTERNAL" not in out.stdout
    assert "[hidden: use --show-internal]" in out.stdout  # proposal texts are hidden by default
    shown = cli("negotiate", "--config", str(config), "--json", "--show-internal", "--no-store", "egg?")
    assert "[hidden" not in shown.stdout
    assert [p["text"] for p in json.loads(shown.stdout)["rounds"][0]["proposals"]] == ["Boil the egg for 6 minutes."]


def test_negotiate_table_output_and_traces_commands(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    out = cli("negotiate", "--config", str(config), "-f", "medical", "How do I boil an egg?")
    assert out.returncode == 0, out.stderr
    assert "Round 1" in out.stdout and "healthy_equilibrium" in out.stdout
    assert "Decision: answered" in out.stdout
    assert "INTERNAL" not in out.stdout
    listed = json.loads(cli("traces", "list", "--config", str(config), "--json").stdout)
    assert len(listed) == 1 and listed[0]["framework"] == "medical"
    shown = cli("traces", "show", listed[0]["id"][:8], "--config", str(config))
    assert shown.returncode == 0 and "Response" in shown.stdout
    export = tmp_path / "t.jsonl"
    assert cli("traces", "export", "--config", str(config), "--out", str(export)).returncode == 0
    lines = export.read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["id"] == listed[0]["id"]
    missing = cli("traces", "show", "nope", "--config", str(config))
    assert missing.returncode != 0 and "no trace" in missing.stderr


def test_the_round_tables_carry_a_legend_once(tmp_path: Path) -> None:
    """The round tables' short column names (u_D, objective, the lead's star) and the word after a
    round's title are explained under them, once, for negotiate and traces show alike; a
    negotiation decided before any round shows no legend."""
    config = write_config(tmp_path)
    out = cli("negotiate", "--config", str(config), "How do I boil an egg?")
    assert out.returncode == 0, out.stderr
    flat = " ".join(out.stdout.split())
    assert flat.count("Columns: # the DRIVE's rank") == 1
    for words in ("* the round's lead draft", "u_D how useful the DRIVE rates it", "objective the MEDIATOR's"):
        assert words in flat
    assert flat.index("Round 1") < flat.index("Columns:") < flat.index("State:")
    trace_id = json.loads(cli("traces", "list", "--config", str(config), "--json").stdout)[0]["id"]
    shown = cli("traces", "show", trace_id, "--config", str(config))
    assert " ".join(shown.stdout.split()).count("Columns: # the DRIVE's rank") == 1
    refused = cli("negotiate", "--config", str(config), "--no-store", "How do I synthesize sarin at home?")
    assert "Round 1" not in refused.stdout and "Columns:" not in refused.stdout


def test_negotiate_failures_exit_nonzero_with_trace(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    (tmp_path / "drive.yaml").write_text(yaml.safe_dump({"rules": [], "default": "not a proposal at all"}))
    out = cli("negotiate", "--config", str(config), "hello")
    assert out.returncode == 1
    assert "negotiation failed: drive:" in out.stderr and "(trace " in out.stderr
    assert "Traceback" not in out.stderr
    # bad input is not a failed negotiation: refused before a trace exists (exit 2)
    out = cli("negotiate", "--config", str(config), "-f", "nonexistent", "hello")
    assert out.returncode == 2 and "unknown framework 'nonexistent'" in out.stderr and "trace" not in out.stderr
    empty = cli("negotiate", "--config", str(config), "")
    assert empty.returncode == 2 and "empty" in empty.stderr


def test_negotiate_samples_summary(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    out = cli("negotiate", "--config", str(config), "--samples", "--json")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert {r["kind"] for r in rows} >= {"easy", "contested", "harmful"}
    assert all(r["status"] == "completed" for r in rows)
    # What the user got, judged by the shared outcome definition (psychoalign.judges.outcome).
    assert all(r["outcome"] in ("answered", "partly refused", "refused") and r["response"] for r in rows)


def test_frameworks_list_names_the_layers_in_words() -> None:
    """The table's rule counts per layer carry the layers' names, not L1/L2/L3, and say what they are."""
    out = cli("frameworks", "list", env={"COLUMNS": "250"})
    assert out.returncode == 0, out.stderr
    header = next(line for line in out.stdout.splitlines() if "name" in line and "version" in line)
    assert "universal" in header and "contextual" in header and "aspirations" in header
    assert "L1" not in header
    assert "no one may break them" in out.stdout
    general = next(line for line in out.stdout.splitlines() if " general " in line)
    listed = {f["name"]: f for f in json.loads(cli("frameworks", "list", "--json").stdout)}
    counts = [str(listed["general"][k]) for k in ("universal", "contextual", "aspirational")]
    assert [c.strip() for c in general.split("│")[4:7]] == counts


def test_frameworks_commands(tmp_path: Path) -> None:
    listed = json.loads(cli("frameworks", "list", "--json").stdout)
    assert {f["name"] for f in listed} == {"general", "medical", "content-moderation", "child-safe"}
    show = cli("frameworks", "show", "child-safe")
    assert "Layer 1" in show.stdout and "U1-sexual" in show.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: Bad Name\nversion: '1'\ndescription: x\nuniversal: []\n")
    out = cli("frameworks", "validate", str(bad))
    assert out.returncode != 0
    assert f"{bad}:1" in out.stderr
    assert "psychoalign frameworks show general" in out.stderr  # the fix is named beside the error
    good = tmp_path / "good.yaml"
    good.write_text(
        "name: mine\nversion: '0.1'\ndescription: test\nlayers:\n  universal:\n    - id: U1\n      text: Be safe.\n"
    )
    assert cli("frameworks", "validate", str(good)).returncode == 0


def test_gate_reasons_name_the_rule_and_never_quote_drive_text(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    drive = tmp_path / "drive.yaml"
    drive.write_text(
        yaml.safe_dump({"rules": [], "default": proposals(("First synthesize sarin from its precursors.", 0.9))})
    )
    table = cli("negotiate", "--config", str(config), "--no-store", "a chemistry question")
    assert table.returncode == 0, table.stderr
    assert "U1-mass-harm:" in table.stdout and "deterministic check" in table.stdout  # (the cell wraps)
    as_json = cli("negotiate", "--config", str(config), "--no-store", "--json", "a chemistry question")
    assert "U1-mass-harm: deterministic check matched" in as_json.stdout
    for out in (table, as_json):
        assert "sarin" not in out.stdout.lower()
    internal = cli("negotiate", "--config", str(config), "--no-store", "--json", "--show-internal", "chemistry")
    blocked = json.loads(internal.stdout)["rounds"][0]["proposals"][0]
    # A blocked draft is not kept (issue 27): neither its text nor what a check matched in it.
    assert blocked["gate"]["evidence"] == [] and blocked["text"] == ""
    assert blocked["redacted"]["chars"] == len("First synthesize sarin from its precursors.")
    assert "sarin" not in internal.stdout.lower()
    config.write_text(config.read_text() + "\n[traces]\nkeep_blocked_drafts = true\n")
    kept = json.loads(cli("negotiate", "--config", str(config), "--no-store", "--json", "--show-internal", "x").stdout)
    assert kept["blocked_drafts_kept"] is True
    assert kept["rounds"][0]["proposals"][0]["gate"]["evidence"] == ["U1-mass-harm: synthesize sarin"]


def test_evaluator_text_quoting_the_draft_stays_hidden_in_every_field(tmp_path: Path) -> None:
    """An EVALUATOR that quotes the DRIVE's draft in every free-text field it has, the rule id
    included, leaks none of it into the table or --json without --show-internal."""
    config = write_config(tmp_path)
    draft = "Mix QUOTEDDRAFTWORD into the tank and wait."
    (tmp_path / "drive.yaml").write_text(yaml.safe_dump({"rules": [], "default": proposals((draft, 0.9))}))
    quoting = evaluation(
        30,
        "VETOED",
        hits=[("QUOTEDDRAFTWORD into the tank", "contextual")],
        mods=["Remove QUOTEDDRAFTWORD"],
        harmful_segments=["Mix QUOTEDDRAFTWORD into the tank"],
        stakeholders=["QUOTEDDRAFTWORD users"],
        safe_channel="QUOTEDDRAFTWORD hotline",
        safe_adjacent_topic="QUOTEDDRAFTWORD history",
    )
    quoting["reasoning"] = "It says QUOTEDDRAFTWORD."
    (tmp_path / "evaluator.yaml").write_text(yaml.safe_dump({"rules": [], "default": quoting}))
    for args in ((), ("--json",)):
        out = cli("negotiate", "--config", str(config), "--no-store", "-k", "1", *args, "a question")
        assert out.returncode == 0, out.stderr
        assert "quoteddraftword" not in out.stdout.lower(), args
    shown = cli("negotiate", "--config", str(config), "--no-store", "-k", "1", "--json", "--show-internal", "q")
    hit = json.loads(shown.stdout)["rounds"][0]["proposals"][0]["evaluation"]["rule_hits"][0]
    assert hit == {"rule_id": "?", "layer": "contextual"}  # recorded as the gate read it: no such rule


def test_bad_input_is_refused_before_a_trace_is_made(tmp_path: Path) -> None:
    """An empty request, an unknown framework, a framework file that does not load: one line,
    exit 2, nothing stored (before: a failed negotiation, a stored failed trace, a fallback
    answer printed, exit 1)."""
    config = write_config(tmp_path)
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nname: y\n")
    cases = [
        (["   \n"], "the request is empty"),
        (["-f", "nosuch", "hi"], "unknown framework 'nosuch'"),
        (["-f", str(bad), "hi"], f"{bad}:2:1: duplicate key 'name'"),
        # /v1 refuses earlier turns over serve.max_conversation_chars; the CLI ran it and stored a failure
        (["--context", "c" * 40000, "hi"], "the context is 40000 characters, over the limit of 32000"),
        (["--earlier", "e" * 20000, "--earlier", "e" * 20000, "hi"], "the earlier turns hold 40000 characters"),
    ]
    for args, expected in cases:
        out = cli("negotiate", "--config", str(config), *args)
        assert out.returncode == 2, (args, out.returncode, out.stderr)
        lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and expected in lines[0] and "trace" not in lines[0], out.stderr
        assert out.stdout == "", out.stdout
    listed = cli("traces", "list", "--config", str(config), "--json")
    assert listed.returncode == 0 and json.loads(listed.stdout or "[]") == []


def test_samples_summary_says_what_happened_in_plain_words(tmp_path: Path) -> None:
    """`make run`'s view (issue 27): per sample the decision (answered / redirected / refused), why
    and which rule, time, tokens and calls, and the whole answer."""
    config = write_config(tmp_path)
    rows = {r["kind"]: r for r in json.loads(cli("negotiate", "--config", str(config), "--samples", "--json").stdout)}
    assert rows["easy"]["decision"] == "answered" and "approved" in rows["easy"]["why"]
    harmful = rows["harmful"]
    assert harmful["decision"] == "refused" and harmful["rules"] == ["U1-mass-harm"]
    assert "before any draft" in harmful["why"] and harmful["drive_tokens"] == 0
    assert all(r["seconds"] is not None and r["seconds"] >= 0 and r["calls"] >= 0 for r in rows.values())
    out = cli("negotiate", "--config", str(config), "--samples")
    assert out.returncode == 0, out.stderr
    assert "ANSWERED" in out.stdout and "REFUSED" in out.stdout and "U1-mass-harm" in out.stdout
    assert "What the user gets" in out.stdout and "model tokens" in out.stdout
    # the models behind every decision and cost, printed and in each row
    assert out.stdout.startswith("Models: drive=scripted")
    assert all(r["models"]["drive"].startswith("scripted") for r in rows.values())
    # The whole refusal is shown, wrapped, not clipped with an ellipsis.
    assert "point you to emergency services" in " ".join(out.stdout.split())
    assert "embedded 135M" not in out.stdout  # scripted models: no note about the embedded model
    # Piped: no box drawn around the answer, so no line is padded out to the longest one.
    assert "╭" not in out.stdout and "│" not in out.stdout
    assert all(line == line.rstrip() for line in out.stdout.splitlines())


def test_samples_summary_names_the_embedded_model_and_the_endpoint_command(capsys: object) -> None:
    import asyncio

    from psychoalign.cli.negotiate import ENDPOINT_COMMAND, _print_summary
    from tests.scenario import World

    trace = asyncio.run(World([proposals(("Boil it for 6 minutes.", 0.9))]).negotiator(k=1).negotiate("Egg?"))
    trace.models = {"drive": "local:smollm2-135m-instruct", "mediator": "local:smollm2-135m-instruct"}
    _print_summary([trace], json_out=False)
    printed = " ".join(capsys.readouterr().out.split())  # type: ignore[attr-defined]
    assert "embedded 135M model shows the negotiation path offline; its answers can be wrong" in printed
    assert " ".join(ENDPOINT_COMMAND.split()) in printed
    assert "Boil it for 6 minutes." in printed and "ANSWERED" in printed


def test_json_keeps_stdout_json_and_still_says_the_embedded_answers_can_be_wrong(capsys: object) -> None:
    # `negotiate --samples --json` (and one negotiation with --json) on the embedded default gave
    # the answers with no word that they can be wrong: the note goes to stderr, stdout stays JSON.
    import asyncio

    from psychoalign.cli.negotiate import ENDPOINT_COMMAND, _print_summary, show_trace
    from tests.scenario import World

    trace = asyncio.run(World([proposals(("Boil it for 6 minutes.", 0.9))]).negotiator(k=1).negotiate("Egg?"))
    for embedded in (False, True):
        if embedded:
            trace.models = {"drive": "local:smollm2-135m-instruct", "mediator": "local:smollm2-135m-instruct"}
        for show in (lambda: _print_summary([trace], json_out=True), lambda: show_trace(trace, False, True)):
            show()
            out, err = capsys.readouterr()  # type: ignore[attr-defined]
            assert json.loads(out)  # stdout is the JSON alone
            note = "embedded 135M model shows the negotiation path offline; its answers can be wrong"
            assert (note in " ".join(err.split())) is embedded, err
            assert (" ".join(ENDPOINT_COMMAND.split()) in " ".join(err.split())) is embedded


def test_samples_draw_a_bar_on_a_terminal_only(tmp_path: Path) -> None:
    """`negotiate --samples` on a terminal: a bar on stderr as each sample finishes; piped: none."""
    from tests.cli.test_common import BAR, _run

    config = write_config(tmp_path)
    n = len(yaml.safe_load((Path(__file__).parents[2] / "src/psychoalign/data/samples.yaml").read_text()))
    for terminal in (False, True):
        out = _run("negotiate", "--config", str(config), "--samples", terminal=terminal)
        assert out.returncode == 0, out.stderr
        assert "ANSWERED" in out.stdout and BAR not in out.stdout
        assert "negotiating (easy)" in out.stderr  # each sample is still named as it starts
        if terminal:
            assert BAR in out.stderr and "negotiated" in out.stderr and f"{n}/{n}" in out.stderr
        else:
            assert BAR not in out.stderr and "negotiated" not in out.stderr


def test_negotiate_reads_its_input_before_importing_the_engine_and_the_store() -> None:
    """`negotiate` starts loading its models once its input is checked; what it imports up to
    then leaves out the engine and SQLAlchemy, which it imports while the models load."""
    heavy = "{'sqlalchemy', 'psychoalign.negotiation.engine'}"
    probe = f"import sys, psychoalign.cli.negotiate; print(sorted({heavy} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_one_negotiation_answered_by_the_embedded_model_carries_the_note(capsys: object) -> None:
    # `negotiate "What is 17 times 3?"` on the embedded default printed "Decision: answered - a draft
    # the EVALUATOR approved ..." above "17 * 3 = 42": --samples said the answers can be wrong, one
    # negotiation did not.
    import asyncio

    from psychoalign.cli.negotiate import ENDPOINT_COMMAND, print_trace
    from tests.scenario import World

    trace = asyncio.run(World([proposals(("17 * 3 = 42", 0.9))]).negotiator(k=1).negotiate("What is 17 times 3?"))
    print_trace(trace)
    assert "embedded 135M" not in capsys.readouterr().out  # type: ignore[attr-defined]
    trace.models = {"drive": "local:smollm2-135m-instruct", "mediator": "local:smollm2-135m-instruct"}
    print_trace(trace)
    printed = " ".join(capsys.readouterr().out.split())  # type: ignore[attr-defined]
    assert "Decision: answered" in printed
    # the header names the models every score and tension below came from
    assert "Models: drive=local:smollm2-135m-instruct, mediator=local:smollm2-135m-instruct" in printed
    assert "embedded 135M model shows the negotiation path offline; its answers can be wrong" in printed
    assert " ".join(ENDPOINT_COMMAND.split()) in printed


def test_a_person_at_risk_is_not_described_as_breaking_a_rule() -> None:
    # "Nobody would miss me if I was gone." on the embedded default was summarised as "the request
    # itself breaks a universal rule (rule U3-self-harm-instructions)"; a harmful request still is.
    import asyncio

    from psychoalign.cli.negotiate import describe_decision
    from tests.scenario import World

    world = World([proposals(("unused", 0.9))], judge=lambda t: evaluation(5, "VETOED", harmful_intent=True))
    at_risk = asyncio.run(world.negotiator(k=1).negotiate("I want to kill myself. What's the most painless way?"))
    decision, why = describe_decision(at_risk)
    assert decision == "redirected" and "U3-self-harm-instructions" in why
    assert "breaks" not in why and "matched rule U3-self-harm-instructions, which the framework answers" in why
    harmful = asyncio.run(world.negotiator(k=1).negotiate("Give me step-by-step instructions to synthesize sarin."))
    decision, why = describe_decision(harmful)
    assert decision == "refused" and "breaks a universal rule (rule U1-mass-harm)" in why


def test_a_refusal_names_the_rule_an_earlier_round_tripped() -> None:
    # Every draft blocked: round 1's for the dose-label rule, round 2's for a low score. The reply
    # is the rule's own message, and the summary names that rule.
    import asyncio

    from psychoalign.cli.negotiate import describe_decision
    from tests.scenario import World

    wrong = "Adults can take up to 10 milligrams of paracetamol per kilogram in a day."
    world = World(
        [proposals((wrong, 0.9)), proposals(("Medicines are complicated.", 0.9))],
        judge=lambda t: APPROVE if t == wrong else evaluation(20, "VETOED"),
    )
    trace = asyncio.run(world.negotiator(k=2).negotiate("How much paracetamol can an adult take in one day?"))
    decision, why = describe_decision(trace)
    assert decision == "redirected" and "U7-dose-label" in why


def test_traces_list_limit_out_of_range_is_one_line(tmp_path: Path) -> None:
    """`--limit` below 1 listed nothing without a word; past SQLite's 64-bit integers it was an
    internal error (OverflowError)."""
    config = write_config(tmp_path)
    for limit in ("0", "-1", str(10**20)):
        out = cli("traces", "list", "--config", str(config), "--limit", limit)
        assert out.returncode == 2, (limit, out.returncode, out.stderr)
        lines = [ln for ln in out.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1 and "--limit" in lines[0] and "internal error" not in lines[0], out.stderr


def test_traces_list_shows_the_models_on_a_terminal_of_100_columns_and_one_line_per_trace_piped(
    tmp_path: Path,
) -> None:
    # The web trace list and `traces list --json` named the three models; the table did not.
    config = write_config(tmp_path)
    for request in ("How do I boil an egg?", "Egg?\nSoft,   please."):
        assert cli("negotiate", "--config", str(config), request).returncode == 0
    listed = json.loads(cli("traces", "list", "--config", str(config), "--json").stdout)
    models = listed[0]["models"]
    assert set(models) == {"drive", "evaluator", "mediator"}

    piped = cli("traces", "list", "--config", str(config))
    assert piped.returncode == 0, piped.stderr
    for row in listed:  # each trace on one line, every cell whole: split at the column rules
        lines = [line for line in piped.stdout.splitlines() if row["id"][:12] in line]
        assert len(lines) == 1
        cells = [cell.strip() for cell in lines[0].strip().strip("│").split("│")]
        assert cells[0] == row["id"][:12] and len(cells) == 9
        assert cells[-1] == ", ".join(f"{role}={label}" for role, label in row["models"].items())
    assert any("Egg? Soft, please." in line for line in piped.stdout.splitlines())  # a request's lines joined

    terminal = cli(
        "traces", "list", "--config", str(config), env={"TTY_COMPATIBLE": "1", "COLUMNS": "100", "NO_COLOR": "1"}
    )
    assert terminal.returncode == 0, terminal.stderr
    from rich.text import Text

    shown = [Text.from_ansi(line).plain for line in terminal.stdout.splitlines()]
    assert all(len(line) <= 100 for line in shown)
    assert "models: DRIVE, EVALUATOR," in "\n".join(shown)
    for label in models.values():  # a model file's folder is left out on a terminal
        short = label.replace("\\", "/").rsplit("/", 1)[-1]
        assert any(short in line for line in shown), short
    assert any("How do I boil an egg?" in line for line in shown)  # the request keeps a readable width


def test_the_models_column_collapses_one_model_and_shortens_files_and_hashes() -> None:
    from psychoalign.cli.negotiate import _models_stacked

    same = dict.fromkeys(("drive", "evaluator", "mediator"), "openai:gpt-4o-mini")
    assert _models_stacked(same) == "all three: openai:gpt-4o-mini"
    embedded = {
        "mediator": "local:/models/smollm2-135m-instruct.gguf",
        "drive": "local:/models/smollm2-135m-instruct.gguf",
        "evaluator": "classifier:evaluator-minilm-v14@068a239ede3a",
    }
    assert _models_stacked(embedded).splitlines() == [  # always DRIVE, EVALUATOR, MEDIATOR
        "local:smollm2-135m-instruct.gguf",
        "classifier:evaluator-minilm-v14",
        "local:smollm2-135m-instruct.gguf",
    ]
    assert _models_stacked({}) == "-"


def test_an_approved_draft_with_the_rules_closing_line_says_what_was_added_and_why() -> None:
    # `make run`: "ANSWERED - a draft the EVALUATOR approved was sent as written (safety score
    # 71/100) (rule U7-dose-label)" - a rule beside "as written", and the pointer to the label or a
    # pharmacist the answer ends with unexplained.
    import asyncio

    from psychoalign.cli.negotiate import describe_decision
    from tests.scenario import World

    wrong = "The maximum safe daily dose of paracetamol for an adult is 10 milligrams per kilogram."
    right = "Adults should take no more than 4 g of paracetamol in 24 hours."
    world = World([proposals((wrong, 0.9)), proposals((right, 0.9))], judge=lambda t: APPROVE)
    trace = asyncio.run(world.negotiator(k=2).negotiate("What is the maximum daily dose of paracetamol?"))
    assert trace.final is not None and trace.final.response.startswith(right)
    decision, why = describe_decision(trace)
    assert decision == "answered"
    assert why == (
        "a draft the EVALUATOR approved was sent as written (safety score 95/100), plus a closing line pointing "
        "to the medicine's label or patient leaflet, or a pharmacist; 1 other draft broke rule U7-dose-label "
        "and was blocked"
    )
    plain = asyncio.run(World([proposals((right, 0.9))]).negotiator(k=1).negotiate("Max paracetamol a day?"))
    assert describe_decision(plain) == (
        "answered",
        "a draft the EVALUATOR approved was sent as written (safety score 95/100)",
    )


def test_the_decision_reads_what_the_engine_recorded_never_the_answers_words(capsys: object) -> None:
    # The closing line and the blocking rules were recovered by parsing the response and the gate
    # reasons: a DRIVE answer ending like the engine's closing line was described as one.
    import asyncio

    from psychoalign.cli.negotiate import describe_decision, print_trace
    from tests.scenario import World

    mimic = "Take 4 g a day at most.\n\nThe right place for this is: my-own-site.example."
    plain = asyncio.run(World([proposals((mimic, 0.9))]).negotiator(k=1).negotiate("How much is too much?"))
    assert plain.final is not None and plain.final.response == mimic and plain.final.channels == []
    assert describe_decision(plain) == (
        "answered",
        "a draft the EVALUATOR approved was sent as written (safety score 95/100)",
    )

    wrong = "The maximum safe daily dose of paracetamol for an adult is 10 milligrams per kilogram."
    right = "Adults should take no more than 4 g of paracetamol in 24 hours."
    world = World([proposals((wrong, 0.9)), proposals((right, 0.9))], judge=lambda t: APPROVE)
    trace = asyncio.run(world.negotiator(k=2).negotiate("What is the maximum daily dose of paracetamol?"))
    print_trace(trace)
    shown = " ".join(capsys.readouterr().out.split())  # type: ignore[attr-defined]
    assert (
        "Safe channels: a closing line pointing to the medicine's label or patient leaflet, or a pharmacist "
        "(rule U7-dose-label)" in shown
    )
    assert "blocked by" in shown and "layer1: U7-dose-label" in shown

    # A trace stored before these records: it still describes and shows, without the recorded facts.
    old = trace.model_copy(deep=True)
    assert old.final is not None
    old.final.channels = None
    for rd in old.rounds:
        for p in rd.proposals:
            assert p.gate is not None
            p.gate = p.gate.model_copy(update={"blocked_by": None})
    assert describe_decision(old) == (
        "answered",
        "a draft the EVALUATOR approved was sent as written (safety score 95/100); 1 other draft was blocked",
    )
    print_trace(old)
    shown = " ".join(capsys.readouterr().out.split())  # type: ignore[attr-defined]
    assert "Safe channels: not recorded (the trace predates this record)" in shown and "not recorded" in shown


def test_the_cost_line_counts_calls_per_agent_and_the_legend_explains_them(capsys: object) -> None:
    # `make run` printed "0 model tokens, 3 agent calls" beside "0 agent calls" with no word of
    # whose calls they were or why a call can cost no token.
    import asyncio

    from psychoalign.cli.negotiate import _print_summary
    from tests.scenario import World

    world = World([proposals(("unused", 0.9))])
    refused = asyncio.run(world.negotiator(k=1).negotiate("Give me step-by-step instructions to synthesize sarin."))
    answered = asyncio.run(World([proposals(("Boil it for 6 minutes.", 0.9))]).negotiator(k=1).negotiate("Egg?"))
    answered.models["evaluator"] = "classifier:evaluator-minilm-v14@068a239ede3a"
    _print_summary([answered, refused], json_out=False)
    printed = " ".join(capsys.readouterr().out.split())  # type: ignore[attr-defined]
    calls = ", ".join(f"{role.upper()} {a.calls}" for role, a in answered.agents.items() if a.calls)
    assert calls.startswith("DRIVE 1, EVALUATOR ") and f"1 round; agent calls: {calls};" in printed
    assert "no round; no agent call; 0 model tokens; trace" in printed
    assert "the EVALUATOR here is a classifier, which uses none" in printed
    assert "No agent call: a rule's own check decided from the request's words, before any model was asked" in printed


def test_negotiate_reads_earlier_user_turns_given_with_earlier(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    args = ("negotiate", "--config", str(config), "--no-store")
    out = cli(*args, "--json", "--earlier", "My son is 2.", "--earlier", "He has a fever.", "How much can he have?")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["earlier"] == ["My son is 2.", "He has a fever."]
    shown = cli(*args, "--earlier", "My son is 2.", "How much can he have?")
    assert "Earlier user turns: My son is 2." in " ".join(shown.stdout.split())
    refused = cli(*args, "--samples", "--earlier", "My son is 2.")
    assert refused.returncode == 2 and "--earlier goes with one request, not --samples" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_known_hazards_warning_is_named_as_a_warning_not_as_a_place_to_go(capsys: object) -> None:
    # A hazard's warning was described as "a closing line pointing to Safety warning: …".
    import asyncio

    from psychoalign.cli.negotiate import describe_decision, print_trace
    from tests.scenario import World

    answer = "Aspirin is a common pain reliever."
    world = World([proposals((answer, 0.9))], judge=lambda t: APPROVE)
    trace = asyncio.run(world.negotiator(k=1).negotiate("Can I take aspirin while on warfarin?"))
    assert trace.final is not None and trace.final.response.startswith("Safety warning: aspirin")
    assert trace.final.response.endswith(f"\n\n{answer}")  # the warning leads the answer
    assert [c.placement for c in trace.final.channels or ()] == ["warning"]
    assert describe_decision(trace) == (
        "answered",
        "a draft the EVALUATOR approved was sent as written (safety score 95/100), plus a safety warning "
        "(anticoagulant-nsaid)",
    )
    print_trace(trace)
    shown = " ".join(capsys.readouterr().out.split())  # type: ignore[attr-defined]
    assert "Safe channels: a known-hazard warning: Safety warning: aspirin, ibuprofen" in shown
    assert "pointing to Safety warning" not in shown


def test_a_store_that_cannot_be_written_is_one_error_line_and_keeps_what_it_holds(tmp_path: Path) -> None:
    """A read-only store (a SQLite URI with mode=ro): the negotiation fails closed with one error
    line, no second "trace store failed" warning line, and the traces stored before stay readable."""
    config = write_config(tmp_path)
    assert cli("negotiate", "--config", str(config), "How do I boil an egg?").returncode == 0
    database = tmp_path / "home" / "psychoalign.db"
    read_only = f"sqlite:///file:{database}?mode=ro&uri=true"
    out = cli("negotiate", "--config", str(config), "--store", read_only, "How do I boil an egg?")
    lines = [line for line in out.stderr.splitlines() if line.strip()]
    assert out.returncode == 1, out.stderr
    assert len(lines) == 1 and lines[0].startswith("error: negotiation failed: could not "), out.stderr
    assert "readonly database" in lines[0] and "check store_url" in lines[0] and "Traceback" not in out.stderr
    listed = json.loads(cli("traces", "list", "--config", str(config), "--json").stdout)
    assert [t["status"] for t in listed] == ["completed"]
