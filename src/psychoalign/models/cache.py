"""On-disk response cache keyed by the full request, so experiments rerun reproducibly and cheaply."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import sqlite3
import threading
from functools import lru_cache
from pathlib import Path

from .spec import ModelSpec
from .types import ChatRequest, Completion

#: Files up to this size are hashed whole for the cache key; larger ones (a GGUF model) by their
#: size and their first and last MiB, which differ between two models of one architecture.
_WHOLE_FILE = 64 << 20


@lru_cache(maxsize=64)
def _digest(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as fh:
        if size <= _WHOLE_FILE:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                digest.update(chunk)
        else:
            digest.update(fh.read(1 << 20))
            fh.seek(-(1 << 20), os.SEEK_END)
            digest.update(fh.read(1 << 20))
    return digest.hexdigest()


def file_fingerprint(path: str | None) -> str | None:
    """What a file named by a model spec holds (a script, a GGUF or classifier weights file), so a
    file replaced at the same path is a different model. None when ``path`` names no file."""
    if not path or not os.path.isfile(path):
        return None
    try:
        stat = os.stat(path)
        return _digest(os.path.abspath(path), stat.st_size, stat.st_mtime_ns)
    except OSError:
        return None


def cache_key(spec: ModelSpec, request: ChatRequest) -> str:
    """SHA-256 over everything that can change the reply (backend, model, endpoint, request), and
    the content of a file the spec names: a script or weights file edited in place is another
    model, whose replies must not come from the old one's cache."""
    payload: dict[str, object] = {
        "backend": spec.backend,
        "model": spec.model,
        "base_url": spec.base_url,
        "script": spec.script,
        "request": request.model_dump(mode="json"),
    }
    files = {k: d for k, d in (("script", file_fingerprint(spec.script)), ("model", file_fingerprint(spec.model))) if d}
    if files:  # absent for endpoint models, so their cached replies keep their keys
        payload["files"] = files
    blob = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class ResponseCache:
    """A SQLite file of ``key -> Completion``. Only schema-valid completions are stored."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, completion TEXT NOT NULL)")

    def _get(self, key: str) -> Completion | None:
        with self._lock:
            row = self._conn.execute("SELECT completion FROM responses WHERE key = ?", (key,)).fetchone()
        return Completion.model_validate_json(row[0]) if row else None

    def _put(self, key: str, completion: Completion) -> None:
        with self._lock:
            self._conn.execute(
                "INSERT OR REPLACE INTO responses (key, completion) VALUES (?, ?)",
                (key, completion.model_dump_json()),
            )

    async def get(self, key: str) -> Completion | None:
        return await asyncio.to_thread(self._get, key)

    async def put(self, key: str, completion: Completion) -> None:
        await asyncio.to_thread(self._put, key, completion)

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        with self._lock:
            self._conn.close()
