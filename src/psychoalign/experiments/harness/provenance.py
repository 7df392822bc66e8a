"""A run's identity: everything that changes its numbers, recorded so a reader can rebuild the run.

The run id hashes the spec only; the models come from the configuration, the items from the data
folder and the judges from the installed package. :func:`run_identity` resolves all of them:

* per system and role, the model actually used (backend, model name, endpoint host and a hash of its path, sampling
  settings, and the hash of a script or classifier weights file), the framework (name,
  version, and :attr:`~psychoalign.frameworks.Framework.sha256`: the hash every decision is
  stamped with, which a field added to the framework format with a default leaves as it was,
  while any value a framework sets changes it), and the negotiation parameters the
  configuration's ``[negotiation]`` changed (the spec's own are in the run id);
* the judges: the spec's judge section, the judge role's model, a hash of the judges' code
  and the shipped classifier weights, a hash of the packaged prompts the judge models are asked
  with (:func:`judge_prompt_files`), the user's calibration files and, when the run measures
  its judges on them, the held-out labelled files of the data folder (:data:`HELD_OUT_LABELS`)
  and every other data-folder file its calibrations (and the ``harm: auto`` prompt pick) read
  (:func:`calibration_files`);
* per benchmark, the hash of the items sampled (their ids, turns and data, as read), and of the
  data-folder files its judges grade with (:data:`JUDGE_DATA_FILES`: MT-Bench's judge prompts);
* the package version;
* with ``repeats`` above 1, the repeats and their reducer (absent at 1, so runs stored before
  repeats existed keep their identity).

:func:`identity_changes` names what differs between two identities; the runner refuses to resume a
run whose identity differs (``--new-run`` starts one beside it). Identities stored by older code
hashed the framework's whole dump and had no held-out labels: :func:`legacy_identities` spells the
current identity those ways, so such a run still resumes when nothing it ran with changed (its
calibrations that read held-out labels are measured again). The git revision is recorded
(:func:`code_revision`) but not compared: a commit that touches nothing a run uses would
otherwise lock every stored run; the report lists every revision a run's cells were computed under.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from ...errors import PsychoAlignError
from ...frameworks import Framework
from ...frameworks.model import HASHED_ALWAYS
from ...models import ModelSpec
from ...models.identity import model_identity
from ...models.identity import sha256_file as _sha256_file
from .labels import LabelFile, read_user_labels

if TYPE_CHECKING:
    from .benchmark import Item
    from .judging import JudgeSpec
    from .metering import ModelPool
    from .systems import System


#: The identity's parts that must match to resume a run (``revision`` is recorded only). A part
#: absent from an identity (``repeats`` at 1) is left out of its digest, so older digests hold.
COMPARED = ("systems", "judges", "data", "package", "repeats")

#: The data folder's held-out labelled files a run measures its judges on (refusal and harm
#: agreement, the literature suites' LLM judges): JailbreakBench's judge comparison set. Their
#: content is identity: a relabelled file would otherwise leave the stored agreement in place.
HELD_OUT_LABELS = ("jailbreakbench/classifier_comparison.csv",)
#: Run meta keys of the calibrations that may read :data:`HELD_OUT_LABELS`.
HELD_OUT_CALIBRATIONS = ("refusal_calibration", "harm_calibration", "harmbench_calibration", "strongreject_calibration")
#: Most fields :func:`legacy_identities` supposes an older framework format lacked (2**n spellings).
_LEGACY_FIELDS_MAX = 8


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


def judge_prompt_files() -> list[Path]:
    """The packaged prompt files the judges ask their models with (``prompts/judge_*.yaml``: the
    refusal judge's model tier, the harm, choice, rating and toxicity prompts, the HarmBench and
    StrongREJECT prompts)."""
    from ... import prompts

    return sorted(Path(prompts.__file__).parent.glob("judge_*.yaml"))


def _judge_prompts_digest(files: Sequence[Path]) -> str:
    """One hash of the judges' prompt files (names and content): an edited prompt is another judge."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode())
        digest.update((_sha256_file(path) or "missing").encode())
    return digest.hexdigest()


