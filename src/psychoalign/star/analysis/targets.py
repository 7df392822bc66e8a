"""Which target a STAR dialogue red-teamed, and the user's explicit choices about it.

A figure about the target (attack success, H1's tension) is a property of one model, so an
analysis refuses to pool dialogues of several targets (:func:`mixed_reason`). Dialogues stored
before target labels carried a version and digest keep the *legacy* label ``psychoalign:<framework>``:
a distinct target whose version, models and negotiation settings are unknown. Two ways forward, both
explicit and recorded in the report (``target_audit``), never silent:

* ``--target LABEL`` (:func:`select_target`): analyse one target's dialogues, the others left out
  and counted;
* ``--attach-legacy LEGACY=LABEL`` (:func:`attach_legacy`): the user asserts the legacy dialogues
  red-teamed the same framework version, models and settings as the current target ``LABEL`` of the
  same framework; they are analysed as ``LABEL``, with the assertion in the report.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ...errors import InputError
from .files import clean
from .rating_data import RatingData

#: ``psychoalign:<framework>`` with no ``@<version>#<digest>``: written before labels carried them.
_LEGACY = re.compile(r"^psychoalign:([^@#\s]+)$")
#: ``psychoalign:<framework>@<version>#<digest>``: the current label of a PsychoAlign target.
_CURRENT = re.compile(r"^psychoalign:([^@#\s]+)@[^#\s]+#[0-9a-f]{12}$")


def is_legacy(label: str) -> bool:
    return _LEGACY.match(label) is not None


def describe(label: str) -> str:
    """A target as a reason names it: legacy labels say that their version is unknown."""
    return f"{label} (legacy label: version and models unknown)" if is_legacy(label) else label


def targets_of(data: RatingData) -> dict[str, int]:
    """Dialogues per target label (dialogues without a label left out)."""
    if "target" not in data.items.columns:
        return {}
    labels = [str(t) for t in data.items["target"] if clean(t) is not None]
    return {t: labels.count(t) for t in sorted(set(labels))}


def mixed_reason(targets: Sequence[str], what: str, why: str) -> str:
    """Why a figure about the target is not computed over dialogues of several ``targets`` (``what``
    red-teamed them, ``why`` they do not pool), and the way forward: one target at a time, or an
    explicit attachment of legacy-labelled dialogues."""
    named = ", ".join(describe(t) for t in targets)
    fix = (
        "analyse each target's dialogues on its own (psychoalign star analyze --target LABEL, or "
        "psychoalign star export --campaign NAME, one campaign per file)"
    )
    legacy = [t for t in targets if is_legacy(t)]
    for old in legacy:
        name = _LEGACY.match(old)
        current = [t for t in targets if (m := _CURRENT.match(t)) and name and m.group(1) == name.group(1)]
        if len(current) == 1:
            fix += (
                f"; if the legacy dialogues red-teamed the same framework version and models, "
                f"--attach-legacy '{old}={current[0]}' analyses them as that target (recorded in the report)"
            )
    return f"{what} {len(targets)} targets ({named}), {why}: {fix}"


def attach_legacy(data: RatingData, pairs: Sequence[str]) -> RatingData:
    """Relabel legacy-labelled dialogues as a current target of the same framework, each ``pair``
    ``LEGACY=LABEL`` on the user's word: the report's notes and ``target_audit`` say so."""
    present = targets_of(data)
    for pair in pairs:
        old, sep, new = (p.strip() for p in pair.partition("="))
        if not sep or not old or not new:
            raise InputError(
                f"--attach-legacy '{pair}' is not LEGACY=LABEL",
                hint="e.g. --attach-legacy 'psychoalign:general=psychoalign:general@1.0#0123456789ab'",
            )
        legacy = _LEGACY.match(old)
        if legacy is None:
            raise InputError(
                f"--attach-legacy: '{old}' is not a legacy label (psychoalign:<framework>, no @version#digest)",
                hint="only dialogues stored before labels carried a version can be attached; use --target LABEL",
            )
        if old not in present:
            raise InputError(
                f"--attach-legacy: no dialogue of {data.name} is labelled '{old}'",
                hint=f"its targets: {', '.join(present) or 'none'}",
            )
        current = _CURRENT.match(new)
        if current is None or current.group(1) != legacy.group(1):
            raise InputError(
                f"--attach-legacy: '{new}' is not a current label of the framework '{legacy.group(1)}'",
                hint=f"give one of the targets the export's target column names: {', '.join(present)}",
            )
        if new not in present:
            raise InputError(
                f"--attach-legacy: no dialogue of {data.name} red-teamed '{new}'",
                hint=f"its targets: {', '.join(present)}",
            )
        n = present.pop(old)
        present[new] += n
        data.items["target"] = data.items["target"].where(data.items["target"].astype(str) != old, new)
        data.target_audit.append(
            {
                "action": "attach_legacy",
                "from": old,
                "to": new,
                "dialogues": n,
                "basis": "the user's assertion (--attach-legacy); the export does not show the version or models",
            }
        )
        data.notes.append(
            f"{n} dialogue{'s' if n != 1 else ''} labelled {old} (legacy label: version and models unknown) "
            f"{'are' if n != 1 else 'is'} analysed as {new} on the user's word (--attach-legacy): nothing in the "
            "export shows they red-teamed the same framework version, models and settings."
        )
    return data


def select_target(data: RatingData, label: str) -> RatingData:
    """Keep the dialogues of one target (and their ratings); the ones left out are counted."""
    present = targets_of(data)
    if label not in present:
        raise InputError(
            f"--target: no dialogue of {data.name} red-teamed '{label}'",
            hint=f"its targets: {', '.join(present) or 'none (the file has no target column)'}",
        )
    unlabelled = int(sum(clean(t) is None for t in data.items["target"]))
    keep = data.items["target"].astype(str) == label
    left_out = set(data.items.loc[~keep, "item_id"].astype(str))
    data.items = data.items[keep].reset_index(drop=True)
    gone = data.ratings["item_id"].isin(left_out)
    data.counts.drop("dialogue of another target (--target)", int(gone.sum()))
    data.ratings = data.ratings[~gone].reset_index(drop=True)
    data.counts.ratings_kept = len(data.ratings)
    data.counts.items_kept = len(data.items)
    others = {t: n for t, n in present.items() if t != label}
    data.target_audit.append(
        {"action": "select", "target": label, "dialogues": present[label], "left_out": others, "unlabelled": unlabelled}
    )
    data.notes.append(
        f"Only the {present[label]} dialogues of {describe(label)} are analysed (--target); left out: "
        + (", ".join(f"{describe(t)} ({n})" for t, n in others.items()) or "none")
        + (f", {unlabelled} without a target label" if unlabelled else "")
        + "."
    )
    return data
