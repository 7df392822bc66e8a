"""Every ``psychoalign`` command line the docs show names a command and options the CLI has.

The shell blocks (```bash, ```sh, ```console) of the user-facing docs (``USER_DOCS``) are read line by line; each
``psychoalign ...`` invocation in them (after environment assignments, inside ``$(...)``, before a
pipe or a redirection) is resolved against the CLI's own click tree: the command path must exist,
every ``--long`` and ``-s`` option it uses must be one of that command's (or the root's), and a
literal value given to a choice option must be one of its choices. Nothing runs: it is fast and
offline, so a renamed command or option fails here before a reader meets it. test_docs.py runs
the ```console blocks themselves.

A line that is not a command to check (a placeholder syntax, another program's option) is marked
by ``<!-- not a command -->`` on the line before its block, which skips the whole block.
"""

from __future__ import annotations

import re
import shlex
import typing
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, USER_DOCS

DOCS = USER_DOCS
_SHELL = re.compile(r"^```(?:bash|sh|shell|console)[ \t]*\n(.*?)^```", re.M | re.S)
_SKIP = "<!-- not a command -->"
#: Where one command of a shell line ends and the next program (or a file) begins.
_BREAKS = {"|", "||", "&&", ";", ">", ">>", "<", "2>", "2>&1", "&"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SUBSTITUTION = re.compile(r"\$\((psychoalign[^()]*)\)")


@dataclass(frozen=True)
class DocCommand:
    where: str  # doc:line
    argv: tuple[str, ...]  # after "psychoalign"

    def __str__(self) -> str:
        return f"{self.where}: psychoalign {shlex.join(self.argv)}"


def _invocations(line: str) -> list[list[str]]:
    """The argument lists of each ``psychoalign`` run on one shell line (nested ones included)."""
    runs = [shlex.split(inner, comments=True)[1:] for inner in _SUBSTITUTION.findall(line)]
    tokens = shlex.split(_SUBSTITUTION.sub("X", line), comments=True)
    current: list[str] | None = None
    start = True  # at a command position: environment assignments may come first
    for token in tokens:
        if token in _BREAKS:
            if current is not None:
                runs.append(current)
            current, start = None, True
        elif current is not None:
            # `[--limit 20]` is the docs' notation for an optional part: check what is inside
            current.append(token.removeprefix("[").removesuffix("]"))
        elif start and _ASSIGNMENT.match(token):
            continue
        elif start and token == "psychoalign":
            current = []
        else:
            start = False
    if current is not None:
        runs.append(current)
    return runs


def doc_commands() -> list[DocCommand]:
    out = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in _SHELL.finditer(text):
            before = text[: match.start()].rstrip().rsplit("\n", 1)[-1].strip()
            if before == _SKIP:
                continue
            first = text.count("\n", 0, match.start(1)) + 1
            lines = match.group(1).splitlines()
            index = 0
            while index < len(lines):
                number, line = first + index, lines[index]
                while line.endswith("\\") and index + 1 < len(lines):  # a continued line
                    index += 1
                    line = line[:-1] + " " + lines[index].strip()
                index += 1
                line = line.strip()
                if line.startswith("$ "):
                    line = line[2:]
                elif match.group(0).startswith("```console"):
                    continue  # output the example shows, not a command
                if "psychoalign" not in line:
                    continue
                where = f"{doc.relative_to(ROOT)}:{number}"
                out.extend(DocCommand(where, tuple(argv)) for argv in _invocations(line))
        out.extend(_inline(doc, text))
    return out


_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_INLINE = re.compile(r"`psychoalign( [^`]*)?`")


def _inline(doc: Path, text: str) -> list[DocCommand]:
    """The ``psychoalign ...`` code spans of the prose. In a table ``a \\| b`` lists alternatives:
    sub-commands (``data list \\| path``: ``data list`` and ``data path``) or options."""
    prose = _FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)  # line numbers kept
    out = []
    for match in _INLINE.finditer(prose):
        where = f"{doc.relative_to(ROOT)}:{prose.count(chr(10), 0, match.start()) + 1}"
        first, *others = (match.group(1) or "").split(r" \| ")
        spans = [first]
        for other in others:
            if other.lstrip().startswith("-"):
                spans[-1] += " " + other  # an alternative option: check it with the others
            else:  # another sub-command of the same group
                spans.append(" ".join([*shlex.split(first)[:-1], other]))
        out.extend(DocCommand(where, tuple(argv)) for span in spans for argv in _invocations("psychoalign " + span))
    return out