def held_out_labels(data_dir: Path) -> dict[str, str | None]:
    """The sha256 of each of :data:`HELD_OUT_LABELS` under ``data_dir`` (None: not there), of the
    text the calibrations read (the judges' reader keeps it, so the file is opened once)."""
    from ...judges.jailbreak_eval import REL, jbb_judge_set_sha256

    return {
        rel: jbb_judge_set_sha256(data_dir) if rel == REL else _sha256_file(data_dir / rel) for rel in HELD_OUT_LABELS
    }


#: Data-folder files a judge grades cells with, by the judge that reads them: their content is in
#: the identity (``judges.files``) of a run with that judge, so an edited prompt file cannot judge
#: the cells a resume adds while the stored ones were judged with the old one.
JUDGE_DATA_FILES = {"mtbench": ("mt_bench/judge_prompts.jsonl",)}


def judge_data_files(data_dir: Path, needs: Iterable[str]) -> dict[str, str | None]:
    """The sha256 of each :data:`JUDGE_DATA_FILES` file the judges in ``needs`` read (None: not there)."""
    wanted = set(needs)
    return {
        rel: _sha256_file(data_dir / rel) for judge, rels in JUDGE_DATA_FILES.items() if judge in wanted for rel in rels
    }


#: The calibrations (and the ``harm: auto`` pick) whose data-folder files :func:`calibration_files`
#: hashes, besides :data:`HELD_OUT_LABELS`: refusal (XSTest completions, when the held-out labels
#: are absent), harm (the labelled non-refusals the pick is made and, without held-out labels,
#: the judge measured on), choice (HHH) and mtbench (every question and reference answer): the
#: files the HHH and MT-Bench suites of the same run read (:func:`calibration_rels`).
CALIBRATIONS = ("refusal", "harm", "choice", "mtbench")
#: Run meta keys of the calibrations reading :func:`calibration_files` beside :data:`HELD_OUT_CALIBRATIONS`.
CALIBRATION_META = ("choice_calibration", "mtbench_calibration")


def calibration_rels(data_dir: Path, calibration: str) -> list[str]:
    """The data-folder files ``calibration`` (one of :data:`CALIBRATIONS`) reads, relative to ``data_dir``."""
    from . import harm_labels

    if calibration == "refusal":
        return list(harm_labels.FILES)
    if calibration == "harm":
        return harm_labels.source_files(data_dir)
    # The choice and MT-Bench checks no longer read these files (they run on the project's rating
    # pairs, whose text is in the judges' code digest), but they stay: a run has these calibrations
    # only when its HHH or MT-Bench suite is in it, and that suite reads the very files. The items
    # digest covers only what the suite parses (an edited reference answer record outside its turns
    # is invisible to it), so the files' own hash is what refuses a resume over changed data.
    if calibration == "choice":
        from ..suites.benchmarks.hhh import HHH

        return [f"hhh_alignment/{part}.task.json" for part in HHH.FILES]
    if calibration == "mtbench":
        return ["mt_bench/question.jsonl", "mt_bench/reference_answer_gpt-4.jsonl"]
    raise ValueError(f"unknown calibration {calibration!r}")


def calibration_files(data_dir: Path, calibrations: Iterable[str]) -> dict[str, str | None]:
    """The sha256 of each data-folder file the run's ``calibrations`` read (None: not there): a
    changed file changes the agreement stored with the run, or the harm prompt picked on it."""
    rels = sorted({rel for c in set(calibrations) for rel in calibration_rels(data_dir, c)})
    return {rel: _sha256_file(data_dir / rel) for rel in rels}


def framework_identity(framework: Framework) -> dict[str, Any]:
    return {"name": framework.name, "version": framework.version, "sha256": framework.sha256}


def _always(model: BaseModel) -> frozenset[str]:
    return next((HASHED_ALWAYS[c] for c in type(model).__mro__ if c in HASHED_ALWAYS), frozenset())


def _optional_fields(value: Any, out: dict[tuple[type, str], bool]) -> None:
    """Each (model class, field) outside :data:`HASHED_ALWAYS` in ``value``: whether it holds its
    default everywhere (only such a field may be one the code of an older run did not have)."""
    if isinstance(value, BaseModel):
        always = _always(value)
        for name, info in type(value).model_fields.items():
            held = getattr(value, name)
            if name not in always:
                key = (type(value), name)
                out[key] = out.get(key, True) and held == info.get_default(call_default_factory=True)
            _optional_fields(held, out)
    elif isinstance(value, tuple | list):
        for v in value:
            _optional_fields(v, out)


