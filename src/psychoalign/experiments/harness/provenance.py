"""A run's identity: everything that changes its numbers, recorded so a reader can rebuild the run.

The run id hashes the spec only; the models come from the configuration, the items from the data
folder and the judges from the installed package. :func:`run_identity` resolves all of them:

* per system and role, the model actually used (backend, model name, endpoint host, sampling
  settings, and the hash of a script or classifier weights file), the framework (name,
  version, hash of its content), and the negotiation parameters the configuration's
  ``[negotiation]`` changed (the spec's own are in the run id);
* the judges: the spec's judge section, the judge role's model, and a hash of the judges' code
  and the shipped classifier weights;
* per benchmark, the hash of the items sampled (their ids, turns and data, as read);
* the package version;
* with ``repeats`` above 1, the repeats and their reducer (absent at 1, so runs stored before
  repeats existed keep their identity).

:func:`identity_changes` names what differs between two identities; the runner refuses to resume a
run whose identity differs (``--new-run`` starts one beside it). The git revision is recorded
(:func:`code_revision`) but not compared: a commit that touches nothing a run uses would
otherwise lock every stored run; the report lists every revision a run's cells were computed under.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from ...errors import PsychoAlignError
from ...models import Backend, ModelSpec
from .labels import LabelFile, read_user_labels

if TYPE_CHECKING:
    from .benchmark import Item
    from .judging import JudgeSpec
    from .metering import ModelPool
    from .systems import System


#: The identity's parts that must match to resume a run (``revision`` is recorded only). A part
#: absent from an identity (``repeats`` at 1) is left out of its digest, so older digests hold.
COMPARED = ("systems", "judges", "data", "package", "repeats")


def _sha256_file(path: Path) -> str | None:
    try:
        digest = hashlib.sha256()
        with path.open("rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        return digest.hexdigest()
    except OSError:
        return None


def _host(base_url: str | None) -> str | None:
    """The endpoint's host[:port], never its path, user or password."""
    if not base_url:
        return None
    parts = urlsplit(base_url)
    if parts.hostname is None:
        return None
    return f"{parts.hostname}:{parts.port}" if parts.port else parts.hostname


def model_identity(spec: ModelSpec, backend: Backend | None = None) -> dict[str, Any]:
    """What about a model changes its answers: backend, model name (as the backend resolves it:
    a classifier's carries its weights hash), endpoint host, sampling, and a script file's hash."""
    out: dict[str, Any] = {
        "backend": spec.backend,
        "model": backend.model_name if backend is not None else (spec.model or "default"),
        "host": _host(spec.base_url),
        "temperature": spec.temperature,
        "max_tokens": spec.max_tokens,
        "seed": spec.seed,
    }
    if spec.backend == "local":
        out["n_ctx"] = spec.n_ctx
    if spec.script:
        out["script_sha256"] = _sha256_file(Path(spec.script))
    if spec.backend == "classifier" and spec.model and spec.model.endswith(".json"):
        out["weights_sha256"] = _sha256_file(Path(spec.model))
    return out


def items_digest(items: Iterable[Item]) -> str:
    """SHA-256 of the items as read (ids, turns, data), in order."""
    digest = hashlib.sha256()
    for item in items:
        digest.update(json.dumps(item.model_dump(mode="json"), sort_keys=True, default=str).encode())
        digest.update(b"\n")
    return digest.hexdigest()


@cache
def _judges_code_digest() -> str:
    """The judges' code and rules, and the shipped classifier weights (the embedded harm judge)."""
    from ...judges import __file__ as judges_init
    from ...models.classifier import default_weights_path
    from ...models.refusal_rules import __file__ as rules_file

    root = Path(judges_init).parent
    files = sorted(p for p in root.iterdir() if p.suffix in (".py", ".yaml", ".json"))
    digest = hashlib.sha256()
    for path in [*files, Path(rules_file), default_weights_path()]:
        digest.update(path.name.encode())
        digest.update((_sha256_file(path) or "missing").encode())
    return digest.hexdigest()


def _package_version() -> str:
    # read from the installed metadata: importing the top-level package would run up a layer
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("psychoalign")
    except PackageNotFoundError:
        return "unknown"