def _resolve(where: str, argv: tuple[str, ...]) -> tuple[list[Any], list[str]]:
    """The chain of commands from the root that ``argv`` names, and the arguments left."""
    import typer

    from psychoalign.cli.main import COMMANDS, app, load_command

    root = typer.main.get_command(app)
    chain: list[Any] = [root]  # click commands (typer's vendored click: no public type)
    rest = list(argv)
    while rest and rest[0].startswith("-"):  # root options (--debug) before the command
        rest.pop(0)
    if not rest or rest[0] in {"…", "..."}:  # `psychoalign --debug …`: any command
        return chain, []
    name = rest.pop(0)
    assert name in COMMANDS, f"{where}: no command {name!r} (psychoalign -h lists {', '.join(COMMANDS)})"
    command: Any = load_command(name)
    chain.append(command)
    while hasattr(command, "commands") and rest and not rest[0].startswith("-"):
        sub = command.commands.get(rest[0])
        assert sub is not None, f"{where}: `{' '.join(c.name or '' for c in chain)}` has no sub-command {rest[0]!r}"
        rest.pop(0)
        chain.append(sub)
        command = sub
    if chain[1:] and [c.name for c in chain[1:]] == ["experiment", "run"] and rest:
        named = _named_experiment(rest[0])  # `experiment run boundary`: that experiment's own options
        if named is not None:
            rest.pop(0)
            chain.append(named)
    return chain, rest


def _named_experiment(name: str) -> Any:
    """The command ``experiment run NAME`` hands a named experiment's options to, as it builds it."""
    import typer

    from psychoalign.cli.experiment import experiment_registry

    entry = experiment_registry().commands.get(name)
    if entry is None:
        return None  # a preset or a spec file: `experiment run`'s own options
    sub = typer.Typer(add_completion=False)
    sub.command(name=name)(entry.command)
    return typer.main.get_command(sub)


def _choices(option: Any) -> list[str]:
    """The values an enum-typed option accepts (none for any other type)."""
    annotation = option.type_descriptor.annotation
    for candidate in (annotation, *typing.get_args(annotation)):
        if isinstance(candidate, type) and issubclass(candidate, Enum):
            return [str(member.value) for member in candidate]
    return []


def _options(command: Any) -> dict[str, Any]:
    options = [p for p in command.params if p.param_type_name == "option"]
    return {name: p for p in options for name in (*p.opts, *p.secondary_opts)}


COMMANDS = doc_commands()


def test_the_docs_show_commands() -> None:
    """The extraction finds the docs' command lines (a broken pattern would check nothing)."""
    assert len(COMMANDS) >= 150, len(COMMANDS)
    assert {c.argv[0] for c in COMMANDS if c.argv} >= {"negotiate", "serve", "experiment", "star", "judge", "data"}


@pytest.mark.parametrize("doc_command", COMMANDS, ids=str)
def test_documented_command_exists(doc_command: DocCommand) -> None:
    chain, rest = _resolve(doc_command.where, doc_command.argv)
    command = chain[-1]
    known = _options(chain[0]) | _options(command)
    index = 0
    while index < len(rest):
        token = rest[index]
        index += 1
        if token == "--":
            break
        if not token.startswith("-") or token == "-" or re.fullmatch(r"-\d.*", token):
            continue  # an argument or an option's value
        name, _, inline = token.partition("=")
        if not name.startswith("--") and len(name) > 2:
            name = name[:2]  # -n5: the short option and its value
        path = " ".join(c.name or "" for c in chain[1:])
        assert name in known, f"{doc_command}: `psychoalign {path}` has no option {name} (see its -h)"
        option = known[name]
        if option.is_flag or option.count:
            continue
        value = inline or (rest[index] if index < len(rest) else "")
        if not inline:
            index += option.nargs
        choices = _choices(option)
        for one in value.split("|") if choices else ():  # `completed|failed`: the docs' alternatives
            if one.isidentifier():  # not a placeholder (…, N)
                assert one in choices, f"{doc_command}: {name} takes one of {choices}, not {one!r}"