def _dump_without(value: Any, dumped: Any, drop: frozenset[tuple[type, str]]) -> Any:
    if isinstance(value, BaseModel):
        return {
            name: _dump_without(getattr(value, name), dumped[name], drop)
            for name in type(value).model_fields
            if (type(value), name) not in drop
        }
    if isinstance(value, tuple | list):
        return [_dump_without(v, d, drop) for v, d in zip(value, dumped, strict=True)]
    return dumped


def _legacy_sha(framework: Framework, drop: frozenset[tuple[type, str]]) -> str:
    """The framework's hash as identities before :attr:`Framework.sha256` was used spelled it:
    its whole JSON dump, keys sorted, without the fields in ``drop`` (added to the format since)."""
    body = _dump_without(framework, framework.model_dump(mode="json"), drop)
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()


def legacy_identities(identity: Mapping[str, Any], systems: Sequence[System]) -> list[dict[str, Any]]:
    """``identity`` as older code would have stored it for the same models, frameworks, judges and
    data: every framework hashed by its whole dump (under each set of optional fields still at
    their default that the format may have lacked then), and without held-out labels. A stored
    identity equal to one of them ran with what this one names; a value a framework sets is in
    every spelling, so changing it still matches none."""
    frameworks = {s.spec.name: fw for s in systems if isinstance(fw := getattr(s, "framework", None), Framework)}
    optional: dict[tuple[type, str], bool] = {}
    for fw in frameworks.values():
        _optional_fields(fw, optional)
    droppable = sorted((k for k, at_default in optional.items() if at_default), key=lambda k: (k[0].__name__, k[1]))
    judges = identity.get("judges") or {}
    spellings: list[Mapping[str, Any]] = [identity]
    if "held_out_labels" in judges:
        spellings.append({**identity, "judges": {k: v for k, v in judges.items() if k != "held_out_labels"}})
    # stored before the endpoint's path, or an embedded model's GGUF content, was part of a model's identity
    for field in ("path_sha256", "gguf"):
        if _has_field(identity, field):
            spellings += [_without_field(base, field) for base in spellings]
    for key in ("files", "calibration_files", "prompts_sha256"):  # stored before these files were hashed
        if key in judges:
            spellings += [
                {**base, "judges": {k: v for k, v in base["judges"].items() if k != key}} for base in spellings
            ]
    if len(droppable) > _LEGACY_FIELDS_MAX:  # bounded: the format as it is, and without them all
        drops = [frozenset(), frozenset(droppable)]
    else:
        drops = [frozenset(c) for r in range(len(droppable) + 1) for c in itertools.combinations(droppable, r)]
    out: list[dict[str, Any]] = []
    seen = {identity_digest(identity)}
    # the frameworks as hashed now (an identity that lacks only the held-out labels), then as before
    hashings: list[dict[str, str]] = [{}]
    if frameworks:
        hashings += [{name: _legacy_sha(fw, drop) for name, fw in frameworks.items()} for drop in drops]
    for shas in hashings:
        for base in spellings:
            alt = copy.deepcopy(dict(base))
            for name, sha in shas.items():
                entry = alt.get("systems", {}).get(name)
                if entry is not None and "framework" in entry:
                    entry["framework"]["sha256"] = sha
            if (digest := identity_digest(alt)) not in seen:
                seen.add(digest)
                out.append(alt)
    return out


def _model_entries(identity: Mapping[str, Any]) -> list[dict[str, Any]]:
    systems = identity.get("systems") or {}
    entries = [m for entry in systems.values() for m in (entry.get("models") or {}).values()]
    judge_model = (identity.get("judges") or {}).get("model")
    return [m for m in [*entries, judge_model] if isinstance(m, dict)]


def _has_field(identity: Mapping[str, Any], field: str) -> bool:
    return any(field in m for m in _model_entries(identity))


