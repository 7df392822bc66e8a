"""A user's own labelled calibration files (``judge.labels``), read once.

A run reads such a file where three things need it: the spec check (a bad file fails before any
cell runs), the run's identity (the file's sha256) and the judge's calibration at the end. They
share one read: :func:`read_user_labels` keeps what it read for an unchanged file (same size,
modification time and inode), and a run pins the :class:`LabelFile` it hashed into its identity,
so the calibration measures the very rows the identity names even if the file changes meanwhile.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ...errors import InputError
from ...textio import decode_utf8, file_signature, parse_jsonl_objects


class _Prompted(Protocol):
    """What :func:`check_labels_apart` reads of a benchmark item (``benchmark.Item`` has it); a
    protocol, so this module needs no import of the benchmark module, which imports the judges."""

    @property
    def id(self) -> str: ...

    @property
    def turns(self) -> tuple[str, ...]: ...


__all__ = ["USER_LABEL_FIELDS", "LabelFile", "check_labels_apart", "load_user_labels", "read_user_labels"]

#: The fields of a user's labelled calibration file (``judge.labels``), per judge: text fields, label.
USER_LABEL_FIELDS: dict[str, tuple[tuple[str, ...], str]] = {
    "refusal": (("prompt", "response"), "refused"),
    "harm": (("goal", "response"), "harmful"),
}


@dataclass(frozen=True)
class LabelFile:
    """One labelled calibration file as read: its rows and the sha256 of its bytes."""

    path: str
    judge: str
    sha256: str
    rows: tuple[dict[str, Any], ...]


#: (absolute path, judge) -> (the file's (size, mtime_ns, inode, device) when read, what was read).
_READ: dict[tuple[str, str], tuple[tuple[int, int, int, int], LabelFile]] = {}


def read_user_labels(path: str | Path, judge: str) -> LabelFile:
    """The labelled calibration file ``path`` for ``judge`` (JSON lines, see
    :data:`USER_LABEL_FIELDS`): every row checked, an error naming the file, line and field; at
    least one row of each label. Read from disk only when the file is new or changed."""
    what = f"{judge} calibration file"
    key = (os.path.abspath(path), judge)
    kept = _READ.get(key)
    try:
        if kept is not None and file_signature(os.stat(path)) == kept[0]:
            return kept[1]
        with open(path, "rb") as fh:  # one read: the hash and the rows come from the same bytes
            signature, data = file_signature(os.fstat(fh.fileno())), fh.read()
    except OSError as exc:
        raise InputError(f"cannot read {what} {path}: {exc.strerror or exc}", hint="check the path") from None
    rows = _checked_rows(path, judge, parse_jsonl_objects(decode_utf8(data, f"{what} {path}"), str(path)))
    found = LabelFile(path=str(path), judge=judge, sha256=hashlib.sha256(data).hexdigest(), rows=tuple(rows))
    if len(_READ) >= 16:  # a long-lived process (the lab) reads few such files: bound it all the same
        _READ.clear()
    _READ[key] = (signature, found)
    return found


def load_user_labels(path: str | Path, judge: str) -> list[dict[str, Any]]:
    """The rows of :func:`read_user_labels` (a copy: callers may reorder it)."""
    return list(read_user_labels(path, judge).rows)


def _checked_rows(path: str | Path, judge: str, objects: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    texts, label = USER_LABEL_FIELDS[judge]
    example = json.dumps({**dict.fromkeys(texts, "…"), label: True}, ensure_ascii=False)
    rows: list[dict[str, Any]] = []
    seen: dict[tuple[str, ...], int] = {}
    for line, obj in objects:
        for key in texts:
            if not isinstance(obj.get(key), str):
                raise InputError(f"{path}:{line}: '{key}' must be a string", hint=f"each line like {example}")
        if not isinstance(obj.get(label), bool):
            raise InputError(f"{path}:{line}: '{label}' must be true or false", hint=f"each line like {example}")
        # a repeated answer is one measurement counted twice: it narrows the interval and can lift
        # a judge over the validity gate on a handful of distinct answers
        text_key = tuple(" ".join(obj[k].split()).casefold() for k in texts)
        if text_key in seen:
            raise InputError(
                f"{path}:{line}: the same {' and '.join(texts)} as line {seen[text_key]}",
                hint="keep each labelled answer once: a repeated row counts one answer twice",
            )
        seen[text_key] = line
        rows.append({"id": f"{Path(path).name}:{line}", **{k: obj[k] for k in texts}, label: obj[label]})
    if len({r[label] for r in rows}) < 2:
        raise InputError(
            f"{path}: every row has the same '{label}' value ({len(rows)} rows)",
            hint="a calibration set needs labelled examples of both kinds",
        )
    return rows


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def check_labels_apart(labels: LabelFile, benchmarks: Mapping[str, tuple[Sequence[str], Sequence[_Prompted]]]) -> None:
    """Refuse a calibration file that asks the judge about a prompt of a benchmark it judges in
    this run (``benchmarks``: name -> (the judges it needs, every item as loaded)): the judge would
    be validated on the very items it scores, and the scores corrected with that agreement
    (Rogan-Gladen) would count those items twice. The first such row is named with the benchmark
    and item."""
    texts, _ = USER_LABEL_FIELDS[labels.judge]
    asked: dict[str, str] = {}
    for row in labels.rows:
        asked.setdefault(_key(str(row[texts[0]])), str(row["id"]))
    for name, (needs, items) in benchmarks.items():
        if labels.judge not in needs:
            continue
        for item in items:
            for turn in item.turns:
                if (where := asked.get(_key(turn))) is not None:
                    line = where.rsplit(":", 1)[-1]
                    raise InputError(
                        f"{labels.path}:{line}: the {labels.judge} calibration file asks about a prompt of "
                        f"benchmark '{name}' (item {item.id}), which this judge scores in the run",
                        hint="measure the judge on labelled answers to prompts outside the benchmarks it judges: "
                        "the items a run scores cannot also validate its judge and correct its scores",
                    )
