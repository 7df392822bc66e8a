"""The experiment harness: the paper's benchmarks against its baselines and ablations, on any models.

>>> spec = load_spec("paper-table3").with_overrides(n=3)
>>> store = open_result_store(None)
>>> summary = await run_experiment(spec, settings, store=store)
>>> run = await store.get_run(summary.run_id)
>>> write_report(build_report(run, await store.cells(run.id)), Path("out"))

Three parts: :mod:`.harness` (spec, runner, result store, judges, cost, report), :mod:`.suites`
(the benchmarks and the attack suite) and :mod:`.studies` (boundary profiling, retest, H1,
cross-turn tension, defense-mechanism accuracy). A plugin adds systems, benchmarks or named
experiments to a :class:`Registry` (see :func:`default_registry`). See docs/experiments.md for
every system, benchmark, scoring rule and judge.
"""

from .harness.registry import Registry, default_registry
from .harness.report import build_report, write_report
from .harness.runner import run_experiment
from .harness.spec import ExperimentSpec, load_spec
from .harness.store import ResultStore, open_result_store

__all__ = [
    "ExperimentSpec",
    "Registry",
    "ResultStore",
    "build_report",
    "default_registry",
    "load_spec",
    "open_result_store",
    "run_experiment",
    "write_report",
]