def _without_field(identity: Mapping[str, Any], field: str) -> dict[str, Any]:
    out = copy.deepcopy(dict(identity))
    for m in _model_entries(out):
        m.pop(field, None)
    return out


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
    held_out: Mapping[str, str | None] | None = None,
    judge_files: Mapping[str, str | None] | None = None,
    calibration: Mapping[str, str | None] | None = None,
) -> dict[str, Any]:
    """The run's identity (see the module doc): plain JSON data. ``labels``: the user's
    calibration files (``judge.labels``) as the run read them (read here when not given).
    ``held_out``: :func:`held_out_labels` when the run measures its judges on them.
    ``judge_files``: :func:`judge_data_files`, the data-folder files its judges grade cells with.
    ``calibration``: :func:`calibration_files`, the other data-folder files its calibrations read."""
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
        if isinstance(framework, Framework):
            entry["framework"] = framework_identity(framework)
        params = getattr(system, "params", None)
        if isinstance(framework, Framework) and params is not None:
            # the shipped crisis check and the possible-risk band's vote decide routing and the soft line
            from ...models.crisis_check import crisis_identity

            entry["crisis"] = crisis_identity(band=bool(getattr(params, "crisis_band", False)))
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
            # the packaged prompts the judge models are asked with: an edited prompt judges otherwise
            "prompts_sha256": _judge_prompts_digest(judge_prompt_files()),
            # a user's own calibration files (judge.labels): their content, not only their names
            "labels": {name: labels[name].sha256 for name in sorted(judge.labels)},
        },
        "data": {name: {"items": len(got), "sha256": items_digest(got)} for name, got in items.items()},
        "package": {"name": "psychoalign", "version": _package_version()},
        "revision": code_revision(),
    }
    if held_out is not None:
        out["judges"]["held_out_labels"] = dict(held_out)
    if judge_files:
        out["judges"]["files"] = dict(judge_files)
    if calibration:
        out["judges"]["calibration_files"] = dict(calibration)
    if repeats > 1:
        out["repeats"] = {"n": repeats, "reducer": reducer}
    return out


class ModelFile(BaseModel):
    """A file a model of the run reads, whose hash its identity holds (:func:`model_files`)."""

    what: str  # "the judge script", as an error names it
    path: Path
    setting: str  # where the configuration names it: "roles.judge.script"


def model_files(systems: Sequence[System], pool: ModelPool, judge: JudgeSpec) -> dict[str, ModelFile]:
    """Each script or classifier weights file the run's models read, by the identity field that
    holds its hash (``judges.model.script_sha256``)."""
    out: dict[str, ModelFile] = {}

    def add(field: str, spec: ModelSpec, role: str, who: str) -> None:
        if spec.script:
            out[f"{field}.script_sha256"] = ModelFile(
                what=f"{who} script", path=Path(spec.script), setting=f"roles.{role}.script"
            )
        if spec.backend == "classifier" and spec.model and spec.model.endswith(".json"):
            out[f"{field}.weights_sha256"] = ModelFile(
                what=f"{who} classifier weights", path=Path(spec.model), setting=f"roles.{role}.model"
            )

    for system in systems:
        for role in _system_roles(system):
            extra = system.spec.roles.get(role)
            spec = pool.spec(role, dict(extra) if extra else None)
            who = f"the {role} model's (system {system.spec.name})"
            add(f"systems.{system.spec.name}.models.{role}", spec, role, who)
    add("judges.model", pool.spec(judge.role), judge.role, "the judge")
    return out


def unreadable_files(
    stored: Mapping[str, Any], current: Mapping[str, Any], files: Mapping[str, ModelFile]
) -> list[ModelFile]:
    """The files of ``files`` the stored identity hashed that cannot be read now (their hash is
    None): the run cannot tell whether they changed, which is not the same as a changed model."""
    old: dict[str, Any] = {}
    new: dict[str, Any] = {}
    _flatten(stored, "", old)
    _flatten(current, "", new)
    return [f for field, f in files.items() if old.get(field) and new.get(field) is None]


def unreadable_reason(path: Path) -> str:
    """Why ``path`` cannot be read, as the operating system says it ("No such file or directory")."""
    try:
        with path.open("rb"):
            return "unreadable"  # readable again by now: the hash was taken a moment ago
    except OSError as exc:
        return exc.strerror or type(exc).__name__


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