def test_documented_example_files_exist() -> None:
    """Every ``examples/...`` file the docs name is shipped (the commands above read them)."""
    named = {
        (f"{doc.relative_to(ROOT)}", path.rstrip("."))
        for doc in DOCS
        for path in re.findall(r"examples/[A-Za-z0-9_./-]+", doc.read_text(encoding="utf-8"))
    }
    assert len(named) >= 5, named
    missing = sorted(f"{doc}: {path}" for doc, path in named if not (ROOT / path).exists())
    assert not missing, missing


#: ``python bench/x.py --flag``, ``python -m tests.migrations.new_migration`` as the docs name them.
_SCRIPT = re.compile(r"\bpython (?:-m )?((?:bench|scripts|tests)/[\w/]+\.py|tests\.[\w.]+)([^`\n;)]*)")


def test_documented_scripts_and_their_options_exist() -> None:
    """Every repository script the docs tell the reader to run is there, and takes each ``--option``
    the docs give it (an argparse option is a string literal in the script, in a module beside it
    that it imports, or in the benches' shared helpers, bench/_util.py)."""
    helpers = (ROOT / "bench" / "_util.py").read_text(encoding="utf-8")
    found, problems = 0, []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for match in _SCRIPT.finditer(text):
            where = f"{doc.relative_to(ROOT)}:{text.count(chr(10), 0, match.start()) + 1}"
            name = match.group(1)
            if "NAME" in name:
                continue  # `python bench/NAME.py --help`: any of them
            path = ROOT / (name if name.endswith(".py") else name.replace(".", "/") + ".py")
            found += 1
            if not path.is_file():
                problems.append(f"{where}: no script {name}")
                continue
            source = path.read_text(encoding="utf-8") + helpers
            for sibling in re.findall(r"^(?:import|from) (\w+)", source, flags=re.M):
                if (path.parent / f"{sibling}.py").is_file():  # e.g. scripts/crisis_lofo.py
                    source += (path.parent / f"{sibling}.py").read_text(encoding="utf-8")
            for option in re.findall(r"(?<!\S)--[a-z][a-z0-9-]*", match.group(2)):
                if f'"{option}"' not in source and f"'{option}'" not in source:
                    problems.append(f"{where}: {name} has no option {option}")
    assert found >= 40, found
    assert not problems, problems


#: ``make X`` where a command starts: a line's start (after ``$ `` and ``VAR=value``), ``&&``, ``;``.
_MAKE = re.compile(r"(?:^\s*(?:\$ )?(?:[A-Z_]+=\S+ )*|&& |; )make ([a-z][\w-]*)")


def test_documented_make_targets_exist() -> None:
    """``make run``, ``make test``, ``make bench QUICK=1``: each target the docs name is in the Makefile."""
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, re.M))
    named = set()
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        spans = re.findall(r"`([^`\n]*\bmake [^`\n]*)`", _FENCE.sub("", text))
        lines = [line for block in _SHELL.findall(text) for line in block.splitlines()]
        for line in [*spans, *lines]:
            named |= {(f"{doc.relative_to(ROOT)}", t) for t in _MAKE.findall(line)}
    assert {t for _, t in named} >= {"run", "test", "install", "bench"}, named
    assert not sorted((d, t) for d, t in named if t not in targets)


def test_documented_commands_give_every_required_option() -> None:
    """A command line the docs show with arguments gives each option its command requires
    (``star analyze FILE`` without ``--out`` stops with "Missing option"): the reader can run it as
    written. A bare mention (``psychoalign star analyze``), a line holding an ellipsis and a help
    call name the command only."""
    missing = []
    for doc_command in COMMANDS:
        chain, rest = _resolve(doc_command.where, doc_command.argv)
        command = chain[-1]
        if hasattr(command, "commands") or not rest or any(t in {"-h", "--help", "..."} or "…" in t for t in rest):
            continue
        given = {token.partition("=")[0] for token in rest}
        for option in (p for p in command.params if p.param_type_name == "option" and p.required):
            if not given & {*option.opts, *option.secondary_opts}:
                missing.append(f"{doc_command}: no {option.opts[0]}, which the command requires")
    assert not missing, missing
