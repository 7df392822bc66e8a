"""Experiment specs: systems x benchmarks x sample size x seed x judge x concurrency, as a file.

A spec is frozen and fully describes a run: its canonical JSON (with the effective ``n``) is
hashed into the run id, so rerunning the same spec resumes the same run. Built-in presets are
package data (``psychoalign/data/experiment-<name>.yaml``).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ...errors import ConfigError
from ...textio import read_text
from ...yamlio import MAX_YAML_CHARS, line_of, parse_yaml, parse_yaml_node
from .judging import JudgeSpec
from .systems import SystemSpec

if TYPE_CHECKING:
    from ...config import Settings
    from .registry import Registry

__all__ = ["ExperimentSpec", "load_spec", "preset_names"]

PRESET_PREFIX = "experiment-"
MAX_N = 100_000
"""Items per benchmark at most (`n`, `--n`)."""


class BenchmarkSpec(BaseModel):
    """One benchmark of a spec; ``n`` overrides the spec's sample size for this benchmark."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    n: int | None = Field(None, ge=1, le=MAX_N)
    options: dict[str, Any] = Field(default_factory=dict)


class RunLimits(BaseModel):
    """Per-run budgets (``experiment run --max-*`` flags override them). A limit reached stops the
    run cleanly: cells in flight finish, no new cell starts, and the reason is stored in the run's
    meta. Tokens, cost and time count the whole run (earlier invocations included), so rerunning
    with a higher limit goes on where it stopped. Per-sample limits (``sample_*``, the
    ``--sample-*`` flags) bound one cell: past one the cell fails with ``limit: …`` (counted by
    ``errors``), so a hung cell never hangs the run. Not part of the run's id: they change how far
    a run goes, never the numbers of the cells it scores."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tokens: int | None = Field(None, ge=1, description="Tokens of every model call (systems, judges, attackers).")
    cost_usd: float | None = Field(None, gt=0, description="Estimated USD of every model call.")
    time_s: float | None = Field(None, gt=0, description="Seconds of running, summed over invocations.")
    errors: float | None = Field(
        None,
        gt=0,
        description="Failed cells that stop the run: a count (>= 1) or a fraction of the run's cells (< 1).",
    )
    sample_tokens: int | None = Field(
        None, ge=1, description="Tokens of one cell's system calls; past it the cell fails ('limit: tokens')."
    )
    sample_time_s: float | None = Field(
        None, gt=0, description="Seconds one cell may run; past it the cell is cut off and fails ('limit: time')."
    )

    @field_validator("errors")
    @classmethod
    def _count_or_fraction(cls, value: float | None) -> float | None:
        if value is not None and value >= 1 and value != int(value):
            raise ValueError("a count of failed cells is a whole number; a fraction is below 1")
        return value


#: Spec fields left out of the run id at their default, so specs written before them keep their id.
_ID_DEFAULTS: dict[str, Any] = {"repeats": 1, "reducer": "mean"}

#: Operational spec fields: how a run goes (cells in flight, how far it may go), never its numbers.
#: Left out of the run id, so a rerun with another ``--concurrency`` or limit resumes the same run.
OPERATIONAL = frozenset({"concurrency", "limits"})

#: A run id as :meth:`ExperimentSpec.run_id` writes it (a ``--new-run`` id adds ``-<8 hex>``).
RUN_ID_HEX = 12


class ExperimentSpec(BaseModel):
    """A whole experiment. ``layout`` picks the report's main table (paper Table 3, 4 or 5)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=80)
    description: str = ""
    systems: tuple[SystemSpec, ...] = Field(min_length=1)
    benchmarks: tuple[BenchmarkSpec, ...] = Field(min_length=1)
    n: int = Field(50, ge=1, le=MAX_N, description="Items per benchmark (XSTest: per label).")
    seed: int = Field(0, ge=0, description="Seed of the item sample and of every resampling (numpy's take >= 0).")
    judge: JudgeSpec = Field(default_factory=JudgeSpec)
    concurrency: int = Field(8, ge=1, le=512, description="Cells in flight at most (adaptive below it).")
    layout: Literal["table3", "table4", "table5"] = "table3"
    baseline: str = Field("vanilla", description="System the cost table divides by (when present).")
    repeats: int = Field(1, ge=1, le=100, description="Times each item runs (separate cells); reduced per item.")
    reducer: Literal["mean", "majority"] = Field("mean", description="How an item's repeats become one score.")
    limits: RunLimits = Field(default_factory=RunLimits)

    @field_validator("systems", "benchmarks", mode="before")
    @classmethod
    def _names_to_specs(cls, value: Any) -> Any:
        """A bare name in either list is shorthand for ``{"name": NAME}``."""
        if isinstance(value, list | tuple):
            return [{"name": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _unique(self) -> ExperimentSpec:
        for what, names in (
            ("system", [s.name for s in self.systems]),
            ("benchmark", [b.name for b in self.benchmarks]),
        ):
            dupes = sorted({n for n in names if names.count(n) > 1})
            if dupes:
                raise ValueError(f"duplicate {what} name(s): {', '.join(dupes)}")
        if self.reducer == "majority" and self.repeats % 2 == 0:
            raise ValueError(
                f"reducer 'majority' needs an odd number of repeats (got {self.repeats}): a tie has no majority"
            )
        return self

    def n_for(self, bench: BenchmarkSpec) -> int:
        return bench.n or self.n

    def with_overrides(
        self, *, n: int | None = None, systems: list[str] | None = None, benchmarks: list[str] | None = None
    ) -> ExperimentSpec:
        """A copy with ``--n`` (every benchmark) and subsets of systems/benchmarks applied."""
        update: dict[str, Any] = {}
        if n is not None:
            update["n"] = n
            update["benchmarks"] = tuple(b.model_copy(update={"n": None}) for b in self.benchmarks)
        if systems:
            unknown = [s for s in systems if s not in {x.name for x in self.systems}]
            if unknown:
                raise ConfigError(
                    f"system(s) not in spec '{self.name}': {', '.join(unknown)}",
                    hint=f"the spec has: {', '.join(s.name for s in self.systems)}",
                )
            update["systems"] = tuple(s for s in self.systems if s.name in systems)
        if benchmarks:
            known = update.get("benchmarks", self.benchmarks)
            unknown = [b for b in benchmarks if b not in {x.name for x in known}]
            if unknown:
                raise ConfigError(
                    f"benchmark(s) not in spec '{self.name}': {', '.join(unknown)}",
                    hint=f"the spec has: {', '.join(b.name for b in known)}",
                )
            update["benchmarks"] = tuple(b for b in known if b.name in benchmarks)
        return self.model_copy(update=update)

    def canonical(self) -> str:
        """The spec as hashed into the run id: without its :data:`OPERATIONAL` fields (they change
        how a run goes, not its numbers), without ``repeats``/``reducer`` at their defaults and
        without a system's kind where it is its name (older specs keep their id)."""
        data = self.model_dump(mode="json", exclude=set(OPERATIONAL))
        for key, default in _ID_DEFAULTS.items():
            if data.get(key) == default:
                data.pop(key)
        for system in data["systems"]:
            if system.get("kind") == system["name"]:
                # the kind a bare name implies, hashed as a kind-less system was (kind ""), so
                # ``- psychoalign`` and ``{name: psychoalign, kind: psychoalign}`` are one run
                system["kind"] = ""
        return json.dumps(data, sort_keys=True, separators=(",", ":"))

    def run_id(self) -> str:
        """Same spec, same run: ``<name>-<12 hex of the canonical spec's SHA-256>``."""
        return f"{self.name}-{hashlib.sha256(self.canonical().encode()).hexdigest()[:RUN_ID_HEX]}"

    def same_numbers(self, stored: dict[str, Any]) -> bool:
        """Whether a stored run's spec (as :meth:`model_dump` wrote it, maybe by older code) is this
        spec but for its operational fields: a run stored under an id that hashed them resumes."""
        try:
            return ExperimentSpec.model_validate(stored).canonical() == self.canonical()
        except ValidationError:  # a spec older code wrote that this code no longer reads
            return False


def preset_names() -> list[str]:
    root = resources.files("psychoalign") / "data"
    return sorted(
        p.name.removeprefix(PRESET_PREFIX).removesuffix(".yaml")
        for p in root.iterdir()
        if p.name.startswith(PRESET_PREFIX) and p.name.endswith(".yaml")
    )


def _toml_line(text: str, loc: tuple[str | int, ...]) -> int:
    """Best-effort line of a TOML key: the last named key of ``loc`` as ``key =`` or a table header."""
    names = [str(p) for p in loc if isinstance(p, str)]
    for name in reversed(names):
        pattern = re.compile(rf"^\s*(\[\[?[^\]]*\b{re.escape(name)}\b[^\]]*\]\]?|{re.escape(name)}\s*=)", re.M)
        m = pattern.search(text)
        if m:
            return text.count("\n", 0, m.start()) + 1
    return 1


@dataclass(frozen=True)
class _Source:
    """Where a spec came from, to name the line of an error found after parsing."""

    name: str
    text: str
    toml: bool

    def line(self, loc: tuple[str | int, ...]) -> int:
        if self.toml:
            return _toml_line(self.text, loc)
        try:
            node, _ = parse_yaml_node(self.text, self.name)
        except ConfigError:
            return 1
        return line_of(node, loc) if node is not None else 1


def _fields(model: type[BaseModel], loc: tuple[str | int, ...]) -> list[str]:
    """The field names of the model at ``loc`` (for "did you mean")."""
    current: Any = model
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = getattr(current, "model_fields", {}).get(part)
        if field is None:
            return []
        ann = field.annotation
        args = [a for a in getattr(ann, "__args__", ()) if isinstance(a, type) and issubclass(a, BaseModel)]
        current = args[0] if args else ann
    return list(getattr(current, "model_fields", {}))


def _validation_message(exc: ValidationError, source: _Source) -> str:
    """``source:line: field: message`` for the most useful error: an unknown key (a typo) first,
    with the closest known key; the count of the others after it."""
    errors = exc.errors()
    first = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = tuple(first["loc"])
    where = ".".join(str(p) for p in loc) or "(top level)"
    msg = first["msg"]
    if first["type"] == "extra_forbidden" and loc:
        known = _fields(ExperimentSpec, loc)
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        msg = f"unknown key{f' (did you mean {close[0]!r}?)' if close else ''}"
        if known:
            msg += f"; known keys: {', '.join(known)}"
    more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{source.name}:{source.line(loc)}: {where}: {msg}{more}"


def spec_from_text(text: str, source: str, *, toml: bool = False) -> ExperimentSpec:
    """Parse a spec; every error names ``source`` and the line."""
    src = _Source(source, text, toml)
    if toml:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{source}: invalid TOML: {exc}", hint="fix the TOML at that line") from None
    else:
        data = parse_yaml(text, source, error=ConfigError)
        if not isinstance(data, dict):
            raise ConfigError(f"{source}:1: expected a YAML mapping at the top level")
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(
            _validation_message(exc, src),
            hint="fix that key (docs/experiments.md lists a spec's keys; `experiment show NAME` prints one)",
        ) from None


def check_spec(
    spec: ExperimentSpec,
    registry: Registry,
    settings: Settings,
    *,
    text: str | None = None,
    source: str = "spec",
    toml: bool = False,
) -> None:
    """What parsing cannot know: every system kind and benchmark exists, their options and
    negotiation parameters are valid, the baseline is one of the systems. With the spec's
    ``text``, errors name ``source`` and the line."""
    from .registry import build_benchmark
    from .systems import build_system

    src = _Source(source, text, toml) if text is not None else None

    def fail(loc: tuple[str | int, ...], exc: ConfigError | str) -> ConfigError:
        where = ".".join(str(p) for p in loc)
        message = exc.message if isinstance(exc, ConfigError) else exc
        prefix = f"{src.name}:{src.line(loc)}: " if src is not None else ""
        return ConfigError(f"{prefix}{where}: {message}", hint=exc.hint if isinstance(exc, ConfigError) else None)

    for i, system in enumerate(spec.systems):
        try:
            build_system(system, settings, registry.systems)
        except ConfigError as exc:
            raise fail(("systems", i), exc) from None
    for i, bench in enumerate(spec.benchmarks):
        try:
            build_benchmark(bench.name, bench.options, registry.benchmarks)
        except ConfigError as exc:
            raise fail(("benchmarks", i), exc) from None
    names = [s.name for s in spec.systems]
    if "baseline" in spec.model_fields_set and spec.baseline not in names:
        raise fail(("baseline",), f"'{spec.baseline}' is not one of the spec's systems ({', '.join(names)})")
    from ...errors import PsychoAlignError
    from .labels import read_user_labels

    for judge, path in spec.judge.labels.items():
        # read now, not after every cell has run: a bad file otherwise fails the run at its end
        # (the run reuses this read: labels.py)
        try:
            read_user_labels(path, judge)
        except PsychoAlignError as exc:
            raise fail(("judge", "labels", judge), ConfigError(exc.message, hint=exc.hint)) from None


def load_spec(
    name_or_path: str | Path, *, registry: Registry | None = None, settings: Settings | None = None
) -> ExperimentSpec:
    """A spec file (``.yaml``/``.yml``/``.toml``) or a built-in preset name. With ``registry``
    (and ``settings``), also :func:`check_spec` it, so every error names the file and line."""
    path = Path(name_or_path)
    if path.suffix.lower() in (".yaml", ".yml", ".toml", ".json") or path.is_file():
        text = read_text(path, what="spec file", error=ConfigError, max_bytes=MAX_YAML_CHARS)
        source, toml = str(path), path.suffix.lower() == ".toml"
    elif str(name_or_path) in preset_names():
        res = resources.files("psychoalign") / "data" / f"{PRESET_PREFIX}{name_or_path}.yaml"
        text, source, toml = res.read_text(encoding="utf-8"), f"preset {name_or_path}", False
    else:
        hint = f"presets: {', '.join(preset_names())}; or pass a .yaml/.toml spec file"
        if re.fullmatch(rf"[A-Za-z0-9][A-Za-z0-9_.-]*-[0-9a-f]{{{RUN_ID_HEX}}}(-[0-9a-f]{{8}})?", str(name_or_path)):
            hint = (  # a run id where a spec goes
                f"'{name_or_path}' looks like a run id: `psychoalign experiment report {name_or_path}` rebuilds its "
                f"report and `psychoalign experiment status {name_or_path}` shows its progress; {hint}"
            )
        raise ConfigError(f"no spec file or preset named '{name_or_path}'", hint=hint)
    spec = spec_from_text(text, source, toml=toml)
    if registry is not None:
        from ...config import Settings

        check_spec(spec, registry, settings or Settings(), text=text, source=source, toml=toml)
    return spec


def _dump(spec: ExperimentSpec) -> str:  # used by `experiment show`
    return yaml.safe_dump(spec.model_dump(mode="json"), sort_keys=False)
