"""What `experiment run` can run: system kinds, benchmarks and named experiments with their own CLI.

Plugins extend it without touching this package's code: any module under ``psychoalign.experiments``
(in a subpackage too; the harness is not scanned) that defines ``register(registry: Registry) ->
None`` is imported by :func:`default_registry` and may add systems, benchmarks, or a named command,
which ``psychoalign experiment run NAME [OPTIONS]`` then dispatches to. The named experiments that
come with the package (``boundary``, ``h1``, ``defense-accuracy``, ``cross-turn-scripted``) are
commands of the CLI, which adds them to this registry (``psychoalign.cli.experiment``).

A named command is a typer-style function. ``experiment run`` forwards its own ``--n``,
``--config``, ``--out``, ``--concurrency`` and ``--store`` only to commands whose function has a
parameter of that name (``n``, ``config``, ``out``, ``concurrency``, ``store_url``); every other
option on the command line is passed through.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ...errors import ConfigError
from ..suites.benchmarks import BENCHMARKS
from .benchmark import Benchmark
from .systems import SYSTEM_KINDS

__all__ = ["Registry", "default_registry"]

#: The package whose modules may be plugins, and its parts that are never scanned (the harness itself).
PLUGIN_PACKAGE = "psychoalign.experiments"
NOT_SCANNED = frozenset({f"{PLUGIN_PACKAGE}.harness"})


@dataclass(frozen=True)
class NamedExperiment:
    """An experiment with its own options, run as ``psychoalign experiment run NAME …``."""

    name: str
    help: str
    command: Callable[..., Any]


@dataclass
class Registry:
    systems: dict[str, type[Any]] = field(default_factory=lambda: dict(SYSTEM_KINDS))
    benchmarks: dict[str, type[Benchmark]] = field(default_factory=lambda: dict(BENCHMARKS))
    commands: dict[str, NamedExperiment] = field(default_factory=dict)

    def add_system(self, cls: type[Any]) -> None:
        """``cls(spec, settings)`` must satisfy :class:`~psychoalign.experiments.harness.systems.System`
        and carry ``info`` (a :class:`~psychoalign.experiments.harness.systems.SystemInfo`)."""
        self._unique(cls.info.kind, self.systems, "system")
        self.systems[cls.info.kind] = cls

    def add_benchmark(self, cls: type[Benchmark]) -> None:
        self._unique(cls.name, self.benchmarks, "benchmark")
        self.benchmarks[cls.name] = cls

    def add_command(self, name: str, command: Callable[..., Any], help: str = "") -> None:
        self._unique(name, self.commands, "experiment")
        self.commands[name] = NamedExperiment(name=name, help=help or (command.__doc__ or "").strip(), command=command)

    @staticmethod
    def _unique(name: str, table: dict[str, Any], what: str) -> None:
        if name in table:
            raise ConfigError(f"{what} '{name}' is registered twice")


def _modules(package: str, paths: list[str]) -> Iterator[tuple[str, str]]:
    """(name, source file) of every module under ``package`` (subpackages too), in name order;
    names starting with ``_`` and the packages in :data:`NOT_SCANNED` are skipped."""
    for info in sorted(pkgutil.iter_modules(paths), key=lambda m: m.name):
        name = f"{package}.{info.name}"
        if info.name.startswith("_") or name in NOT_SCANNED:
            continue
        where = os.path.join(str(getattr(info.module_finder, "path", "")), info.name)
        if info.ispkg:
            yield from _modules(name, [where])
        else:
            yield name, f"{where}.py"


def _defines_register(source: str) -> bool:
    """Whether the module's source defines ``register`` (read, not imported: analysis modules
    pull in heavy libraries that a CLI call should not pay for)."""
    try:
        with open(source, encoding="utf-8") as fh:
            return "\ndef register(" in fh.read()
    except OSError:
        return True  # compiled or unusual: import it to find out


def default_registry() -> Registry:
    """Built-ins plus every plugin module under :data:`PLUGIN_PACKAGE` that defines ``register``."""
    registry = Registry()
    package = importlib.import_module(PLUGIN_PACKAGE)
    for name, source in _modules(PLUGIN_PACKAGE, list(package.__path__)):
        if not _defines_register(source):
            continue
        hook = getattr(importlib.import_module(name), "register", None)
        if callable(hook):
            hook(registry)
    return registry


def build_benchmark(
    name: str, options: dict[str, Any] | None = None, kinds: dict[str, type[Benchmark]] | None = None
) -> Benchmark:
    """The benchmark ``name`` of ``kinds`` (default: the built-in ones) with its ``options``
    checked; an unknown name or option is a :class:`ConfigError` naming the known ones."""
    table = kinds if kinds is not None else BENCHMARKS
    if name not in table:
        raise ConfigError(f"unknown benchmark '{name}'", hint=f"known benchmarks: {', '.join(sorted(table))}")
    accepted = table[name].option_names
    unknown = sorted(set(options or {}) - set(accepted)) if accepted is not None else []
    if unknown:
        raise ConfigError(
            f"benchmark '{name}': unknown option(s) {', '.join(unknown)}",
            hint=f"its options: {', '.join(accepted or ()) or 'none'}",
        )
    return table[name](options)
