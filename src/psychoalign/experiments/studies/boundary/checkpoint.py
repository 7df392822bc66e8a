"""Resuming a negotiated corpus: ``OUT/outcomes.jsonl`` holds one line per finished negotiation,
keyed by a fingerprint of everything that changes the negotiations."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from .negotiate import ItemOutcome

__all__ = ["Checkpoint", "fingerprint"]


class Checkpoint:
    """``OUT/outcomes.jsonl``: one line per finished negotiation, appended as it finishes, so a
    rerun with the same ``--out`` (and the same corpus, models and parameters: the fingerprint)
    skips what an interrupted run completed. Lines of another fingerprint are ignored."""

    def __init__(self, path: Path, fingerprint: str) -> None:
        self.path = path
        self.fingerprint = fingerprint

    def load(self) -> dict[tuple[int, str], ItemOutcome]:
        done: dict[tuple[int, str], ItemOutcome] = {}
        if not self.path.exists():
            return done
        for line in self.path.read_text(encoding="utf-8").splitlines():
            try:
                row = json.loads(line)
                if row.get("fingerprint") == self.fingerprint and row["outcome"]["status"] == "completed":
                    outcome = ItemOutcome(**row["outcome"])
                    done[(outcome.repeat, outcome.id)] = outcome
            except (ValueError, KeyError, TypeError):
                continue  # a line cut by a crash: that item simply runs again
        return done

    def append(self, outcome: ItemOutcome) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"fingerprint": self.fingerprint, "outcome": outcome.as_dict()}) + "\n")


def fingerprint(*parts: Any) -> str:
    """SHA-256 over everything that changes the negotiations (API keys excluded)."""
    blob = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()
