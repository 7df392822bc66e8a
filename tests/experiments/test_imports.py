"""The experiments package imports one way: no two of its modules import each other, directly or
around a circle, and none imports the CLI, the web app, typer or rich (presentation lives in
psychoalign.cli). Read from the source (imports inside functions count too), nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import ROOT

SRC = ROOT / "src"
FORBIDDEN = ("psychoalign.cli", "psychoalign.web", "typer", "rich")


def _module(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports, absolute (``from .x import y`` names ``…x.y`` when y is a module)."""
    name = _module(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            module = ".".join([*base, node.module] if node.module else base)
            out.add(module)
            out.update(f"{module}.{alias.name}" for alias in node.names)
    return out


def _graph() -> dict[str, set[str]]:
    files = {_module(p): p for p in (SRC / "psychoalign" / "experiments").rglob("*.py")}
    return {name: {m for m in _imports(path) if m in files and m != name} for name, path in files.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle, if there is one (depth-first search)."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)) is not None:
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)) is not None:
            return found
    return None


def test_no_module_of_experiments_is_in_an_import_circle() -> None:
    graph = _graph()
    assert len(graph) > 40  # the walk found the package
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_experiments_imports_no_cli_web_typer_or_rich() -> None:
    found = [
        f"{_module(path)} imports {m}"
        for path in (SRC / "psychoalign" / "experiments").rglob("*.py")
        for m in sorted(_imports(path))
        if any(m == f or m.startswith(f"{f}.") for f in FORBIDDEN)
    ]
    assert not found, found
