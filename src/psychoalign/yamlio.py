"""The one YAML loader: safe (no tags beyond plain data) and strict (no duplicate keys).

PyYAML's ``safe_load`` keeps the *last* of two equal keys in a mapping, so a file with two
``tau:`` keys or two ``rules:`` blocks silently loses one of them; for an ethical framework that
drops rules. Every YAML file PsychoAlign reads (configuration, frameworks, experiment specs, STAR
policies and campaigns, sample and prompt files, package data) goes through :func:`parse_yaml`,
which refuses such a file with one line naming the file, the line and column of the second
occurrence and the key. Merge keys (``<<: *anchor``) keep their YAML meaning: a key written in
the mapping overrides a merged one, which is not a duplicate.

Aliases are bounded: PyYAML shares an anchored value between its aliases, but anything that walks
the loaded data (validation, JSON, a report) expands it, so nine aliases of nine aliases of ... (a
"billion laughs" alias bomb, or the same with merge keys, which PyYAML does copy) would take
gigabytes. A document whose aliases add more than :data:`MAX_ALIAS_VALUES` values beyond the ones
written, or whose anchored value contains its own alias, is refused before it is constructed;
so is a document over :data:`MAX_YAML_CHARS` characters.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from .errors import ConfigError, PsychoAlignError

__all__ = ["line_of", "load_yaml_model", "parse_yaml", "parse_yaml_node"]

M = TypeVar("M", bound=BaseModel)

# The C parser when libyaml is present (the constructor, where the check lives, is Python either way).
_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_MERGE_TAG = "tag:yaml.org,2002:merge"

#: Values (scalars, lists, mappings) aliases may add to a document beyond the ones written in it.
MAX_ALIAS_VALUES = 100_000
#: Characters of YAML read at most (a 22 MB list of strings takes ~3 s and ~400 MB to load).
MAX_YAML_CHARS = 32 * 1024 * 1024


class DuplicateKeyError(yaml.constructor.ConstructorError):
    """A mapping holds the same key twice (a :class:`yaml.YAMLError`, raised while loading)."""

    def __init__(self, key: Any, first: yaml.Mark, second: yaml.Mark) -> None:
        super().__init__(None, None, f"duplicate key {_show(key)}", second)
        self.key = key
        self.first = first
        self.second = second


def _show(key: Any) -> str:
    text = repr(key)  # repr: newlines and control characters escaped, so the message stays one line
    return text if len(text) <= 80 else text[:77] + "..."


class StrictSafeLoader(_Base):  # type: ignore[misc]
    """``yaml.SafeLoader`` (plain data only) that rejects a mapping with a repeated key."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, yaml.Mark] = {}
            for key_node, _value in node.value:
                if key_node.tag == _MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
                    continue  # merges keep YAML's meaning; a non-scalar key is refused by the base
                key = self.construct_object(key_node)
                try:
                    first = seen.get(key)
                except TypeError:  # unhashable: the base constructor names it
                    continue
                if first is not None:
                    raise DuplicateKeyError(key, first, key_node.start_mark)
                seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _check_aliases(root: yaml.Node, source: str, error: type[PsychoAlignError]) -> None:
    """Refuse a node graph whose aliases expand it by more than :data:`MAX_ALIAS_VALUES` values
    (counted once per alias use, as a walk of the loaded data sees them) or that contains itself.

    Iterative post-order walk, each distinct node once: linear in the document, whatever it
    expands to."""
    sizes: dict[int, int] = {}  # id(collection node) -> values in its expansion (a scalar is 1)
    active: set[int] = set()  # collections on the current path (an alias back to one is a cycle)
    distinct = 0
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, finished = stack.pop()
        key = id(node)
        children = _children(node)
        if finished:
            active.discard(key)
            size = 1 + sum(sizes.get(id(child), 1) for child in children)
            sizes[key] = size
            if size > distinct + MAX_ALIAS_VALUES:
                mark = node.start_mark
                raise error(
                    f"{source}:{mark.line + 1}:{mark.column + 1}: aliases expand the value here to more than "
                    f"{MAX_ALIAS_VALUES:,} values beyond those written (an alias bomb?)",
                    hint="write the data out, or refer to an anchor (*name) fewer times",
                )
            continue
        if key in sizes:
            continue
        if key in active:
            mark = node.start_mark
            raise error(
                f"{source}:{mark.line + 1}:{mark.column + 1}: recursive alias: the anchored value contains itself",
                hint="a value cannot hold an alias (*name) of its own anchor",
            )
        active.add(key)
        distinct += 1
        stack.append((node, True))
        for child in children:  # scalars are counted here, collections when entered
            if isinstance(child, yaml.ScalarNode):
                distinct += 1
            elif id(child) not in sizes:
                stack.append((child, False))


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def _yaml_error(exc: yaml.YAMLError, source: str, error: type[PsychoAlignError], text: str = "") -> PsychoAlignError:
    """One line: ``source:line:column: what`` (never PyYAML's multi-line report)."""
    if isinstance(exc, DuplicateKeyError):
        where = f"{source}:{exc.second.line + 1}:{exc.second.column + 1}"
        return error(
            f"{where}: duplicate key {_show(exc.key)} (first at line {exc.first.line + 1})",
            hint="a mapping may name each key once: remove or merge one of them",
        )
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML does not allow (NUL, a control byte)
        # libyaml counts the position in UTF-8 bytes, PyYAML's own reader in characters
        before = (
            text.encode()[: exc.position].decode(errors="ignore")
            if _Base is not yaml.SafeLoader
            else text[: exc.position]
        )
        line = before.count("\n") + 1
        column = len(before) - (before.rfind("\n") + 1) + 1
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)  # libyaml: int
        return error(
            f"{source}:{line}:{column}: invalid YAML: control character #x{code:04x} is not allowed",
            hint="remove it (is this a binary file?)",
        )
    mark = getattr(exc, "problem_mark", None)
    where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
    problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
    context = " ".join(str(getattr(exc, "context", None) or "").split())
    if context and not isinstance(exc, yaml.constructor.ConstructorError):
        # PyYAML's context says what it was reading ("while scanning a quoted scalar", "expected a
        # single document in the stream"), and where that began when it is another line.
        began = getattr(exc, "context_mark", None)
        since = (
            f" (begun at line {began.line + 1})"
            if began is not None and mark is not None and began.line != mark.line
            else ""
        )
        problem = f"{context}{since}, {problem}"
    if isinstance(exc, yaml.constructor.ConstructorError):  # a tag: only plain data is read
        return error(f"{where}: invalid YAML: {problem}", hint="only plain YAML data is accepted: remove the tag")
    if mark is not None and _char_at(text, mark.line, mark.column) == "\t":
        return error(
            f"{where}: invalid YAML: a tab where YAML expects spaces",
            hint="YAML indents with spaces: replace the tab with spaces",
        )
    return error(f"{where}: invalid YAML: {problem}", hint="fix the YAML syntax at that line")


