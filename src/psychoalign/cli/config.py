"""`psychoalign config …`: the effective configuration."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import typer

from .common import ConfigOpt, JsonOpt, emit_json, settings_from

config_app = typer.Typer(help="Inspect the effective configuration.", no_args_is_help=True)


@config_app.command("show")
def config_show(
    config: Path | None = ConfigOpt,
    json_out: bool = JsonOpt,
    sources: bool = typer.Option(
        False, "--sources", help="Print only where each key came from (default, the file, a variable, a flag)."
    ),
) -> None:
    """Print the effective configuration (file + environment + flags), secrets masked, each key
    followed by a comment naming the layer it came from (the YAML still parses as the settings).

    Validates it as the commands would: a bad [negotiation] table (or a deployment's override)
    is an error here too, not only when a negotiation starts."""
    import os

    from ..config import layer_sources
    from ..negotiation.params import negotiation_source, parse_params

    settings = settings_from(config)
    parse_params(settings.negotiation, where=negotiation_source(settings))
    for name in settings.deployments:
        profile = settings.for_deployment(name)
        parse_params(profile.negotiation, where=negotiation_source(settings, name))
    settings.check_deployments()
    data = settings.masked()
    layers = layer_sources(config, environ=os.environ)
    if sources:
        by_key = {".".join(path): layers.of(path) for path in _leaves(data)}
        if json_out:
            emit_json(by_key)
        else:
            import sys

            import yaml

            sys.stdout.write(yaml.safe_dump(by_key, sort_keys=False, width=float("inf")))
        return
    if json_out:
        emit_json(data)
        return
    import sys

    sys.stdout.write(annotated_yaml(data, layers.of))


def _leaves(data: Any, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """The paths of ``data``'s values that are not non-empty tables, in order."""
    if isinstance(data, dict) and data:
        return [leaf for key, value in data.items() for leaf in _leaves(value, (*path, str(key)))]
    return [path] if path else []


def _comment(text: str) -> str:
    # a path or variable name may hold anything: no line break or unprintable character in a comment
    return "".join(c if c.isprintable() else f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}" for c in text)


def annotated_yaml(data: dict[str, Any], source_of: Callable[[Sequence[str]], str]) -> str:
    """``data`` as YAML, long lines kept (a terminal wraps them for the eye only), each value
    followed by ``# <layer>``: after it on its line when it takes one line, after its key when it
    starts below the key (a list), else on a line of its own above the key. Comments only: the
    text loads as ``data``."""
    import yaml

    text = yaml.safe_dump(data, sort_keys=False, width=float("inf"))
    lines = text.split("\n")
    after: dict[int, str] = {}
    above: dict[int, list[str]] = {}

    def walk(node: yaml.Node, path: tuple[str, ...]) -> None:
        assert isinstance(node, yaml.MappingNode)
        for key, value in node.value:
            here = (*path, str(key.value))
            if isinstance(value, yaml.MappingNode) and value.value:
                walk(value, here)
                continue
            note = f"# {_comment(source_of(here))}"
            line = key.start_mark.line
            if value.start_mark.line > line or value.end_mark.line == line:
                after[line] = note
            else:  # a scalar folded over several lines: a comment after its first line would be in it
                above.setdefault(line, []).append(" " * key.start_mark.column + note)

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if isinstance(root, yaml.MappingNode):
        walk(root, ())
    out: list[str] = []
    for i, line in enumerate(lines):
        out += above.get(i, [])
        out.append(f"{line}  {after[i]}" if i in after else line)
    return "\n".join(out)
