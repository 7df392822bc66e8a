"""The import layers of ``src/psychoalign``: no import runs up a layer, no two modules import
each other (directly or round a longer circle).

Every import statement counts, wherever it sits: module level, inside a function (a lazy
import is still a dependency), under ``TYPE_CHECKING``. Each one is resolved, absolute or
relative, to the module of the package it loads: ``from ..models import ChatModel`` is an edge to
``psychoalign.models`` (the package's ``__init__``), ``from . import server`` an edge to the
submodule ``server``.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "psychoalign"

#: The layers, lowest first: a module may import its own layer and any layer below it.
#: Each entry: the top-level modules and packages of psychoalign in it, and why it sits there.
LAYERS: tuple[tuple[frozenset[str], str], ...] = (
    (
        frozenset(
            {
                "errors",
                "lazy",
                "textio",
                "textnorm",
                "yamlio",
                "jsonguard",
                "storage",
                "migrations",
                "datasets",
                "intervals",
            }
        ),
        "ground floor: errors, text, YAML and bounded JSON reading, database engines and their migrations, "
        "the intervals of a share (plain and clustered), "
        "the data catalogue; "
        "they import nothing above",
    ),
    (frozenset({"prompts", "frameworks"}), "package data read by name: prompt texts, ethical frameworks"),
    (frozenset({"models"}), "model backends behind ChatModel, the classifier and the rule refusal labels it uses"),
    (frozenset({"config"}), "the settings: model specs per role, deployments, [serve], [lab]; read from above"),
    (frozenset({"agents"}), "DRIVE, EVALUATOR and MEDIATOR, each over a ChatModel"),
    (frozenset({"traces"}), "the trace and every type it stores, and the trace stores"),
    (frozenset({"negotiation"}), "the loop, gates, tension, defenses and bus; it fills in traces"),
    (frozenset({"judges", "a2a"}), "judgements of responses and traces; the negotiation over the A2A protocol"),
    (frozenset({"star"}), "STAR red teaming: policies, instructions, campaigns, their store and analysis"),
    (frozenset({"experiments"}), "the harness, suites and studies; they may use STAR's analysis"),
    (frozenset({"web"}), "the one FastAPI app: gateway, lab pages, trace viewer, A2A mount"),
    (frozenset({"cli"}), "the psychoalign command; it starts the web app"),
    (frozenset({"", "__main__"}), "the package's face (psychoalign/__init__.py) and python -m psychoalign"),
)


#: Inside a package of several parts, the same rule one level down: each entry lists, lowest first,
#: the package's parts (its subpackages and modules; "" is its ``__init__``) in each sub-layer.
SUBLAYERS: dict[str, tuple[tuple[frozenset[str], str], ...]] = {
    "experiments": (
        (frozenset({"harness", "suites"}), "the harness and the benchmarks and attacks it runs"),
        (frozenset({"studies"}), "boundary, cross-turn and defense-accuracy studies, on the harness and suites"),
        (frozenset({""}), "the package's face"),
    ),
    "star": (
        (
            frozenset({"files", "model", "policy", "parameters", "matching", "personas", "instructions", "builtin"}),
            "STAR's vocabulary: policies, parameters, instructions, personas, and the files they are read from",
        ),
        (frozenset({"store", "analysis"}), "the store and the analysis, each on the vocabulary alone"),
        (frozenset({"campaign"}), "a campaign: instructions planned into the store"),
        (frozenset({"lab_store"}), "the lab's tables beside the STAR store"),
        (frozenset({""}), "the package's face"),
    ),
}


@dataclass(frozen=True)
class Edge:
    importer: str
    imported: str
    path: Path
    line: int

    def where(self) -> str:
        return f"{self.path.relative_to(SRC.parent)}:{self.line}"


def _modules() -> dict[str, tuple[Path, bool]]:
    """Module name -> (file, is a package)."""
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        out[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return out


def _resolve(name: str, modules: dict[str, tuple[Path, bool]]) -> str | None:
    """The module ``import name`` loads last: the longest prefix of ``name`` that is a module."""
    parts = name.split(".")
    while parts:
        if ".".join(parts) in modules:
            return ".".join(parts)
        parts.pop()
    return None


@functools.cache
def _edges() -> tuple[Edge, ...]:
    """Every import of the package, once per (importer, imported, line)."""
    modules = _modules()
    edges: dict[tuple[str, str, int], Edge] = {}
    for module, (path, is_package) in modules.items():
        package = module.split(".") if is_package else module.split(".")[:-1]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            targets: list[str | None] = []
            if isinstance(node, ast.Import):
                targets = [_resolve(alias.name, modules) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                for alias in node.names:
                    child = f"{base}.{alias.name}"
                    targets.append(child if child in modules else _resolve(base, modules))
            for target in targets:
                if target is not None and target != module:
                    edges.setdefault((module, target, node.lineno), Edge(module, target, path, node.lineno))
    return tuple(edges.values())


def _layer(module: str) -> int:
    top = module.split(".")[1] if "." in module else ""
    for index, (members, _) in enumerate(LAYERS):
        if top in members:
            return index
    raise AssertionError(f"{module}: its top-level name '{top}' is in no layer: add it to LAYERS in {__file__}")


def test_every_module_has_a_layer() -> None:
    for module in _modules():
        _layer(module)


def test_no_import_runs_up_a_layer() -> None:
    up = [
        f"{e.where()}: {e.importer} ({_name(_layer(e.importer))}) imports {e.imported} ({_name(_layer(e.imported))})"
        for e in _edges()
        if _layer(e.imported) > _layer(e.importer)
    ]
    assert not up, "imports that run up a layer (move the shared type down instead):\n" + "\n".join(up)


def test_no_import_circles() -> None:
    graph: dict[str, dict[str, Edge]] = {}
    for e in _edges():
        graph.setdefault(e.importer, {}).setdefault(e.imported, e)
    circles = [_circle(component, graph) for component in _components(graph) if len(component) > 1]
    assert not circles, "import circles (each edge file:line):\n" + "\n\n".join(circles)


def _name(layer: int) -> str:
    return "/".join(sorted(m or PACKAGE for m in LAYERS[layer][0]))


def _components(graph: dict[str, dict[str, Edge]]) -> list[list[str]]:
    """Strongly connected components (Tarjan): modules that reach each other by imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            out.append(component)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _circle(component: list[str], graph: dict[str, dict[str, Edge]]) -> str:
    """One shortest circle through the component's first module, edge by edge."""
    members = set(component)
    start = min(component)
    paths: dict[str, list[Edge]] = {start: []}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w, edge in sorted(graph.get(v, {}).items()):
                if w == start:
                    return "\n".join(f"  {e.where()}: {e.importer} -> {e.imported}" for e in [*paths[v], edge])
                if w in members and w not in paths:
                    paths[w] = [*paths[v], edge]
                    nxt.append(w)
        frontier = nxt
    raise AssertionError(f"no circle through {start}")  # unreachable for a component of two or more


def _sublayer(module: str) -> tuple[str, int] | None:
    """(package, index of the module's sub-layer) for a module inside a package of SUBLAYERS."""
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in SUBLAYERS:
        return None
    part = parts[2] if len(parts) > 2 else ""
    for index, (members, _) in enumerate(SUBLAYERS[parts[1]]):
        if part in members:
            return parts[1], index
    raise AssertionError(f"{module}: '{part}' is in no sub-layer of {parts[1]}: add it to SUBLAYERS in {__file__}")


def test_no_import_runs_up_a_sublayer() -> None:
    up = []
    for e in _edges():
        a, b = _sublayer(e.importer), _sublayer(e.imported)
        if a is not None and b is not None and a[0] == b[0] and b[1] > a[1]:
            up.append(f"{e.where()}: {e.importer} imports {e.imported}, a part above it in {a[0]}")
    assert not up, "imports that run up a sub-layer (move the shared part down instead):\n" + "\n".join(up)
