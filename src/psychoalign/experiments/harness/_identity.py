"""Which stored run a spec resumes: its id (and the ids older versions stored it under), and the
checks that the stored run measures what the spec asks (the same data, judges and models)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ...errors import ConfigError
from .benchmark import Benchmark
from .provenance import (
    CALIBRATION_META,
    HELD_OUT_CALIBRATIONS,
    ModelFile,
    identity_changes,
    identity_digest,
    unreadable_files,
    unreadable_reason,
)
from .spec import RUN_ID_HEX, ExperimentSpec
from .store import ResultStore, RunRecord


async def _found_id(store: ResultStore, spec: ExperimentSpec, suffix: str) -> str | None:
    """The stored run of ``spec`` under ``spec.run_id() + suffix``, or else the one stored by older
    code, whose id also hashed the spec's operational fields (``concurrency``), so it resumes
    whatever concurrency it ran at; None: neither is stored."""
    run_id = spec.run_id() + suffix
    if (found := await store.get_run(run_id)) is not None and found.id == run_id:
        return run_id
    pattern = re.compile(rf"{re.escape(spec.name)}-[0-9a-f]{{{RUN_ID_HEX}}}{re.escape(suffix)}")
    for old in await store.list_runs():
        if old.name == spec.name and pattern.fullmatch(old.id) and spec.same_numbers(old.spec):
            return old.id
    return None


async def _stored_id(
    store: ResultStore, spec: ExperimentSpec, identity: dict[str, Any], legacy: Sequence[dict[str, Any]], new_run: bool
) -> str:
    """The id to run ``spec`` under: its run id, or with ``new_run`` the run id plus 8 hex of the
    identity's digest; a run stored beside it under an older spelling of the same identity
    (:func:`.provenance.legacy_identities`) resumes under its own id."""
    if not new_run:
        return await _found_id(store, spec, "") or spec.run_id()
    suffixes = [f"-{identity_digest(i)[:8]}" for i in (identity, *legacy)]
    for suffix in dict.fromkeys(suffixes):
        if (found := await _found_id(store, spec, suffix)) is not None:
            return found
    return spec.run_id() + suffixes[0]


def _measures_on_held_out(spec: ExperimentSpec, benchmarks: dict[str, Benchmark]) -> bool:
    """Whether the run's calibrations may read :data:`.provenance.HELD_OUT_LABELS`: the refusal
    and harm agreement, and the literature suites' own LLM judges."""
    if spec.judge.calibration_n <= 0:
        return False
    return any(
        {"refusal", "harm"} & set(b.needs) or getattr(b, "own_judge", None) is not None for b in benchmarks.values()
    )


def _calibrations(spec: ExperimentSpec, benchmarks: dict[str, Benchmark]) -> set[str]:
    """The calibrations of :data:`.provenance.CALIBRATIONS` whose data-folder files the run reads:
    each one the run measures (not on the user's own labels), and the harm rows ``harm: auto``
    picks its prompt on whatever ``calibration_n`` says."""
    needs = {need for b in benchmarks.values() for need in b.needs}
    measured = spec.judge.calibration_n > 0
    out: set[str] = set()
    if measured and "refusal" in needs and "refusal" not in spec.judge.labels:
        out.add("refusal")
    picked = spec.judge.harm == "auto"
    if spec.judge.harm_on and "harm" in needs and (picked or (measured and "harm" not in spec.judge.labels)):
        out.add("harm")
    if measured and "choice" in needs and spec.judge.choice_model:
        out.add("choice")
    if measured and "mtbench" in needs:
        out.add("mtbench")
    return out


async def _check_identity(
    store: ResultStore,
    run: RunRecord,
    identity: dict[str, Any],
    legacy: Sequence[dict[str, Any]],
    data_dir: Path,
    files: Mapping[str, ModelFile],
) -> None:
    """Refuse to resume ``run`` under another identity: its stored cells were computed by what the
    stored identity names, and mixing them with new ones would report the old numbers. A stored
    identity that is an older spelling of this one (``legacy``) is rewritten as this one; when it
    had no held-out labels, the calibrations that may have read them are measured again. A model
    file the run hashed (``files``: a judge script…) that cannot be read now is named as such: the
    run cannot tell whether it changed, and the fix is the file, not --new-run."""
    stored = run.meta.get("identity")
    if stored is None:
        if await store.cells(run.id):
            raise ConfigError(
                f"run {run.id} was stored without its identity (models, judges, data): its cells cannot be "
                "attributed to this configuration",
                hint="add --new-run to start a new run beside it",
            )
        await store.set_meta(run.id, "identity", identity)
        return
    changes = identity_changes(stored, identity)
    if changes and any(not identity_changes(stored, alt) for alt in legacy):
        updates: dict[str, Any] = {"identity": identity}
        was = stored.get("judges") or {}
        if "held_out_labels" in identity["judges"] and "held_out_labels" not in was:
            # measured on labels whose content the stored identity does not name
            updates.update(dict.fromkeys(HELD_OUT_CALIBRATIONS))
        if "calibration_files" in identity["judges"] and "calibration_files" not in was:
            updates.update(dict.fromkeys((*HELD_OUT_CALIBRATIONS, *CALIBRATION_META)))
        await store.update_meta(run.id, updates)
        return
    for key, did in (
        ("held_out_labels", "measured its judges on it"),
        ("files", "judged its cells with it"),
        ("calibration_files", "measured or picked its judges on it"),
    ):
        was = (stored.get("judges") or {}).get(key) or {}
        now = identity["judges"].get(key) or {}
        for rel in sorted(set(was) & set(now)):
            if was[rel] != now[rel]:
                state = "is missing" if now[rel] is None else "has changed"
                raise ConfigError(
                    f"{data_dir / rel} {state} since run {run.id} {did}",
                    hint="restore the file the run used, or add --new-run to start a new run beside it",
                )
    if changes and (gone := unreadable_files(stored, identity, files)):
        raise ConfigError(
            f"{gone[0].what} at {gone[0].path} can't be read ({unreadable_reason(gone[0].path)}); "
            f"run {run.id} was computed with it",
            hint=f"restore the file (or its read permission) and rerun; {gone[0].setting} in the configuration "
            "names it",
        )
    if changes:
        more = f" (+{len(changes) - 3} more)" if len(changes) > 3 else ""
        raise ConfigError(
            f"run {run.id} was computed with other settings: {'; '.join(changes[:3])}{more}",
            hint="resume it with the configuration it ran with, or add --new-run to start a new run beside it",
        )
