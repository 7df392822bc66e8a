"""On-disk response cache keyed by the full request, so experiments rerun reproducibly and cheaply."""

from __future__ import annotations

import asyncio
import hashlib
import json
import sqlite3
import threading
from pathlib import Path

from .spec import ModelSpec
from .types import ChatRequest, Completion


def cache_key(spec: ModelSpec, request: ChatRequest) -> str:
    """SHA-256 over everything that can change the reply (backend, model, endpoint, request)."""
    payload = {
        "backend": spec.backend,
        "model": spec.model,
        "base_url": spec.base_url,
        "script": spec.script,
        "request": request.model_dump(mode="json"),
    }
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
