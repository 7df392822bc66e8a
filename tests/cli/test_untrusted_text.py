"""Stored untrusted text (requests, answers, display names) as the terminal shows it: bidi
controls and control characters as ``⟨U+XXXX⟩`` markers, rich markup literal; ``--json`` exact."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from psychoalign.cli.common import safe
from psychoalign.config import load_settings
from psychoalign.textio import terminal_text
from tests.cli.test_main import cli
from tests.cli.test_negotiate import write_config

RLO = "\u202e"
CLEAR = "\x1b[2J"  # ESC [ 2 J: clears the screen
HOSTILE_REQUEST = f"Harmless {RLO}gnp.exe{CLEAR} [red]markup[/red]"
HOSTILE_ANSWER = f"answer {RLO}desrever{CLEAR} [bold]loud[/bold]\x9b31m"


def _no_raw_controls(text: str) -> None:
    for char in (RLO, "\x1b[2J", "\x9b", "\u2066", "\u200f"):
        assert char not in text, repr(char)


def test_the_terminal_rendering_marks_bidi_and_control_characters_and_keeps_text() -> None:
    assert terminal_text(f"a{RLO}b{CLEAR}c") == "a⟨U+202E⟩b⟨U+001B⟩[2Jc"
    assert terminal_text("x\u2066y\u200fz\u061c\x9b\x7f\x00") == "x⟨U+2066⟩y⟨U+200F⟩z⟨U+061C⟩⟨U+009B⟩⟨U+007F⟩⟨U+0000⟩"
    # tab and newlines stay, a CRLF line end becomes a newline, a lone CR (overwrites the line) is marked
    assert terminal_text("one\ttwo\r\nthree\rfour") == "one\ttwo\nthree⟨U+000D⟩four"
    # what scripts need stays: Arabic text, the zero-width joiner of emoji sequences
    assert terminal_text("مرحبا 👩\u200d💻") == "مرحبا 👩\u200d💻"
    shown = safe("[red]markup[/red]")
    assert shown.plain == "[red]markup[/red]" and not shown.spans  # literal, never read as markup


def _store_hostile_trace(config: Path) -> str:
    """A negotiated trace whose stored request, context, models and answer are hostile (as a
    store written by another client, an import or a model's output could hold them)."""
    from psychoalign.traces import open_store

    async def go() -> str:
        store = open_store(load_settings(config).effective_store_url())
        try:
            [row] = await store.list(limit=1)
            trace = await store.get(row["id"])
            assert trace is not None and trace.final is not None
            final = trace.final.model_copy(update={"response": HOSTILE_ANSWER})
            hostile = trace.model_copy(
                update={
                    "request": HOSTILE_REQUEST,
                    "context": f"ctx {RLO}txc",
                    "models": {**trace.models, "drive": f"scripted:{CLEAR}[blink]x[/blink]"},
                    "final": final,
                }
            )
            await store.finish(hostile)
            return trace.id
        finally:
            await store.close()

    return asyncio.run(go())


def test_traces_show_and_list_print_stored_controls_as_markers_and_markup_literally(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    assert cli("negotiate", "--config", str(config), "How do I boil an egg?").returncode == 0
    trace_id = _store_hostile_trace(config)

    shown = cli("traces", "show", trace_id[:8], "--config", str(config))
    assert shown.returncode == 0, shown.stderr
    _no_raw_controls(shown.stdout)
    assert "Harmless ⟨U+202E⟩gnp.exe⟨U+001B⟩[2J [red]markup[/red]" in shown.stdout
    assert "answer ⟨U+202E⟩desrever⟨U+001B⟩[2J [bold]loud[/bold]⟨U+009B⟩31m" in shown.stdout
    assert "ctx ⟨U+202E⟩txc" in shown.stdout and "[blink]x[/blink]" in shown.stdout

    piped = cli("traces", "list", "--config", str(config))
    assert piped.returncode == 0, piped.stderr
    _no_raw_controls(piped.stdout)
    assert "Harmless ⟨U+202E⟩gnp.exe⟨U+001B⟩[2J [red]markup[/red]" in piped.stdout

    # on a terminal rich writes its own escape sequences (styles): none from the stored text
    terminal = cli(
        "traces",
        "list",
        "--config",
        str(config),
        env={"TTY_COMPATIBLE": "1", "COLUMNS": "300", "NO_COLOR": "1"},
    )
    assert terminal.returncode == 0, terminal.stderr
    _no_raw_controls(terminal.stdout)
    assert "⟨U+202E⟩gnp.exe⟨U+001B⟩[2J [red]markup[/red]" in terminal.stdout

    exact = json.loads(cli("traces", "list", "--config", str(config), "--json").stdout)  # machine output: exact
    assert exact[0]["request"] == HOSTILE_REQUEST
    exported = json.loads(cli("traces", "show", trace_id, "--config", str(config), "--json").stdout)
    assert exported["request"] == HOSTILE_REQUEST and exported["final"]["response"] == HOSTILE_ANSWER


def test_lab_accounts_prints_a_hostile_display_name_as_markers(tmp_path: Path) -> None:
    config = tmp_path / "psychoalign.toml"
    config.write_text(f'home = "{tmp_path / "home"}"\n')
    name = f"Eve {RLO}nimda{CLEAR} [red]boss[/red]"
    made = cli("lab", "add-lead", "--invite", "--name", name, "--config", str(config))
    assert made.returncode == 0, made.stderr
    listed = cli("lab", "accounts", "--config", str(config))
    assert listed.returncode == 0, listed.stderr
    _no_raw_controls(listed.stdout)
    assert "Eve ⟨U+202E⟩nimda⟨U+001B⟩[2J [red]boss[/red]" in listed.stdout
    exact = json.loads(cli("lab", "accounts", "--config", str(config), "--json").stdout)
    assert [a["display_name"] for a in exact] == [name]