def _char_at(text: str, line: int, column: int) -> str:
    lines = text.splitlines()
    return lines[line][column : column + 1] if 0 <= line < len(lines) else ""


def parse_yaml_node(
    text: str, source: str, *, error: type[PsychoAlignError] = ConfigError
) -> tuple[yaml.Node | None, Any]:
    """The document's node tree (for line numbers) and its data, parsed once, strictly.

    Raises ``error`` with one line naming ``source``, the line and column, and the problem."""
    if len(text) > MAX_YAML_CHARS:
        raise error(
            f"{source}: {len(text) / 2**20:.0f} MB of YAML, more than the {MAX_YAML_CHARS // 2**20} MB read",
            hint="split the file (or give data as JSONL where the command accepts it)",
        )
    loader = StrictSafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is not None:
            _check_aliases(node, source, error)
        data = loader.construct_document(node) if node is not None else None
    except yaml.YAMLError as exc:
        raise _yaml_error(exc, source, error, text) from None
    finally:
        loader.dispose()
    return node, data


def parse_yaml(text: str, source: str, *, error: type[PsychoAlignError] = ConfigError) -> Any:
    """``yaml.safe_load`` that refuses duplicate keys; errors are one line naming ``source``.

    An empty document is ``None``, as with ``safe_load``."""
    return parse_yaml_node(text, source, error=error)[1]


def line_of(node: yaml.Node, loc: tuple[str | int, ...]) -> int:
    """1-based line of the YAML node at ``loc`` (the deepest node that exists)."""
    current = node
    for part in loc:
        if isinstance(current, yaml.MappingNode):
            match = next((v for k, v in current.value if k.value == part), None)
            if match is None:
                break
            current = match
        elif isinstance(current, yaml.SequenceNode) and isinstance(part, int) and part < len(current.value):
            current = current.value[part]
        else:
            break
    return int(current.start_mark.line) + 1


class LocatedError(ValueError):
    """A model validator's error about one place in the document: ``loc`` (field names and list
    indexes, as pydantic's) puts the error on that place's line, and ``hint``, when given, is the
    fix shown with it instead of the loader's general one."""

    def __init__(self, message: str, loc: tuple[str | int, ...], hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.loc = loc
        self.hint = hint


def load_yaml_model(
    text: str,
    source: str,
    model: type[M],
    *,
    error: type[ConfigError] = ConfigError,
    prepare: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
    yaml_loc: Callable[[tuple[str | int, ...]], tuple[str | int, ...]] | None = None,
    hint: str | None = None,
) -> M:
    """Parse ``text`` (strictly, see :func:`parse_yaml`) and validate it as ``model``.

    ``prepare`` may reshape the parsed mapping before validation; ``yaml_loc`` maps a validation
    error location back to the location in the YAML document (for the line number); ``hint``: the
    fix a validation error is shown with.
    """
    node, data = parse_yaml_node(text, source, error=error)
    if not isinstance(data, dict) or node is None:
        raise error(f"{source}:1: expected a YAML mapping at the top level", hint=hint)
    try:
        return model.model_validate(prepare(data) if prepare else data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc: tuple[str | int, ...] = tuple(first["loc"])
        msg = first["msg"]
        located = (first.get("ctx") or {}).get("error")
        if isinstance(located, LocatedError):  # a cross-field check that knows where it failed
            loc, msg, hint = (*loc, *located.loc), located.message, located.hint or hint
        lineno = line_of(node, yaml_loc(loc) if yaml_loc else loc)
        where = ".".join(str(p) for p in loc) or "(top level)"
        more = f" (+{len(exc.errors()) - 1} more)" if len(exc.errors()) > 1 else ""
        raise error(f"{source}:{lineno}: {where}: {msg}{more}", hint=hint) from None
