"""What the crisis check's build and its leave-one-file-out explorations share (imported by
``scripts/build_crisis_check.py``, ``scripts/explore_crisis_v9.py``, ``scripts/explore_crisis_v10.py``,
``scripts/explore_crisis_v11.py`` and ``scripts/crisis_lofo.py``, each run from the repo root with
``src`` on the path): the build's threshold rule, a crisis file's texts, the texts embedded window by
window, and a fold's training items from the crisis files it keeps."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import yaml
from numpy.typing import NDArray

from psychoalign.models.heads import Encoder, windows

#: A crisis file's crisis and benign items, by its name.
CrisisFiles = dict[str, tuple[list[str], list[str]]]


def capped(margins: NDArray[np.float64], cap: float) -> float:
    """The lowest threshold at which at most ``cap`` of ``margins`` reach it."""
    ordered = np.sort(margins)[::-1]
    return float(np.nextafter(ordered[math.floor(cap * len(ordered))], np.inf))


def yaml_texts(path: Path, key: str) -> list[str]:
    """The texts listed under ``key`` in the YAML file ``path`` (none when it lists none)."""
    return [str(t) for t in (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get(key) or []]


def embed_windows(texts: list[str], encode: Encoder) -> tuple[dict[str, NDArray[np.float32]], NDArray[np.float32]]:
    """Each of ``texts`` (no repeats) -> the embeddings of its encoder windows, in order; and every
    window's embedding, text after text, as one array."""
    parts: list[str] = []
    owner: list[int] = []
    for i, t in enumerate(texts):
        for w in windows(t):
            parts.append(w)
            owner.append(i)
    x_all = encode(parts)
    index: dict[int, list[int]] = {}
    for j, o in enumerate(owner):
        index.setdefault(o, []).append(j)
    return {t: x_all[index[i]] for i, t in enumerate(texts)}, x_all


def kept_files(files: CrisisFiles, held: str | None) -> tuple[list[str], list[bool], list[bool], list[str]]:
    """The training items of the crisis ``files`` but the ``held`` one: texts, crisis or not, project
    benign request or not (never), and groups (one a text, named after its file)."""
    texts: list[str] = []
    y: list[bool] = []
    is_benign: list[bool] = []
    groups: list[str] = []
    for name, (crisis, ben) in files.items():
        if name == held:
            continue
        texts += crisis + ben
        y += [True] * len(crisis) + [False] * len(ben)
        is_benign += [False] * (len(crisis) + len(ben))
        groups += [f"{name}:{i}" for i in range(len(crisis) + len(ben))]
    return texts, y, is_benign, groups
