"""What `experiment run` can run: system kinds, benchmarks and named experiments with their own CLI.

Plugins extend it without touching this package's code: any module
``psychoalign.experiments.<name>`` that defines ``register(registry: Registry) -> None`` is
imported by :func:`default_registry` and may add systems, benchmarks, or a named command, which
``psychoalign experiment run NAME [OPTIONS]`` then dispatches to. The named experiments that come
with the package (``boundary``, ``h1``, ``defense-accuracy``, ``cross-turn-scripted``) are commands of
the CLI, which adds them to this registry (``psychoalign.cli.experiment.experiment_registry``).

A named command is a typer-style function. ``experiment run`` forwards its own ``--n``,
``--config``, ``--out``, ``--concurrency`` and ``--store`` only to commands whose function has a
parameter of that name (``n``, ``config``, ``out``, ``concurrency``, ``store_url``); every other
option on the command line is passed through.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError
from .benchmarks import BENCHMARKS, Benchmark
from .systems import SYSTEM_KINDS

__all__ = ["BUILTIN_MODULES", "NamedExperiment", "Registry", "default_registry"]

#: This package's own modules (never scanned for ``register``).
BUILTIN_MODULES = frozenset(
    {
        "benchmarks",
        "calibration",
        "judging",
        "metering",
        "registry",
        "report",
        "runner",
        "spec",
        "store",
        "systems",
        "estimate",
    }
)


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
        """``cls(spec, settings)`` must satisfy :class:`~psychoalign.experiments.systems.System`
        and carry ``info`` (a :class:`~psychoalign.experiments.systems.SystemInfo`)."""
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


def _defines_register(package: Any, name: str) -> bool:
    """Whether the module's source defines ``register`` (read, not imported: analysis modules
    pull in heavy libraries that a CLI call should not pay for)."""
    spec = importlib.util.find_spec(f"{package.__name__}.{name}")
    origin = spec.origin if spec is not None else None
    if origin is None or not origin.endswith(".py"):
        return True  # compiled or unusual: import it to find out
    try:
        with open(origin, encoding="utf-8") as fh:
            return "\ndef register(" in fh.read()
    except OSError:
        return True


def default_registry() -> Registry:
    """Built-ins plus every plugin module of this package that defines ``register``."""
    registry = Registry()
    package = importlib.import_module(__package__ or "psychoalign.experiments")
    for info in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if info.name in BUILTIN_MODULES or info.name.startswith("_") or not _defines_register(package, info.name):
            continue
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        hook = getattr(module, "register", None)
        if callable(hook):
            hook(registry)
    return registry
