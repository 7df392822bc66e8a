"""The public API: each package's face (its ``__init__``) exports what users import, and
docs/api.md lists exactly those names; internal modules declare little; a class name means one thing.

Run as a script to count the names every ``__all__`` in ``src/`` declares (an AST walk, nothing
imported): ``python tests/test_public_api.py`` prints the total, the files and the names per
1,000 lines of source; ``--files`` adds one line per file.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import io
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
API_DOC = ROOT / "docs" / "api.md"

#: Names in ``__all__`` per 1,000 lines of ``src/`` at most: a narrow API, with room to grow.
MAX_PER_1000_LINES = 8.5


def _module(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def declared() -> dict[Path, list[str]]:
    """Each file of ``src/`` that assigns ``__all__`` at module level -> the names it lists."""
    out: dict[Path, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8"), str(path)).body:
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AnnAssign):
                targets = [node.target]
            else:
                continue
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                assert isinstance(node.value, ast.List | ast.Tuple), f"{path}: __all__ is not a literal list"
                out[path] = [ast.literal_eval(e) for e in node.value.elts]
    return out


def source_lines() -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in SRC.rglob("*.py"))


def faces() -> dict[str, list[str]]:
    """Package -> the names its ``__init__`` exports."""
    return {_module(path): names for path, names in declared().items() if path.name == "__init__.py"}


def documented() -> dict[str, list[str]]:
    """Package -> the names docs/api.md lists under its heading (``## `package` ``, rows ``| `name` |``)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in API_DOC.read_text(encoding="utf-8").splitlines():
        if heading := re.fullmatch(r"## `(psychoalign[\w.]*)`", line):
            current = out.setdefault(heading.group(1), [])
        elif line.startswith("## "):
            current = None
        elif current is not None and (row := re.match(r"\| `(\w+)` \|", line)):
            current.append(row.group(1))
    return out


def test_api_doc_lists_exactly_each_face() -> None:
    doc, code = documented(), faces()
    assert sorted(doc) == sorted(code), "docs/api.md headings vs packages whose __init__ has __all__"
    for package, names in code.items():
        assert sorted(doc[package]) == sorted(names), f"docs/api.md under `{package}` vs its __init__ __all__"


def test_every_exported_name_resolves() -> None:
    for package, names in faces().items():
        module = importlib.import_module(package)
        missing = [n for n in names if not hasattr(module, n)]
        assert not missing, f"{package}.__all__ names what the package does not have: {missing}"


def test_api_doc_example_runs() -> None:
    text = API_DOC.read_text(encoding="utf-8")
    example = re.search(r"## Example\n.*?```python\n(.*?)```", text, re.S)
    assert example, "docs/api.md has no python block under '## Example'"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(example.group(1), str(API_DOC), "exec"), {"__name__": "api_example"})
    printed = out.getvalue().splitlines()
    assert printed[0] == "Sorry, I can't help with that. -> refusal"
    assert printed[1].startswith("general ")


def test_each_class_name_has_one_meaning() -> None:
    where: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ClassDef):
                where.setdefault(node.name, []).append(f"{path.relative_to(ROOT)}:{node.lineno}")
    shared = {name: places for name, places in where.items() if len(places) > 1}
    assert not shared, f"class names defined more than once (name each by what it is): {shared}"


def test_public_names_stay_few() -> None:
    names = sum(len(v) for v in declared().values())
    per_1000 = 1000 * names / source_lines()
    assert per_1000 <= MAX_PER_1000_LINES, (
        f"{names} names in __all__ ({per_1000:.1f} per 1,000 lines, at most {MAX_PER_1000_LINES}): a package's "
        "face exports what users import; an internal module lists only what other packages import from it"
    )


def main(argv: list[str]) -> None:
    found = declared()
    names, lines = sum(len(v) for v in found.values()), source_lines()
    if "--files" in argv:
        for path, listed in sorted(found.items(), key=lambda kv: (-len(kv[1]), str(kv[0]))):
            print(f"{len(listed):4d}  {path.relative_to(ROOT)}")
    face_names = sum(len(v) for v in faces().values())
    print(
        f"{names} names in __all__ across {len(found)} files ({face_names} on package faces); "
        f"{lines} lines in src: {1000 * names / lines:.1f} per 1,000 lines"
    )


if __name__ == "__main__":
    main(sys.argv[1:])