@cache
def code_revision() -> dict[str, Any]:
    """The git revision of the source checkout the package runs from (None when installed from a
    wheel), and whether tracked files differ from it."""
    src = Path(__file__).resolve().parent
    try:
        head = subprocess.run(
            ["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=False
        )
        if head.returncode != 0:
            return {"git": None, "dirty": None}
        dirty = subprocess.run(
            ["git", "-C", str(src), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return {"git": None, "dirty": None}
    return {"git": head.stdout.strip(), "dirty": bool(dirty.stdout.strip()) if dirty.returncode == 0 else None}


def _system_roles(system: System) -> list[str]:
    roles = getattr(system, "model_roles", None)
    return list(roles() if callable(roles) else getattr(system.info, "roles", ()))


def run_identity(
    systems: Sequence[System],
    pool: ModelPool,
    judge: JudgeSpec,
    items: Mapping[str, Sequence[Item]],
    *,
    repeats: int = 1,
    reducer: str = "mean",
    labels: Mapping[str, LabelFile] | None = None,
) -> dict[str, Any]:
    """The run's identity (see the module doc): plain JSON data. ``labels``: the user's
    calibration files (``judge.labels``) as the run read them (read here when not given)."""
    if labels is None:
        labels = {name: read_user_labels(path, name) for name, path in judge.labels.items()}
    out_systems: dict[str, Any] = {}
    for system in systems:
        models: dict[str, Any] = {}
        for role in _system_roles(system):
            extra = system.spec.roles.get(role)
            spec, backend = pool.resolve(role, dict(extra) if extra else None)
            models[role] = model_identity(spec, backend)
        entry: dict[str, Any] = {"kind": system.spec.effective_kind, "models": models}
        framework = getattr(system, "framework", None)
        if framework is not None:
            body = json.dumps(framework.model_dump(mode="json"), sort_keys=True)
            entry["framework"] = {
                "name": framework.name,
                "version": framework.version,
                "sha256": hashlib.sha256(body.encode()).hexdigest(),
            }
        from_settings = getattr(system, "negotiation_from_settings", None)
        if callable(from_settings) and (changed := from_settings()):
            # absent when the configuration changes nothing, so older identities hold
            entry["negotiation"] = changed
        out_systems[system.spec.name] = entry
    try:
        judge_spec, judge_backend = pool.resolve(judge.role)
        judge_model = model_identity(judge_spec, judge_backend)
    except PsychoAlignError:  # a judge role that cannot be built (rules-only runs never build it)
        judge_model = model_identity(pool.spec(judge.role))
    out: dict[str, Any] = {
        "systems": out_systems,
        "judges": {
            "spec": judge.model_dump(mode="json"),
            "model": judge_model,
            "code_sha256": _judges_code_digest(),
            # a user's own calibration files (judge.labels): their content, not only their names
            "labels": {name: labels[name].sha256 for name in sorted(judge.labels)},
        },
        "data": {name: {"items": len(got), "sha256": items_digest(got)} for name, got in items.items()},
        "package": {"name": "psychoalign", "version": _package_version()},
        "revision": code_revision(),
    }
    if repeats > 1:
        out["repeats"] = {"n": repeats, "reducer": reducer}
    return out


def identity_digest(identity: Mapping[str, Any]) -> str:
    """SHA-256 of the compared parts of ``identity``."""
    body = json.dumps({k: identity[k] for k in COMPARED if k in identity}, sort_keys=True, default=str)
    return hashlib.sha256(body.encode()).hexdigest()


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping) and value:
        for key, sub in value.items():
            _flatten(sub, f"{prefix}.{key}" if prefix else str(key), out)
    else:
        out[prefix] = value


def _short(value: Any) -> str:
    text = "none" if value is None else str(value)
    return text[:12] + "…" if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text


def identity_changes(stored: Mapping[str, Any], current: Mapping[str, Any]) -> list[str]:
    """What differs in the compared parts, one ``path: old -> new`` each, in path order."""
    old: dict[str, Any] = {}
    new: dict[str, Any] = {}
    for key in COMPARED:
        _flatten(stored.get(key), key, old)
        _flatten(current.get(key), key, new)
    return [
        f"{path}: {_short(old.get(path))} -> {_short(new.get(path))}"
        for path in sorted(set(old) | set(new))
        if old.get(path) != new.get(path)
    ]
